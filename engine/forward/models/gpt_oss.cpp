// gpt-oss: attention with biases and a learned sink per head (a logit that joins every softmax
// without a value), the even layers over a sliding window, NEOX RoPE with YaRN on every layer; a
// norm after attention, then experts in every layer: a biased router, the top k of its logits
// weighted by a softmax over the k alone, biased up/gate/down products and the clamped SwiGLU
// (swiglu_oai: alpha 1.702, limit 7). The output rows are chosen after the last layer. As
// llama.cpp's llama_model_openai_moe::graph strings them together.
#include <fmt/format.h>

#include "engine/forward/graph.h"

namespace ls {
namespace {

struct GptOssLayer {
    Tensor attn_norm, attn_post_norm;
    AttnWeights attn;  // biases on q/k/v optional, on attn_output required; the sinks
    MoeWeights moe;    // with the router's and the experts' biases
};

class GptOssGraph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    std::vector<std::pair<Op, GgmlType>> arch_ops() const override {
        return {{Op::kSwigluOai, GgmlType::F32}, {Op::kAddId, GgmlType::F32}};
    }

    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            GptOssLayer& w = layers_[il];
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm), load_attn(il, &w.attn),
                             load_blk(il, "attn_sinks.weight", &w.attn.sinks),
                             load_blk(il, "post_attention_norm.weight", &w.attn_post_norm), load_moe(il, &w.moe)})
                if (!s) return s;
            if (w.attn.sinks.type != GgmlType::F32)
                return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor blk.{}.attn_sinks.weight is {}; ggml's "
                                                                    "softmax reads the sinks as f32",
                                                                    model_.path(), il, ggml_type_name(w.attn.sinks.type)));
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                       // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const GptOssLayer& w = layers_[il];
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);     // rmsnorm * attn_norm
            const Qkv qkv = build_qkv(cur, w.attn, il);                      // q, k, v (+ biases) in heads; NEOX rope, YaRN, the layer's base
            cur = build_attn(qkv, w.attn, il);                               // softmax(q k^T / sqrt(n_rot) + mask, sink) v over the layer's cells, wo + bo
            Tensor ffn_inp = build_add(cur, inpL, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.attn_post_norm, "attn_post_norm", il);  // rmsnorm * attn_post_norm
            cur = build_moe(cur, w.moe, il);                                 // biased router, top k, softmax of the k, biased experts, swiglu_oai
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);             // residual
        }
        if (n_out_rows_ == 0) return;  // no logits wanted from this ubatch
        if (n_out_rows_ < T_) {        // the output rows, after the last layer (an unnamed GET_ROWS)
            Tensor rows = buf_.out_x.reshaped(cfg_.n_embd, n_out_rows_);
            be_.get_rows(inpL, inp_out_ids_.reshaped(n_out_rows_), rows);
            inpL = rows;
        }
        build_output(inpL);  // rmsnorm * output_norm, lm_head
    }

    std::vector<GptOssLayer> layers_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_gpt_oss_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<GptOssGraph>(model, backend, options);
}

}  // namespace ls
