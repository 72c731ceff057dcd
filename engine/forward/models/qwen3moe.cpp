// qwen3moe (Qwen3-30B-A3B, Qwen3-235B-A22B): qwen3's attention (per-head q/k RMS norms before
// NEOX RoPE) with every feed-forward a mixture of experts: a softmax router, the top k experts,
// their weights renormalised to sum 1, no shared experts. As llama.cpp's llm_build_qwen3moe
// strings them together.
#include "engine/forward/graph.h"

namespace ls {
namespace {

struct Qwen3MoeLayer {
    Tensor attn_norm, ffn_norm;
    AttnWeights attn;  // with q_norm, k_norm (and q/k/v biases when a file has them)
    MoeWeights moe;
};

class Qwen3MoeGraph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Qwen3MoeLayer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "attn_k_norm.weight", &w.attn.k_norm),
                             load_blk(il, "attn_q_norm.weight", &w.attn.q_norm),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm), load_moe(il, &w.moe)})
                if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Qwen3MoeLayer& w = layers_[il];
            Tensor inpSA = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            const Qkv qkv = build_qkv(cur, w.attn, il);                   // q, k, v in heads; rmsnorm * q_norm / k_norm per head; NEOX rope
            cur = build_attn(qkv, w.attn, il);                            // softmax(q k^T / sqrt(head_dim) + mask) v, wo
            if (!build_out_rows(il, cur, inpSA)) return;                  // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, inpSA, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            cur = build_moe(cur, w.moe, il);                              // softmax router, top k, renormalised, SwiGLU experts
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, lm_head (tied when no output.weight)
    }

    std::vector<Qwen3MoeLayer> layers_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_qwen3moe_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Qwen3MoeGraph>(model, backend, options);
}

}  // namespace ls
