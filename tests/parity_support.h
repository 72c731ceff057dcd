// Runs a model the way a reference dump was made and compares every tensor: shared by the
// parity tests of each architecture.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "engine/compare/metrics.h"
#include "engine/compare/reference.h"
#include "engine/forward/forward.h"
#include "engine/gguf/gguf.h"

namespace ls::test {

struct CapturedTensor {
    int64_t ne[4] = {1, 1, 1, 1};
    std::vector<float> data;
};

// Keeps a host copy of every event, by dump name.
class CaptureAll : public EventSink {
public:
    void on_event(const Event& e) override {
        CapturedTensor& c = tensors[e.dump_name()];
        for (int d = 0; d < 4; ++d) c.ne[d] = e.tensor.ne[d];
        c.data.resize(static_cast<size_t>(e.tensor.n_elements()));
        e.backend->download(c.data.data(), e.tensor.data, c.data.size() * sizeof(float));
        order.push_back(e.dump_name());
    }
    std::map<std::string, CapturedTensor> tensors;
    std::vector<std::string> order;
};

struct ParityResult {
    int compared = 0;           // reference tensors paired with ours
    int not_computed = 0;       // reference nodes we have no event for (views, cache copies, ...)
    double worst_nmse = 0;
    std::string worst_name;
    std::vector<std::string> failures;  // "name: nmse X > limit"
    std::vector<int32_t> generated;     // our greedy tokens, one per decode call
    std::vector<std::vector<int32_t>> top5_ours, top5_ref;  // per decode call
};

// Runs the dump's prompt and generated tokens through `model_path` in `mode` and compares each
// reference node and the logits with ours. `limit` is the largest NMSE accepted.
ParityResult run_parity(const std::string& dump_path, const std::string& model_path, MathMode mode, double limit);

std::vector<int32_t> top_k(const float* logits, int64_t n, int k);

// Runs `prompt` and the tokens of `n_decode` decode calls in all on `backend` (the emulated CUDA
// kernels) and on the CPU backend, both in exact mode with `fo`'s other options, and expects every
// event of ours to agree with the CPU's at NMSE <= 1e-6, each to have a CPU tensor, and at least
// `min_compared` of them.
void expect_agrees_with_cpu_exact(const Model& model, Backend& backend, ForwardOptions fo,
                                  const std::vector<int32_t>& prompt, int n_decode, int64_t min_compared);

// The backend the whole-model CUDA suites run on: the SIMT emulator, or the GPU itself when
// LAYERSCOPE_TEST_CUDA=device (tests/gpu_check.sh sets it; the suite then fails where no GPU is
// usable rather than skipping).
BackendKind whole_model_cuda_kind();

// dump.generated_tokens of a dump file.
std::vector<int32_t> reference_generated(const std::string& dump_path);

// A copy of the GGUF file `in` written to `out` with `edit` applied to its metadata and tensors.
std::string rewrite_gguf(const std::string& in, const std::string& out,
                         const std::function<void(std::vector<GgufKV>&, std::vector<GgufWriteTensor>&)>& edit);

}  // namespace ls::test
