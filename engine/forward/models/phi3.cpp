// phi3 (Phi-3, Phi-3.5, Phi-4-mini): a fused attn_qkv (Q, K and V are views of one product), NEOX
// rope over rope.dimension_count dims (partial for Phi-4-mini) with LongRoPE's short or long
// frequency factors chosen by the context size, the roped Q scaled by 1/sqrt(head_dim) before
// attention (kq scale 1), and one up projection for gate and up (ggml's one-operand SWIGLU). The
// attention residual is unnamed in llama.cpp (our ffn_inp). As llama.cpp's llm_build_phi3.
#include "engine/forward/graph.h"

namespace ls {
namespace {

struct Phi3Layer {
    Tensor attn_norm, ffn_norm;
    AttnWeights attn;  // wqkv (+ bqkv), or wq/wk/wv; wo
    Tensor ffn_up;     // {n_embd, 2 n_ff}: gate rows, then up rows
    Tensor ffn_down;
};

class Phi3Graph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    std::vector<std::pair<Op, GgmlType>> arch_ops() const override { return {{Op::kScale, GgmlType::F32}}; }
    void allocate_arch_buffers() override { q_scaled_ = buffer(cfg_.n_head * cfg_.head_dim_k, std::min(opt_.n_ubatch, opt_.n_ctx)); }

    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Phi3Layer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm), load_blk(il, "ffn_down.weight", &w.ffn_down, true),
                             load_blk(il, "ffn_up.weight", &w.ffn_up, true)})
                if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Phi3Layer& w = layers_[il];
            Tensor residual = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            Qkv qkv = build_qkv(cur, w.attn, il);                         // q, k, v views of wqkv x; NEOX rope (LongRoPE factors)
            Tensor q = q_scaled_.reshaped(qkv.q.ne[0], qkv.q.ne[1], qkv.q.ne[2]);
            be_.unary(Op::kScale, qkv.q, q, phi3_q_scale(cfg_));         // q / sqrt(head_dim)
            cb(q, "Qcur", il, Op::kScale);
            qkv.q = q;
            cur = build_attn(qkv, w.attn, il);                            // softmax(q k^T + mask) v, wo
            if (!build_out_rows(il, cur, residual)) return;               // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, residual, "ffn_inp", il, buf_.ffn_inp);  // residual (unnamed in llama.cpp)
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            cur = build_ffn_fused_up(cur, w.ffn_up, w.ffn_down, il);      // down(silu(up x [:n_ff]) * up x [n_ff:])
            inpL = build_add(ffn_inp, cur, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, lm_head
    }

    std::vector<Phi3Layer> layers_;
    Tensor q_scaled_;  // (n_head * head_dim, ubatch)
};

}  // namespace

std::unique_ptr<GraphBuilder> make_phi3_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Phi3Graph>(model, backend, options);
}

}  // namespace ls
