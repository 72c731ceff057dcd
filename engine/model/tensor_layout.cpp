// The per-architecture tensor lists (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2, gpt-oss, qwen35):
// names,
// ggml shapes,
// which tensors are optional, refused or unused, in the order llama.cpp's loader creates them.
#include "engine/model/tensor_layout.h"

#include <fmt/format.h>

namespace ls {
namespace {

class Layout {
public:
    explicit Layout(std::vector<TensorSpec>& out) : out_(out) {}
    void need(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), true, false, "", ""}); }
    void maybe(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), false, false, "", ""}); }
    void vocab(std::string name, std::vector<int64_t> ne, bool required) {
        out_.push_back({std::move(name), std::move(ne), required, true, "", ""});
    }
    // A tensor llama.cpp loads and its generation graph never reads: `why` says so.
    void unused(std::string name, std::vector<int64_t> ne, std::string why) {
        out_.push_back({std::move(name), std::move(ne), false, false, "", std::move(why)});
    }
    // A tensor llama.cpp's graph reads when present and we do not run yet: a file with it is refused.
    void refused(std::string name, std::vector<int64_t> ne, std::string why) {
        out_.push_back({std::move(name), std::move(ne), false, false, std::move(why), ""});
    }
    // A tensor llama.cpp's loader knows but cannot load: a file with it is refused there, and here.
    void loader_refuses(std::string name, std::vector<int64_t> ne, std::string why) {
        out_.push_back({std::move(name), std::move(ne), false, false, std::move(why), "", true});
    }

private:
    std::vector<TensorSpec>& out_;
};

std::string blk(int64_t il, const char* what) { return fmt::format("blk.{}.{}", il, what); }

void dense_ffn(Layout& l, int64_t il, int64_t n_embd, int64_t n_ff) {
    l.need(blk(il, "ffn_gate.weight"), {n_embd, n_ff});
    l.need(blk(il, "ffn_down.weight"), {n_ff, n_embd});
    l.need(blk(il, "ffn_up.weight"), {n_embd, n_ff});
}

// Per-tensor scales of NVFP4 conversions, created by llama.cpp's generic pass for every
// projection that exists; `.input_scale` no graph reads. Whether a graph multiplies a product by
// its `.scale` is the architecture's: kApplied (so do we), kUnused (llama.cpp loads it and its
// graph passes none: accepted and unused, as there), kRefused (used there, not run here yet).
enum class ScaleUse { kApplied, kUnused, kRefused };
void weight_scales(Layout& l, int64_t il, std::initializer_list<const char*> projections, ScaleUse use) {
    for (const char* p : projections)
        for (const char* kind : {"scale", "input_scale"}) {
            const std::string name = blk(il, fmt::format("{}.{}", p, kind).c_str());
            if (use == ScaleUse::kRefused) l.refused(name, {1}, fmt::format("per-tensor weight scales on {} are not supported yet", p));
            else if (std::string(kind) == "input_scale") l.unused(name, {1}, "no graph of llama.cpp reads input scales");
            else if (use == ScaleUse::kUnused) l.unused(name, {1}, "llama.cpp's graph gives this projection no scale");
            else l.maybe(name, {1});
        }
}

// The router and the routed experts. deepseek2: an optional selection bias, and gate and up
// either fused in one ffn_gate_up_exps (current converters) or separate; llama: the gate experts
// optional (the graph builder refuses a file without them); qwen3moe: all three separate.
void moe_ffn(Layout& l, const ModelConfig& c, int64_t il) {
    const bool ds2 = c.arch == Arch::kDeepseek2;
    if (c.arch == Arch::kQwen35Moe) {  // create_tensor_gate_up_exps: fused gate_up, or gate and up
        l.need(blk(il, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
        l.maybe(blk(il, "ffn_gate_up_exps.weight"), {c.n_embd, 2 * c.n_ff_expert, c.n_expert});
        l.maybe(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
        l.need(blk(il, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
        l.maybe(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
        for (const char* p : {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"}) {
            l.maybe(blk(il, fmt::format("{}.scale", p).c_str()), {c.n_expert});
            l.unused(blk(il, fmt::format("{}.input_scale", p).c_str()), {c.n_expert}, "no graph of llama.cpp reads input scales");
        }
        return;
    }
    l.need(blk(il, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
    if (ds2) l.maybe(blk(il, "exp_probs_b.bias"), {c.n_expert});
    if (ds2) l.maybe(blk(il, "ffn_gate_up_exps.weight"), {c.n_embd, 2 * c.n_ff_expert, c.n_expert});
    if (ds2 || c.arch == Arch::kLlama) l.maybe(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    else l.need(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    l.need(blk(il, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
    if (ds2) l.maybe(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    else l.need(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    // Per-expert scales ({n_expert}, NVFP4 conversions): llama.cpp's generic pass creates them
    // and build_moe_ffn multiplies each slot's product by its expert's (deepseek2's graph passes
    // none).
    for (const char* p : {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"}) {
        const std::string scale = blk(il, fmt::format("{}.scale", p).c_str());
        if (ds2) l.unused(scale, {c.n_expert}, "llama.cpp's deepseek2 graph passes its experts no scales");
        else l.maybe(scale, {c.n_expert});
        l.unused(blk(il, fmt::format("{}.input_scale", p).c_str()), {c.n_expert}, "no graph of llama.cpp reads input scales");
    }
}

void deepseek2_layer(Layout& l, const ModelConfig& c, int64_t il) {
    const int64_t q_width = c.n_head * c.head_dim_k_mla;
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    if (c.q_lora_rank > 0) l.need(blk(il, "attn_q_a_norm.weight"), {c.q_lora_rank});
    l.need(blk(il, "attn_kv_a_norm.weight"), {c.kv_lora_rank});
    if (c.q_lora_rank > 0) {
        l.need(blk(il, "attn_q_a.weight"), {c.n_embd, c.q_lora_rank});
        l.need(blk(il, "attn_q_b.weight"), {c.q_lora_rank, q_width});
    } else {
        l.need(blk(il, "attn_q.weight"), {c.n_embd, q_width});
    }
    l.need(blk(il, "attn_kv_a_mqa.weight"), {c.n_embd, c.kv_lora_rank + c.n_rot});
    if (c.mla_split) {
        l.need(blk(il, "attn_k_b.weight"), {c.qk_nope_dim(), c.kv_lora_rank, c.n_head});
        l.need(blk(il, "attn_v_b.weight"), {c.kv_lora_rank, c.head_dim_v_mla, c.n_head});
    } else {
        l.need(blk(il, "attn_kv_b.weight"), {c.kv_lora_rank, c.n_head * (c.qk_nope_dim() + c.head_dim_v_mla)});
    }
    l.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v_mla, c.n_embd});
    l.need(blk(il, "ffn_norm.weight"), {c.n_embd});
    if (c.q_lora_rank == 0) weight_scales(l, il, {"attn_q"}, ScaleUse::kRefused);
    weight_scales(l, il, {"attn_output"}, ScaleUse::kRefused);
    if (!c.layer_is_moe(il)) {
        dense_ffn(l, il, c.n_embd, c.n_ff);
        weight_scales(l, il, {"ffn_gate", "ffn_down", "ffn_up"}, ScaleUse::kRefused);
        return;
    }
    moe_ffn(l, c, il);
    const int64_t shared = c.n_ff_expert * c.n_expert_shared;
    l.need(blk(il, "ffn_gate_shexp.weight"), {c.n_embd, shared});
    l.need(blk(il, "ffn_down_shexp.weight"), {shared, c.n_embd});
    l.need(blk(il, "ffn_up_shexp.weight"), {c.n_embd, shared});
    weight_scales(l, il, {"ffn_gate_shexp", "ffn_down_shexp", "ffn_up_shexp"}, ScaleUse::kRefused);
}

// phi3: a fused attn_qkv (or separate q/k/v), a fused ffn_up (gate and up, 2 n_ff rows), and
// LongRoPE's short and long frequency factors (model-wide, created in the first layer).
void phi3_layer(Layout& l, const ModelConfig& c, int64_t il) {
    const int64_t n_qkv = c.n_embd + c.n_embd_k_gqa() + c.n_embd_v_gqa();
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    l.maybe(blk(il, "attn_qkv.weight"), {c.n_embd, n_qkv});
    l.maybe(blk(il, "attn_qkv.bias"), {n_qkv});
    // Without a fused attn_qkv the graph builder asks for all three (llama.cpp: each not required).
    l.maybe(blk(il, "attn_q.weight"), {c.n_embd, c.n_embd});
    l.maybe(blk(il, "attn_k.weight"), {c.n_embd, c.n_embd_k_gqa()});
    l.maybe(blk(il, "attn_v.weight"), {c.n_embd, c.n_embd_v_gqa()});
    l.maybe(blk(il, "attn_q.bias"), {c.n_embd});
    l.maybe(blk(il, "attn_k.bias"), {c.n_embd_k_gqa()});
    l.maybe(blk(il, "attn_v.bias"), {c.n_embd_v_gqa()});
    l.need(blk(il, "attn_output.weight"), {c.n_embd, c.n_embd});
    l.need(blk(il, "ffn_norm.weight"), {c.n_embd});
    l.need(blk(il, "ffn_down.weight"), {c.n_ff, c.n_embd});
    l.need(blk(il, "ffn_up.weight"), {c.n_embd, 2 * c.n_ff});
    if (il == 0) {
        l.maybe("rope_factors_long.weight", {c.n_rot / 2});
        l.maybe("rope_factors_short.weight", {c.n_rot / 2});
    }
    weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kApplied);
    weight_scales(l, il, {"attn_qkv"}, ScaleUse::kRefused);
    weight_scales(l, il, {"ffn_down", "ffn_up"}, ScaleUse::kUnused);  // its graph gives build_ffn none
}

// llama.cpp's create_tensor_qkv (llama, qwen2, qwen3, gemma): a fused attn_qkv when the file has
// one (refused here), else q, k and v with their optional biases.
void qkv_projections(Layout& l, const ModelConfig& c, int64_t il) {
    const int64_t n_q = c.n_head * c.head_dim_k, n_qkv = n_q + c.n_embd_k_gqa() + c.n_embd_v_gqa();
    const std::string fused = "fused QKV projections (attn_qkv) in a " + c.arch_name + " file are not supported yet";
    l.refused(blk(il, "attn_qkv.weight"), {c.n_embd, n_qkv}, fused);
    l.refused(blk(il, "attn_qkv.bias"), {n_qkv}, fused);
    l.need(blk(il, "attn_q.weight"), {c.n_embd, n_q});
    l.need(blk(il, "attn_k.weight"), {c.n_embd, c.n_embd_k_gqa()});
    l.need(blk(il, "attn_v.weight"), {c.n_embd, c.n_embd_v_gqa()});
    l.maybe(blk(il, "attn_q.bias"), {n_q});
    l.maybe(blk(il, "attn_k.bias"), {c.n_embd_k_gqa()});
    l.maybe(blk(il, "attn_v.bias"), {c.n_embd_v_gqa()});
}

// llama, qwen2, qwen3 and qwen3moe: q/k/v projections with optional biases (qwen2 files carry
// them, llama ones rarely do); llama may also have output and feed-forward biases, per-dimension
// rope factors and experts; qwen3 and qwen3moe normalise each head of q and k; qwen3moe's
// feed-forward is all experts.
void llama_layer(Layout& l, const ModelConfig& c, int64_t il) {
    const bool llama = c.arch == Arch::kLlama, qwen3 = c.arch == Arch::kQwen3 || c.arch == Arch::kQwen3Moe;
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    qkv_projections(l, c, il);
    l.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v, c.n_embd});
    if (llama) l.maybe(blk(il, "attn_output.bias"), {c.n_embd});
    if (qwen3) {
        l.need(blk(il, "attn_k_norm.weight"), {c.head_dim_k});
        l.need(blk(il, "attn_q_norm.weight"), {c.head_dim_k});
    }
    l.need(blk(il, "ffn_norm.weight"), {c.n_embd});
    // One model-wide tensor, but llama.cpp creates it inside the first layer (the other layers
    // share it).
    if (llama && il == 0) l.maybe("rope_freqs.weight", {c.n_rot / 2});
    if ((llama && c.n_expert > 0) || c.arch == Arch::kQwen3Moe) {
        moe_ffn(l, c, il);
        weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kApplied);
        weight_scales(l, il, {"attn_qkv"}, ScaleUse::kRefused);
        return;
    }
    dense_ffn(l, il, c.n_embd, c.n_ff);
    if (llama) {
        l.maybe(blk(il, "ffn_gate.bias"), {c.n_ff});
        l.maybe(blk(il, "ffn_down.bias"), {c.n_embd});
        l.maybe(blk(il, "ffn_up.bias"), {c.n_ff});
    }
    weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kApplied);
    // qwen2's graph gives build_ffn no scales.
    weight_scales(l, il, {"ffn_gate", "ffn_down", "ffn_up"}, c.arch == Arch::kQwen2 ? ScaleUse::kUnused : ScaleUse::kApplied);
    weight_scales(l, il, {"attn_qkv"}, ScaleUse::kRefused);
}

// gemma2 and gemma3: q/k/v (optional biases) as llama.cpp's shared create_tensor_qkv, a norm after
// attention and after the feed-forward, per-head q/k norms (gemma3), the GEGLU feed-forward.
void gemma_layer(Layout& l, const ModelConfig& c, int64_t il) {
    const int64_t n_q = c.n_head * c.head_dim_k;
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    qkv_projections(l, c, il);
    l.need(blk(il, "attn_output.weight"), {n_q, c.n_embd});
    l.need(blk(il, "post_attention_norm.weight"), {c.n_embd});
    if (c.arch == Arch::kGemma3) {
        l.need(blk(il, "attn_k_norm.weight"), {c.head_dim_k});
        l.need(blk(il, "attn_q_norm.weight"), {c.head_dim_k});
    }
    l.need(blk(il, "ffn_norm.weight"), {c.n_embd});
    dense_ffn(l, il, c.n_embd, c.n_ff);
    l.need(blk(il, "post_ffw_norm.weight"), {c.n_embd});
    weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kApplied);
    weight_scales(l, il, {"ffn_gate", "ffn_down", "ffn_up"}, ScaleUse::kUnused);  // build_ffn is given none
    weight_scales(l, il, {"attn_qkv"}, ScaleUse::kRefused);
}

// gpt-oss (llama.cpp's openai-moe): q/k/v fused or separate with optional biases (create_tensor_qkv;
// heads n_rot wide), attn_output with a required bias, one attention sink per head, a norm after
// attention, and experts with a biased router and biased up, gate and down products. The graph
// passes build_moe_ffn no per-expert scales, so the generic pass's are loaded and unused.
void gpt_oss_layer(Layout& l, const ModelConfig& c, int64_t il) {
    const int64_t n_q = c.n_head * c.n_rot, n_kv = c.n_head_kv * c.n_rot, n_qkv = n_q + 2 * n_kv;
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    l.need(blk(il, "post_attention_norm.weight"), {c.n_embd});
    l.maybe(blk(il, "attn_qkv.weight"), {c.n_embd, n_qkv});
    l.maybe(blk(il, "attn_qkv.bias"), {n_qkv});
    // Without a fused attn_qkv the graph builder asks for all three.
    l.maybe(blk(il, "attn_q.weight"), {c.n_embd, n_q});
    l.maybe(blk(il, "attn_k.weight"), {c.n_embd, n_kv});
    l.maybe(blk(il, "attn_v.weight"), {c.n_embd, n_kv});
    l.maybe(blk(il, "attn_q.bias"), {n_q});
    l.maybe(blk(il, "attn_k.bias"), {n_kv});
    l.maybe(blk(il, "attn_v.bias"), {n_kv});
    l.need(blk(il, "attn_output.weight"), {n_q, c.n_embd});
    l.need(blk(il, "attn_sinks.weight"), {c.n_head});
    l.need(blk(il, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
    l.need(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    l.need(blk(il, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
    l.need(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    l.need(blk(il, "attn_output.bias"), {c.n_embd});
    l.need(blk(il, "ffn_gate_inp.bias"), {c.n_expert});
    l.need(blk(il, "ffn_gate_exps.bias"), {c.n_ff_expert, c.n_expert});
    l.need(blk(il, "ffn_down_exps.bias"), {c.n_embd, c.n_expert});
    l.need(blk(il, "ffn_up_exps.bias"), {c.n_ff_expert, c.n_expert});
    weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kApplied);
    weight_scales(l, il, {"attn_qkv"}, ScaleUse::kRefused);
    for (const char* p : {"ffn_gate_exps", "ffn_down_exps", "ffn_up_exps"}) {
        l.unused(blk(il, fmt::format("{}.scale", p).c_str()), {c.n_expert}, "llama.cpp's gpt-oss graph passes its experts no scales");
        l.unused(blk(il, fmt::format("{}.input_scale", p).c_str()), {c.n_expert}, "no graph of llama.cpp reads input scales");
    }
}

// qwen35 (llama.cpp's llama_model_qwen35): every layer normalised before its mixer and after it
// (post_attention_norm, before the feed-forward). A Gated DeltaNet layer: the fused q/k/v
// projection (attn_qkv) and the output gate's (attn_gate), the conv1d, the decay gate's bias
// (ssm_dt.bias) and -exp(A_log) (ssm_a), the beta and alpha projections, the gated norm
// (ssm_norm) and ssm_out. A full-attention layer: attn_q twice as wide (each head's query, then its
// gate), k, v, per-head q/k norms and attn_output.
void qwen35_layer(Layout& l, const ModelConfig& c, int64_t il) {
    l.need(blk(il, "attn_norm.weight"), {c.n_embd});
    l.need(blk(il, "post_attention_norm.weight"), {c.n_embd});
    const std::string not_yet = "per-tensor weight scales in a qwen35 file are not supported yet";
    if (c.layer_is_recurrent(il)) {
        const int64_t conv = c.ssm_conv_channels(), n_v = c.ssm_n_v_heads;
        l.need(blk(il, "attn_qkv.weight"), {c.n_embd, conv});
        l.need(blk(il, "attn_gate.weight"), {c.n_embd, c.ssm_d_inner});
        l.need(blk(il, "ssm_conv1d.weight"), {c.ssm_d_conv, conv});
        l.need(blk(il, "ssm_dt.bias"), {n_v});
        l.need(blk(il, "ssm_a"), {n_v});
        l.need(blk(il, "ssm_beta.weight"), {c.n_embd, n_v});
        l.need(blk(il, "ssm_alpha.weight"), {c.n_embd, n_v});
        l.need(blk(il, "ssm_norm.weight"), {c.ssm_d_state});
        l.need(blk(il, "ssm_out.weight"), {c.ssm_d_inner, c.n_embd});
        weight_scales(l, il, {"attn_qkv", "attn_gate", "ssm_beta", "ssm_alpha", "ssm_out"}, ScaleUse::kRefused);
    } else {
        const int64_t n_q = c.n_head * c.head_dim_k;
        const std::string fused = "a fused attn_qkv in a qwen35 attention layer is not supported yet";
        const std::string biases = "q/k/v biases in a qwen35 file are not supported yet";
        l.refused(blk(il, "attn_qkv.weight"), {c.n_embd, 2 * n_q + c.n_embd_k_gqa() + c.n_embd_v_gqa()}, fused);
        l.refused(blk(il, "attn_qkv.bias"), {2 * n_q + c.n_embd_k_gqa() + c.n_embd_v_gqa()}, fused);
        l.need(blk(il, "attn_q.weight"), {c.n_embd, 2 * n_q});
        l.need(blk(il, "attn_k.weight"), {c.n_embd, c.n_embd_k_gqa()});
        l.need(blk(il, "attn_v.weight"), {c.n_embd, c.n_embd_v_gqa()});
        l.refused(blk(il, "attn_q.bias"), {2 * n_q}, biases);
        l.refused(blk(il, "attn_k.bias"), {c.n_embd_k_gqa()}, biases);
        l.refused(blk(il, "attn_v.bias"), {c.n_embd_v_gqa()}, biases);
        l.need(blk(il, "attn_output.weight"), {n_q, c.n_embd});
        l.need(blk(il, "attn_q_norm.weight"), {c.head_dim_k});
        l.need(blk(il, "attn_k_norm.weight"), {c.head_dim_k});
        weight_scales(l, il, {"attn_q", "attn_k", "attn_v", "attn_output"}, ScaleUse::kRefused);
    }
    if (c.arch == Arch::kQwen35Moe) {
        // qwen35moe: routed experts (gate and up fused or separate) and one shared expert behind a
        // sigmoid gate of its own (ffn_gate_inp_shexp, one value per token).
        moe_ffn(l, c, il);
        l.need(blk(il, "ffn_gate_inp_shexp.weight"), {c.n_embd});
        l.need(blk(il, "ffn_gate_shexp.weight"), {c.n_embd, c.n_ff_shexp});
        l.need(blk(il, "ffn_up_shexp.weight"), {c.n_embd, c.n_ff_shexp});
        l.need(blk(il, "ffn_down_shexp.weight"), {c.n_ff_shexp, c.n_embd});
        weight_scales(l, il, {"ffn_gate_shexp", "ffn_down_shexp", "ffn_up_shexp"}, ScaleUse::kRefused);
        return;
    }
    dense_ffn(l, il, c.n_embd, c.n_ff);
    weight_scales(l, il, {"ffn_gate", "ffn_down", "ffn_up"}, ScaleUse::kRefused);
}

}  // namespace

std::vector<TensorSpec> tensor_layout(const ModelConfig& c, int64_t n_vocab) {
    std::vector<TensorSpec> out;
    Layout l(out);
    l.vocab("token_embd.weight", {c.n_embd, n_vocab}, true);
    l.need("output_norm.weight", {c.n_embd});
    // llama, qwen2, qwen3, phi3 and gemma3 tie the LM head to token_embd when output.weight is
    // absent; gemma2's loader always does (it creates no output.weight: a file with one is refused).
    if (c.arch != Arch::kGemma2)
        l.vocab("output.weight", {c.n_embd, n_vocab}, c.arch == Arch::kDeepseek2 || c.arch == Arch::kGptOss);
    if (c.arch == Arch::kQwen2) l.maybe("output.bias", {n_vocab});
    // The LM head's scales: llama.cpp creates them only for an untied NVFP4 head (the graph
    // builder refuses them on any other), and every graph but deepseek2's multiplies the logits by
    // output.scale.
    if (c.arch == Arch::kDeepseek2) l.unused("output.scale", {1}, "llama.cpp's deepseek2 graph gives its LM head no scale");
    else l.maybe("output.scale", {1});
    l.unused("output.input_scale", {1}, "no graph of llama.cpp reads input scales");
    if (c.arch == Arch::kGemma3) {
        // Sentence-transformers projections: only gemma-embedding's loader reads their sizes.
        auto why = [](const char* key) {
            return fmt::format("it creates it with 0 features (gemma3's loader reads no {} key), so a real one has the "
                               "wrong shape; gemma-embedding models take these projections",
                               key);
        };
        l.loader_refuses("dense_2.weight", {c.n_embd, 0}, why("dense_2_feat_out"));
        l.loader_refuses("dense_3.weight", {0, c.n_embd}, why("dense_3_feat_in"));
    }
    if (c.arch == Arch::kQwen3)
        l.unused("cls.output.weight", {c.n_embd, 1}, "a reranker's head, read only when llama.cpp ranks (pooling rank), "
                                                      "never when it generates");
    for (int64_t il = 0; il < c.n_layer; ++il) {
        if (c.arch == Arch::kDeepseek2) deepseek2_layer(l, c, il);
        else if (c.arch == Arch::kPhi3) phi3_layer(l, c, il);
        else if (c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3) gemma_layer(l, c, il);
        else if (c.arch == Arch::kGptOss) gpt_oss_layer(l, c, il);
        else if (c.arch == Arch::kQwen35 || c.arch == Arch::kQwen35Moe) qwen35_layer(l, c, il);
        else llama_layer(l, c, il);
    }
    return out;
}

const TensorSpec* find_tensor_spec(const std::vector<TensorSpec>& layout, const std::string& name) {
    for (const TensorSpec& s : layout)
        if (s.name == name) return &s;
    return nullptr;
}

std::string tensor_refusal(const std::vector<TensorSpec>& layout, const std::string& name, const std::string& arch) {
    const TensorSpec* spec = find_tensor_spec(layout, name);
    if (!spec)
        return fmt::format("llama.cpp's {} loader has no tensor of that name (it refuses the file: wrong number of tensors)",
                           arch);
    if (spec->loader_refuses) return fmt::format("llama.cpp's {} loader refuses the file: {}", arch, spec->unsupported);
    if (!spec->unsupported.empty()) return fmt::format("llama.cpp's {} graph uses it, and {}", arch, spec->unsupported);
    return "";
}

}  // namespace ls
