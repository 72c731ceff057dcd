// The divergence doctor: for a diverged event, tries the transforms that turn the classic engine
// bugs into each other (transpose, NORM <-> NEOX, position shifts, attention scales, the causal
// mask, RMSNorm epsilon and weight, biases, vocabulary crop, f16 rounding, Q4_K scale/min roles)
// on our side of the comparison, and says in plain words which one explains the reference.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/forward/model.h"

namespace ls {

struct DoctorFinding {
    std::string transform;  // short id, e.g. "rope-pairing"
    std::string verdict;    // "Qcur-0#3 matches the reference if RoPE pairs are ... "
    double nmse_before = 0, nmse_after = 0;
    // The noise floor it was judged against: what the weight format and math mode leave between
    // two correct engines for this event (0: none, the fixed bar alone).
    double floor_nmse = 0;
    // Found by re-running our forward pass under a fault of the catalogue (the span doctor), not by
    // transforming our values of the event.
    bool from_rerun = false;
};

struct DoctorReport {
    std::vector<std::string> tried;        // transforms that applied to this event
    std::vector<DoctorFinding> findings;   // those that explain the reference, best first
    bool cancelled = false;                // stopped by the progress callback: what was tried so far
};

// Called before each transform (or re-run) with its name and how many were tried so far; returning
// false stops the doctor there (the GUI's cancel).
using DoctorProgress = std::function<bool(const std::string& step, size_t tried)>;

// `event` is the index of a diverged comparison in `run`. `model` gives weights and the config
// (nullptr: only transforms that need no model are tried). With a model, when the events between
// the last matching one and this one are missing from ours (an engine that dumps only some
// tensors), the span doctor re-runs our forward pass on the reference's tokens under each fault
// of the catalogue that applies to the model and reports the one that reproduces the reference.
DoctorReport diagnose(const CompareRunResult& run, size_t event, const ReferenceDump& reference, const Model* model,
                      const CompareThresholds& thresholds, const DoctorProgress& progress = {});

}  // namespace ls
