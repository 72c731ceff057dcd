// qwen2 (Qwen2, Qwen2.5): the llama layer with biases on the q/k/v projections, NEOX RoPE (from
// the config) and the LM head tied to token_embd when output.weight is absent, as llama.cpp's
// llm_build_qwen2 strings them together.
#include "engine/forward/graph.h"

namespace ls {
namespace {

struct Qwen2Layer {
    Tensor attn_norm, ffn_norm;
    AttnWeights attn;  // with bq, bk, bv
    FfnWeights ffn;
};

class Qwen2Graph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Qwen2Layer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "ffn_norm.weight", &w.ffn_norm), load_ffn(il, &w.ffn)})
                if (!s) return s;
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Qwen2Layer& w = layers_[il];
            Tensor inpSA = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            const Qkv qkv = build_qkv(cur, w.attn, il);                   // (w x + b) for q, k, v; NEOX rope on q, k
            cur = build_attn(qkv, w.attn, il);                            // softmax(q k^T * scale + mask) v, wo
            if (!build_out_rows(il, cur, inpSA)) return;                  // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, inpSA, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            cur = build_ffn(cur, w.ffn, il);                              // down(silu(gate x) * up x)
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, tied lm_head
    }

    std::vector<Qwen2Layer> layers_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_qwen2_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Qwen2Graph>(model, backend, options);
}

}  // namespace ls
