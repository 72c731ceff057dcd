// Events: every intermediate tensor of a forward pass, announced under the name llama.cpp gives
// the same tensor, in execution order.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace ls {

class Backend;

struct Event {
    int64_t index = 0;        // position in the execution order of this run (0 = first event)
    std::string name;         // llama.cpp's name, e.g. "Qcur-0", "result_output"
    int occurrence = 1;       // k-th tensor of this name within one graph evaluation (1-based)
    int decode = 0;           // decode call: 0 = the prompt, then one per generated token
    int ubatch = 0;           // physical batch within the decode call
    int layer = -1;           // -1 for tensors outside the layers
    Op op = Op::kNone;        // the ggml op that makes it: MUL_MAT, ROPE, ...
    Tensor tensor;            // f32, on the backend's device; valid during the callback only
    Backend* backend = nullptr;

    // The name as the dump format writes it: name, then "#k" for k >= 2, then "@d[.u]".
    std::string dump_name() const;
};

// Receives events while a forward pass runs. It may block (a paused debugger) or throw
// EvalCancelled to abandon the evaluation.
class EventSink {
public:
    virtual ~EventSink() = default;
    virtual void on_event(const Event& event) = 0;
};

struct EvalCancelled {};

// Builds dump names: "Qcur-0" + occurrence 3 + decode 2 -> "Qcur-0#3@2".
std::string event_dump_name(const std::string& name, int occurrence, int decode, int ubatch);

// A dump name split into its parts: "Qcur-0#3@1.2" -> base "Qcur-0", occurrence 3, decode 1, ubatch 2.
struct DumpName { std::string base; int occurrence = 1; int decode = 0; int ubatch = 0; };
// False when a suffix is malformed ("x#", "x@a"); names without suffixes parse as themselves.
// A suffix is '#' or '@' followed by 1 to 9 digits ("@d.u": both parts). Even on false, `out`
// holds what did parse: a malformed suffix stays in `base`, with everything before it. Values are
// as written: "x#1" and "x#0" give occurrence 1 and 0 (event_dump_name writes neither), which
// callers may reject. parse_dump_name(event_dump_name(n, o, d, u)) gives back n, o, d, u.
bool parse_dump_name(const std::string& dump_name, DumpName* out);

}  // namespace ls
