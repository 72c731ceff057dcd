// Local vs inherited error: for each warn or diverged event, our op is run on the reference's own
// inputs (the reference's tensors for what the op reads; the weights from the model, as our engine
// loads them) and compared with the reference's output. An op whose own error is small only
// inherited the divergence from its inputs; the first event with a large local error is where the
// bug lives.
//
// The rule: an event is local when its local NMSE (or a NaN/Inf mismatch) would itself make the
// event warn, i.e. NMSE above max(warn_nmse, kFloorWarnFactor x the event's noise floor); else
// inherited. Where the reference lacks an input the origin is unknown, with the reason.
#pragma once

#include <string>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/forward/forward.h"
#include "engine/forward/model.h"

namespace ls {

struct LocalErrorOptions {
    // Our op as the comparison ran it: math mode, flash attention and the planted fault (a fault
    // is part of our op); llama mode reproduces `run.llama_isa`.
    ForwardOptions forward;
    CompareThresholds thresholds;
    // Whose tensors the op reads and is checked against, for the reasons given: "the reference"
    // for a model run; for two dumps it is ours ("our dump"): the model's op on our engine's own
    // inputs against our engine's output, so the op of ours that is wrong is the local one.
    std::string source = "the reference";
};

// Fills local_origin, local_nmse and local_why of every warn or diverged comparison in `run`
// (every architecture's products, norms, residual sums and the attention of most; the rest say
// "no local recomputation ..."). Does nothing without a model. Returns the wall time it took, seconds.
double compute_local_errors(const Model* model, const ReferenceDump& reference, const LocalErrorOptions& options,
                            CompareRunResult& run);

// What the local errors say together.
struct LocalSummary {
    int64_t origin = -1;  // index into the comparisons of the first local event (-1: none)
    int local = 0, inherited = 0, unknown = 0;  // among warn and diverged events
    int not_recomputed = 0;                      // of the unknown: ops not recomputed (yet), not a missing input
};
LocalSummary summarize_local(const std::vector<EventComparison>& comparisons);

// The weights by the local error of the ops that read them (products, embeddings): one entry per
// weight (local_weight), its worst event, worst first (ties: the earlier event). With two files of
// one model, what each weight's format adds, not what it inherits.
std::vector<const EventComparison*> attribution(const std::vector<EventComparison>& comparisons);

// One line: "the bug is local to Qcur-0#3 (event 8): local nmse 0.3; 41 other warn/diverged events
// only inherited it", or why nothing is local; "" when no local error was computed. `two_formats`:
// the runs are two files of one model, whose every weight adds an error of its own, so the line
// names the first such op, not a bug.
std::string local_summary_line(const std::vector<EventComparison>& comparisons, bool two_formats = false);

}  // namespace ls
