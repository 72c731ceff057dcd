// Bridges between the session's snapshots and the rest of the engine: a capture file (a dump)
// opened without its model becomes a snapshot every view can draw, and a session's first
// divergence can be handed to the doctor.
#pragma once

#include <memory>

#include "engine/compare/compare_run.h"
#include "engine/session/session.h"

namespace ls {

// A finished "run" made of a dump's tensors: events in the dump's order (graph nodes and logits),
// stats for each, every tensor captured, attention / Q-K norms / top-k derived as in a session.
// With `reference`, every event is also compared with it.
std::shared_ptr<const SessionSnapshot> snapshot_from_dump(const ReferenceDump& dump, const Tokenizer* tokenizer,
                                                          const ReferenceDump* reference = nullptr,
                                                          const CompareThresholds& thresholds = {});

// The doctor's view of a snapshot: comparisons and the captured tensors by dump name (only the
// tensors the capture policy kept are there).
CompareRunResult compare_run_from_snapshot(const SessionSnapshot& snapshot);

}  // namespace ls
