// Model hyperparameters read from GGUF metadata (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2), with llama.cpp's
// defaults and requirements, so that our forward pass and the lints agree with what llama.cpp loads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/result.h"

namespace ls {

class GgufFile;

enum class Arch { kLlama, kQwen2, kQwen3, kQwen3Moe, kPhi3, kGemma2, kGemma3, kDeepseek2, kGptOss, kQwen35, kQwen35Moe };

// NORM rotates adjacent pairs (x0,x1),(x2,x3)...; NEOX rotates (x_i, x_{i+n_rot/2}). IMROPE
// (qwen35): NEOX pairs whose angles take one of four positions by an interleaved section pattern
// (rope.dimension_sections); a text token's first three positions are its position, the fourth 0.
enum class RopeType { kNorm, kNeox, kImrope };

// kLongRope: Phi-3's short/long frequency factors (rope_factors_short/_long), chosen by context size.
enum class RopeScaling { kNone, kLinear, kYarn, kLongRope };

const char* arch_name(Arch arch);          // "llama", ...
const char* rope_type_name(RopeType type);  // "norm", "neox"
const char* rope_scaling_name(RopeScaling scaling);
// Parses general.architecture; false for architectures we do not support.
bool arch_from_name(std::string_view name, Arch* out);

struct ModelConfig {
    Arch arch = Arch::kLlama;
    std::string arch_name;  // as written in general.architecture

    int64_t n_embd = 0;        // <arch>.embedding_length
    int64_t n_layer = 0;       // <arch>.block_count
    int64_t n_head = 0;        // <arch>.attention.head_count
    int64_t n_head_kv = 0;     // <arch>.attention.head_count_kv (default n_head)
    int64_t head_dim_k = 0;    // <arch>.attention.key_length (default n_embd / n_head)
    int64_t head_dim_v = 0;    // <arch>.attention.value_length (default n_embd / n_head)
    int64_t n_rot = 0;         // <arch>.rope.dimension_count (default head_dim_k)
    int64_t n_ff = 0;          // <arch>.feed_forward_length
    int64_t n_ctx_train = 0;   // <arch>.context_length
    int64_t n_vocab = 0;       // entries of tokenizer.ggml.tokens (0 when absent)
    int64_t n_vocab_key = 0;   // <arch>.vocab_size when present, else 0
    double rms_eps = 0;        // <arch>.attention.layer_norm_rms_epsilon
    double rope_freq_base = 10000.0;

    RopeType rope_type = RopeType::kNorm;
    RopeScaling rope_scaling = RopeScaling::kNone;
    double rope_scaling_factor = 1.0;           // rope.scaling.factor
    int64_t rope_orig_ctx = 0;                  // rope.scaling.original_context_length
    double rope_yarn_log_multiplier = 0.0;      // as stored (llama.cpp divides it by 0.1 on load)
    double rope_yarn_beta_fast = 32.0;
    double rope_yarn_beta_slow = 1.0;
    double rope_attn_factor = 1.0;              // rope.scaling.attn_factor: multiplies cos/sin (every architecture)

    // Mixture of experts (deepseek2, qwen3moe; llama when expert_count > 0). The routing fields hold
    // what the architecture's graph does: qwen3moe and llama route by softmax and renormalise the
    // chosen weights whatever the file says (llama.cpp's graphs pass fixed values).
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_expert_shared = 0;
    int64_t n_ff_expert = 0;          // expert_feed_forward_length
    int64_t n_ff_shexp = 0;           // qwen35moe: expert_shared_feed_forward_length (default n_ff), one gated shared expert
    int64_t n_layer_dense_lead = 0;   // leading_dense_block_count: layers before the first MoE one
    double expert_weights_scale = 0;  // 0 = no scaling
    bool expert_weights_norm = false;
    int64_t expert_gating_func = 0;   // 0 = none given (softmax), 1 = softmax, 2 = sigmoid, 3 = softmax of the chosen k (gpt-oss)
    int64_t n_expert_groups = 1;      // expert_group_count: > 1 routes within the best groups first
    int64_t n_group_used = 0;         // expert_group_used_count: the groups kept (DeepSeek-V3: 4 of 8)

    // deepseek2 multi-head latent attention.
    int64_t q_lora_rank = 0;       // 0 = plain attn_q (no q compression)
    int64_t kv_lora_rank = 0;
    int64_t head_dim_k_mla = 0;    // key_length_mla (nope + rope), falls back to key_length
    int64_t head_dim_v_mla = 0;    // value_length_mla, falls back to value_length
    bool mla_split = false;        // attn_k_b/attn_v_b (true) or one attn_kv_b (legacy)

    // Gemma 2/3: interleaved sliding-window attention and tanh soft caps.
    int64_t n_swa = 0;                  // attention.sliding_window: a local layer's token sees the last n_swa positions
    std::vector<uint8_t> swa_layers;    // per layer, 1 = local (sliding window): attention.sliding_window_pattern
    double rope_freq_base_swa = 10000;  // rope.freq_base_swa: the local layers' RoPE base
    bool swa_rope_scaled = false;       // the local layers' RoPE keeps the model's scale (gpt-oss); else scale 1 (gemma)
    double attn_softcap = 0;            // attn_logit_softcapping: kq = cap * tanh(kq / cap) (gemma2); 0 = none
    double final_softcap = 0;           // final_logit_softcapping: the logits capped the same way; 0 = none

    // Qwen3.5 (qwen35): Gated DeltaNet layers (recurrent: a causal conv1d and a delta-rule state)
    // and, every full_attention_interval-th layer, gated full attention.
    int64_t ssm_d_conv = 0;     // ssm.conv_kernel: the conv1d's taps
    int64_t ssm_d_inner = 0;    // ssm.inner_size: value heads x their width
    int64_t ssm_d_state = 0;    // ssm.state_size: the width of a DeltaNet head (q, k and v)
    int64_t ssm_n_v_heads = 0;  // ssm.time_step_rank: value heads (and gates)
    int64_t ssm_n_k_heads = 0;  // ssm.group_count: q/k heads
    std::vector<uint8_t> recurrent_layers;  // per layer, 1 = Gated DeltaNet
    int rope_sections[4] = {0, 0, 0, 0};    // rope.dimension_sections (IMROPE)

    int64_t n_embd_k_gqa() const { return head_dim_k * n_head_kv; }
    int64_t n_embd_v_gqa() const { return head_dim_v * n_head_kv; }
    int64_t qk_nope_dim() const { return head_dim_k_mla - n_rot; }  // deepseek2 only
    bool layer_is_moe(int64_t il) const { return n_expert > 0 && il >= n_layer_dense_lead; }
    bool layer_is_swa(int64_t il) const { return n_swa > 0 && il >= 0 && il < static_cast<int64_t>(swa_layers.size()) && swa_layers[il]; }
    bool has_swa() const { return n_swa > 0; }
    bool layer_is_recurrent(int64_t il) const {
        return il >= 0 && il < static_cast<int64_t>(recurrent_layers.size()) && recurrent_layers[il];
    }
    bool hybrid() const { return !recurrent_layers.empty(); }
    // A DeltaNet layer's widths: q and k heads of ssm_d_state, conv channels (q, k, v), the
    // conv state (d_conv - 1 columns per channel) and the delta-rule state (S x S per value head).
    int64_t ssm_key_dim() const { return ssm_d_state * ssm_n_k_heads; }
    int64_t ssm_conv_channels() const { return 2 * ssm_key_dim() + ssm_d_inner; }
    int64_t ssm_conv_state() const { return (ssm_d_conv - 1) * ssm_conv_channels(); }
    int64_t ssm_state() const { return ssm_d_state * ssm_d_inner; }
};

// RoPE scaling as llama.cpp's context derives it (llama-context.cpp) before any graph is built.
struct RopeScales {
    float freq_scale = 1.0f;        // 1/rope.scaling.factor with linear or YaRN scaling, else 1
    float attn_factor = 1.0f;       // what the rope op is given (rope.scaling.attn_factor included)
    float ggml_yarn_factor = 1.0f;  // ggml multiplies it in with YaRN on: 1 + 0.1 ln(1/freq_scale)
};
RopeScales rope_scales(const ModelConfig& c);

// deepseek2's YaRN magnitude correction (llama.cpp's mscale), which its kq scale squares; 1 for
// other architectures.
float deepseek2_mscale(const ModelConfig& c);

// The attention scale llama.cpp uses for kq (before the softmax): 1 for phi3, whose graph scales
// the roped Q by phi3_q_scale = 1/sqrt(head_dim) instead.
float attention_kq_scale(const ModelConfig& c);
float phi3_q_scale(const ModelConfig& c);
// gemma2/gemma3 scale the roped Q themselves (kq scale 1): 1/sqrt(head_dim), or
// 1/sqrt(n_embd / n_head) for the 27B models (gemma2 with 46 layers, gemma3 with 62), as llama.cpp.
float gemma_q_scale(const ModelConfig& c);
// The positions layer il's attention sees from a token at position `pos`: [first, pos], first =
// pos - n_swa + 1 on a local layer (gemma's sliding window), 0 on the others.
struct LayerView {
    bool local = false;
    int64_t first = 0, last = 0;
};
LayerView layer_view(const ModelConfig& c, int64_t il, int64_t pos);
// "local layer (window 8): position 72 sees positions 65..72" / "global layer: position 72 sees
// positions 0..72"; "" for models without sliding windows.
std::string layer_view_text(const ModelConfig& c, int64_t il, int64_t pos);
// The scale between the roped Q and K's dot products and the softmax's input: kq_scale, times
// phi3's Q scale (what rebuilds attention from a reference's roped Q and K).
float roped_qk_scale(const ModelConfig& c);
// hparams.rope_yarn_log_mul as llama.cpp holds it (a float): deepseek2 divides the stored key by
// 0.1f on load, other architectures keep it.
float yarn_log_mul(const ModelConfig& c);

// IMROPE with text tokens (qwen35): a token's four positions are p, p, p and 0, so a rotated pair
// whose interleaved section takes the fourth position keeps angle 0. The frequency factors that do
// so in ggml's rope (each pair's angle divided by its factor): +inf for those pairs, 1 for the
// others; empty when every pair takes p (Qwen3.5's sections cover all of its rotated pairs).
std::vector<float> imrope_text_factors(const int sections[4], int64_t n_rot);

// Reads the config of a supported architecture. Errors (kBadInput) name the missing or bad key:
// "llama.block_count is missing; llama models need it".
Result<ModelConfig> model_config_from_gguf(const GgufFile& file);

// The same values without the consistency checks between keys (n_rot vs head dim, n_head vs
// n_head_kv): the lints report those one by one and still check the tensors.
Result<ModelConfig> model_config_from_gguf_unchecked(const GgufFile& file);

}  // namespace ls
