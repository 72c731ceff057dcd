// gemma2 and gemma3: the embeddings scaled by sqrt(n_embd) (inp_scaled); each layer normalised
// before and after attention and before and after the feed-forward (the converter stores gemma's
// 1 + w norm weights with the 1 added, so each is a plain RMS norm); gemma3 RMS-normalises every
// head of q and k before NEOX RoPE; the roped Q is scaled by gemma_q_scale (kq scale 1); local
// layers attend over a sliding window with their own RoPE base (swa_layers_); a GEGLU
// feed-forward (GELU's tanh form); gemma2 caps the attention scores and the logits with
// cap * tanh(x / cap). As llama.cpp's llama_model_gemma2::graph and llama_model_gemma3::graph.
#include <cmath>

#include "engine/forward/graph.h"

namespace ls {
namespace {

struct GemmaLayer {
    Tensor attn_norm, attn_post_norm, ffn_norm, ffn_post_norm;
    AttnWeights attn;  // q_norm, k_norm: gemma3
    FfnWeights ffn;
};

class GemmaGraph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    bool gemma3() const { return cfg_.arch == Arch::kGemma3; }

    std::vector<std::pair<Op, GgmlType>> arch_ops() const override {
        return {{Op::kScale, GgmlType::F32}, {Op::kGeglu, GgmlType::F32}, {Op::kTanh, GgmlType::F32}};
    }
    void allocate_arch_buffers() override {
        const int64_t T = std::min(opt_.n_ubatch, opt_.n_ctx);
        q_scaled_ = buffer(cfg_.n_head * cfg_.head_dim_k, T);
        sa_out_ = buffer(cfg_.n_embd, T);
    }

    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            GemmaLayer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "post_attention_norm.weight", &w.attn_post_norm),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm), load_ffn(il, &w.ffn),
                             load_blk(il, "post_ffw_norm.weight", &w.ffn_post_norm)})
                if (!s) return s;
            if (gemma3())
                for (Status s : {load_blk(il, "attn_k_norm.weight", &w.attn.k_norm),
                                 load_blk(il, "attn_q_norm.weight", &w.attn.q_norm)})
                    if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                         // token embeddings
        const float embd_scale = knobs_.embd_scale_skipped ? 1.0f : std::sqrt(static_cast<float>(cfg_.n_embd));
        inpL = build_scale(inpL, embd_scale, "inp_scaled", -1, buf_.ffn_inp);  // * sqrt(n_embd)
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const GemmaLayer& w = layers_[il];
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);       // rmsnorm * attn_norm
            Qkv qkv = build_qkv(cur, w.attn, il);                              // q, k, v in heads (gemma3: q/k norms); NEOX rope at the layer's base
            Tensor q = q_scaled_.reshaped(qkv.q.ne[0], qkv.q.ne[1], qkv.q.ne[2]);
            be_.unary(Op::kScale, qkv.q, q, gemma_q_scale(cfg_));             // q * gemma_q_scale (unnamed in llama.cpp)
            cb(q, "Qcur", il, Op::kScale);
            qkv.q = q;
            cur = build_attn(qkv, w.attn, il);                                 // softmax(cap(q k^T) + mask) v over the layer's cells, wo
            if (!build_out_rows(il, cur, inpL)) return;                        // last layer: only the output rows go on
            cur = build_norm(cur, w.attn_post_norm, "attn_post_norm", il);     // rmsnorm * attn_post_norm
            Tensor sa_out = build_add(cur, inpL, "sa_out", il, sa_out_);       // residual
            cur = build_norm(sa_out, w.ffn_norm, "ffn_norm", il);              // rmsnorm * ffn_norm
            cur = build_ffn(cur, w.ffn, il, "ffn_out", nullptr, FfnAct::kGelu);  // down(gelu(gate x) * up x)
            // llama.cpp gives this norm's RMS_NORM no layer ("norm"), and gemma2 its MUL neither.
            cur = build_post_ffw_norm(cur, w.ffn_post_norm, gemma3() ? il : -1);
            inpL = build_add(cur, sa_out, "l_out", il, buf_.x);                // residual
        }
        build_output(inpL);                                                    // rmsnorm * output_norm, lm_head (tied), gemma2's cap
    }

    Tensor build_post_ffw_norm(const Tensor& x, const Tensor& weight, int il) {
        Tensor norm = buf_.norm.reshaped(x.ne[0], x.ne[1]), cur = buf_.cur.reshaped(x.ne[0], x.ne[1]);
        be_.rms_norm(x, rms_eps_, norm);
        cb(norm, "norm", -1, Op::kRmsNorm);
        be_.mul_row(norm, weight, cur);
        if (knobs_.norm_weight_twice) be_.mul_row(cur, weight, cur);
        if (knobs_.norm_plus_one) be_.add(cur, norm, cur);
        cb(cur, "ffn_post_norm", il, Op::kMul);
        return cur;
    }

    std::vector<GemmaLayer> layers_;
    Tensor q_scaled_;  // (n_head * head_dim, ubatch)
    Tensor sa_out_;    // (n_embd, ubatch): the attention's residual sum
};

}  // namespace

std::unique_ptr<GraphBuilder> make_gemma_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<GemmaGraph>(model, backend, options);
}

}  // namespace ls
