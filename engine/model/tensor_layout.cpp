// The tensor layout of each architecture (see tensor_layout.h).
#include "engine/model/tensor_layout.h"

#include <fmt/format.h>

namespace ls {
namespace {

using ExpectedTensor = TensorSpec;

class Expector {
public:
    explicit Expector(std::vector<ExpectedTensor>& out) : out_(out) {}
    void need(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), true, false}); }
    void maybe(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), false, false}); }
    void vocab(std::string name, std::vector<int64_t> ne, bool required) {
        out_.push_back({std::move(name), std::move(ne), required, true});
    }

private:
    std::vector<ExpectedTensor>& out_;
};

std::string blk(int64_t il, const char* what) { return fmt::format("blk.{}.{}", il, what); }

void expect_dense_ffn(Expector& e, int64_t il, int64_t n_embd, int64_t n_ff) {
    e.need(blk(il, "ffn_gate.weight"), {n_embd, n_ff});
    e.need(blk(il, "ffn_down.weight"), {n_ff, n_embd});
    e.need(blk(il, "ffn_up.weight"), {n_embd, n_ff});
}

void expect_moe_ffn(Expector& e, const ModelConfig& c, int64_t il) {
    e.need(blk(il, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
    e.need(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    e.need(blk(il, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
    e.need(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
}

}  // namespace

std::vector<TensorSpec> tensor_layout(const ModelConfig& c, int64_t n_vocab) {
    std::vector<ExpectedTensor> out;
    Expector e(out);
    e.vocab("token_embd.weight", {c.n_embd, n_vocab}, true);
    e.need("output_norm.weight", {c.n_embd});
    // llama and qwen2 tie the LM head to token_embd when output.weight is absent.
    e.vocab("output.weight", {c.n_embd, n_vocab}, c.arch == Arch::kDeepseek2);
    if (c.arch == Arch::kLlama) e.maybe("rope_freqs.weight", {c.n_rot / 2});

    for (int64_t il = 0; il < c.n_layer; ++il) {
        e.need(blk(il, "attn_norm.weight"), {c.n_embd});
        e.need(blk(il, "ffn_norm.weight"), {c.n_embd});
        if (c.arch == Arch::kDeepseek2) {
            int64_t q_width = c.n_head * c.head_dim_k_mla;
            if (c.q_lora_rank == 0) {
                e.need(blk(il, "attn_q.weight"), {c.n_embd, q_width});
            } else {
                e.need(blk(il, "attn_q_a_norm.weight"), {c.q_lora_rank});
                e.need(blk(il, "attn_q_a.weight"), {c.n_embd, c.q_lora_rank});
                e.need(blk(il, "attn_q_b.weight"), {c.q_lora_rank, q_width});
            }
            e.need(blk(il, "attn_kv_a_mqa.weight"), {c.n_embd, c.kv_lora_rank + c.n_rot});
            e.need(blk(il, "attn_kv_a_norm.weight"), {c.kv_lora_rank});
            if (c.mla_split) {
                e.need(blk(il, "attn_k_b.weight"), {c.qk_nope_dim(), c.kv_lora_rank, c.n_head});
                e.need(blk(il, "attn_v_b.weight"), {c.kv_lora_rank, c.head_dim_v_mla, c.n_head});
            } else {
                e.need(blk(il, "attn_kv_b.weight"), {c.kv_lora_rank, c.n_head * (c.qk_nope_dim() + c.head_dim_v_mla)});
            }
            e.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v_mla, c.n_embd});
            if (!c.layer_is_moe(il)) {
                expect_dense_ffn(e, il, c.n_embd, c.n_ff);
            } else {
                expect_moe_ffn(e, c, il);
                e.maybe(blk(il, "exp_probs_b.bias"), {c.n_expert});
                int64_t shared = c.n_ff_expert * c.n_expert_shared;
                e.need(blk(il, "ffn_gate_shexp.weight"), {c.n_embd, shared});
                e.need(blk(il, "ffn_down_shexp.weight"), {shared, c.n_embd});
                e.need(blk(il, "ffn_up_shexp.weight"), {c.n_embd, shared});
            }
            continue;
        }
        // llama and qwen2 attention: q/k/v projections, optional biases.
        e.need(blk(il, "attn_q.weight"), {c.n_embd, c.n_head * c.head_dim_k});
        e.need(blk(il, "attn_k.weight"), {c.n_embd, c.n_embd_k_gqa()});
        e.need(blk(il, "attn_v.weight"), {c.n_embd, c.n_embd_v_gqa()});
        e.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v, c.n_embd});
        e.maybe(blk(il, "attn_q.bias"), {c.n_head * c.head_dim_k});
        e.maybe(blk(il, "attn_k.bias"), {c.n_embd_k_gqa()});
        e.maybe(blk(il, "attn_v.bias"), {c.n_embd_v_gqa()});
        if (c.arch == Arch::kLlama) e.maybe(blk(il, "attn_output.bias"), {c.n_embd});
        if (c.arch == Arch::kLlama && c.n_expert > 0) expect_moe_ffn(e, c, il);
        else expect_dense_ffn(e, il, c.n_embd, c.n_ff);
    }
    return out;
}

const TensorSpec* find_tensor_spec(const std::vector<TensorSpec>& layout, const std::string& name) {
    for (const TensorSpec& t : layout)
        if (t.name == name) return &t;
    return nullptr;
}

}  // namespace ls
