// The built-in demo: a small llama model generated on the fly, a reference made by the clean
// engine, and a session on the same model with one fault injected, so a new user sees a
// divergence, its first event and the doctor's verdict at once.
#pragma once

#include <string>

#include "engine/forward/faults.h"
#include "engine/util/result.h"

namespace ls::app {

struct DemoFiles {
    std::string model_path;      // the generated model
    std::string reference_path;  // the clean engine's dump of the demo prompt
    std::string prompt;
    Fault fault = Fault::kRopeWrongPairing;
    int n_generate = 4;
};

// Writes (or rewrites: generation is deterministic and takes milliseconds) the demo model and
// its clean reference under `dir` (created if missing).
Result<DemoFiles> prepare_demo(const std::string& dir);

// "What does Q4_K cost": the demo's architecture at a width Q4_K's blocks fit, in F16 and in Q4_K
// from the same master weights, and the prompt to run.
struct QuantDemoFiles {
    std::string source_path, quantized_path, prompt;
};
Result<QuantDemoFiles> prepare_quant_demo(const std::string& dir);

// Where the demo's files go: $XDG_CACHE_HOME/layerscope, ~/.cache/layerscope, or the temp dir.
std::string demo_directory();

}  // namespace ls::app
