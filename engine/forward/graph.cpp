// The graph machinery shared by every architecture (see graph.h): loading, buffers, the ubatch
// loop, output rows, events and the build_* helpers.
#include "engine/forward/graph.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <new>
#include <numeric>
#include <tuple>

#include "kernels/common/host_memory.h"

namespace ls {
namespace {

// The first n columns of a preallocated buffer (its ne[1] is the ubatch size).
Tensor cols(const Tensor& buffer, int64_t n) { return buffer.reshaped(buffer.ne[0], n); }

}  // namespace

GraphBuilder::GraphBuilder(const Model& model, Backend& backend, const ForwardOptions& options)
    : model_(model), cfg_(model.config()), be_(backend), opt_(options) {}

GraphBuilder::~GraphBuilder() {
    for (void* p : allocations_) be_.release(p);
}

Tensor GraphBuilder::buffer(int64_t ne0, int64_t ne1, int64_t ne2, GgmlType type) {
    Tensor t = make_tensor(nullptr, ne0, ne1, ne2, 1, type);
    t.data = be_.alloc(t.n_bytes());
    allocations_.push_back(t.data);
    return t;
}

Result<Tensor> GraphBuilder::load(const std::string& name, bool matmul) {
    const TensorSpec* spec = find_tensor_spec(layout_, name);
    if (!spec)
        return make_error(ErrorCode::kInternal, fmt::format("{} is not in the {} tensor layout", name, cfg_.arch_name));
    const GgufTensorInfo* info = model_.find(name);
    if (!info) {
        if (!spec->required) return Tensor{};
        return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {} is missing; a {} model needs it", model_.path(),
                                                            name, cfg_.arch_name));
    }
    // Rows of the vocabulary tensors come from the file (the lints report a mismatch with the
    // vocabulary); every other count must be as the layout says.
    std::vector<int64_t> ne = spec->ne;
    if (spec->vocab_rows && ne.size() >= 2) ne[1] = info->ne[1];
    int64_t want[4] = {1, 1, 1, 1};
    for (size_t d = 0; d < ne.size() && d < 4; ++d) want[d] = ne[d];
    for (int d = 0; d < 4; ++d)
        if (info->ne[d] != want[d])
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{}: tensor {}: expected ne {} got {}", model_.path(), name,
                                          format_ne(want, static_cast<int>(std::max<size_t>(ne.size(), 1))),
                                          format_ne(info->ne, static_cast<int>(info->n_dims))));
    // Norms, biases, scales, sinks and factors (the 1-D tensors, and the experts' 2-D biases) are
    // element-wise operands: f32, as every converter writes them (ggml's binary ops take no f16 or
    // quantized operand beside f32 activations, so llama.cpp aborts on one).
    const bool bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if ((spec->ne.size() == 1 || bias) && info->type != GgmlType::F32)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: tensor {} is {}; it is an element-wise operand, which must be f32 (llama.cpp "
                                      "aborts on another type)", model_.path(), name, ggml_type_name(info->type)));
    const FaultWeight rewritten = fault_weight(opt_.fault, name, info->type, info->ne, info->data, info->n_bytes);
    const GgmlType type = rewritten.rewrote ? rewritten.type : info->type;
    if (matmul) {
        const Op op = expert_weight(name) ? Op::kMulMatId : Op::kMulMat;
        ops_used_.push_back({op, type});
        if (!be_.supports(op, opt_.mode, type)) return check_backend_support().error();
    }
    if (!rewritten.rewrote) return be_.weight(type, info->ne, info->data);
    Tensor t = make_tensor(nullptr, info->ne[0], info->ne[1], info->ne[2], info->ne[3], type);
    t.data = be_.alloc(rewritten.bytes.size());
    allocations_.push_back(t.data);
    be_.upload(t.data, rewritten.bytes.data(), rewritten.bytes.size());
    return t;
}

Status GraphBuilder::load_blk(int64_t il, const char* name, Tensor* out, bool matmul) {
    auto t = load(fmt::format("blk.{}.{}", il, name), matmul);
    if (!t) return t.error();
    *out = t.value();
    return {};
}

Status GraphBuilder::load_attn(int64_t il, AttnWeights* w) {
    for (auto [dst, name, matmul] : {std::tuple{&w->wqkv, "attn_qkv.weight", true}, {&w->bqkv, "attn_qkv.bias", false}})
        if (in_layout(fmt::format("blk.{}.{}", il, name)))
            if (Status s = load_blk(il, name, dst, matmul); !s) return s;
    for (auto [dst, name, matmul] : {std::tuple{&w->wq, "attn_q.weight", true},
                                     {&w->wk, "attn_k.weight", true},
                                     {&w->wv, "attn_v.weight", true},
                                     {&w->wo, "attn_output.weight", true},
                                     {&w->bq, "attn_q.bias", false},
                                     {&w->bk, "attn_k.bias", false},
                                     {&w->bv, "attn_v.bias", false}})
        if (Status s = load_blk(il, name, dst, matmul); !s) return s;
    for (auto [dst, name] : {std::pair{&w->bo, "attn_output.bias"}, {&w->sq, "attn_q.scale"}, {&w->sk, "attn_k.scale"},
                             {&w->sv, "attn_v.scale"}, {&w->so, "attn_output.scale"}})
        if (in_layout(fmt::format("blk.{}.{}", il, name)))
            if (Status s = load_blk(il, name, dst); !s) return s;
    // q, k and v: fused or all three (phi3's loader accepts either).
    if (w->wqkv.data && (w->bq.data || w->bk.data || w->bv.data))
        return make_error(ErrorCode::kBadInput, fmt::format("{}: blk.{}: a fused attn_qkv.weight with separate q/k/v "
                                                            "biases (llama.cpp concatenates them) is not supported yet",
                                                            model_.path(), il));
    if (!w->wqkv.data && (!w->wq.data || !w->wk.data || !w->wv.data))
        return make_error(ErrorCode::kBadInput, fmt::format("{}: blk.{}: neither attn_qkv.weight nor all of attn_q, attn_k "
                                                            "and attn_v.weight; a {} model needs one or the other",
                                                            model_.path(), il, cfg_.arch_name));
    return {};
}

Status GraphBuilder::load_ffn(int64_t il, FfnWeights* w) {
    for (auto [dst, name] : {std::pair{&w->gate, "ffn_gate.weight"}, {&w->up, "ffn_up.weight"}, {&w->down, "ffn_down.weight"}})
        if (Status s = load_blk(il, name, dst, true); !s) return s;
    for (auto [dst, name] : {std::pair{&w->gate_b, "ffn_gate.bias"}, {&w->up_b, "ffn_up.bias"}, {&w->down_b, "ffn_down.bias"},
                             {&w->gate_s, "ffn_gate.scale"}, {&w->up_s, "ffn_up.scale"}, {&w->down_s, "ffn_down.scale"}})
        if (in_layout(fmt::format("blk.{}.{}", il, name)))
            if (Status s = load_blk(il, name, dst); !s) return s;
    // llama.cpp's build_ffn asserts against an NVFP4 projection with both a bias and a scale (its
    // scale would follow the bias).
    for (auto [weight, bias, scale, name] : {std::tuple{&w->gate, &w->gate_b, &w->gate_s, "ffn_gate"},
                                             {&w->up, &w->up_b, &w->up_s, "ffn_up"},
                                             {&w->down, &w->down_b, &w->down_s, "ffn_down"}})
        if (weight->type == GgmlType::NVFP4 && bias->data && scale->data)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: blk.{}: an NVFP4 {}.weight with both a .bias and a .scale; "
                                                                "llama.cpp's build_ffn refuses that (an assertion)",
                                                                model_.path(), il, name));
    return {};
}

bool GraphBuilder::expert_weight(const std::string& name) {
    const std::string tail = "_exps.weight";
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
}

Status GraphBuilder::load_moe(int64_t il, MoeWeights* w) {
    // 3 (a softmax over the chosen k) only where the graph fixes it (gpt-oss).
    if (cfg_.expert_gating_func > 2 && !(cfg_.expert_gating_func == 3 && cfg_.arch == Arch::kGptOss))
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: {}.expert_gating_func = {} is not supported (1 softmax, 2 sigmoid)", model_.path(),
                                      cfg_.arch_name, cfg_.expert_gating_func));
    if (Status s = load_blk(il, "ffn_gate_inp.weight", &w->gate_inp, true); !s) return s;
    if (in_layout(fmt::format("blk.{}.exp_probs_b.bias", il)))
        if (Status s = load_blk(il, "exp_probs_b.bias", &w->exp_probs_b); !s) return s;
    if (in_layout(fmt::format("blk.{}.ffn_gate_up_exps.weight", il)))
        if (Status s = load_blk(il, "ffn_gate_up_exps.weight", &w->gate_up_exps, true); !s) return s;
    for (auto [dst, name] : {std::pair{&w->gate_exps, "ffn_gate_exps.weight"}, {&w->up_exps, "ffn_up_exps.weight"},
                             {&w->down_exps, "ffn_down_exps.weight"}})
        if (Status s = load_blk(il, name, dst, true); !s) return s;
    for (auto [dst, name] : {std::pair{&w->gate_inp_b, "ffn_gate_inp.bias"}, {&w->gate_exps_b, "ffn_gate_exps.bias"},
                             {&w->up_exps_b, "ffn_up_exps.bias"}, {&w->down_exps_b, "ffn_down_exps.bias"},
                             {&w->gate_exps_s, "ffn_gate_exps.scale"}, {&w->up_exps_s, "ffn_up_exps.scale"},
                             {&w->down_exps_s, "ffn_down_exps.scale"}})
        if (in_layout(fmt::format("blk.{}.{}", il, name)))
            if (Status s = load_blk(il, name, dst); !s) return s;
    // llama.cpp creates gate and up only when there is no fused gate_up (a file with both has
    // tensors its loader never creates, and is refused there); so too their scales.
    const std::string where = fmt::format("{}: blk.{}", model_.path(), il);
    for (const char* scale : {"ffn_gate_exps.scale", "ffn_up_exps.scale", "ffn_gate_exps.input_scale", "ffn_up_exps.input_scale"})
        if (w->gate_up_exps.data && model_.find(fmt::format("blk.{}.{}", il, scale)))
            return make_error(ErrorCode::kBadInput, fmt::format("{}: {} with a fused ffn_gate_up_exps.weight; llama.cpp's loader "
                                                                "creates expert scales only for separate gate and up experts",
                                                                where, scale));
    if (w->gate_up_exps.data && (w->gate_exps.data || w->up_exps.data))
        return make_error(ErrorCode::kBadInput, fmt::format("{}: ffn_gate_up_exps.weight and separate ffn_gate/ffn_up_exps; "
                                                            "llama.cpp's loader takes one or the other", where));
    if (!w->gate_up_exps.data && !w->up_exps.data)
        return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor ffn_up_exps.weight is missing (nor is there a fused "
                                                            "ffn_gate_up_exps.weight); a {} model needs it", where, cfg_.arch_name));
    if (!w->gate_up_exps.data && !w->gate_exps.data)
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: experts without ffn_gate_exps.weight (llama.cpp then runs silu(up x)) are not "
                                      "supported yet", where));
    return {};
}

bool GraphBuilder::in_layout(const std::string& name) const {
    const TensorSpec* spec = find_tensor_spec(layout_, name);
    return spec && spec->unused.empty() && spec->unsupported.empty();
}

#define LS_TRY_LOAD(dst, ...)       \
    do {                            \
        auto r_ = load(__VA_ARGS__); \
        if (!r_) return r_.error(); \
        dst = r_.value();           \
    } while (0)

Status GraphBuilder::init() {
    const GgufTensorInfo* emb = model_.find("token_embd.weight");
    if (!emb) return make_error(ErrorCode::kBadInput, model_.path() + ": tensor token_embd.weight is missing");
    const GgufTensorInfo* out = model_.find("output.weight");
    n_vocab_ = out ? out->ne[1] : emb->ne[1];
    layout_ = tensor_layout(cfg_, n_vocab_);
    // A tensor llama.cpp would use and we do not (or one llama.cpp's loader does not know) is
    // refused by name, never skipped.
    for (const GgufTensorInfo& t : model_.tensors())
        if (std::string why = tensor_refusal(layout_, t.name, cfg_.arch_name); !why.empty())
            return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {}: {}", model_.path(), t.name, why));
    // llama.cpp creates the LM head's scales only for an NVFP4 output.weight, and refuses them on
    // a tied head (an assertion in its loader).
    for (const char* scale : {"output.scale", "output.input_scale"})
        if (model_.find(scale) && (!out || out->type != GgmlType::NVFP4))
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{}: tensor {}: {}; llama.cpp reads the LM head's scales only for an untied NVFP4 "
                                          "output.weight", model_.path(), scale,
                                          out ? fmt::format("output.weight is {}", ggml_type_name(out->type))
                                              : "the LM head is token_embd (tied)"));
    for (const GgufTensorInfo& t : model_.tensors()) {
        auto ends_with = [&](const char* tail) {
            const size_t n = std::char_traits<char>::length(tail);
            return t.name.size() > n && t.name.compare(t.name.size() - n, n, tail) == 0;
        };
        optional_buffers_.attn_out = optional_buffers_.attn_out || ends_with(".attn_output.bias");
        optional_buffers_.ffn = optional_buffers_.ffn || ends_with(".ffn_gate.bias") || ends_with(".ffn_up.bias") ||
                            ends_with(".ffn_down.bias");
        optional_buffers_.output = optional_buffers_.output || t.name == "output.bias";
        optional_buffers_.qk_norm = optional_buffers_.qk_norm || ends_with(".attn_q_norm.weight");
        optional_buffers_.scales = optional_buffers_.scales || ends_with(".scale");
        optional_buffers_.fused_qkv = optional_buffers_.fused_qkv || ends_with(".attn_qkv.weight");
        optional_buffers_.fused_up = optional_buffers_.fused_up || (ends_with(".ffn_up.weight") && t.ne[1] == 2 * cfg_.n_ff);
        optional_buffers_.fused_gate_up = optional_buffers_.fused_gate_up || ends_with(".ffn_gate_up_exps.weight");
        optional_buffers_.expert_biases = optional_buffers_.expert_biases || ends_with("_exps.bias");
        optional_buffers_.expert_scales = optional_buffers_.expert_scales || ends_with("_exps.scale");
        optional_buffers_.output_scale = optional_buffers_.output_scale || t.name == "output.scale";
    }

    auto knobs = fault_knobs(opt_.fault, fault_model_facts(model_));
    if (!knobs) return knobs.error();
    knobs_ = knobs.value();

    // What the graph runs besides the weights' matmuls, checked before any weight is uploaded (a
    // GPU backend would copy gigabytes first); load() checks each matmul weight's type.
    const MathMode mode = opt_.mode;
    for (Op op : {Op::kRmsNorm, Op::kMul, Op::kAdd, Op::kRope, Op::kSwiglu, Op::kSetRows, Op::kSoftMax, Op::kCont})
        ops_used_.push_back({op, GgmlType::F32});
    ops_used_.push_back({Op::kMulMat, GgmlType::F16});  // attention's products with the (f16) KV cache
    ops_used_.push_back({Op::kGetRows, GgmlType::F32});  // output rows
    ops_used_.push_back({Op::kCpy, GgmlType::F32});
    if (opt_.flash_attn && mode == MathMode::kLlama) ops_used_.push_back({Op::kFlashAttnExt, GgmlType::F32});
    ops_used_.push_back({Op::kGetRows, emb->type});
    if (!out) ops_used_.push_back({Op::kMulMat, emb->type});  // tied LM head
    // The matrices' formats too, so that a refusal lists all that is missing at once.
    for (const GgufTensorInfo& t : model_.tensors())
        if (t.n_dims >= 2 && t.name != "token_embd.weight")
            ops_used_.push_back({expert_weight(t.name) ? Op::kMulMatId : Op::kMulMat, t.type});
    if (cfg_.n_expert > 0) {  // build_moe's ops
        for (Op op : {Op::kArgsort, Op::kMul, Op::kSumRows, Op::kClamp, Op::kDiv, Op::kScale})
            ops_used_.push_back({op, GgmlType::F32});
        if (cfg_.expert_gating_func == 2) ops_used_.push_back({Op::kSigmoid, GgmlType::F32});
    }
    for (const auto& op : arch_ops()) ops_used_.push_back(op);
    if (Status s = check_backend_support(); !s) return s;

    // Before anything is allocated or uploaded: refuse what cannot fit, with the numbers.
    n_logits_ = std::max(n_vocab_, knobs_.logits_rows);
    const BackendMemory memory = be_.memory();
    if (Status s = check_memory(fmt::format("running {} with n_ctx {} and ubatch {}", model_.path(), opt_.n_ctx, opt_.n_ubatch),
                                memory_estimate(memory.weights_copied), memory, memory_hint(memory.weights_copied));
        !s)
        return s;

    LS_TRY_LOAD(token_embd_, "token_embd.weight", false);
    LS_TRY_LOAD(output_norm_, "output_norm.weight", false);
    // Tied embeddings (qwen2 and others): the LM head is token_embd.
    if (out) LS_TRY_LOAD(output_, "output.weight");
    else output_ = token_embd_;
    if (in_layout("output.bias")) LS_TRY_LOAD(output_b_, "output.bias", false);
    if (in_layout("output.scale")) LS_TRY_LOAD(output_s_, "output.scale", false);
    if (Status s = load_layer_weights(); !s) return s;
    if (in_layout("rope_freqs.weight")) {
        LS_TRY_LOAD(rope_freqs_, "rope_freqs.weight", false);
        // ggml's CPU rope reads the factors as f32 (and asserts it): so must the file.
        if (rope_freqs_.data && rope_freqs_.type != GgmlType::F32)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor rope_freqs.weight is {}; llama.cpp's rope "
                                                                "needs f32 frequency factors", model_.path(),
                                                                ggml_type_name(rope_freqs_.type)));
        if (knobs_.rope_freqs_ignored) rope_freqs_ = Tensor{};
    }
    if (in_layout("rope_factors_long.weight")) {
        // LongRoPE (phi3): llama.cpp takes the long factors when the context per sequence is
        // longer than the original one (llama_model::get_rope_factors), else the short ones.
        const bool long_ctx = (opt_.n_ctx > cfg_.rope_orig_ctx) != knobs_.longrope_swapped;
        const char* name = long_ctx ? "rope_factors_long.weight" : "rope_factors_short.weight";
        LS_TRY_LOAD(rope_freqs_, name, false);
        if (rope_freqs_.data && rope_freqs_.type != GgmlType::F32)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {} is {}; llama.cpp's rope needs f32 frequency "
                                                                "factors", model_.path(), name, ggml_type_name(rope_freqs_.type)));
    }

    rope_ = rope_params_for(cfg_);
    if (knobs_.rope_swap_pairing) rope_.mode = rope_.mode == RopeMode::kNorm ? RopeMode::kNeox : RopeMode::kNorm;
    rope_.attn_factor *= knobs_.rope_attn_factor;
    if (cfg_.has_swa()) {
        // The local layers (gemma, gpt-oss): a window of n_swa positions, their own RoPE base at
        // scale 1 (gpt-oss: the model's scale; llama_model::get_rope_freq_base/_scale), and a cache of at most n_swa + ubatch cells
        // (padded to 256 as llama.cpp's SWA cache; the whole context when that is smaller).
        n_swa_ = cfg_.n_swa + knobs_.swa_window_delta;
        swa_layers_.assign(static_cast<size_t>(cfg_.n_layer), 0);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            // The wrong-layers fault: the period's global layer first instead of last.
            const int64_t src = knobs_.swa_layers_shifted ? (il + 1) % cfg_.n_layer : il;
            swa_layers_[il] = cfg_.layer_is_swa(src);
        }
        swa_cells_ = std::min(opt_.n_ctx, (n_swa_ + std::min(opt_.n_ubatch, opt_.n_ctx) + 255) / 256 * 256);
        layer_rope_.assign(static_cast<size_t>(cfg_.n_layer), rope_);
        for (int64_t il = 0; il < cfg_.n_layer; ++il)
            if (swa_layer(il)) {
                layer_rope_[il].freq_base = static_cast<float>(cfg_.rope_freq_base_swa);
                if (!cfg_.swa_rope_scaled) layer_rope_[il].freq_scale = 1.0f;
            }
    }
    kq_scale_ = attention_kq_scale(cfg_);
    if (knobs_.scale_by_head_dim)  // deepseek2: YaRN's mscale^2 left out; the others: 1/d for 1/sqrt(d)
        kq_scale_ = cfg_.arch == Arch::kDeepseek2 ? 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim_k_mla))
                                                  : 1.0f / static_cast<float>(cfg_.head_dim_k);
    if (knobs_.kq_scale_latent_width) {
        ModelConfig latent = cfg_;
        latent.head_dim_k_mla = cfg_.kv_lora_rank + cfg_.n_rot;
        kq_scale_ = attention_kq_scale(latent);
    }
    rms_eps_ = static_cast<float>(cfg_.rms_eps) * knobs_.rms_eps_factor;
    try {
        allocate_buffers();
    } catch (const std::bad_alloc&) {
        // The estimate fitted when it was checked, and the memory went elsewhere since.
        return make_error(ErrorCode::kBadInput, fmt::format("out of memory allocating the buffers of {}: they need {}. {}",
                                                            model_.path(), memory_estimate(false).describe(),
                                                            memory_hint(false)));
    }
    return {};
}

void GraphBuilder::allocate_buffers() {
    // No evaluation holds more tokens than the context, so no buffer needs more rows than that
    // (llama.cpp clamps n_ubatch the same way).
    const AttnDims a = attn_dims();
    const int64_t n_embd = cfg_.n_embd, hd = a.head_dim_k, hd_v = a.head_dim_v;
    const int64_t n_q = cfg_.n_head * hd, n_k = a.n_head_kv * hd, n_v = a.n_head_kv * hd_v;
    const int64_t T = std::min(opt_.n_ubatch, opt_.n_ctx), n_ctx = opt_.n_ctx;
    buf_.x = buffer(n_embd, T);
    buf_.norm = buffer(n_embd, T), buf_.cur = buffer(n_embd, T);
    buf_.q = buffer(n_q, T), buf_.q_b = buffer(n_q, T), buf_.q_rope = buffer(n_q, T);
    buf_.k = buffer(n_k, T), buf_.k_b = buffer(n_k, T), buf_.k_rope = buffer(n_k, T);
    buf_.v = buffer(n_v, T), buf_.v_b = buffer(n_v, T);
    buf_.kq = buffer(n_ctx, T, cfg_.n_head), buf_.kq_soft_max = buffer(n_ctx, T, cfg_.n_head);
    buf_.kqv = buffer(hd_v, T, cfg_.n_head);
    buf_.kqv_out = buffer(cfg_.n_head * hd_v, T);
    buf_.attn_out = buffer(n_embd, T);
    if (optional_buffers_.attn_out) buf_.attn_out_b = buffer(n_embd, T);
    if (optional_buffers_.scales) {
        buf_.q_s = buffer(n_q, T), buf_.k_s = buffer(n_k, T), buf_.v_s = buffer(n_v, T), buf_.attn_out_s = buffer(n_embd, T);
        buf_.gate_s = buffer(cfg_.n_ff, T), buf_.up_s = buffer(cfg_.n_ff, T), buf_.ffn_out_s = buffer(n_embd, T);
    }
    if (optional_buffers_.fused_qkv) buf_.qkv = buffer(n_q + n_k + n_v, T), buf_.qkv_b = buffer(n_q + n_k + n_v, T);
    if (optional_buffers_.fused_up) buf_.up2 = buffer(2 * cfg_.n_ff, T);
    if (optional_buffers_.qk_norm) {
        buf_.q_norm = buffer(n_q, T), buf_.q_normed = buffer(n_q, T);
        buf_.k_norm = buffer(n_k, T), buf_.k_normed = buffer(n_k, T);
    }
    if (optional_buffers_.ffn) buf_.gate_b = buffer(cfg_.n_ff, T), buf_.up_b = buffer(cfg_.n_ff, T), buf_.ffn_out_b = buffer(n_embd, T);
    buf_.out_attn = buffer(n_embd, T), buf_.out_x = buffer(n_embd, T);
    buf_.ffn_inp = buffer(n_embd, T);
    buf_.gate = buffer(cfg_.n_ff, T), buf_.up = buffer(cfg_.n_ff, T), buf_.swiglu = buffer(cfg_.n_ff, T);
    buf_.ffn_out = buffer(n_embd, T);
    buf_.logits = buffer(n_logits_, T);
    if (optional_buffers_.output) buf_.logits_b = buffer(n_logits_, T);
    if (optional_buffers_.output_scale) buf_.logits_s = buffer(n_logits_, T);
    if (n_logits_ > n_vocab_) {
        // The padded-vocabulary fault: the rows the LM head never writes hold what was there
        // before (deterministic "garbage" here).
        std::vector<float> garbage(static_cast<size_t>(n_logits_ * T));
        uint32_t state = 12345;
        for (float& g : garbage) {
            state = state * 1664525u + 1013904223u;
            g = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 40.0f - 20.0f;
        }
        be_.upload(buf_.logits.data, garbage.data(), garbage.size() * sizeof(float));
    }
    for (int64_t il = 0; il < cfg_.n_layer; ++il) {
        if (cfg_.layer_is_recurrent(il)) {  // qwen35's DeltaNet layers keep a recurrent state instead
            buf_.cache_k.push_back(Tensor{});
            buf_.cache_v.push_back(Tensor{});
            continue;
        }
        const int64_t cells = swa_layer(il) ? swa_cells_ : n_ctx;
        buf_.cache_k.push_back(buffer(hd, a.n_head_kv, cells));
        buf_.cache_v.push_back(buffer(hd_v, a.n_head_kv, cells));
    }
    inp_tokens_ = buffer(T, 1, 1, GgmlType::I32);
    inp_pos_ = buffer(T, 1, 1, GgmlType::I32);
    if (swa_cells_ > 0) inp_pos_swa_ = buffer(T, 1, 1, GgmlType::I32);
    inp_rope_pos_ = buffer(T, 1, 1, GgmlType::I32);
    inp_out_ids_ = buffer(T, 1, 1, GgmlType::I32);
    last_logits_.resize(n_logits_);
    if (cfg_.n_expert > 0) {
        const int64_t E = cfg_.n_expert, k = cfg_.n_expert_used, n_ff = cfg_.n_ff_expert;
        moe_.logits = buffer(E, T), moe_.probs = buffer(E, T), moe_.selection = buffer(E, T);
        moe_.argsort = buffer(E, T, 1, GgmlType::I32), moe_.argsort_f = buffer(E, T);
        moe_.topk = buffer(k, T, 1, GgmlType::I32), moe_.topk_f = buffer(k, T);
        moe_.weights = buffer(1, k, T), moe_.weights_sum = buffer(1, T), moe_.weights_clamped = buffer(1, T);
        moe_.weights_norm = buffer(k, T), moe_.weights_scaled = buffer(1, k, T);
        if (optional_buffers_.fused_gate_up) moe_.gate_up = buffer(2 * n_ff, k, T);
        if (optional_buffers_.expert_biases)
            moe_.gate_b = buffer(n_ff, k, T), moe_.up_b = buffer(n_ff, k, T), moe_.down_b = buffer(n_embd, k, T);
        if (optional_buffers_.expert_scales) {
            moe_.scale_rows = buffer(1, k, T);
            moe_.gate_s = buffer(n_ff, k, T), moe_.up_s = buffer(n_ff, k, T), moe_.down_s = buffer(n_embd, k, T);
        }
        moe_.gate = buffer(n_ff, k, T), moe_.up = buffer(n_ff, k, T), moe_.swiglu = buffer(n_ff, k, T);
        moe_.down = buffer(n_embd, k, T), moe_.weighted = buffer(n_embd, k, T);
        moe_.slot = buffer(n_embd, T), moe_.out = buffer(n_embd, T);
        if (cfg_.n_expert_groups > 1) moe_.group_topk = buffer(cfg_.n_group_used, T), moe_.probs_masked = buffer(E, T);
    }
    allocate_arch_buffers();
}

MemoryEstimate GraphBuilder::memory_estimate(bool weights_copied) const {
    // Saturating arithmetic over the metadata's dims, which are not checked against the weights
    // yet: an absurd one gives an absurd size, not an overflow (a negative one counts as 0 here;
    // loading the weights refuses it).
    auto dim = [](int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : uint64_t{0}; };
    auto f32 = [](std::initializer_list<uint64_t> dims) {
        uint64_t bytes = sizeof(float);
        for (uint64_t d : dims) bytes = mul_sat(bytes, d);
        return bytes;
    };
    const uint64_t n_ctx = dim(opt_.n_ctx), T = std::min(dim(opt_.n_ubatch), n_ctx), n_layer = dim(cfg_.n_layer);
    const AttnDims a = attn_dims();
    const uint64_t n_embd = dim(cfg_.n_embd), hd = dim(a.head_dim_k), hd_v = dim(a.head_dim_v);
    const uint64_t n_head = dim(cfg_.n_head), n_head_kv = dim(a.n_head_kv), n_ff = dim(cfg_.n_ff);
    const uint64_t n_q = mul_sat(n_head, hd), n_k = mul_sat(n_head_kv, hd), n_v = mul_sat(n_head_kv, hd_v);
    MemoryEstimate e;
    e.add("attention scores", fmt::format("n_ctx {} x ubatch {} x {} heads x 2 (kq, kq_soft_max) x 4 bytes", n_ctx, T, n_head),
          mul_sat(2, f32({n_ctx, T, n_head})));
    // gemma's local layers cache at most their window plus a ubatch (padded to 256 cells); qwen35's
    // DeltaNet layers none (their recurrent state below).
    uint64_t n_local = 0, n_recurrent = 0;
    for (int64_t il = 0; il < cfg_.n_layer; ++il) {
        n_local += cfg_.layer_is_swa(il) ? 1 : 0;
        n_recurrent += cfg_.layer_is_recurrent(il) ? 1 : 0;
    }
    const uint64_t n_attn = n_layer - n_recurrent;
    const uint64_t swa_cells = std::min(n_ctx, (add_sat(dim(cfg_.n_swa), T) + 255) / 256 * 256);
    const uint64_t cells = add_sat(mul_sat(n_ctx, n_attn - n_local), mul_sat(swa_cells, n_local));
    e.add("KV cache", n_local == 0 ? fmt::format("n_ctx {} x {} {}layers x {} KV heads x (head_dim {} + {}) x 4 bytes", n_ctx,
                                                 n_attn, n_recurrent > 0 ? "attention " : "", n_head_kv, hd, hd_v)
                                   : fmt::format("(n_ctx {} x {} global layers + {} cells x {} local layers) x {} KV heads "
                                                 "x (head_dim {} + {}) x 4 bytes", n_ctx, n_attn - n_local, swa_cells,
                                                 n_local, n_head_kv, hd, hd_v),
          f32({cells, n_head_kv, add_sat(hd, hd_v)}));
    if (n_recurrent > 0) {
        // qwen35 (models/qwen35.cpp's allocate_arch_buffers): each DeltaNet layer's conv and
        // delta-rule states, and per token the q/k/v channels five times (product, transposed
        // copy, conv input, conv output, its SiLU), q and k three times each, nine value-wide
        // buffers (v, q/k repeated, the rule's output and its norms, z, silu(z), the gated
        // output), six gates per value head, the gated attention's six query-wide buffers and two
        // of n_embd; qwen35moe's shared expert three n_ff_shexp and two n_embd more.
        const uint64_t state = add_sat(dim(cfg_.ssm_conv_state()), dim(cfg_.ssm_state()));
        e.add("recurrent state", fmt::format("{} DeltaNet layers x ({} conv + {} delta-rule values) x 4 bytes", n_recurrent,
                                             cfg_.ssm_conv_state(), cfg_.ssm_state()),
              f32({n_recurrent, state}));
        const uint64_t C = dim(cfg_.ssm_conv_channels()), d_inner = dim(cfg_.ssm_d_inner), qk = dim(cfg_.ssm_key_dim());
        uint64_t per_token = add_sat(add_sat(mul_sat(5, C), mul_sat(6, qk)), add_sat(mul_sat(9, d_inner), mul_sat(6, dim(cfg_.ssm_n_v_heads))));
        per_token = add_sat(per_token, add_sat(mul_sat(6, n_q), mul_sat(2, n_embd)));
        if (cfg_.n_expert > 0) per_token = add_sat(per_token, add_sat(mul_sat(3, dim(cfg_.n_ff_shexp)), mul_sat(2, n_embd) + 2));
        // The conv input's state columns, and IMROPE's frequency factors when its sections give
        // some pairs the fourth position.
        const uint64_t window = add_sat(mul_sat(dim(cfg_.ssm_d_conv - 1), C),
                                        imrope_text_factors(cfg_.rope_sections, cfg_.n_rot).size());
        e.add("DeltaNet activations", fmt::format("(ubatch {} x {} values + {} conv window and rope values) x 4 bytes", T, per_token,
                                                  window),
              add_sat(f32({T, per_token}), f32({window})));
    }
    const uint64_t ffn_bufs = 3 + (optional_buffers_.ffn ? 2 : 0) + (optional_buffers_.scales ? 2 : 0) + (optional_buffers_.fused_up ? 2 : 0);
    e.add("feed-forward activations", fmt::format("ubatch {} x n_ff {} x {} (gate, up, swiglu{}{}) x 4 bytes", T, n_ff,
                                                  ffn_bufs, optional_buffers_.ffn ? ", with their biases" : "",
                                                  optional_buffers_.scales ? ", times their scales" : ""),
          mul_sat(ffn_bufs, f32({T, n_ff})));
    const uint64_t logits_bufs = 1 + (optional_buffers_.output ? 1 : 0) + (optional_buffers_.output_scale ? 1 : 0);
    e.add("logits", fmt::format("ubatch {} x {} rows x {} x 4 bytes", T, n_logits_, logits_bufs),
          mul_sat(logits_bufs, f32({T, dim(n_logits_)})));
    // Per token: x, norm, cur, attn_out, out_attn, out_x, ffn_inp, ffn_out (n_embd each); q, q_b,
    // q_rope; k, k_b, k_rope; v, v_b; kqv and kqv_out (n_head x head_dim_v each); 4 I32 inputs.
    const uint64_t embd_bufs = 8 + (optional_buffers_.attn_out ? 1 : 0) + (optional_buffers_.ffn ? 1 : 0) + (optional_buffers_.scales ? 2 : 0);
    const uint64_t qk_bufs = 3 + (optional_buffers_.qk_norm ? 2 : 0) + (optional_buffers_.scales ? 1 : 0);  // + normed, scaled
    const uint64_t v_bufs = optional_buffers_.scales ? 3 : 2;
    uint64_t per_token = add_sat(mul_sat(embd_bufs, n_embd), mul_sat(qk_bufs, n_q));
    if (optional_buffers_.fused_qkv) per_token = add_sat(per_token, mul_sat(2, add_sat(n_q, add_sat(n_k, n_v))));
    per_token = add_sat(per_token, add_sat(mul_sat(qk_bufs, n_k), mul_sat(v_bufs, n_v)));
    per_token = add_sat(per_token, add_sat(mul_sat(2, mul_sat(n_head, hd_v)), 4));
    e.add("other activations", fmt::format("ubatch {} x {} values x 4 bytes", T, per_token), f32({T, per_token}));
    if (weights_copied) {
        uint64_t weights = 0;
        for (const TensorSpec& spec : layout_)
            if (const GgufTensorInfo* info = model_.find(spec.name)) weights = add_sat(weights, info->n_bytes);
        e.add("weights", "copied from the file", weights);
    }
    return e;
}

std::string GraphBuilder::memory_hint(bool weights_copied) const {
    const MemoryEstimate e = memory_estimate(weights_copied);
    const MemoryPart* largest = &e.parts.front();
    for (const MemoryPart& p : e.parts)
        if (p.bytes > largest->bytes) largest = &p;
    if (largest->what == "weights") return "The model does not fit here; use the CPU backend (it reads the weights in place).";
    if (largest->what == "KV cache") return "Lower --ctx.";
    if (largest->what == "attention scores") return "Lower --ctx or --ubatch.";
    return "Lower --ubatch.";
}

Status GraphBuilder::check_backend_support() const {
    std::vector<std::string> missing;
    for (const auto& [op, type] : ops_used_) {
        if (be_.supports(op, opt_.mode, type)) continue;
        const bool typed = op == Op::kGetRows || op == Op::kMulMat || op == Op::kMulMatId;
        std::string what = typed ? fmt::format("{} ({})", op_name(op), ggml_type_name(type)) : op_name(op);
        if (std::find(missing.begin(), missing.end(), what) == missing.end()) missing.push_back(what);
    }
    if (missing.empty()) return {};
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{} cannot run {} in {} mode: it does not support {}. It supports: {}", be_.name(),
                                  model_.path(), math_mode_name(opt_.mode), list, describe_support(be_, opt_.mode)));
}

Status GraphBuilder::eval(const std::vector<int32_t>& tokens, EventSink* sink) {
    if (knobs_.position_stuck) pos_ = 0;  // the bug: the position never advances
    if (tokens.empty()) return make_error(ErrorCode::kUsage, "no tokens to evaluate");
    if (pos_ + static_cast<int64_t>(tokens.size()) > opt_.n_ctx)
        return make_error(ErrorCode::kUsage, fmt::format("the context is full: {} + {} tokens > n_ctx {}; raise --ctx",
                                                         pos_, tokens.size(), opt_.n_ctx));
    const int64_t n_rows = token_embd_.ne[1];
    for (int32_t id : tokens)
        if (id < 0 || id >= n_rows)
            return make_error(ErrorCode::kUsage,
                              fmt::format("token id {} is out of range (the model has {} embedding rows)", id, n_rows));
    sink_ = sink;
    be_.set_llama_isa(opt_.llama_isa);
    be_.set_llama_threads(opt_.llama_threads);
    event_index_ = decode_ == 0 ? 0 : event_index_;
    int ubatch = 0;
    std::vector<int32_t> out_rows;
    for (size_t first = 0; first < tokens.size(); first += opt_.n_ubatch, ++ubatch) {
        const int64_t T = std::min<int64_t>(opt_.n_ubatch, tokens.size() - first);
        const bool last_batch = first + T == tokens.size();
        out_rows.clear();
        for (int64_t t = 0; t < T; ++t)
            if (opt_.all_logits || (last_batch && t == T - 1)) out_rows.push_back(static_cast<int32_t>(t));
        eval_ubatch(tokens.data() + first, T, ubatch, out_rows);
    }
    ++decode_;
    sink_ = nullptr;
    return {};
}

void GraphBuilder::eval_ubatch(const int32_t* tokens, int64_t T, int ubatch, const std::vector<int32_t>& out_rows) {
    T_ = T;
    n_kv_ = pos_ + T;
    ubatch_ = ubatch;
    occurrences_.clear();
    // The graph's inputs, uploaded once: token ids, positions, and the rows that reach the logits.
    std::vector<int32_t> pos(static_cast<size_t>(T)), rope_pos(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
        pos[t] = static_cast<int32_t>(pos_ + t);
        rope_pos[t] = pos[t] + knobs_.rope_position_offset;
    }
    be_.upload(inp_tokens_.data, tokens, static_cast<size_t>(T) * sizeof(int32_t));
    be_.upload(inp_pos_.data, pos.data(), pos.size() * sizeof(int32_t));
    be_.upload(inp_rope_pos_.data, rope_pos.data(), rope_pos.size() * sizeof(int32_t));
    if (swa_cells_ > 0) {
        slide_swa_window(T);
        for (int32_t& p : pos) p -= static_cast<int32_t>(swa_base_);
        be_.upload(inp_pos_swa_.data, pos.data(), pos.size() * sizeof(int32_t));
    }
    n_out_rows_ = static_cast<int64_t>(out_rows.size());
    if (n_out_rows_ > 0) be_.upload(inp_out_ids_.data, out_rows.data(), out_rows.size() * sizeof(int32_t));
    build_graph();
    pos_ += T;
}

void GraphBuilder::slide_swa_window(int64_t T) {
    if (pos_ < swa_base_) swa_base_ = 0;  // the context was reset (or the position-stuck fault)
    if (pos_ + T - swa_base_ <= swa_cells_) return;
    // The first token of this ubatch still sees positions from pos_ - n_swa_ + 1 on: those cells
    // move to the front, in chunks no longer than the shift so that no chunk overwrites its source.
    const int64_t keep_from = std::max(swa_base_, pos_ - n_swa_ + 1);
    const int64_t shift = keep_from - swa_base_, kept = pos_ - keep_from;
    for (size_t il = 0; il < buf_.cache_k.size(); ++il) {
        if (!swa_layer(static_cast<int64_t>(il))) continue;
        for (Tensor* cache : {&buf_.cache_k[il], &buf_.cache_v[il]}) {
            const uint64_t cell = cache->nb[2];
            for (int64_t done = 0; done < kept; done += shift) {
                const int64_t n = std::min(shift, kept - done);
                const Tensor src = cache->view({cache->ne[0], cache->ne[1], n, 1}, {cache->nb[0], cache->nb[1], cell, cell * n},
                                               static_cast<uint64_t>(shift + done) * cell);
                Tensor dst = cache->view({cache->ne[0], cache->ne[1], n, 1}, {cache->nb[0], cache->nb[1], cell, cell * n},
                                         static_cast<uint64_t>(done) * cell);
                be_.copy(src, dst);
            }
        }
    }
    swa_base_ = keep_from;
}

void GraphBuilder::cb(const Tensor& t, const char* name, int il, Op op) {
    Event e;
    e.name = il >= 0 ? fmt::format("{}-{}", name, il) : name;
    e.occurrence = ++occurrences_[e.name];
    e.index = event_index_++;
    e.decode = decode_;
    e.ubatch = ubatch_;
    e.layer = il;
    e.op = op;
    e.tensor = t;
    e.backend = &be_;
    if (sink_) sink_->on_event(e);
}

// ---- helpers

Tensor GraphBuilder::build_inp_embd(const char* name) {
    Tensor x = cols(buf_.x, T_);
    be_.get_rows(token_embd_, inp_tokens_.reshaped(T_), x);  // x = token_embd[tokens]
    cb(x, name, -1, Op::kGetRows);
    return x;
}

Tensor GraphBuilder::build_norm(const Tensor& x, const Tensor& weight, const char* name, int il) {
    return build_norm(x, weight, name, il, buf_.norm, buf_.cur);
}

Tensor GraphBuilder::build_norm(const Tensor& x, const Tensor& weight, const char* name, int il, const Tensor& norm_buf,
                                const Tensor& out_buf) {
    Tensor norm = norm_buf.reshaped(x.ne[0], x.ne[1], x.ne[2]), cur = out_buf.reshaped(x.ne[0], x.ne[1], x.ne[2]);
    be_.rms_norm(x, rms_eps_, norm);
    cb(norm, "norm", il, Op::kRmsNorm);
    be_.mul_row(norm, weight, cur);
    if (knobs_.norm_weight_twice) be_.mul_row(cur, weight, cur);
    if (knobs_.norm_plus_one) be_.add(cur, norm, cur);  // x w + x = x (1 + w)
    cb(cur, name, il, Op::kMul);
    return cur;
}

namespace {

// y = w x (* s) (+ b), announced as `name` after the product, again after the scale and again
// after the bias.
struct Projection {
    Backend& be;
    MathMode mode;
    bool biases;
    Tensor operator()(const Tensor& w, const Tensor& s, const Tensor& b, const Tensor& x, const Tensor& out_buf,
                      const Tensor& out_s_buf, const Tensor& out_b_buf,
                      const std::function<void(const Tensor&, Op)>& announce) const {
        Tensor y = cols(out_buf, x.ne[1]);
        be.matmul(w, x, y, mode);
        announce(y, Op::kMulMat);
        if (s.data) {
            Tensor ys = cols(out_s_buf, x.ne[1]);
            be.binary(Op::kMul, y, s, ys);
            announce(ys, Op::kMul);
            y = ys;
        }
        if (!b.data || !biases) return y;
        Tensor yb = cols(out_b_buf, x.ne[1]);
        be.add(y, b, yb);
        announce(yb, Op::kAdd);
        return yb;
    }
};

}  // namespace

Qkv GraphBuilder::build_qkv(const Tensor& cur, const AttnWeights& w, int il) {
    const int64_t T = cur.ne[1], hd = cfg_.head_dim_k, hd_v = cfg_.head_dim_v;
    const Projection proj{be_, opt_.mode, knobs_.qkv_biases};
    auto as = [&](const char* name) { return [this, name, il](const Tensor& t, Op op) { cb(t, name, il, op); }; };
    Qkv r;
    if (w.wqkv.data) {
        // One product (+ bias), then Q, K and V as views of its rows, gathered contiguous as
        // ggml's dumps and the next ops read them.
        const int64_t n_q = cfg_.n_head * hd, n_k = cfg_.n_head_kv * hd;
        Tensor qkv = cols(buf_.qkv, T);
        be_.matmul(w.wqkv, cur, qkv, opt_.mode);
        cb(qkv, "wqkv", il, Op::kMulMat);
        if (w.bqkv.data && knobs_.qkv_biases) {
            Tensor biased = cols(buf_.qkv_b, T);
            be_.add(qkv, w.bqkv, biased);
            cb(biased, "wqkv_b", il, Op::kAdd);
            qkv = biased;
        }
        auto part = [&](int64_t first, int64_t head, int64_t heads, const Tensor& buf, const char* name) {
            const Tensor view = qkv.view({head, heads, T, 1}, {4, static_cast<uint64_t>(head) * 4, qkv.nb[1], qkv.nb[1] * T},
                                         static_cast<uint64_t>(first) * 4);
            Tensor out = buf.reshaped(head, heads, T);
            be_.copy(view, out);
            cb(out, name, il, Op::kView);
            return out;
        };
        // llama.cpp's graph order: q through its rope, then v, then k through its rope.
        const Tensor q = part(0, hd, cfg_.n_head, buf_.q, "Qcur");
        r.q = build_rope(q, buf_.q_rope, "Qcur", il);
        const bool swapped = knobs_.qkv_split_swapped;  // the fault: K's and V's rows exchanged
        r.v = part(swapped ? n_q : n_q + n_k, hd_v, cfg_.n_head_kv, buf_.v, "Vcur");
        const Tensor k = part(swapped ? n_q + n_k : n_q, hd, cfg_.n_head_kv, buf_.k, "Kcur");
        r.k = build_rope(k, buf_.k_rope, "Kcur", il);
        return r;
    }
    // llama.cpp's graph order: q through its rope, then v, then k through its rope.
    Tensor q = proj(w.wq, w.sq, w.bq, cur, buf_.q, buf_.q_s, buf_.q_b, as("Qcur")).reshaped(hd, cfg_.n_head, T);
    cb(q, "Qcur", il, Op::kReshape);
    const bool norm_first = !knobs_.qk_norm_after_rope;
    if (w.q_norm.data && norm_first) q = build_norm(q, w.q_norm, "Qcur_normed", il, buf_.q_norm, buf_.q_normed);
    r.q = build_rope(q, buf_.q_rope, "Qcur", il);
    if (w.q_norm.data && !norm_first) r.q = build_norm(r.q, w.q_norm, "Qcur_normed", il, buf_.q_norm, buf_.q_normed);
    r.v = proj(w.wv, w.sv, w.bv, cur, buf_.v, buf_.v_s, buf_.v_b, as("Vcur")).reshaped(hd_v, cfg_.n_head_kv, T);
    cb(r.v, "Vcur", il, Op::kReshape);
    Tensor k = proj(w.wk, w.sk, w.bk, cur, buf_.k, buf_.k_s, buf_.k_b, as("Kcur")).reshaped(hd, cfg_.n_head_kv, T);
    cb(k, "Kcur", il, Op::kReshape);
    if (w.k_norm.data && norm_first) k = build_norm(k, w.k_norm, "Kcur_normed", il, buf_.k_norm, buf_.k_normed);
    r.k = build_rope(k, buf_.k_rope, "Kcur", il);
    if (w.k_norm.data && !norm_first) r.k = build_norm(r.k, w.k_norm, "Kcur_normed", il, buf_.k_norm, buf_.k_normed);
    return r;
}

Tensor GraphBuilder::build_rope(const Tensor& heads, Tensor& buffer, const char* name, int il) {
    Tensor roped = buffer.reshaped(heads.ne[0], heads.ne[1], heads.ne[2]);
    be_.copy(heads, roped);
    const RopeParams& rope = layer_rope_.empty() ? rope_ : layer_rope_[il];
    if (!knobs_.rope_skipped) be_.rope(roped, inp_rope_pos_.reshaped(heads.ne[2]), rope_freqs_, rope, opt_.mode);
    cb(roped, name, il, Op::kRope);
    return roped;
}

Tensor GraphBuilder::build_attn_kqv(const Qkv& qkv, int il, Tensor* flash_out, const Tensor& sinks) {
    const MathMode mode = opt_.mode;
    const int64_t T = qkv.q.ne[2], n_head = qkv.q.ne[1], hd_v = qkv.v.ne[0];
    // A local layer's cache starts at position swa_base_; its tokens see the last n_swa_ positions.
    const bool local = swa_layer(il);
    const int64_t base = local ? swa_base_ : 0, n_kv = n_kv_ - base;
    const Tensor pos = (local ? inp_pos_swa_ : inp_pos_).reshaped(T);
    const float cap = knobs_.softcap_skipped ? 0.0f : static_cast<float>(cfg_.attn_softcap);
    AttnMask mask(knobs_.causal_mask, local ? n_swa_ : 0, cap);
    if (!knobs_.sinks_ignored) mask.sinks = sinks.data ? sinks.f32() : nullptr;
    const int64_t pad = 256;
    mask.ggml_cells = std::min((opt_.n_ctx + pad - 1) / pad * pad, std::max(pad, (n_kv_ + pad - 1) / pad * pad));
    Tensor kq = buf_.kq.reshaped(n_kv, T, n_head), kq_soft_max = buf_.kq_soft_max.reshaped(n_kv, T, n_head);
    Tensor kqv = buf_.kqv.reshaped(hd_v, T, n_head);
    Tensor& cache_k = buf_.cache_k[il];
    Tensor& cache_v = buf_.cache_v[il];
    be_.store_kv(qkv.k, qkv.v, cache_k, cache_v, pos_ - base, mode);
    be_.attn_scores(qkv.q, cache_k, n_kv, kq, mode);
    cb(kq, "kq", il, Op::kMulMat);
    if (cap != 0.0f) {
        // gemma2's soft cap: kq / cap, tanh, * cap.
        be_.unary(Op::kScale, kq, kq, 1.0f / cap);
        cb(kq, "kq_scaled_1", il, Op::kScale);
        be_.unary(Op::kTanh, kq, kq);
        cb(kq, "kq_tanh", il, Op::kTanh);
        be_.unary(Op::kScale, kq, kq, cap);
        cb(kq, "kq_scaled_2", il, Op::kScale);
    }
    be_.softmax_masked(kq, kq_scale_, pos, mask, kq_soft_max, mode);
    cb(kq_soft_max, "kq_soft_max", il, Op::kSoftMax);
    be_.attn_values(kq_soft_max, cache_v, n_kv, kqv, mode);
    cb(kqv, "kqv", il, Op::kMulMat);
    if (flash_out && opt_.flash_attn && mode == MathMode::kLlama)
        // What llama.cpp computes with flash attention on; kq and kq_soft_max above are for display.
        be_.attn_flash(qkv.q, cache_k, cache_v, n_kv, kq_scale_, pos, mask, *flash_out);
    return kqv;
}

Tensor GraphBuilder::build_attn(const Qkv& qkv, const AttnWeights& w, int il) {
    const MathMode mode = opt_.mode;
    const int64_t T = qkv.q.ne[2], n_head = qkv.q.ne[1], hd_v = qkv.v.ne[0];
    Tensor kqv_out = cols(buf_.kqv_out, T).reshaped(hd_v * n_head, T);
    Tensor fa_out = kqv_out.reshaped(hd_v, n_head, T);
    const Tensor kqv = build_attn_kqv(qkv, il, &fa_out, w.sinks);
    if (!(opt_.flash_attn && mode == MathMode::kLlama)) be_.merge_heads(kqv, kqv_out);
    cb(kqv_out, "kqv_out", il, Op::kCont);
    const Projection proj{be_, mode, true};
    return proj(w.wo, w.so, w.bo, kqv_out, buf_.attn_out, buf_.attn_out_s, buf_.attn_out_b,
                [this, il](const Tensor& t, Op op) { cb(t, "attn_out", il, op); });
}

bool GraphBuilder::build_out_rows(int il, Tensor& cur, Tensor& residual) {
    if (il != cfg_.n_layer - 1 || n_out_rows_ >= T_) return true;
    if (n_out_rows_ == 0) return false;
    const Tensor ids = inp_out_ids_.reshaped(n_out_rows_);
    Tensor sel_cur = cols(buf_.out_attn, n_out_rows_), sel_residual = cols(buf_.out_x, n_out_rows_);
    be_.get_rows(cur, ids, sel_cur);
    be_.get_rows(residual, ids, sel_residual);
    cur = sel_cur, residual = sel_residual;
    return true;
}

Tensor GraphBuilder::build_scale(const Tensor& x, float s, const char* name, int il, const Tensor& out_buf) {
    Tensor y = out_buf.reshaped(x.ne[0], x.ne[1], x.ne[2]);
    be_.unary(Op::kScale, x, y, s);
    cb(y, name, il, Op::kScale);
    return y;
}

Tensor GraphBuilder::build_add(const Tensor& a, const Tensor& b, const char* name, int il, Tensor& out) {
    Tensor y = cols(out, a.ne[1]);
    be_.add(a, b, y);
    cb(y, name, il, Op::kAdd);
    return y;
}

Tensor GraphBuilder::build_ffn(const Tensor& cur, const FfnWeights& w, int il, const char* out_name,
                               const Tensor* buffers, FfnAct act) {
    const MathMode mode = opt_.mode;
    const int64_t T = cur.ne[1], n_ff = w.gate.ne[1], n_out = w.down.ne[1];
    const Tensor* b = buffers;
    Tensor gate = (b ? b[0] : buf_.gate).reshaped(n_ff, T), up = (b ? b[1] : buf_.up).reshaped(n_ff, T);
    Tensor swiglu = (b ? b[2] : buf_.swiglu).reshaped(n_ff, T), out = (b ? b[3] : buf_.ffn_out).reshaped(n_out, T);
    // ggml's execution order: the gate's product, bias and scale, then the up projection's (the
    // SWIGLU's first and second operands).
    auto step = [&](Tensor& y, const Tensor& operand, Op op, const Tensor& buf, const char* name) {
        if (!operand.data) return;
        Tensor z = buf.reshaped(y.ne[0], T);
        if (op == Op::kAdd) be_.add(y, operand, z);
        else be_.binary(Op::kMul, y, operand, z);
        cb(z, name, il, op);
        y = z;
    };
    be_.matmul(w.gate, cur, gate, mode);
    cb(gate, "ffn_gate", il, Op::kMulMat);
    step(gate, w.gate_b, Op::kAdd, buf_.gate_b, "ffn_gate_b");
    step(gate, w.gate_s, Op::kMul, buf_.gate_s, "ffn_gate_s");
    be_.matmul(w.up, cur, up, mode);
    cb(up, "ffn_up", il, Op::kMulMat);
    step(up, w.up_b, Op::kAdd, buf_.up_b, "ffn_up_b");
    step(up, w.up_s, Op::kMul, buf_.up_s, "ffn_up_s");
    if (act == FfnAct::kGelu) {
        be_.geglu(gate, up, swiglu, mode);
        cb(swiglu, "ffn_geglu", il, Op::kGeglu);
    } else {
        be_.swiglu(gate, up, swiglu, mode);
        cb(swiglu, "ffn_swiglu", il, Op::kSwiglu);
    }
    // The down product is ffn_down when a bias follows; the last step is `out_name`.
    be_.matmul(w.down, swiglu, out, mode);
    cb(out, w.down_b.data ? "ffn_down" : out_name, il, Op::kMulMat);
    step(out, w.down_b, Op::kAdd, buf_.ffn_out_b, w.down_s.data ? "ffn_down" : out_name);
    step(out, w.down_s, Op::kMul, buf_.ffn_out_s, out_name);
    return out;
}

void GraphBuilder::announce_ids(const Tensor& ids, const Tensor& f32_buffer, const char* name, int il, Op op) {
    std::vector<int32_t> host(static_cast<size_t>(ids.n_elements()));
    be_.download(host.data(), ids.data, host.size() * sizeof(int32_t));
    std::vector<float> values(host.begin(), host.end());
    Tensor out = f32_buffer.reshaped(ids.ne[0], ids.ne[1], ids.ne[2]);
    be_.upload(out.data, values.data(), values.size() * sizeof(float));
    cb(out, name, il, op);
}

Tensor GraphBuilder::build_moe_groups(const Tensor& selection, int il) {
    const int64_t E = cfg_.n_expert, T = selection.ne[1], G = cfg_.n_expert_groups, P = E / G, used = cfg_.n_group_used;
    std::vector<float> sel(static_cast<size_t>(E * T)), masked(sel.size(), -std::numeric_limits<float>::infinity());
    std::vector<float> chosen(static_cast<size_t>(used * T));
    be_.download(sel.data(), selection.data, sel.size() * sizeof(float));
    // ggml's ARGSORT (std::sort with its comparator) for the two best of a group and the best groups.
    auto desc = [](const float* v, std::vector<int32_t>& idx) {
        std::iota(idx.begin(), idx.end(), 0);
        std::sort(idx.begin(), idx.end(), [v](int32_t a, int32_t b) { return v[a] > v[b]; });
    };
    std::vector<int32_t> in_group(static_cast<size_t>(P)), by_score(static_cast<size_t>(G));
    std::vector<float> score(static_cast<size_t>(G));
    for (int64_t t = 0; t < T; ++t) {
        const float* v = sel.data() + t * E;
        for (int64_t g = 0; g < G; ++g) {
            desc(v + g * P, in_group);
            // SUM_ROWS of the two values: in double, rounded once, as ggml sums a row (the bug:
            // the best one alone).
            const float best = v[g * P + in_group[0]], second = knobs_.moe_group_by_best ? 0.0f : v[g * P + in_group[1]];
            score[g] = static_cast<float>(static_cast<double>(best) + second);
        }
        desc(score.data(), by_score);
        for (int64_t u = 0; u < used; ++u) {
            const int64_t g = by_score[u];
            chosen[t * used + u] = static_cast<float>(g);
            std::copy(v + g * P, v + (g + 1) * P, masked.begin() + t * E + g * P);
        }
    }
    Tensor groups = moe_.group_topk.reshaped(used, T);
    be_.upload(groups.data, chosen.data(), chosen.size() * sizeof(float));
    cb(groups, "ffn_moe_group_topk", il, Op::kView);
    Tensor out = moe_.probs_masked.reshaped(E, T);
    be_.upload(out.data, masked.data(), masked.size() * sizeof(float));
    cb(out, "ffn_moe_probs_masked", il, Op::kReshape);
    return out;
}

namespace {

// The mask of a softmax over whole rows with no cells behind them (the router's).
AttnMask whole_row_mask() {
    AttnMask whole(false);
    whole.whole_row = true;
    return whole;
}

}  // namespace

Tensor GraphBuilder::build_moe(const Tensor& cur, const MoeWeights& w, int il) {
    const MathMode mode = opt_.mode;
    const int64_t T = cur.ne[1], E = cfg_.n_expert, k = cfg_.n_expert_used, n_embd = cfg_.n_embd, n_ff = cfg_.n_ff_expert;
    // The router.
    Tensor logits = moe_.logits.reshaped(E, T);
    be_.matmul(w.gate_inp, cur, logits, mode);
    cb(logits, "ffn_moe_logits", il, Op::kMulMat);
    Tensor probs = moe_.probs.reshaped(E, T);
    const bool softmax_weight = cfg_.expert_gating_func == 3 && !knobs_.moe_softmax_before_topk;
    if (softmax_weight) {
        // gpt-oss (the only model with gating 3; its router's bias is required): the experts are
        // chosen by their biased logits, which llama.cpp's graph names ffn_moe_probs (the bias's
        // ADD is renamed so).
        be_.add(logits, w.gate_inp_b, probs);
        cb(probs, "ffn_moe_probs", il, Op::kAdd);
    } else if (cfg_.expert_gating_func == 2) {
        be_.unary(Op::kSigmoid, logits, probs);
        cb(probs, "ffn_moe_probs", il, Op::kSigmoid);
    } else {
        // Every expert, no padding: ggml's softmax over exactly E values (the bug: gpt-oss's
        // softmax over all the experts, before the top k, with the bias).
        Tensor in = logits;
        if (w.gate_inp_b.data) {
            be_.add(logits, w.gate_inp_b, probs);
            in = probs;
        }
        be_.softmax_masked(in.reshaped(E, T, 1), 1.0f, inp_pos_.reshaped(T), whole_row_mask(), probs, mode);
        cb(probs, "ffn_moe_probs", il, Op::kSoftMax);
    }
    // The selection bias chooses; the weights come from the unbiased probabilities.
    Tensor selection = probs;
    if (w.exp_probs_b.data) {
        selection = moe_.selection.reshaped(E, T);
        be_.binary(Op::kAdd, probs, w.exp_probs_b, selection);
        cb(selection, "ffn_moe_probs_biased", il, Op::kAdd);
    }
    if (cfg_.n_expert_groups > 1) selection = build_moe_groups(selection, il);
    Tensor argsort = moe_.argsort.reshaped(E, T);
    if (knobs_.moe_topk_ascending) {  // the bug: the ranking read from its wrong end
        Tensor negated = moe_.selection.reshaped(E, T);
        be_.unary(Op::kScale, selection, negated, -1.0f);
        selection = negated;
    }
    be_.argsort_desc(selection, argsort, mode == MathMode::kLlama);
    announce_ids(argsort, moe_.argsort_f, "ffn_moe_argsort", il, Op::kArgsort);
    Tensor topk = make_tensor(moe_.topk.data, k, T, 1, 1, GgmlType::I32);
    Tensor first_k = argsort;
    first_k.ne[0] = k;
    be_.copy(first_k, topk);
    announce_ids(topk, moe_.topk_f, "ffn_moe_topk", il, Op::kView);
    // The chosen experts' probabilities, per token: rows of probs {1, E} picked by topk (the bug:
    // of the biased selection values).
    Tensor weights = moe_.weights.reshaped(1, k, T);
    const Tensor& gathered = knobs_.moe_bias_in_weights && w.exp_probs_b.data ? moe_.selection : probs;
    for (int64_t t = 0; t < T; ++t) {
        const Tensor table = make_tensor(gathered.f32() + t * E, 1, E);
        const Tensor ids = make_tensor(topk.i32() + t * k, k, 1, 1, 1, GgmlType::I32);
        Tensor y = make_tensor(weights.f32() + t * k, 1, k);
        be_.get_rows(table, ids, y);
    }
    cb(weights, "ffn_moe_weights", il, Op::kGetRows);
    if (softmax_weight) {  // gpt-oss: a softmax over the k chosen logits
        Tensor soft = moe_.weights_norm.reshaped(k, T);
        be_.softmax_masked(weights.reshaped(k, T, 1), 1.0f, inp_pos_.reshaped(T), whole_row_mask(), soft, mode);
        weights = soft.reshaped(1, k, T);  // llama.cpp names the softmax's reshape back to {1, k, T}
        cb(weights, "ffn_moe_weights_softmax", il, Op::kSoftMax);
    }
    if (cfg_.expert_weights_norm != knobs_.moe_norm_flipped) {
        const Tensor w2 = weights.reshaped(k, T);
        Tensor sum = moe_.weights_sum.reshaped(1, T), clamped = moe_.weights_clamped.reshaped(1, T);
        be_.sum_rows(w2, sum);
        cb(sum, "ffn_moe_weights_sum", il, Op::kSumRows);
        // Against a division by zero: the smallest normal f16.
        be_.unary(Op::kClamp, sum, clamped, 6.103515625e-5f, std::numeric_limits<float>::infinity());
        cb(clamped, "ffn_moe_weights_sum_clamped", il, Op::kClamp);
        Tensor normed = moe_.weights_norm.reshaped(k, T);
        be_.binary(Op::kDiv, w2, clamped, normed);
        cb(normed, "ffn_moe_weights_norm", il, Op::kDiv);
        weights = normed.reshaped(1, k, T);
    }
    const float scale = static_cast<float>(cfg_.expert_weights_scale);
    if (scale != 0.0f && scale != 1.0f) {
        Tensor scaled = moe_.weights_scaled.reshaped(1, k, T);
        be_.unary(Op::kScale, weights, scaled, scale);
        cb(scaled, "ffn_moe_weights_scaled", il, Op::kScale);
        weights = scaled;
    }
    // NVFP4 conversions' per-expert scales: each slot's product times its expert's scale (llama.cpp
    // gathers the scales by the chosen ids and renames the product ffn_moe_*_scaled).
    auto scaled = [&](Tensor& y, const Tensor& scale, const Tensor& buf, const char* name) {
        if (!scale.data) return;
        Tensor rows = moe_.scale_rows.reshaped(1, k, T);
        const Tensor table = make_tensor(scale.data, 1, E);
        for (int64_t t = 0; t < T; ++t) {
            const Tensor ids = make_tensor(topk.i32() + t * k, k, 1, 1, 1, GgmlType::I32);
            Tensor row = make_tensor(rows.f32() + t * k, 1, k);
            be_.get_rows(table, ids, row);
        }
        Tensor z = buf.reshaped(y.ne[0], k, T);
        be_.binary(Op::kMul, y, rows, z);
        cb(z, name, il, Op::kMul);
        y = z;
    };
    // The chosen experts: up and gate (one fused product, or two), swiglu, down.
    const Tensor x = cur.reshaped(n_embd, 1, T);
    Tensor gate = moe_.gate.reshaped(n_ff, k, T), up = moe_.up.reshaped(n_ff, k, T), swiglu = moe_.swiglu.reshaped(n_ff, k, T);
    if (w.gate_up_exps.data) {
        Tensor gate_up = moe_.gate_up.reshaped(2 * n_ff, k, T);
        be_.matmul_id(w.gate_up_exps, x, topk, gate_up, mode);
        cb(gate_up, "ffn_moe_gate_up", il, Op::kMulMatId);
        const uint64_t f = sizeof(float);
        const uint64_t nb[4] = {f, 2 * n_ff * f, 2 * n_ff * k * f, 2 * n_ff * k * T * f};
        // Gate's rows first, then up's (the bug: the other way round).
        const uint64_t gate_at = knobs_.moe_gate_up_swapped ? n_ff * f : 0, up_at = knobs_.moe_gate_up_swapped ? 0 : n_ff * f;
        be_.copy(gate_up.view({n_ff, k, T, 1}, {nb[0], nb[1], nb[2], nb[3]}, gate_at), gate);
        cb(gate, "ffn_moe_gate", il, Op::kView);
        be_.copy(gate_up.view({n_ff, k, T, 1}, {nb[0], nb[1], nb[2], nb[3]}, up_at), up);
        cb(up, "ffn_moe_up", il, Op::kView);
    } else {
        // Each product + its chosen experts' biases (gpt-oss: ADD_ID) when the model has them.
        auto biased = [&](Tensor& y, const Tensor& bias, const Tensor& buf, const char* name) {
            if (!bias.data) return;
            Tensor z = buf.reshaped(y.ne[0], k, T);
            be_.add_id(y, bias, topk, z);
            cb(z, name, il, Op::kAddId);
            y = z;
        };
        be_.matmul_id(w.up_exps, x, topk, up, mode);
        cb(up, "ffn_moe_up", il, Op::kMulMatId);
        scaled(up, w.up_exps_s, moe_.up_s, "ffn_moe_up_scaled");
        biased(up, w.up_exps_b, moe_.up_b, "ffn_moe_up_biased");
        be_.matmul_id(w.gate_exps, x, topk, gate, mode);
        cb(gate, "ffn_moe_gate", il, Op::kMulMatId);
        scaled(gate, w.gate_exps_s, moe_.gate_s, "ffn_moe_gate_scaled");
        biased(gate, w.gate_exps_b, moe_.gate_b, "ffn_moe_gate_biased");
    }
    if (cfg_.arch == Arch::kGptOss) {
        // gpt-oss's clamped SwiGLU (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE: alpha 1.702, limit 7; the
        // bug: no clamp).
        const float inf = std::numeric_limits<float>::infinity();
        float limit = knobs_.swiglu_oai_unclamped ? inf : 7.0f;
        if (knobs_.swiglu_oai_clamp_below) {
            // The bug: the gate limited from below. The clamps done first (exactly), then the op
            // without one; gate and up are the biased values here, so their unbiased buffers are free.
            Tensor g = moe_.gate.reshaped(n_ff, k, T), u = moe_.up.reshaped(n_ff, k, T);
            be_.unary(Op::kClamp, gate, g, -limit, inf);
            be_.unary(Op::kClamp, up, u, -limit, limit);
            gate = g;
            up = u;
            limit = inf;
        }
        be_.swiglu_oai(gate, up, swiglu, 1.702f, limit, mode);
        cb(swiglu, "ffn_moe_swiglu_oai", il, Op::kSwigluOai);
    } else {
        be_.swiglu(gate, up, swiglu, mode);
        cb(swiglu, "ffn_moe_swiglu", il, Op::kSwiglu);
    }
    Tensor down = moe_.down.reshaped(n_embd, k, T), weighted = moe_.weighted.reshaped(n_embd, k, T);
    be_.matmul_id(w.down_exps, swiglu, topk, down, mode);
    cb(down, "ffn_moe_down", il, Op::kMulMatId);
    scaled(down, w.down_exps_s, moe_.down_s, "ffn_moe_down_scaled");
    if (w.down_exps_b.data) {
        Tensor z = moe_.down_b.reshaped(n_embd, k, T);
        be_.add_id(down, w.down_exps_b, topk, z);
        cb(z, "ffn_moe_down_biased", il, Op::kAddId);
        down = z;
    }
    be_.binary(Op::kMul, down, weights, weighted);
    cb(weighted, "ffn_moe_weighted", il, Op::kMul);
    // The experts' rows summed in slot order.
    Tensor out = moe_.out.reshaped(n_embd, T), slot = moe_.slot.reshaped(n_embd, T);
    const uint64_t f = sizeof(float);
    auto slot_view = [&](int64_t s) {
        return weighted.view({n_embd, T, 1, 1}, {f, n_embd * k * f, n_embd * k * T * f, n_embd * k * T * f}, s * n_embd * f);
    };
    be_.copy(slot_view(0), out);
    for (int64_t s = 1; s < k; ++s) {
        be_.copy(slot_view(s), slot);
        be_.add(out, slot, out);
    }
    cb(out, "ffn_moe_out", il, k > 1 ? Op::kAdd : Op::kCont);
    return out;
}

Tensor GraphBuilder::build_ffn_fused_up(const Tensor& cur, const Tensor& up, const Tensor& down, int il) {
    const MathMode mode = opt_.mode;
    const int64_t T = cur.ne[1], n_ff = up.ne[1] / 2, n_out = down.ne[1];
    Tensor up2 = buf_.up2.reshaped(2 * n_ff, T);
    be_.matmul(up, cur, up2, mode);
    cb(up2, "ffn_up", il, Op::kMulMat);
    // The halves of each column as two contiguous operands: silu(first) * second.
    Tensor gate = buf_.gate.reshaped(n_ff, T), upper = buf_.up.reshaped(n_ff, T);
    be_.copy(up2.view({n_ff, T, 1, 1}, {4, up2.nb[1], up2.nb[1] * T, up2.nb[1] * T}, 0), gate);
    be_.copy(up2.view({n_ff, T, 1, 1}, {4, up2.nb[1], up2.nb[1] * T, up2.nb[1] * T}, static_cast<uint64_t>(n_ff) * 4), upper);
    Tensor swiglu = buf_.swiglu.reshaped(n_ff, T), out = buf_.ffn_out.reshaped(n_out, T);
    be_.swiglu(gate, upper, swiglu, mode);
    cb(swiglu, "ffn_swiglu", il, Op::kSwiglu);
    be_.matmul(down, swiglu, out, mode);
    cb(out, "ffn_out", il, Op::kMulMat);
    return out;
}

void GraphBuilder::build_output(const Tensor& x) { build_lm_head(build_norm(x, output_norm_, "result_norm", -1)); }

void GraphBuilder::build_output_all_rows(const Tensor& x, const char* norm_name) {
    const Tensor normed = build_norm(x, output_norm_, norm_name, -1);
    if (n_out_rows_ == 0) return;
    Tensor rows = cols(buf_.out_x, n_out_rows_);
    be_.get_rows(normed, inp_out_ids_.reshaped(n_out_rows_), rows);
    cb(rows, "result_norm", -1, Op::kGetRows);
    build_lm_head(rows);
}

void GraphBuilder::build_lm_head(const Tensor& cur) {
    const int64_t n_out = cur.ne[1];
    Tensor logits = buf_.logits.reshaped(n_logits_, n_out);
    if (n_logits_ == n_vocab_) {
        be_.matmul(output_, cur, logits, opt_.mode);
    } else {
        // The LM head writes n_vocab rows per token into a buffer whose rows are n_logits long.
        Tensor head = make_tensor(nullptr, n_vocab_, 1);
        for (int64_t t = 0; t < n_out; ++t) {
            head.data = logits.f32() + t * n_logits_;
            be_.matmul(output_, cur.columns(t, 1), head, opt_.mode);
        }
    }
    cb(logits, "result_output", -1, Op::kMulMat);
    if (output_s_.data) {
        // An NVFP4 head's tensor-wide scale; llama.cpp names the product result_output (then its
        // sum with qwen2's bias, when there is one).
        Tensor scaled = buf_.logits_s.reshaped(n_logits_, n_out);
        for (int64_t t = 0; t < n_out; ++t) {
            Tensor y = scaled.columns(t, 1).reshaped(n_vocab_, 1);
            be_.binary(Op::kMul, logits.columns(t, 1).reshaped(n_vocab_, 1), output_s_, y);
        }
        cb(scaled, "result_output", -1, Op::kMul);
        logits = scaled;
    }
    if (output_b_.data) {
        // qwen2's output.bias: llama.cpp names the sum result_output, its product is unnamed.
        Tensor biased = buf_.logits_b.reshaped(n_logits_, n_out);
        for (int64_t t = 0; t < n_out; ++t) {
            Tensor y = biased.columns(t, 1).reshaped(n_vocab_, 1);
            be_.add(logits.columns(t, 1).reshaped(n_vocab_, 1), output_b_, y);
        }
        cb(biased, "result_output", -1, Op::kAdd);
        logits = biased;
    }
    if (cfg_.final_softcap > 0 && !knobs_.softcap_skipped) {
        // gemma's final soft cap: logits / cap, tanh, * cap (llama.cpp names the last).
        const float cap = static_cast<float>(cfg_.final_softcap);
        Tensor rows = logits.reshaped(n_logits_ * n_out);
        be_.unary(Op::kScale, rows, rows, 1.0f / cap);
        cb(logits, "result_output", -1, Op::kScale);
        be_.unary(Op::kTanh, rows, rows);
        cb(logits, "result_output", -1, Op::kTanh);
        be_.unary(Op::kScale, rows, rows, cap);
        cb(logits, "result_output", -1, Op::kScale);
    }
    be_.download(last_logits_.data(), logits.f32() + (n_out - 1) * n_logits_, n_logits_ * sizeof(float));
}

RopeParams rope_params_for(const ModelConfig& c) {
    RopeParams rope;
    rope.mode = c.rope_type == RopeType::kNorm ? RopeMode::kNorm : RopeMode::kNeox;  // IMROPE: NEOX pairs (qwen35.cpp)
    rope.n_rot = static_cast<int>(c.n_rot);
    rope.freq_base = static_cast<float>(c.rope_freq_base);
    const RopeScales scales = rope_scales(c);
    rope.freq_scale = scales.freq_scale;
    rope.attn_factor = scales.attn_factor;
    if (c.rope_scaling == RopeScaling::kYarn) {
        rope.ext_factor = 1.0f;
        rope.n_ctx_orig = static_cast<int>(c.rope_orig_ctx);
        rope.beta_fast = static_cast<float>(c.rope_yarn_beta_fast);
        rope.beta_slow = static_cast<float>(c.rope_yarn_beta_slow);
    }
    return rope;
}

const char* mla_form_name(MlaForm form) {
    switch (form) {
        case MlaForm::kAuto: return "auto";
        case MlaForm::kAbsorbed: return "absorbed";
        case MlaForm::kUnabsorbed: return "unabsorbed";
    }
    return "?";
}

bool mla_form_from_name(const std::string& name, MlaForm* out) {
    for (MlaForm f : {MlaForm::kAuto, MlaForm::kAbsorbed, MlaForm::kUnabsorbed})
        if (name == mla_form_name(f)) {
            *out = f;
            return true;
        }
    return false;
}

Result<int64_t> context_for_run(const ModelConfig& config, int64_t n_prompt, int64_t n_predict, int64_t requested,
                                bool beyond_train) {
    const int64_t train = config.n_ctx_train, need = n_prompt + n_predict;
    const std::string key = config.arch_name + ".context_length";
    if (requested > 0) {
        if (train > 0 && requested > train && !beyond_train)
            return make_error(ErrorCode::kUsage,
                              fmt::format("--ctx {} is beyond the model's trained context ({} = {}); positions past it "
                                          "were never trained. Lower --ctx, or add --ctx-beyond-train to run there anyway",
                                          requested, key, train));
        return requested;
    }
    if (train > 0 && need > train && !beyond_train)
        return make_error(ErrorCode::kUsage,
                          fmt::format("a {}-token prompt and -n {} need {} KV cells, beyond the model's trained context "
                                      "({} = {}). Lower -n (`layerscope run` goes past it with --ctx N --ctx-beyond-train)",
                                      n_prompt, n_predict, need, key, train));
    const int64_t rounded = std::max<int64_t>(256, (need + 255) / 256 * 256);
    return train > 0 && need <= train ? std::min(rounded, train) : rounded;
}

Result<std::unique_ptr<ForwardPass>> make_forward(const Model& model, Backend& backend, const ForwardOptions& options) {
    if (options.n_ctx <= 0 || options.n_ubatch <= 0)
        return make_error(ErrorCode::kUsage, fmt::format("n_ctx ({}) and n_ubatch ({}) must be positive", options.n_ctx,
                                                         options.n_ubatch));
    // The CPU reads every weight each token: from memory of its own, in huge pages, not from a
    // mapping of the page cache in whatever pages it holds (MappedFile::keep_in_memory). A dry
    // run's null backend reads none, and a GPU's copy is on the device.
    if (backend.reads_host_weights()) model.file().keep_in_memory();
    std::unique_ptr<GraphBuilder> graph;
    switch (model.config().arch) {
        case Arch::kLlama: graph = make_llama_graph(model, backend, options); break;
        case Arch::kQwen2: graph = make_qwen2_graph(model, backend, options); break;
        case Arch::kQwen3: graph = make_qwen3_graph(model, backend, options); break;
        case Arch::kQwen3Moe: graph = make_qwen3moe_graph(model, backend, options); break;
        case Arch::kPhi3: graph = make_phi3_graph(model, backend, options); break;
        case Arch::kGemma2:
        case Arch::kGemma3: graph = make_gemma_graph(model, backend, options); break;
        case Arch::kDeepseek2: graph = make_deepseek2_graph(model, backend, options); break;
        case Arch::kGptOss: graph = make_gpt_oss_graph(model, backend, options); break;
        case Arch::kQwen35:
        case Arch::kQwen35Moe: graph = make_qwen35_graph(model, backend, options); break;
        default:
            return make_error(ErrorCode::kUnsupported, fmt::format("{}: running {} models is not supported yet", model.path(),
                                                                   model.config().arch_name));
    }
    if (Status s = graph->init(); !s) return s.error();
    return std::unique_ptr<ForwardPass>(std::move(graph));
}

}  // namespace ls
