// llama (Llama 2/3.x, TinyLlama, stories): pre-norm decoder layers of grouped-query attention with
// RoPE (Llama 3.1+'s rope_freqs factors when the file has them) and a SwiGLU feed-forward, with the
// optional biases llama.cpp's llama graph adds, or a mixture of experts in every layer (Mixtral), as
// its llm_build_llama strings them together.
#include "engine/forward/graph.h"

namespace ls {
namespace {

struct LlamaLayer {
    Tensor attn_norm, ffn_norm;
    AttnWeights attn;  // q/k/v/o biases when the file has them
    FfnWeights ffn;    // gate/up/down biases when the file has them
    MoeWeights moe;    // instead of ffn in a file with experts (Mixtral)
};

class LlamaGraph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            LlamaLayer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm),
                             cfg_.n_expert > 0 ? load_moe(il, &w.moe) : load_ffn(il, &w.ffn)})
                if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const LlamaLayer& w = layers_[il];
            Tensor inpSA = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            const Qkv qkv = build_qkv(cur, w.attn, il);                   // q, k, v in heads; rope on q and k
            cur = build_attn(qkv, w.attn, il);                            // softmax(q k^T * scale + mask) v, wo (* so, + bo)
            if (!build_out_rows(il, cur, inpSA)) return;                  // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, inpSA, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            if (cfg_.n_expert > 0)
                cur = build_moe(cur, w.moe, il);                          // softmax router, top k, renormalised, SwiGLU experts
            else
                cur = build_ffn(cur, w.ffn, il);                          // down(silu(gate x + bg) * (up x + bu)) + bd
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, lm_head
    }

    std::vector<LlamaLayer> layers_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_llama_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<LlamaGraph>(model, backend, options);
}

}  // namespace ls
