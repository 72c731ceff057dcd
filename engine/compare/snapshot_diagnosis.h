// What the GUI shows about a session's divergences beyond the comparison itself: the local error
// of each flagged event and the doctor's verdict on the first one. Worked out beside a local
// session, and on the server for a session there (engine/remote), by the same functions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/compare/doctor.h"
#include "engine/compare/logit_lens.h"
#include "engine/compare/tensor_names.h"
#include "engine/session/session.h"

namespace ls {

// A reference for a session: an engine's own tensor names (Hugging Face, Meta) become llama.cpp's,
// as `compare --names auto` does, so that it pairs whoever named it.
Status name_as_llama(ReferenceDump& dump, const BiasedProjection& biased);

// A session's numerics against `reference`, as `compare` runs them: its batch size, flash
// attention and output rows. Refuses a dump.n_ubatch below 1 (naming the file).
Status use_reference_numerics(const ReferenceDump& reference, ForwardOptions& forward);

// Whether any record of `snap` is warn or diverged.
bool has_flagged_records(const SessionSnapshot& snap);

// Local against inherited error of the warn and diverged events of `snap`, by event index (the
// others kNotComputed); empty when none is flagged. `forward` is our op as the session runs it;
// `checked` holds the tensors the op reads (the reference, or our own dump: see LocalErrorOptions).
std::vector<EventComparison> snapshot_local_errors(const SessionSnapshot& snap, const Model& model,
                                                   const ReferenceDump& checked, const ForwardOptions& forward,
                                                   const std::string& source = "the reference");

// The doctor's one-line verdict on event `first` of `snap` (its first divergence): the best
// finding, "no known transform explains it", or "cancelled after N transforms" when `progress`
// stopped it. "" when `first` has no captured values.
std::string snapshot_doctor_verdict(const SessionSnapshot& snap, int64_t first, const ReferenceDump& reference,
                                    const Model* model, const DoctorProgress& progress = {});

// The logit lens of a snapshot's run against `reference` (logit_lens, its head in llama mode as
// this processor's build runs it), with the l_out event each cell was read from: what the logit
// lens panel shows, worked out beside a local session or on the server of a remote one.
struct LensEvent {
    int layer = 0;
    int decode = 0;
    int64_t position = -1;
    int64_t event = -1;  // the l_out event whose rows hold that position
};
struct SnapshotLens {
    LogitLens lens;
    std::vector<LensEvent> events;
    std::string error;  // why there is no lens ("" when there is one)
};
SnapshotLens snapshot_logit_lens(const SessionSnapshot& snap, const Model& model, const ReferenceDump& reference);

}  // namespace ls
