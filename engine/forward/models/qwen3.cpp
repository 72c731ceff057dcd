// qwen3 (Qwen3 dense): the qwen2 layer without q/k/v biases but with each head of q and k
// RMS-normalised (its own weight) before NEOX RoPE; the head width is attention.key_length, so
// n_head * head_dim need not be n_embd. As llama.cpp's llm_build_qwen3 strings them together.
#include "engine/forward/graph.h"

namespace ls {
namespace {

struct Qwen3Layer {
    Tensor attn_norm, ffn_norm;
    AttnWeights attn;  // with q_norm, k_norm (and q/k/v biases when a file has them)
    FfnWeights ffn;
};

class Qwen3Graph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Qwen3Layer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "attn_k_norm.weight", &w.attn.k_norm),
                             load_blk(il, "attn_q_norm.weight", &w.attn.q_norm),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm), load_ffn(il, &w.ffn)})
                if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Qwen3Layer& w = layers_[il];
            Tensor inpSA = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            const Qkv qkv = build_qkv(cur, w.attn, il);                   // q, k, v in heads; rmsnorm * q_norm / k_norm per head; NEOX rope
            cur = build_attn(qkv, w.attn, il);                            // softmax(q k^T / sqrt(head_dim) + mask) v, wo
            if (!build_out_rows(il, cur, inpSA)) return;                  // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, inpSA, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            cur = build_ffn(cur, w.ffn, il);                              // down(silu(gate x) * up x)
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, lm_head (tied when no output.weight)
    }

    std::vector<Qwen3Layer> layers_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_qwen3_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Qwen3Graph>(model, backend, options);
}

}  // namespace ls
