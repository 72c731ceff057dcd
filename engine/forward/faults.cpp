// The fault catalogue's names and descriptions.
#include "engine/forward/faults.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "engine/forward/model.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"

namespace ls {

const std::vector<FaultInfo>& fault_catalogue() {
    static const std::vector<FaultInfo> kCatalogue = {
        {Fault::kNone, "none", "no fault", ""},
        {Fault::kTransposedWeight, "transposed-weight",
         "attn_q weight used transposed (row-major GGUF read as column-major: CUBLAS_OP_T vs _N, wrong lda)", "Qcur-0"},
        {Fault::kRopeWrongPairing, "rope-pairing", "RoPE pairs (2i, 2i+1) and (i, i+n_rot/2) swapped: NORM vs NEOX",
         "Qcur-0 after rope"},
        {Fault::kRopeSkipped, "rope-skipped", "RoPE not applied to Q and K", "Qcur-0 after rope"},
        {Fault::kRopePositionOffByOne, "rope-position-off-by-one", "RoPE uses position p + 1", "Qcur-0 after rope"},
        {Fault::kKvPositionStuck, "kv-position-stuck",
         "the position is never advanced: each decode call ropes and writes the KV cache at position 0",
         "Qcur-0 after rope, decode 1"},
        {Fault::kAttentionScale, "attention-scale", "attention scores scaled by 1/d instead of 1/sqrt(d)", "kq_soft_max-0"},
        {Fault::kYarnMscale, "yarn-mscale", "YaRN magnitude scaling applied to cos/sin as well as to the attention scale",
         "Qcur-0 after rope"},
        {Fault::kNoCausalMask, "no-causal-mask", "the causal mask is missing: tokens see later tokens", "kq_soft_max-0"},
        {Fault::kPaddedVocabArgmax, "padded-vocab",
         "the logits buffer is sized to a padded vocabulary and the argmax reads rows the LM head never wrote",
         "result_output"},
        {Fault::kQkvBiasDropped, "qkv-bias-dropped", "the attention q/k/v biases are not added (qwen2)", "Qcur-0 + bias"},
        {Fault::kRmsNormWeightTwice, "rmsnorm-weight-twice", "the RMSNorm weight is multiplied in twice", "attn_norm-0"},
        {Fault::kRmsNormEpsilon, "rmsnorm-epsilon", "RMSNorm epsilon 1000x too large", "norm-0"},
        {Fault::kQ4KScaleMinSwapped, "q4k-scale-min-swapped", "Q4_K 6-bit scales and mins unpacked in swapped roles",
         "the first tensor read from a Q4_K weight"},
        {Fault::kMoeWeightsNorm, "moe-weights-norm",
         "the chosen experts' weights renormalised to sum 1 when the model says not to (expert_weights_norm), or not "
         "when it says to",
         "ffn_moe_weighted-L (the first MoE layer)"},
        {Fault::kMoeTopKOrder, "moe-topk-order",
         "experts taken from the wrong end of the router's ranking (an ascending sort): the k least likely ones",
         "ffn_moe_argsort-L (the first MoE layer)"},
        {Fault::kMlaScaleWidth, "mla-scale-width",
         "absorbed MLA's attention scale computed over the latent key width (kv_lora_rank + rope) instead of the "
         "head's (nope + rope)",
         "kq_soft_max-0"},
        {Fault::kRopeFreqsIgnored, "rope-freqs-ignored",
         "Llama 3.1+'s rope_freqs.weight not applied: RoPE at the plain frequencies, so every position but 0 "
         "rotates the slow pairs too fast",
         "Qcur-0 after rope"},
        {Fault::kQkNormAfterRope, "qk-norm-after-rope",
         "qwen3's per-head RMS norm of q and k (attn_q_norm, attn_k_norm) applied after RoPE instead of before",
         "Qcur-0 after rope"},
        {Fault::kQkvSplitSwapped, "qkv-split-order",
         "a fused attn_qkv split in the wrong order: the rows after Q taken as V and the last ones as K (the order is "
         "Q, K, V)",
         "Vcur-0"},
        {Fault::kLongRopeSwapped, "longrope-swapped",
         "phi3's LongRoPE factors swapped: the long ones (rope_factors_long) for a context within the original one, "
         "or the short ones beyond it",
         "Qcur-0 after rope"},
        {Fault::kGemmaNormPlusOne, "gemma-norm-plus-one",
         "gemma's (and qwen35's) RMS norms applied as x * (1 + w), though the converter already added the 1 to the "
         "stored weights",
         "attn_norm-0"},
        {Fault::kEmbdScaleMissing, "embd-scale-missing",
         "gemma's token embeddings not multiplied by sqrt(n_embd) before the first layer", "inp_scaled"},
        {Fault::kSoftcapMissing, "softcap-missing",
         "gemma2's soft caps left out: the attention scores and the final logits not squashed by cap * tanh(x / cap)",
         "kq_soft_max-0"},
        {Fault::kSwaOffByOne, "swa-off-by-one",
         "the sliding window one position too wide: a local layer's token sees n_swa + 1 positions (p - j <= n_swa "
         "instead of < n_swa)",
         "kq_soft_max-0 once the prompt is longer than the window"},
        {Fault::kSwaWrongLayers, "swa-wrong-layers",
         "the local/global layer pattern shifted by one layer (an off-by-one in the pattern's index): the global, "
         "full-attention layer one earlier in each period, so the wrong layers get the sliding window and the local "
         "RoPE base",
         "gemma3: Qcur-L after rope of the first layer that changes; gemma2: kq_soft_max-0"},
        {Fault::kMoeBiasInWeights, "moe-bias-in-weights",
         "the experts' selection bias (exp_probs_b) added into their weights as well: the weights gathered from the "
         "biased values instead of the router's probabilities (the bias is only for choosing)",
         "ffn_moe_weights-L (the first MoE layer)"},
        {Fault::kMoeGroupScore, "moe-group-score",
         "expert groups ranked by their single best expert instead of the sum of their two best (DeepSeek-V3's "
         "group-limited routing)",
         "ffn_moe_group_topk-L (the first MoE layer)"},
        {Fault::kMoeGateUpSwapped, "moe-gate-up-swapped",
         "a fused ffn_gate_up_exps split the wrong way round: the gate read from the second half of each expert's "
         "rows and up from the first (the order is gate, then up)",
         "ffn_moe_gate-L (the first MoE layer)"},
        {Fault::kAttnSinksIgnored, "attn-sinks-ignored",
         "gpt-oss's attention sinks (attn_sinks, one logit per head) left out of the softmax: every row's weights "
         "sum to 1 where the sink should take its share",
         "kq_soft_max-0 (flash attention: kqv_out-0)"},
        {Fault::kSwigluOaiUnclamped, "swiglu-oai-unclamped",
         "gpt-oss's SwiGLU without its clamp: the gate not limited to 7 and up not to [-7, 7] before "
         "x * sigmoid(1.702 x) * (up + 1)",
         "ffn_moe_swiglu_oai-L (the first layer with a value beyond the limit)"},
        {Fault::kSwigluOaiClampBelow, "swiglu-oai-clamp-below",
         "gpt-oss's SwiGLU with the gate's one-sided clamp on the wrong side: the gate limited from below "
         "(max(gate, -7)) instead of from above (min(gate, 7)); up still clamped to [-7, 7]",
         "ffn_moe_swiglu_oai-L (the first layer with a gate above 7)"},
        {Fault::kMoeSoftmaxBeforeTopk, "moe-softmax-before-topk",
         "gpt-oss's router run like Mixtral's: a softmax over every expert's logit, its top k, and those probabilities "
         "as weights, instead of the top k logits and a softmax over those k alone",
         "ffn_moe_probs-0"},
        {Fault::kMxfp4NibbleOrder, "mxfp4-nibble-order",
         "MXFP4 blocks decoded with the nibbles the wrong way round: element j from the high nibble of byte j and "
         "element j + 16 from the low one (ggml: low nibble first)",
         "the first product with an MXFP4 weight (gpt-oss: ffn_moe_up-0)"},
        {Fault::kMxfp4ScaleExponent, "mxfp4-scale-exponent",
         "MXFP4's E8M0 scale off by one power of two: 2^(e - 127) with ggml's doubled level table (ggml takes "
         "2^(e - 128) for it), every value twice its size",
         "the first product with an MXFP4 weight (gpt-oss: ffn_moe_up-0)"},
        {Fault::kConvStateNotRolled, "conv-state-not-rolled",
         "qwen35's conv state never rolled: each evaluation's causal conv1d window starts from zeros instead of the "
         "last d_conv - 1 inputs of the tokens before it",
         "conv_state_last-L (the first DeltaNet layer)"},
        {Fault::kConvStateRolledWrong, "conv-state-rolled-wrong",
         "qwen35's conv state rolled the wrong way: the window's first d_conv - 1 inputs kept as the new state instead "
         "of its last",
         "conv_state_last-L (the first DeltaNet layer)"},
        {Fault::kDecayGateSign, "decay-gate-sign",
         "qwen35's decay gate with its sign flipped: A = exp(A_log) instead of -exp(A_log) (ssm_a stores the "
         "latter), so the delta-rule state grows by e^|g| per token instead of decaying",
         "gate-L (the first DeltaNet layer)"},
        {Fault::kOutputGateBeforeNorm, "output-gate-before-norm",
         "qwen35's DeltaNet output gate on the wrong side of its norm: silu(z) multiplied into the delta rule's "
         "output before the per-head RMS norm instead of after the weighted norm",
         "norm-L#2 (the first DeltaNet layer)"},
        {Fault::kDeltaHeadsInterleaved, "delta-heads-interleaved",
         "qwen35's value heads paired with q/k heads interleaved (value head h reads q/k head h / (H_v / H_k), as "
         "Hugging Face's repeat_interleave) where llama.cpp's converted weights tile them (h % H_k)",
         "new_state-L (the first DeltaNet layer)"},
        {Fault::kDeltaChunkDecay, "delta-chunk-decay",
         "qwen35's delta rule in its chunked form for prompts without the decay between a chunk's tokens (the "
         "exp(G_i - G_j) masks left out), so a prompt disagrees with the same tokens decoded one by one",
         "new_state-L of a prompt (the first DeltaNet layer)"},
        {Fault::kImropeSectionsReversed, "imrope-sections-reversed",
         "qwen35's IMROPE sections (rope.dimension_sections) read in reverse order, so pairs of one position kind "
         "take the fourth position, 0 for text tokens, and stay unrotated",
         "Qcur-L after rope (the first attention layer)"},
    };
    return kCatalogue;
}

const FaultInfo& fault_info(Fault fault) {
    for (const FaultInfo& f : fault_catalogue())
        if (f.fault == fault) return f;
    return fault_catalogue().front();
}

bool fault_from_name(const std::string& name, Fault* out) {
    for (const FaultInfo& f : fault_catalogue())
        if (name == f.name) {
            *out = f.fault;
            return true;
        }
    return false;
}

std::string fault_names() {
    std::string out;
    for (const FaultInfo& f : fault_catalogue()) {
        if (f.fault == Fault::kNone) continue;
        if (!out.empty()) out += ", ";
        out += f.name;
    }
    return out;
}

Result<FaultKnobs> fault_knobs(Fault fault, const FaultModelFacts& m) {
    const ModelConfig& c = *m.config;
    FaultKnobs k;
    auto refuse = [&](const std::string& why) {
        return make_error(ErrorCode::kUsage, fmt::format("fault {}: {}", fault_info(fault).name, why));
    };
    switch (fault) {
        case Fault::kNone: break;
        case Fault::kTransposedWeight:
            if (c.n_head * c.head_dim_k != c.n_embd) return refuse("needs a square attn_q weight (n_head * head_dim == n_embd)");
            break;
        case Fault::kRopeWrongPairing: k.rope_swap_pairing = true; break;
        case Fault::kRopeSkipped: k.rope_skipped = true; break;
        case Fault::kRopePositionOffByOne: k.rope_position_offset = 1; break;
        case Fault::kKvPositionStuck: k.position_stuck = true; break;
        case Fault::kAttentionScale: k.scale_by_head_dim = true; break;
        case Fault::kYarnMscale:
            if (c.rope_scaling != RopeScaling::kYarn) return refuse("needs a model with YaRN rope scaling");
            // The magnitude correction applied once more on top of ggml's own.
            k.rope_attn_factor = 1.0f + 0.1f * std::log(static_cast<float>(c.rope_scaling_factor));
            break;
        case Fault::kNoCausalMask: k.causal_mask = false; break;
        case Fault::kPaddedVocabArgmax: k.logits_rows = (m.n_vocab / 256 + 2) * 256; break;
        case Fault::kQkvBiasDropped:
            if (!m.has_qkv_bias) return refuse("needs a model with attention biases (qwen2)");
            k.qkv_biases = false;
            break;
        case Fault::kRmsNormWeightTwice: k.norm_weight_twice = true; break;
        case Fault::kRmsNormEpsilon: k.rms_eps_factor = 1000.0f; break;
        case Fault::kQ4KScaleMinSwapped:
            if (!m.has_q4_k) return refuse("needs a model with Q4_K weights");
            break;
        case Fault::kMoeWeightsNorm:
            if (c.n_expert <= 0) return refuse("needs a mixture-of-experts model");
            k.moe_norm_flipped = true;
            break;
        case Fault::kMoeTopKOrder:
            if (c.n_expert <= 0) return refuse("needs a mixture-of-experts model");
            k.moe_topk_ascending = true;
            break;
        case Fault::kRopeFreqsIgnored:
            if (!m.has_rope_freqs) return refuse("needs a model with rope frequency factors (rope_freqs.weight, Llama 3.1+)");
            k.rope_freqs_ignored = true;
            break;
        case Fault::kQkNormAfterRope:
            if (!m.has_qk_norm) return refuse("needs a model with per-head q/k norms (attn_q_norm, qwen3)");
            k.qk_norm_after_rope = true;
            break;
        case Fault::kLongRopeSwapped:
            if (!m.has_longrope) return refuse("needs a model with LongRoPE factors (rope_factors_long/short, phi3)");
            k.longrope_swapped = true;
            break;
        case Fault::kQkvSplitSwapped:
            if (!m.has_fused_qkv) return refuse("needs a model with a fused attn_qkv whose K and V are as wide (phi3)");
            k.qkv_split_swapped = true;
            break;
        case Fault::kGemmaNormPlusOne:
            // qwen35's norms are zero-centred in the checkpoint as gemma's are (its converter adds the 1 too).
            if (c.arch != Arch::kGemma2 && c.arch != Arch::kGemma3 && !c.hybrid())
                return refuse("needs a gemma2, gemma3, qwen35 or qwen35moe model");
            k.norm_plus_one = true;
            break;
        case Fault::kEmbdScaleMissing:
            if (c.arch != Arch::kGemma2 && c.arch != Arch::kGemma3) return refuse("needs a gemma2 or gemma3 model");
            k.embd_scale_skipped = true;
            break;
        case Fault::kSoftcapMissing:
            if (c.attn_softcap <= 0 && c.final_softcap <= 0) return refuse("needs a model with soft caps (gemma2)");
            k.softcap_skipped = true;
            break;
        case Fault::kSwaOffByOne:
            if (!c.has_swa()) return refuse("needs a model with sliding-window layers (gemma2, gemma3)");
            k.swa_window_delta = 1;
            break;
        case Fault::kSwaWrongLayers:
            if (!c.has_swa()) return refuse("needs a model with sliding-window layers (gemma2, gemma3)");
            k.swa_layers_shifted = true;
            break;
        case Fault::kMoeBiasInWeights:
            if (!m.has_expert_bias) return refuse("needs a model whose experts have a selection bias (exp_probs_b, DeepSeek-V3)");
            k.moe_bias_in_weights = true;
            break;
        case Fault::kMoeGroupScore:
            if (c.n_expert <= 0 || c.n_expert_groups <= 1)
                return refuse("needs a model with group-limited expert routing (expert_group_count > 1, DeepSeek-V3)");
            k.moe_group_by_best = true;
            break;
        case Fault::kMoeGateUpSwapped:
            if (!m.has_fused_gate_up) return refuse("needs a model whose gate and up experts are fused (ffn_gate_up_exps)");
            k.moe_gate_up_swapped = true;
            break;
        case Fault::kAttnSinksIgnored:
            if (!m.has_sinks) return refuse("needs a model with attention sinks (attn_sinks, gpt-oss)");
            k.sinks_ignored = true;
            break;
        case Fault::kSwigluOaiUnclamped:
            if (c.arch != Arch::kGptOss) return refuse("needs a gpt-oss model (clamped SwiGLU experts)");
            k.swiglu_oai_unclamped = true;
            break;
        case Fault::kSwigluOaiClampBelow:
            if (c.arch != Arch::kGptOss) return refuse("needs a gpt-oss model (clamped SwiGLU experts)");
            k.swiglu_oai_clamp_below = true;
            break;
        case Fault::kMoeSoftmaxBeforeTopk:
            if (c.expert_gating_func != 3) return refuse("needs a model whose router takes a softmax over the chosen experts (gpt-oss)");
            k.moe_softmax_before_topk = true;
            break;
        case Fault::kMxfp4NibbleOrder:
        case Fault::kMxfp4ScaleExponent:
            if (!m.has_mxfp4) return refuse("needs a model with MXFP4 weights (gpt-oss's experts)");
            break;  // the weights are rewritten as they load (fault_weight)
        case Fault::kConvStateNotRolled:
        case Fault::kConvStateRolledWrong:
        case Fault::kDecayGateSign:
        case Fault::kOutputGateBeforeNorm:
            if (!c.hybrid()) return refuse("needs a model with Gated DeltaNet layers (qwen35)");
            k.conv_state_frozen = fault == Fault::kConvStateNotRolled;
            k.conv_state_first = fault == Fault::kConvStateRolledWrong;
            k.decay_sign_flipped = fault == Fault::kDecayGateSign;
            k.gate_before_norm = fault == Fault::kOutputGateBeforeNorm;
            break;
        case Fault::kDeltaHeadsInterleaved:
            if (!c.hybrid() || c.ssm_n_v_heads == c.ssm_n_k_heads)
                return refuse("needs a model with Gated DeltaNet layers of more value heads than q/k heads (qwen35)");
            k.delta_heads_interleaved = true;
            break;
        case Fault::kDeltaChunkDecay:
            if (!c.hybrid()) return refuse("needs a model with Gated DeltaNet layers (qwen35)");
            k.delta_chunk_no_decay = true;
            break;
        case Fault::kImropeSectionsReversed: {
            if (c.rope_type != RopeType::kImrope) return refuse("needs a model with IMROPE sections (qwen35)");
            const int reversed[4] = {c.rope_sections[3], c.rope_sections[2], c.rope_sections[1], c.rope_sections[0]};
            if (imrope_text_factors(reversed, c.n_rot) == imrope_text_factors(c.rope_sections, c.n_rot))
                return refuse("the model's sections give every rotated pair the same position in either order");
            k.imrope_sections_reversed = true;
            break;
        }
        case Fault::kMlaScaleWidth:
            if (c.arch != Arch::kDeepseek2) return refuse("needs a deepseek2 model (multi-head latent attention)");
            k.kq_scale_latent_width = true;
            break;
    }
    return k;
}

FaultModelFacts fault_model_facts(const Model& model) {
    FaultModelFacts facts;
    facts.config = &model.config();
    const GgufTensorInfo* out = model.find("output.weight");
    const GgufTensorInfo* emb = model.find("token_embd.weight");
    facts.n_vocab = out ? out->ne[1] : emb ? emb->ne[1] : model.config().n_vocab;
    for (const char* b : {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"})
        facts.has_qkv_bias = facts.has_qkv_bias || model.find(b) != nullptr;
    for (const GgufTensorInfo& t : model.tensors()) {
        facts.has_q4_k = facts.has_q4_k || t.type == GgmlType::Q4_K;
        facts.has_mxfp4 = facts.has_mxfp4 || t.type == GgmlType::MXFP4;
    }
    facts.has_rope_freqs = model.config().arch == Arch::kLlama && model.find("rope_freqs.weight") != nullptr;
    facts.has_qk_norm = model.find("blk.0.attn_q_norm.weight") != nullptr;
    for (const GgufTensorInfo& t : model.tensors())
        facts.has_expert_bias = facts.has_expert_bias || t.name.find("exp_probs_b.bias") != std::string::npos,
        facts.has_fused_gate_up = facts.has_fused_gate_up || t.name.find("ffn_gate_up_exps.weight") != std::string::npos,
        facts.has_sinks = facts.has_sinks || t.name.find("attn_sinks.weight") != std::string::npos;
    facts.has_longrope = model.config().arch == Arch::kPhi3 && model.find("rope_factors_long.weight") &&
                         model.find("rope_factors_short.weight");
    facts.has_fused_qkv = model.config().arch == Arch::kPhi3 && model.find("blk.0.attn_qkv.weight") &&
                          model.config().head_dim_k == model.config().head_dim_v;
    return facts;
}

FaultWeight fault_weight(Fault fault, const std::string& name, GgmlType type, const int64_t ne[4], const uint8_t* data,
                         uint64_t n_bytes) {
    FaultWeight w;
    if (fault == Fault::kQ4KScaleMinSwapped && type == GgmlType::Q4_K) {
        w.rewrote = true;
        w.type = type;
        w.bytes.assign(data, data + n_bytes);
        swap_q4k_scales_and_mins(w.bytes.data(), static_cast<int64_t>(n_bytes / sizeof(block_q4_K)));
    }
    if ((fault == Fault::kMxfp4NibbleOrder || fault == Fault::kMxfp4ScaleExponent) && type == GgmlType::MXFP4) {
        w.rewrote = true;
        w.type = type;
        w.bytes.assign(data, data + n_bytes);
        rewrite_mxfp4(fault, w.bytes.data(), static_cast<int64_t>(n_bytes / sizeof(block_mxfp4)));
    }
    const std::string suffix = "attn_q.weight";
    const bool is_wq = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (fault == Fault::kTransposedWeight && is_wq && ne[0] == ne[1]) {
        // attn_q as a column-major reader sees it: element (i, j) read at (j, i).
        const int64_t n = ne[0];
        std::vector<float> rows(static_cast<size_t>(n * n)), transposed(rows.size());
        dequantize_rows(type, data, 0, rows.data(), n, n);
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < n; ++j) transposed[j * n + i] = rows[i * n + j];
        w.rewrote = true;
        w.type = GgmlType::F32;
        w.bytes.resize(transposed.size() * sizeof(float));
        std::memcpy(w.bytes.data(), transposed.data(), w.bytes.size());
    }
    return w;
}

void rewrite_mxfp4(Fault fault, void* blocks, int64_t n_blocks) {
    auto* b = static_cast<block_mxfp4*>(blocks);
    for (int64_t i = 0; i < n_blocks; ++i) {
        if (fault == Fault::kMxfp4ScaleExponent && b[i].e < 255) ++b[i].e;
        if (fault == Fault::kMxfp4NibbleOrder)
            for (uint8_t& q : b[i].qs) q = static_cast<uint8_t>((q >> 4) | (q << 4));
    }
}

void swap_q4k_scales_and_mins(void* blocks, int64_t n_blocks) {
    auto* b = static_cast<block_q4_K*>(blocks);
    for (int64_t i = 0; i < n_blocks; ++i) {
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; ++j) get_scale_min_k4(j, b[i].scales, &m[j], &sc[j]);  // roles swapped
        uint8_t* q = b[i].scales;
        for (int k = 0; k < 4; ++k) {
            q[k] = static_cast<uint8_t>((sc[k] & 63) | ((sc[k + 4] >> 4) << 6));
            q[k + 4] = static_cast<uint8_t>((m[k] & 63) | ((m[k + 4] >> 4) << 6));
            q[k + 8] = static_cast<uint8_t>((sc[k + 4] & 0xF) | ((m[k + 4] & 0xF) << 4));
        }
    }
}

}  // namespace ls
