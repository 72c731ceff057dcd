// The event list of a planned run, known before it runs: a dry run of the forward pass on the
// null backend gives every event's name, order and shape (the event browser's tree).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/forward/forward.h"

namespace ls {

struct EventInfo {
    int64_t index = 0;      // execution order within the run (decode calls continue the count)
    std::string name;       // dump name: "Qcur-0#3@1"
    std::string base_name;  // llama.cpp's name: "Qcur-0"
    int occurrence = 1;
    int layer = -1;
    Op op = Op::kNone;      // MUL_MAT, ROPE, ...
    int64_t ne[4] = {1, 1, 1, 1};
    int decode = 0;
    int ubatch = 0;
};

EventInfo event_info(const Event& event);

// Events of a run that evaluates `prompt` in decode call 0 and then `n_generated` single-token
// decode calls, with the same forward options (faults included) as the real run. Token values do
// not change names or shapes, so the generated tokens are stood in for by token 0.
//
// Why a null backend rather than the real forward on a throwaway CPU backend: it costs no
// arithmetic and no activation memory at any model size, and it runs the very same forward code,
// so the list cannot drift from what the real run emits.
// A run longer than the context is refused up front (kUsage), before a single event is planned.
Result<std::vector<EventInfo>> plan_events(const Model& model, const ForwardOptions& options,
                                           const std::vector<int32_t>& prompt, int n_generated);

// How many events such a run announces and the bytes of their f32 values: what a dump of it holds.
// Counted without listing them (a plan of a million decode calls would itself take gigabytes): an
// event's size grows with the position at most linearly (attention over the cells so far), so dry
// runs of the prompt and of two single-token calls give the whole run in closed form.
struct EventVolume {
    uint64_t n_events = 0;
    uint64_t f32_bytes = 0;  // saturates at UINT64_MAX
};
Result<EventVolume> planned_event_volume(const Model& model, const ForwardOptions& options,
                                         const std::vector<int32_t>& prompt, int n_generated);

}  // namespace ls
