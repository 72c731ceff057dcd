// deepseek2 (DeepSeek-V2, DeepSeek-V2-Lite): multi-head latent attention (MLA) with YaRN RoPE on
// the rope part of each head, and a mixture of experts after the leading dense blocks, as
// llama.cpp's llm_build_deepseek2 strings them together. Events follow the order and names of
// llama.cpp's graph (its dumps), views and permutes included, so that every one pairs.
//
// MLA, per layer: q = wq x (or wq_b norm(wq_a x)), split per head into q_nope and q_pe;
// kv_cmpr_pe = wkv_a_mqa x, split into the latent kv_cmpr (normed) and one shared k_pe. q_pe and
// k_pe are roped. Then either
//   absorbed:   Q = [k_b^T q_nope, q_pe], K = [kv_cmpr, k_pe], V = kv_cmpr: one KV head over the
//               latent (MQA); the heads' outputs are decompressed by v_b afterwards;
//   unabsorbed: K = [k_nope, k_pe] and V per head decompressed from kv_cmpr (by attn_kv_b in the
//               legacy files, by k_b^T and v_b in the split ones): plain multi-head attention.
// The two are the same function of the weights; llama.cpp runs the first for files with
// attn_k_b/attn_v_b and the second for legacy attn_kv_b files. A form a file was not made for
// uses the missing weight transposed, in f32.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "engine/forward/graph.h"
#include "kernels/cpu/dequant.h"

namespace ls {
namespace {

struct Deepseek2Layer {
    Tensor attn_norm, ffn_norm, kv_a_norm, q_a_norm;
    Tensor wq, wq_a, wq_b;  // wq (no q compression) or wq_a -> q_a_norm -> wq_b
    Tensor wkv_a_mqa;       // {n_embd, kv_lora + rope}
    // Absorbed: k_b {nope, kv_lora, n_head} (q_nope -> latent) and v_b {kv_lora, v, n_head}
    // (latent -> v). Unabsorbed: kv_b {kv_lora, n_head * (nope + v)} (latent -> k_nope, v per
    // head), or per head k_b^T {kv_lora, nope, n_head} and v_b.
    Tensor wk_b, wv_b, wkv_b, wk_b_t;
    Tensor wo;
    FfnWeights ffn;                      // the dense blocks
    MoeWeights moe;                      // the routed experts
    FfnWeights shexp;                    // the shared experts
};

class Deepseek2Graph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

private:
    // ---- shapes
    int64_t H() const { return cfg_.n_head; }
    int64_t nope() const { return cfg_.qk_nope_dim(); }
    int64_t rope_dims() const { return cfg_.n_rot; }
    int64_t kv_lora() const { return cfg_.kv_lora_rank; }
    int64_t k_mla() const { return cfg_.head_dim_k_mla; }  // nope + rope
    int64_t v_mla() const { return cfg_.head_dim_v_mla; }
    bool absorbed() const {
        return opt_.mla == MlaForm::kAbsorbed || (opt_.mla == MlaForm::kAuto && cfg_.mla_split);
    }

    AttnDims attn_dims() const override {
        if (absorbed()) return {kv_lora() + rope_dims(), kv_lora(), 1};
        return {k_mla(), v_mla(), H()};
    }

    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Deepseek2Layer& w = layers_[il];
            for (auto [dst, name, matmul] : {std::tuple{&w.attn_norm, "attn_norm.weight", false},
                                             {&w.kv_a_norm, "attn_kv_a_norm.weight", false},
                                             {&w.wkv_a_mqa, "attn_kv_a_mqa.weight", true},
                                             {&w.wo, "attn_output.weight", true},
                                             {&w.ffn_norm, "ffn_norm.weight", false}})
                if (Status s = load_blk(il, name, dst, matmul); !s) return s;
            if (cfg_.q_lora_rank > 0) {
                for (auto [dst, name, matmul] : {std::tuple{&w.wq_a, "attn_q_a.weight", true},
                                                 {&w.q_a_norm, "attn_q_a_norm.weight", false},
                                                 {&w.wq_b, "attn_q_b.weight", true}})
                    if (Status s = load_blk(il, name, dst, matmul); !s) return s;
            } else if (Status s = load_blk(il, "attn_q.weight", &w.wq, true); !s) {
                return s;
            }
            if (Status s = load_mla(il, w); !s) return s;
            if (!cfg_.layer_is_moe(il)) {
                if (Status s = load_ffn(il, &w.ffn); !s) return s;
                continue;
            }
            if (Status s = load_moe(il, &w.moe); !s) return s;
            for (auto [dst, name, matmul] : {std::tuple{&w.shexp.gate, "ffn_gate_shexp.weight", true},
                                             {&w.shexp.up, "ffn_up_shexp.weight", true},
                                             {&w.shexp.down, "ffn_down_shexp.weight", true}})
                if (Status s = load_blk(il, name, dst, matmul); !s) return s;
        }
        return {};
    }

    // The attention weights of the form that runs: the file's own, or the missing one made by
    // transposing per head (f32).
    Status load_mla(int64_t il, Deepseek2Layer& w) {
        if (cfg_.mla_split) {
            if (Status s = load_blk(il, "attn_v_b.weight", &w.wv_b, true); !s) return s;
            if (absorbed()) return load_blk(il, "attn_k_b.weight", &w.wk_b, true);
            // k_b maps q_nope to the latent ({nope, kv_lora} per head); the keys need the way back.
            return transposed_heads(fmt::format("blk.{}.attn_k_b.weight", il), kv_lora(), nope(), kv_lora(), &w.wk_b_t);
        }
        if (Status s = load_blk(il, "attn_kv_b.weight", &w.wkv_b, true); !s) return s;
        if (!absorbed()) return {};
        // kv_b's rows per head: nope rows of k (latent -> k_nope), then v rows (latent -> v). The
        // absorbed query needs k's rows transposed; v's rows are v_b as they are.
        if (Status s = transposed_heads(fmt::format("blk.{}.attn_kv_b.weight", il), nope(), kv_lora(), nope() + v_mla(),
                                        &w.wk_b);
            !s)
            return s;
        w.wv_b = w.wkv_b;
        w.wv_b.ne[1] = v_mla(), w.wv_b.ne[2] = H();
        w.wv_b.nb[2] = w.wkv_b.nb[1] * static_cast<uint64_t>(nope() + v_mla());
        w.wv_b.data = static_cast<char*>(w.wkv_b.data) + w.wkv_b.nb[1] * static_cast<uint64_t>(nope());
        return {};
    }

    // Per head h, the `rows` rows of the weight `name` from row h * head_stride on (each `width`
    // long), transposed into an f32 tensor {rows, width, H}.
    Status transposed_heads(const std::string& name, int64_t rows, int64_t width, int64_t head_stride, Tensor* out) {
        auto checked = load(name, false);  // the layout's shape check
        if (!checked) return checked.error();
        const GgufTensorInfo* info = model_.find(name);
        const uint64_t row_bytes = checked.value().nb[1];
        std::vector<float> block(static_cast<size_t>(rows * width));
        std::vector<float> t(static_cast<size_t>(rows * width * H()));
        for (int64_t h = 0; h < H(); ++h) {
            const uint8_t* src = info->data + static_cast<uint64_t>(h * head_stride) * row_bytes;
            if (!dequantize_rows(info->type, src, row_bytes, block.data(), rows, width))
                return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {}: cannot decode its {} rows", model_.path(),
                                                                    name, ggml_type_name(info->type)));
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t c = 0; c < width; ++c) t[(h * width + c) * rows + r] = block[r * width + c];
        }
        *out = buffer(rows, width, H());
        be_.upload(out->data, t.data(), t.size() * sizeof(float));
        return {};
    }

    void allocate_arch_buffers() override {
        const int64_t T = std::min(opt_.n_ubatch, opt_.n_ctx), q_width = H() * k_mla();
        const int64_t wide = std::max({kv_lora(), v_mla(), k_mla(), nope()});
        if (cfg_.q_lora_rank > 0) {
            b_.q_a = buffer(cfg_.q_lora_rank, T), b_.q_a_norm = buffer(cfg_.q_lora_rank, T);
            b_.q_a_out = buffer(cfg_.q_lora_rank, T);
        }
        b_.q = buffer(q_width, T);
        b_.q_nope = buffer(nope(), H(), T), b_.q_nope_perm = buffer(nope(), T, H());
        b_.q_pe = buffer(rope_dims(), H(), T), b_.q_pe_rope = buffer(rope_dims(), H(), T);
        b_.head_out = buffer(wide, T, H()), b_.head_perm = buffer(wide, H(), T);
        b_.Q = buffer(std::max(kv_lora() + rope_dims(), k_mla()), H(), T);
        b_.kv_cmpr_pe = buffer(kv_lora() + rope_dims(), T);
        b_.kv_cmpr = buffer(kv_lora(), T), b_.kv_norm = buffer(kv_lora(), T), b_.kv_cmpr_n = buffer(kv_lora(), T);
        b_.k_pe = buffer(rope_dims(), 1, T), b_.k_pe_rope = buffer(rope_dims(), 1, T);
        b_.kv = buffer(H() * (nope() + v_mla()), T);
        b_.k_nope = buffer(nope(), H(), T), b_.V = buffer(v_mla(), H(), T), b_.v_view = buffer(v_mla(), H(), T);
        b_.K = buffer(std::max(kv_lora() + rope_dims(), k_mla()), H(), T);
        b_.attn_heads = buffer(wide, T, H());
        if (cfg_.n_expert <= 0) return;
        const int64_t n_sh = cfg_.n_ff_expert * cfg_.n_expert_shared;
        for (Tensor* t : {&b_.sh[0], &b_.sh[1], &b_.sh[2]}) *t = buffer(n_sh, T);
        b_.sh[3] = buffer(cfg_.n_embd, T);
        b_.ffn_out = buffer(cfg_.n_embd, T);
    }

    // ---- helpers

    // `view` copied into `buffer` (contiguous, same counts), announced as `name`.
    Tensor materialize(const Tensor& view, const Tensor& buffer, const char* name, int il, Op op) {
        Tensor out = buffer.reshaped(view.ne[0], view.ne[1], view.ne[2]);
        be_.copy(view, out);
        if (name) cb(out, name, il, op);
        return out;
    }

    // y[:, :, h] = w[:, :, h] x[:, :, h] for each head h: w {K, N, H} (slices of a weight), x {K,
    // T, H} or {K, T} shared by the heads, y {N, T, H}. ggml's batched MUL_MAT.
    void head_matmul(const Tensor& w, const Tensor& x, Tensor& y) {
        const int64_t K = w.ne[0], N = w.ne[1], T = x.ne[1];
        for (int64_t h = 0; h < H(); ++h) {
            Tensor wh = w;
            wh.ne[2] = 1;
            wh.data = static_cast<char*>(w.data) + static_cast<uint64_t>(h) * w.nb[2];
            const Tensor xh = make_tensor(x.f32() + (x.ne[2] > 1 ? h * K * T : 0), K, T);
            Tensor yh = make_tensor(y.f32() + h * N * T, N, T);
            be_.matmul(wh, xh, yh, opt_.mode);
        }
    }

    // Per-head window [first, first + n) of the rows of a {width * H, T} (or {width, H, T}) tensor.
    static Tensor head_slice(const Tensor& x, int64_t width, int64_t heads, int64_t first, int64_t n, int64_t T) {
        const uint64_t f = sizeof(float);
        return x.view({n, heads, T, 1}, {f, width * f, width * heads * f, width * heads * T * f}, first * f);
    }

    // ---- the layer

    Tensor build_q(const Tensor& cur, const Deepseek2Layer& w, int il) {
        const int64_t T = cur.ne[1];
        Tensor q = b_.q.reshaped(H() * k_mla(), T);
        if (cfg_.q_lora_rank > 0) {
            Tensor q_a = b_.q_a.reshaped(cfg_.q_lora_rank, T);
            be_.matmul(w.wq_a, cur, q_a, opt_.mode);
            cb(q_a, "q", il, Op::kMulMat);
            const Tensor qn = build_norm(q_a, w.q_a_norm, "q", il, b_.q_a_norm, b_.q_a_out);
            be_.matmul(w.wq_b, qn, q, opt_.mode);
        } else {
            be_.matmul(w.wq, cur, q, opt_.mode);
        }
        cb(q, "q", il, Op::kMulMat);
        q = q.reshaped(k_mla(), H(), T);
        cb(q, "q", il, Op::kReshape);
        return q;
    }

    // kv_cmpr_pe = wkv_a_mqa x; the latent kv_cmpr normed. Returns it; k_pe stays in kv_cmpr_pe.
    Tensor build_kv_cmpr(const Tensor& cur, const Deepseek2Layer& w, int il, Tensor* kv_cmpr_pe) {
        const int64_t T = cur.ne[1];
        *kv_cmpr_pe = b_.kv_cmpr_pe.reshaped(kv_lora() + rope_dims(), T);
        be_.matmul(w.wkv_a_mqa, cur, *kv_cmpr_pe, opt_.mode);
        cb(*kv_cmpr_pe, "kv_cmpr_pe", il, Op::kMulMat);
        const uint64_t f = sizeof(float), row = static_cast<uint64_t>(kv_lora() + rope_dims()) * f;
        const Tensor kv_cmpr = materialize(kv_cmpr_pe->view({kv_lora(), T, 1, 1}, {f, row, row * T, row * T}, 0),
                                           b_.kv_cmpr, "kv_cmpr", il, Op::kView);
        return build_norm(kv_cmpr, w.kv_a_norm, "kv_cmpr", il, b_.kv_norm, b_.kv_cmpr_n);
    }

    Tensor build_k_pe(const Tensor& kv_cmpr_pe, int il) {
        const int64_t T = kv_cmpr_pe.ne[1];
        const Tensor k_pe = materialize(head_slice(kv_cmpr_pe, kv_lora() + rope_dims(), 1, kv_lora(), rope_dims(), T),
                                        b_.k_pe, "k_pe", il, Op::kView);
        return build_rope(k_pe, b_.k_pe_rope, "k_pe", il);
    }

    // Absorbed MLA: MQA over the latent, then v_b per head.
    Tensor build_mla_absorbed(const Tensor& cur, const Deepseek2Layer& w, int il) {
        const int64_t T = cur.ne[1], L = kv_lora(), R = rope_dims();
        const Tensor q = build_q(cur, w, il);
        materialize(head_slice(q, k_mla(), H(), 0, nope(), T), b_.q_nope, "q_nope", il, Op::kView);
        const Tensor q_nope_perm = materialize(head_slice(q, k_mla(), H(), 0, nope(), T).permuted(0, 2, 1, 3),
                                               b_.q_nope_perm, "q_nope_perm", il, Op::kPermute);
        Tensor absorbed = b_.head_out.reshaped(L, T, H());
        head_matmul(w.wk_b, q_nope_perm, absorbed);
        cb(absorbed, "q_nope_absorbed", il, Op::kMulMat);
        const Tensor absorbed_perm = materialize(absorbed.permuted(0, 2, 1, 3), b_.head_perm, "q_nope_absorbed_perm", il,
                                                 Op::kPermute);
        const Tensor q_pe = materialize(head_slice(q, k_mla(), H(), nope(), R, T), b_.q_pe, "q_pe", il, Op::kView);
        const Tensor q_pe_roped = build_rope(q_pe, b_.q_pe_rope, "q_pe", il);
        Tensor Q = b_.Q.reshaped(L + R, H(), T);
        Tensor q_left = head_slice(Q, L + R, H(), 0, L, T), q_right = head_slice(Q, L + R, H(), L, R, T);
        be_.copy(absorbed_perm, q_left);
        be_.copy(q_pe_roped, q_right);
        cb(Q, "Qcur", il, Op::kConcat);

        Tensor kv_cmpr_pe;
        const Tensor kv_cmpr = build_kv_cmpr(cur, w, il, &kv_cmpr_pe);
        const Tensor V = kv_cmpr.reshaped(L, 1, T);
        cb(V, "Vcur", il, Op::kReshape);
        const Tensor k_pe = build_k_pe(kv_cmpr_pe, il);
        Tensor K = b_.K.reshaped(L + R, 1, T);
        Tensor k_left = head_slice(K, L + R, 1, 0, L, T), k_right = head_slice(K, L + R, 1, L, R, T);
        be_.copy(V, k_left);
        be_.copy(k_pe, k_right);
        cb(K, "Kcur", il, Op::kConcat);

        const bool flash = opt_.flash_attn && opt_.mode == MathMode::kLlama;
        Tensor fa_out = b_.head_perm.reshaped(L, H(), T);
        const Tensor kqv = build_attn_kqv({Q, K, V}, il, &fa_out);
        // The heads' latent outputs {kv_lora, T, H}, decompressed by v_b.
        Tensor heads = kqv;
        if (flash) heads = materialize(fa_out.permuted(0, 2, 1, 3), b_.attn_heads, nullptr, il, Op::kPermute);
        Tensor out = b_.head_out.reshaped(v_mla(), T, H());
        head_matmul(w.wv_b, heads, out);
        cb(out, flash ? "fattn_mla" : "kqv_mla", il, Op::kMulMat);
        Tensor kqv_out = buf_.kqv_out.reshaped(v_mla() * H(), T);
        be_.merge_heads(out, kqv_out);
        cb(kqv_out, "kqv_out", il, Op::kCont);
        Tensor attn_out = buf_.attn_out.reshaped(cfg_.n_embd, T);
        be_.matmul(w.wo, kqv_out, attn_out, opt_.mode);
        cb(attn_out, "attn_out", il, Op::kMulMat);
        return attn_out;
    }

    // Unabsorbed MLA: keys and values per head, then plain multi-head attention.
    Tensor build_mla_unabsorbed(const Tensor& cur, const Deepseek2Layer& w, int il) {
        const int64_t T = cur.ne[1], R = rope_dims(), N = nope(), Vd = v_mla();
        const Tensor q = build_q(cur, w, il);
        // Qcur: q with the rope part of each head rotated in place.
        Tensor Q = b_.Q.reshaped(k_mla(), H(), T);
        be_.copy(q, Q);
        const Tensor q_pe = materialize(head_slice(q, k_mla(), H(), N, R, T), b_.q_pe, nullptr, il, Op::kView);
        Tensor q_pe_roped = b_.q_pe_rope.reshaped(R, H(), T);
        be_.copy(q_pe, q_pe_roped);
        if (!knobs_.rope_skipped) be_.rope(q_pe_roped, inp_rope_pos_.reshaped(T), Tensor{}, rope_, opt_.mode);
        Tensor q_right = head_slice(Q, k_mla(), H(), N, R, T);
        be_.copy(q_pe_roped, q_right);
        cb(Q, "Qcur", il, Op::kRope);

        Tensor kv_cmpr_pe;
        const Tensor kv_cmpr = build_kv_cmpr(cur, w, il, &kv_cmpr_pe);
        Tensor V = b_.V.reshaped(Vd, H(), T), k_nope = b_.k_nope.reshaped(N, H(), T);
        if (!cfg_.mla_split) {
            Tensor kv = b_.kv.reshaped(H() * (N + Vd), T);
            be_.matmul(w.wkv_b, kv_cmpr, kv, opt_.mode);
            cb(kv, "kv", il, Op::kMulMat);
            materialize(head_slice(kv, N + Vd, H(), N, Vd, T), b_.v_view, "Vcur_view", il, Op::kView);
            V = materialize(head_slice(kv, N + Vd, H(), N, Vd, T), b_.V, "Vcur_cont", il, Op::kCont);
            k_nope = materialize(head_slice(kv, N + Vd, H(), 0, N, T), b_.k_nope, "k_nope_view", il, Op::kView);
        } else {
            // Decompressed per head from the latent: v_b and k_b transposed.
            Tensor heads = b_.head_out.reshaped(Vd, T, H());
            head_matmul(w.wv_b, kv_cmpr, heads);
            V = materialize(heads.permuted(0, 2, 1, 3), b_.V, "Vcur_cont", il, Op::kCont);
            heads = b_.head_out.reshaped(N, T, H());
            head_matmul(w.wk_b_t, kv_cmpr, heads);
            k_nope = materialize(heads.permuted(0, 2, 1, 3), b_.k_nope, "k_nope_view", il, Op::kView);
        }
        const Tensor k_pe = build_k_pe(kv_cmpr_pe, il);
        Tensor K = b_.K.reshaped(k_mla(), H(), T);
        Tensor k_left = head_slice(K, k_mla(), H(), 0, N, T), k_right = head_slice(K, k_mla(), H(), N, R, T);
        be_.copy(k_nope, k_left);
        // k_pe is shared by the heads: ggml's REPEAT, a zero head stride here.
        Tensor k_pe_heads = k_pe;
        k_pe_heads.ne[1] = H(), k_pe_heads.nb[1] = 0;
        be_.copy(k_pe_heads, k_right);
        cb(K, "Kcur", il, Op::kConcat);
        AttnWeights out;  // MLA's projections are its own; build_attn applies wo
        out.wo = w.wo;
        return build_attn({Q, K, V}, out, il);
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd();                                    // token embeddings
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Deepseek2Layer& w = layers_[il];
            Tensor inpSA = inpL;
            Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);  // rmsnorm * attn_norm
            cur = absorbed() ? build_mla_absorbed(cur, w, il)             // MQA over the latent, v_b
                             : build_mla_unabsorbed(cur, w, il);          // MHA on decompressed K, V
            if (!build_out_rows(il, cur, inpSA)) return;                  // last layer: only the output rows go on
            Tensor ffn_inp = build_add(cur, inpSA, "ffn_inp", il, buf_.ffn_inp);  // residual
            cur = build_norm(ffn_inp, w.ffn_norm, "ffn_norm", il);        // rmsnorm * ffn_norm
            if (!cfg_.layer_is_moe(il)) {
                cur = build_ffn(cur, w.ffn, il);                          // dense SwiGLU
            } else {
                const Tensor moe = build_moe(cur, w.moe, il);             // routed experts
                const Tensor shexp = build_ffn(cur, w.shexp, il, "ffn_shexp", b_.sh);  // shared experts
                cur = build_add(moe, shexp, "ffn_out", il, b_.ffn_out);
            }
            inpL = build_add(cur, ffn_inp, "l_out", il, buf_.x);          // residual
        }
        build_output(inpL);                                               // rmsnorm * output_norm, lm_head
    }

    std::vector<Deepseek2Layer> layers_;
    struct {
        Tensor q_a, q_a_norm, q_a_out, q, q_nope, q_nope_perm, q_pe, q_pe_rope, head_out, head_perm, Q;
        Tensor kv_cmpr_pe, kv_cmpr, kv_norm, kv_cmpr_n, k_pe, k_pe_rope, kv, k_nope, V, v_view, K, attn_heads;
        Tensor sh[4], ffn_out;  // the shared experts' gate, up, swiglu and output; their sum with the routed ones
    } b_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_deepseek2_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Deepseek2Graph>(model, backend, options);
}

}  // namespace ls
