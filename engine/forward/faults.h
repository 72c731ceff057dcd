// The fault catalogue: classic inference-engine bugs that can be injected into our forward pass,
// so that the comparison shows how each one looks and the doctor learns to name it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"
#include "engine/util/result.h"
#include "kernels/backend.h"

namespace ls {

class Model;

enum class Fault {
    kNone,
    kTransposedWeight,     // one projection (wq) used transposed: cuBLAS OP_T vs OP_N, wrong lda
    kRopeWrongPairing,     // NORM (adjacent pairs) <-> NEOX (halves)
    kRopeSkipped,          // Q and K not rotated
    kRopePositionOffByOne, // rotated for position p + 1
    kKvPositionStuck,      // every decode call writes the KV cache and ropes from position 0
    kAttentionScale,       // scores scaled by 1/d instead of 1/sqrt(d) (deepseek2: 1/sqrt(d) instead of mscale^2/sqrt(d))
    kYarnMscale,           // YaRN magnitude correction applied to cos/sin as well as the scale (double mscale)
    kNoCausalMask,         // tokens attend to later tokens
    kPaddedVocabArgmax,    // logits buffer larger than the vocabulary, argmax over uninitialized rows
    kQkvBiasDropped,       // attention q/k/v biases not added (qwen2)
    kRmsNormWeightTwice,   // RMSNorm weight multiplied twice
    kRmsNormEpsilon,       // RMSNorm epsilon 1000x too large
    kQ4KScaleMinSwapped,   // Q4_K 6-bit scales and mins unpacked in swapped roles
    kMoeWeightsNorm,       // the chosen experts' weights renormalised against the model's expert_weights_norm
    kMoeTopKOrder,         // experts taken from the wrong end of the router's ranking (ascending sort)
    kMlaScaleWidth,        // absorbed MLA's attention scale over the latent key width, not the head's
    kRopeFreqsIgnored,     // Llama 3.1+'s rope_freqs factors not applied (plain RoPE frequencies)
    kQkNormAfterRope,      // qwen3's per-head q/k RMS norm applied after RoPE instead of before
    kLongRopeSwapped,      // phi3's LongRoPE short and long factors swapped (the other set for the context)
    kQkvSplitSwapped,      // a fused attn_qkv split in the wrong order: K's rows taken as V and V's as K
    kGemmaNormPlusOne,     // gemma's RMS norms applied as (1 + w) though the converter already added the 1
    kEmbdScaleMissing,     // gemma's embeddings not multiplied by sqrt(n_embd)
    kSoftcapMissing,       // gemma2's attention and final logit soft caps left out
    kSwaOffByOne,          // the sliding window one position too wide (p - j <= n_swa)
    kSwaWrongLayers,       // the local/global layer pattern shifted by one layer
    kMoeBiasInWeights,     // the experts' selection bias (exp_probs_b) in their weights as well as in the choice
    kMoeGroupScore,        // expert groups ranked by their best expert instead of the sum of their two best
    kMoeGateUpSwapped,     // a fused ffn_gate_up_exps split the wrong way round: gate from the up half and back
    kAttnSinksIgnored,     // gpt-oss's attention sinks left out of the softmax
    kSwigluOaiUnclamped,   // gpt-oss's SwiGLU without its clamp (gate <= 7, -7 <= up <= 7)
    kSwigluOaiClampBelow,  // gpt-oss's SwiGLU with the gate limited from below (gate >= -7) instead of above
    kMoeSoftmaxBeforeTopk, // gpt-oss's router: softmax over all experts before the top k, not over the k chosen
    kMxfp4NibbleOrder,     // MXFP4 blocks decoded with the nibbles the wrong way round (element j from the high nibble)
    kMxfp4ScaleExponent,   // MXFP4's E8M0 scale one power of two too large (2^(e-127) with ggml's doubled levels)
    kConvStateNotRolled,   // qwen35: the conv state never updated, every window starts from zeros
    kConvStateRolledWrong, // qwen35: the conv state keeps the window's first d_conv - 1 inputs, not its last
    kDecayGateSign,        // qwen35: the decay gate's sign flipped (A = exp(A_log) instead of -exp(A_log))
    kOutputGateBeforeNorm, // qwen35: silu(z) multiplied in before the DeltaNet output's RMS norm, not after
    kDeltaHeadsInterleaved,// qwen35: value head h reads q/k head h / (H_v / H_k) instead of h % H_k
    kDeltaChunkDecay,      // qwen35: the chunked delta rule without the decay between a chunk's tokens
    kImropeSectionsReversed,  // qwen35: the IMROPE sections read in reverse order
};

struct FaultInfo {
    Fault fault;
    const char* name;         // CLI name, e.g. "rope-pairing"
    const char* description;  // what the bug is, in the words of the people who hit it
    const char* first_event;  // where it first shows, as a pattern: "Qcur-0#3" ("{L}" none)
};

const std::vector<FaultInfo>& fault_catalogue();
const FaultInfo& fault_info(Fault fault);
bool fault_from_name(const std::string& name, Fault* out);
std::string fault_names();  // "transposed-weight, rope-pairing, ..."

// What a fault changes in a forward pass, as knobs the graph machinery applies (the architecture
// files never see a fault). The defaults are the clean engine.
struct FaultKnobs {
    bool rope_swap_pairing = false;   // NORM <-> NEOX
    bool rope_skipped = false;
    int rope_position_offset = 0;     // rotate for position p + offset
    float rope_attn_factor = 1.0f;    // multiplies RopeParams::attn_factor (cos/sin magnitude)
    bool position_stuck = false;      // every decode call starts at position 0
    bool scale_by_head_dim = false;   // kq scaled by 1/head_dim instead of the model's scale
    bool causal_mask = true;
    bool qkv_biases = true;
    bool norm_weight_twice = false;
    float rms_eps_factor = 1.0f;
    int64_t logits_rows = 0;          // > n_vocab: the logits buffer is padded (garbage rows)
    bool moe_norm_flipped = false;    // renormalise the experts' weights iff the model says not to
    bool moe_topk_ascending = false;  // the k least likely experts
    bool kq_scale_latent_width = false;  // deepseek2: mscale^2 / sqrt(kv_lora_rank + n_rot)
    bool rope_freqs_ignored = false;     // the model's rope_freqs left out of RoPE
    bool qk_norm_after_rope = false;     // qwen3: q/k heads rotated first, normalised after
    bool longrope_swapped = false;       // phi3: the long factors where the short belong, and back
    bool qkv_split_swapped = false;      // fused attn_qkv: K and V read from each other's rows
    bool norm_plus_one = false;          // every RMS norm weight used as 1 + w
    bool embd_scale_skipped = false;     // gemma's sqrt(n_embd) left out
    bool softcap_skipped = false;        // gemma2's soft caps left out
    int64_t swa_window_delta = 0;        // added to the sliding window
    bool swa_layers_shifted = false;     // layer il takes layer il + 1's kind (local or global)
    bool moe_bias_in_weights = false;    // the experts' weights gathered from the biased selection values
    bool moe_group_by_best = false;      // expert groups scored by their best value alone
    bool moe_gate_up_swapped = false;    // a fused gate_up product's halves read the wrong way round
    bool sinks_ignored = false;          // attention without the sinks
    bool swiglu_oai_unclamped = false;   // swiglu_oai with an infinite limit
    bool swiglu_oai_clamp_below = false; // swiglu_oai's gate clamped to [-limit, inf) instead of (-inf, limit]
    bool moe_softmax_before_topk = false;  // gating 3 run as gating 1 (softmax of every expert, weights from it)
    bool conv_state_frozen = false;      // qwen35: the conv state never written back
    bool conv_state_first = false;       // qwen35: the new conv state taken from the window's start
    bool decay_sign_flipped = false;     // qwen35: the decay gate times -1
    bool gate_before_norm = false;       // qwen35: rms_norm(out * silu(z)) * w instead of rms_norm(out) * w * silu(z)
    bool delta_heads_interleaved = false;  // qwen35: q/k heads repeated interleaved for the value heads
    bool delta_chunk_no_decay = false;     // qwen35: prompts through the chunked form, its in-chunk decay left out
    bool imrope_sections_reversed = false; // qwen35: rope.dimension_sections taken from its last entry to its first
};

// The knobs of `fault` for a model, or a usage error when the model cannot have that bug
// ("fault qkv-bias-dropped: needs a model with attention biases (qwen2)"). `has_tensor` answers
// whether the model file holds a tensor; `has_type` whether any weight is of a type.
struct FaultModelFacts {
    const ModelConfig* config = nullptr;
    int64_t n_vocab = 0;
    bool has_qkv_bias = false;
    bool has_q4_k = false;
    bool has_rope_freqs = false;  // rope_freqs.weight (Llama 3.1+ frequency factors)
    bool has_qk_norm = false;     // attn_q_norm / attn_k_norm (qwen3)
    bool has_longrope = false;    // rope_factors_long / _short (phi3)
    bool has_fused_qkv = false;   // attn_qkv with K and V of one width (phi3)
    bool has_expert_bias = false; // exp_probs_b.bias (DeepSeek-V3's selection bias)
    bool has_fused_gate_up = false;  // ffn_gate_up_exps (gate and up experts in one tensor)
    bool has_sinks = false;          // attn_sinks (gpt-oss)
    bool has_mxfp4 = false;          // MXFP4 weights
};
Result<FaultKnobs> fault_knobs(Fault fault, const FaultModelFacts& facts);
// The facts of an opened model (its config must outlive them).
FaultModelFacts fault_model_facts(const Model& model);

// A weight the fault rewrites (attn_q transposed, Q4_K scales and mins swapped): the bytes and
// type our engine then reads instead of the file's. `rewrote` is false for weights it leaves alone.
struct FaultWeight {
    bool rewrote = false;
    GgmlType type = GgmlType::F32;
    std::vector<uint8_t> bytes;
};
FaultWeight fault_weight(Fault fault, const std::string& name, GgmlType type, const int64_t ne[4],
                         const uint8_t* data, uint64_t n_bytes);

// Rewrites Q4_K blocks so that ggml's unpacking reads each sub-block's scale as its min and the
// min as its scale: the bytes a decoder with the two roles swapped would effectively use.
void swap_q4k_scales_and_mins(void* blocks, int64_t n_blocks);
// Rewrites MXFP4 blocks so that ggml's decoding reads what a decoder with the bug reads: the two
// nibbles of every byte swapped (kMxfp4NibbleOrder), or each exponent one larger
// (kMxfp4ScaleExponent; 255 stays).
void rewrite_mxfp4(Fault fault, void* blocks, int64_t n_blocks);

}  // namespace ls
