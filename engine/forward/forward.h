// The forward pass of a model on a backend: evaluates tokens at the next positions of the KV
// cache, announcing every intermediate as an Event. All buffers are allocated up front.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "engine/forward/event.h"
#include "engine/forward/faults.h"
#include "engine/forward/model.h"

namespace ls {

// deepseek2's multi-head latent attention: absorbed (k_b folded into the query, attention over
// the cached latent: what llama.cpp runs for files with attn_k_b/attn_v_b) or unabsorbed (keys
// and values decompressed per head: what it runs for the legacy attn_kv_b files). kAuto: as
// llama.cpp does for the file.
enum class MlaForm { kAuto, kAbsorbed, kUnabsorbed };
const char* mla_form_name(MlaForm form);
bool mla_form_from_name(const std::string& name, MlaForm* out);

struct ForwardOptions {
    MathMode mode = MathMode::kLlama;
    int64_t n_ctx = 512;     // KV cache cells
    int64_t n_ubatch = 512;  // tokens per graph evaluation; longer inputs are split (events "@d.u")
    // Like llama.cpp, the last layer keeps only the rows whose logits are wanted: the last token,
    // or every token with all_logits.
    bool all_logits = false;
    // llama mode: attention computed as ggml's flash-attention CPU kernel does (what llama.cpp
    // runs with --flash-attn on/auto). kq and kq_soft_max are still computed for display.
    bool flash_attn = false;
    Fault fault = Fault::kNone;  // a bug from the fault catalogue, injected on purpose
    MlaForm mla = MlaForm::kAuto;  // deepseek2 only
    // qwen35: prompts (ubatches of more than one token) through the chunked form of the delta rule,
    // chunks of 64, instead of token by token (llama.cpp's CPU form; equal up to rounding).
    bool delta_chunked = false;
    // llama mode: the llama.cpp CPU build whose arithmetic is reproduced.
    LlamaIsa llama_isa = host_llama_isa();
    // llama mode: the threads of the llama.cpp run reproduced (its flash attention splits a decode
    // call's cells per thread); 0: the CPU backend's own.
    int llama_threads = 0;
};

class ForwardPass {
public:
    virtual ~ForwardPass() = default;

    // Runs `tokens` at positions [position(), position() + n). One call is one decode call for
    // event naming. Errors: context full, token id out of range.
    virtual Status eval(const std::vector<int32_t>& tokens, EventSink* sink) = 0;
    // Empties the KV cache: the next eval starts at position 0 with decode call 0.
    virtual void reset() = 0;

    virtual int64_t position() const = 0;
    virtual int decode_calls() const = 0;
    // Logits of the last token of the last eval, one per output row (n_vocab).
    virtual const std::vector<float>& last_logits() const = 0;
    virtual const ForwardOptions& options() const = 0;
    // llama mode reproduces this llama.cpp CPU build from the next evaluation on.
    virtual void set_llama_isa(LlamaIsa isa) = 0;
    virtual void set_llama_threads(int n) = 0;
};

// The backend named `name` (cpu, cuda, cuda-emulated, auto) with `n_threads` CPU threads, or a
// usage error saying why that kind is unavailable here. `note`: why auto chose the CPU.
struct ChosenBackend {
    std::unique_ptr<Backend> backend;
    std::string note;
};
Result<ChosenBackend> open_backend(const std::string& name, int n_threads);
// The same, for running `model` with `options`: auto falls back to the CPU when the CUDA backend
// does not support an op the model needs, and the note says which.
Result<ChosenBackend> open_backend_for(const Model& model, const std::string& name, int n_threads,
                                       const ForwardOptions& options);

// RoPE parameters of a model as llama.cpp derives them (mode, rotated dims, base, scaling).
RopeParams rope_params_for(const ModelConfig& config);

// KV cells for a run of `n_prompt` tokens and then `n_predict` generated ones: `requested` when
// > 0, else what the run needs rounded up to 256 (at least 256; no more than the trained context
// when the need fits in it). Past the model's trained context (<arch>.context_length) is a usage
// error unless `beyond_train`: positions there were never trained (llama.cpp warns and runs; we
// ask for --ctx-beyond-train).
Result<int64_t> context_for_run(const ModelConfig& config, int64_t n_prompt, int64_t n_predict, int64_t requested,
                                bool beyond_train);

// The forward pass for the model's architecture (llama, qwen2, qwen3, phi3, deepseek2).
Result<std::unique_ptr<ForwardPass>> make_forward(const Model& model, Backend& backend, const ForwardOptions& options);

}  // namespace ls
