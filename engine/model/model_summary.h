// Summaries of a GGUF model shared by the CLI and the GUI: tokenizer facts from metadata, bytes
// and bits per weight by tensor type, what the attention, RoPE scaling and MoE parameters imply,
// and a tensor's dequantized values with their statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "engine/model/model_config.h"
#include "engine/util/result.h"

namespace ls {

class GgufFile;
struct GgufTensorInfo;

// What tokenizer.* metadata says (the tokenizer itself lives in engine/tokenizer).
struct TokenizerSummary {
    std::string model;          // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE), ...
    std::string pre;            // tokenizer.ggml.pre ("" when absent)
    int64_t n_tokens = 0;       // entries of tokenizer.ggml.tokens
    int64_t n_merges = 0;       // entries of tokenizer.ggml.merges
    int64_t bos_id = -1;        // -1 when absent
    int64_t eos_id = -1;
    std::string bos_piece;      // the token text, "" when the id is absent or out of range
    std::string eos_piece;
    int add_bos = -1;           // tokenizer.ggml.add_bos_token: 1, 0, or -1 when absent
    int add_eos = -1;
    bool has_chat_template = false;
    size_t chat_template_bytes = 0;
};

TokenizerSummary summarize_tokenizer(const GgufFile& file);

// What a model's parameters imply, derived as llama.cpp (de3ff81) derives them: the numbers that
// decide whether a forward pass is right ("plausible but wrong text" is often one of these).
struct DerivedParams {
    // RoPE and attention, every model.
    float freq_scale = 1.0f;        // 1/rope.scaling.factor with linear or YaRN scaling, else 1
    float rope_attn_factor = 1.0f;  // what llama.cpp gives the rope op
    float kq_scale = 0;             // attention_kq_scale
    int64_t kq_head_dim = 0;        // the key width under its square root

    // YaRN (rope.scaling.type yarn).
    bool yarn = false;
    float ggml_yarn_factor = 1.0f;  // ggml's own factor on cos/sin: 1 + 0.1 ln(1/freq_scale)
    float rope_magnitude = 1.0f;    // rope_attn_factor * ggml_yarn_factor: cos/sin are scaled by it
    int64_t n_ctx_orig = 0;
    float beta_fast = 0, beta_slow = 0;
    // The pair ramp's ends (ggml_rope_yarn_corr_dims): pairs below corr_dims[0] extrapolate,
    // above corr_dims[1] interpolate, over the n_rot rotated dims.
    // Floats as in llama.cpp: a short n_ctx_orig can make the upper end -inf (every pair interpolates).
    float corr_dims[2] = {0, 0};

    // Llama 3.1+'s rope_freqs.weight: the angle divisors of the rotated pairs.
    bool rope_freqs = false;
    int64_t rope_freqs_count = 0;     // pairs (n_rot / 2)
    bool rope_freqs_read = false;     // the factors below were read (a header alone has no data)
    float rope_freqs_min = 1.0f, rope_freqs_max = 1.0f;
    int64_t rope_freqs_scaled = 0;    // pairs whose factor is not 1 (slowed down)
    float rope_attn_factor_key = 1.0f;  // rope.scaling.attn_factor (1 when absent)

    // deepseek2 multi-head latent attention.
    bool mla = false;
    float mscale = 1.0f;            // deepseek2_mscale
    float mscale_all_dim = 0;       // yarn_log_multiplier / 0.1
    int64_t qk_nope = 0, qk_rope = 0;
    int64_t head_k = 0, head_v = 0;            // per head, unabsorbed (textbook) form
    int64_t head_k_latent = 0, head_v_latent = 0;  // absorbed form: kv_lora_rank + n_rot, kv_lora_rank
    int64_t cache_latent = 0;       // values cached per token and layer, absorbed (K only; V is part of it)
    int64_t cache_mha = 0;          // unabsorbed: n_head * (k + v)
    bool llama_absorbs = false;     // llama.cpp runs the absorbed form (split k_b/v_b tensors)

    // Mixture of experts.
    bool moe = false;
    const char* gating = "";        // "softmax" or "sigmoid"
    bool gating_given = false;      // expert_gating_func present (softmax is llama.cpp's default)
    int64_t n_moe_layers = 0;
};

// `file`, when given, adds what the tensors say (rope_freqs).
DerivedParams derive_params(const ModelConfig& c, const GgufFile* file = nullptr);

// The same as text, one line per (label, value), for `inspect` and the model panel: kq scale
// always, YaRN lines only with YaRN scaling, MLA lines for deepseek2, MoE lines with experts.
struct SummaryLine {
    std::string label;
    std::string value;
};
std::vector<SummaryLine> derived_lines(const ModelConfig& c, const GgufFile* file = nullptr);
// A hybrid model's (qwen35) layer kinds, DeltaNet widths, recurrent state sizes and IMROPE
// sections: part of derived_lines, and what the GUI's state view heads its table with.
std::vector<SummaryLine> hybrid_lines(const ModelConfig& c);
// The layers that are (or are not) recurrent, as "0..2, 4..6, 8": "none" when there are none.
std::string layer_list(const ModelConfig& c, bool recurrent);

struct TypeTotal {
    GgmlType type = GgmlType::F32;
    int64_t n_tensors = 0;
    int64_t n_elements = 0;
    uint64_t n_bytes = 0;
    double bits_per_weight() const { return n_elements ? 8.0 * double(n_bytes) / double(n_elements) : 0.0; }
};

// One entry per type present, largest share of the file first.
std::vector<TypeTotal> totals_by_type(const GgufFile& file);

// Statistics over a tensor's values; min/max/mean/rms ignore NaN and Inf, which are counted.
struct ValueStats {
    int64_t n = 0;
    int64_t n_nan = 0;
    int64_t n_inf = 0;
    double min = 0, max = 0, mean = 0, rms = 0;
};

ValueStats compute_stats(const float* values, int64_t n);

// All elements of `tensor` as f32 (ne0 fastest). Errors name the tensor and its type when the
// type cannot be decoded.
Result<std::vector<float>> dequantize_tensor(const GgufTensorInfo& tensor);

}  // namespace ls
