// Deterministic synthetic GGUF models (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2) with a generated
// SentencePiece vocabulary, for tests, demos and bug reports that must not depend on third-party
// weights or vocabularies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "engine/gguf/gguf.h"
#include "engine/util/result.h"

namespace ls {

// What to generate. Zero in rope_freq_base, rms_eps or n_ctx_train means "the architecture's
// default" (llama: 10000, 1e-5, 2048; qwen2: 1e6, 1e-6, 32768; deepseek2: 10000, 1e-6, 163840, as
// the fixtures' models use).
struct MakeModelSpec {
    // "llama": NORM rope, rope.dimension_count, separate output.weight.
    // "qwen2": q/k/v biases (with a few large q/k entries, like real Qwen2.5), NEOX rope, LM head
    // tied to token_embd, token list padded with UNUSED [PADn] entries to a multiple of 256 rows.
    // "phi3": a fused attn_qkv and a fused ffn_up (2 n_ff rows), NEOX rope over n_rot dims, and
    // with `longrope` Phi-3's short and long frequency factors.
    // "qwen3": qwen2's NEOX rope and padded vocabulary without q/k/v biases, with per-head q/k
    // RMS norms (attn_q_norm, attn_k_norm) and its own head width (head_dim).
    // "qwen3moe": qwen3 with every feed-forward a mixture of experts (n_expert, n_expert_used,
    // n_ff_expert); the routing is the graph's (softmax, renormalised).
    // "deepseek2": multi-head latent attention, mixture of experts and YaRN (the fields below);
    // n_head_kv is not used (the file says 1 for the MLA layout, n_head for the legacy one).
    std::string arch = "llama";
    int n_embd = 256;
    int n_layer = 2;
    int n_head = 4;
    int n_head_kv = 2;
    int n_ff = 512;
    int head_dim = 0;  // qwen3, gemma: attention.key_length (0: n_embd / n_head); n_head * head_dim need not be n_embd
    int n_rot = 0;     // phi3: rope.dimension_count (0: the whole head; Phi-4-mini rotates 96 of 128)
    int n_ctx_train = 0;
    float rope_freq_base = 0.0f;
    float rms_eps = 0.0f;
    // Storage type of the 2-D weights; 1-D tensors (norms, biases) are always F32. Rows whose length
    // is not a multiple of the type's block fall back as llama-quantize does (see
    // make_model_tensor_type). MXFP4 follows llama-quantize's MXFP4_MOE: the experts' weights MXFP4,
    // every other matrix Q8_0. NVFP4 follows ModelOpt conversions: every matrix NVFP4 but token_embd
    // (F16) and the router (F32); with weight_scales, each gets its `.scale` (an untied LM head too).
    GgmlType type = GgmlType::F16;
    // Tensors of another type than the recipe's, by exact name (a matrix; its row size must suit the
    // type): one damaged or restored tensor in a model otherwise in `type`.
    std::vector<std::pair<std::string, GgmlType>> tensor_types;
    uint64_t seed = 1;
    int vocab = 512;  // real tokens (specials + 256 byte tokens + generated pieces); >= kMakeModelMinVocab
    // token_embd rows (the token list is padded to them); 0: vocab, and for qwen2 the next multiple
    // of 256 above it.
    int vocab_rows = 0;

    // llama only: rope_freqs.weight with Llama 3.1's "llama3" frequency factors (as
    // convert_hf_to_gguf computes them from rope_scaling: factor, low/high_freq_factor,
    // original_max_position_embeddings); 0: none (Llama 2, TinyLlama).
    float rope_freqs_factor = 0.0f;
    float rope_freqs_low = 1.0f;
    float rope_freqs_high = 4.0f;
    int rope_freqs_orig_ctx = 8192;
    // llama, qwen3: the LM head tied to token_embd (no output.weight), as Llama 3.2 1B/3B and
    // Qwen3 up to 4B ship (qwen2 files are always tied here).
    bool tied_output = false;
    // The optional biases llama.cpp's graph adds when a file has them: llama's attn_output and
    // ffn_gate/up/down biases, qwen2's output.bias.
    bool out_biases = false;
    // llama, qwen2, qwen3: a per-tensor `.scale` and `.input_scale` for every projection, as NVFP4
    // conversions (and llama.cpp's own test models) have them.
    bool weight_scales = false;
    // phi3: LongRoPE (rope.scaling.type longrope): rope_factors_short/_long, the attn_factor
    // sqrt(1 + ln(n_ctx_train / orig) / ln(orig)) and original_context_length `longrope_orig_ctx`.
    bool longrope = false;
    int longrope_orig_ctx = 4096;

    // gemma2, gemma3: the sliding window (attention.sliding_window) and the period of the local /
    // global pattern (attention.sliding_window_pattern, written when > 0: layer il is local when
    // il % n < n - 1); gemma3's local layers' RoPE base (rope.freq_base_swa, 0: not written, llama.cpp
    // takes 10000); a linear RoPE scaling factor for the global layers (rope.scaling.factor, as
    // Gemma-3-4B's 8; 0: none). gemma2 writes its soft caps (0: Gemma 2's 50 and 30).
    int n_swa = 0;
    int swa_pattern = 0;
    float rope_freq_base_swa = 0.0f;
    float rope_linear_factor = 0.0f;
    float attn_softcap = 0.0f;
    float final_softcap = 0.0f;

    // deepseek2 only; the defaults are the fixtures' deepseek2-mini.
    int q_lora_rank = 0;   // 0: a plain attn_q, as DeepSeek-V2-Lite has
    int kv_lora_rank = 64;
    int qk_nope_dim = 32;  // per-head key width without RoPE
    int qk_rope_dim = 16;  // per-head key width with RoPE (rope.dimension_count)
    int v_head_dim = 32;
    bool legacy_kv_b = false;  // one attn_kv_b per layer (older converters) instead of attn_k_b/attn_v_b
    bool expert_bias = false;  // an exp_probs_b.bias per MoE layer: the experts' selection bias (DeepSeek-V3)
    bool fused_gate_up = false;  // ffn_gate_up_exps (gate rows, then up rows) instead of ffn_gate/up_exps
    // deepseek2, qwen3moe and llama with llama_experts (Mixtral: experts n_ff wide in every layer,
    // no other expert option applies): routed experts and how many each token uses.
    bool llama_experts = false;
    int n_expert = 8;
    int n_expert_used = 2;
    int n_expert_shared = 1;
    int n_ff_expert = 256;  // deepseek2, qwen3moe: expert_feed_forward_length
    int n_dense_lead = 1;          // leading_dense_block_count: dense FFN blocks before the MoE ones
    int expert_gating_func = 1;    // 1 softmax, 2 sigmoid
    float expert_weights_scale = 1.0f;
    bool expert_weights_norm = false;
    int n_expert_groups = 1;
    int n_expert_groups_used = 1;
    float yarn_factor = 40.0f;     // rope.scaling.factor; 0: no rope scaling keys
    int yarn_orig_ctx = 4096;      // rope.scaling.original_context_length
    float yarn_log_multiplier = 0.0707f;  // as convert_hf_to_gguf stores it: 0.1 * mscale_all_dim
    // qwen35 only: Gated DeltaNet layers (every layer but each full_attn_interval-th) with heads of
    // ssm_state wide (ssm_k_heads for q and k, ssm_v_heads for v and the gates) and a conv1d of
    // ssm_conv taps; the attention layers' IMROPE sections (rope.dimension_sections) over n_rot dims.
    int ssm_state = 32;
    int ssm_k_heads = 2;
    int ssm_v_heads = 4;
    int ssm_conv = 4;
    int full_attn_interval = 4;
    int rope_sections[4] = {3, 3, 2, 0};
};

// Named specs with real models' shapes (random weights): "deepseek-v2-lite", "deepseek2-tiny" (for
// tests: the fixtures' deepseek2-mini, smaller), "tinyllama-1.1b", "qwen2.5-0.5b", "llama-3.2-1b",
// "llama-3.1-8b", "llama3-tiny" (for tests: Llama 3.1's rope_freqs on a small llama),
// "qwen3-0.6b", "qwen3-8b" and "qwen3-tiny" (for tests: 64-wide heads, n_head * head_dim = 2 n_embd),
// "qwen3-30b-a3b" and "qwen3moe-tiny", "mixtral-8x7b" and "llama-moe-tiny" (llama files with experts),
// "phi-3.5-mini", "phi-4-mini" and "phi3-tiny" (for tests: LongRoPE whose long factors a 256-cell
// context takes).
const std::vector<std::string>& make_model_preset_names();
// The preset's spec; kUsage naming the valid presets for an unknown name.
Result<MakeModelSpec> make_model_preset(const std::string& name);

// Specials (3) + byte tokens (256) + U+2581 + printable ASCII (94): every text round-trips.
inline constexpr int kMakeModelMinVocab = 354;
inline constexpr int kMakeModelMaxVocab = 262144;

// The GUI's built-in demo: llama, n_embd 128, 4 layers, 4 heads / 2 KV heads, n_ff 384, Q8_0,
// 640 tokens, seed 20240601: about 1 MB, a few milliseconds per token on one CPU thread.
MakeModelSpec demo_model_spec();

// Checks the spec; kUsage errors say which field is wrong and what would be accepted.
Status validate_make_model_spec(const MakeModelSpec& spec);

// The type a 2-D weight with rows of `ne0` elements is stored as. K-quants need ne0 % 256 == 0;
// otherwise, like llama-quantize: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, and Q2_K/Q3_K -> Q4_0
// (llama-quantize picks IQ4_NL there, which we cannot write). A row that still does not fit the
// block (ne0 % 32 != 0) is stored F16, llama-quantize's last resort.
GgmlType make_model_tensor_type(GgmlType requested, int64_t ne0);

// The standard deviation a tensor's values are drawn with (the norms' is 0.1 around 1, clipped to
// [0.5, 1.5]); 0 for a name the model does not have. Tests compare the stored weights with it.
double make_model_tensor_std(const MakeModelSpec& spec, const std::string& name);

// What make_model wrote.
struct MakeModelInfo {
    int64_t n_tokens = 0;       // entries of tokenizer.ggml.tokens (qwen2: with the padding)
    int64_t n_params = 0;
    uint64_t file_bytes = 0;
    std::vector<std::string> fallbacks;  // "blk.0.ffn_down.weight: q5_0 (ne0 384 is not a multiple of 256)"
};

// The metadata make_model writes (after validating the spec), without making any weights: a cheap
// look at a big model's header.
Result<std::vector<GgufKV>> make_model_metadata(const MakeModelSpec& spec);
// The number of weights make_model writes.
Result<int64_t> make_model_param_count(const MakeModelSpec& spec);

// Writes the model to `path` (a staging file renamed into place, so a failed write leaves no half
// file; an existing file is replaced only with `overwrite`, and only a regular file). Tensors are
// made and written one at a time, so memory holds only the largest of them. The same
// spec gives a byte-identical file on every run and machine: all randomness is a fixed integer
// generator per tensor, seeded from the spec's seed and the tensor's name. Errors: kUsage (bad
// spec, or a target it may not replace), kIo (cannot write).
Status make_model(const MakeModelSpec& spec, const std::string& path, MakeModelInfo* info = nullptr,
                  bool overwrite = false);

// The generated vocabulary alone (token texts, scores, GGUF token types), for tests.
struct MakeModelVocab {
    std::vector<std::string> tokens;
    std::vector<float> scores;
    std::vector<int32_t> types;  // 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 5 UNUSED, 6 BYTE
};
MakeModelVocab make_model_vocab(int n_real, int n_rows);

// Llama 3.1's "llama3" RoPE frequency factors for head dimension `head_dim` (one per rotated
// pair): 1 for wavelengths under original_ctx / high, `factor` above original_ctx / low, a smooth
// ramp between (convert_hf_to_gguf's generate_extra_tensors).
std::vector<float> llama3_rope_freq_factors(int head_dim, float freq_base, float factor, float low, float high,
                                            int original_ctx);

}  // namespace ls
