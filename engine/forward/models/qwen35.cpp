// qwen35 (Qwen3.5): three of every four layers Gated DeltaNet, a linear attention with a recurrent
// state, the fourth gated full attention; every layer normalised before its mixer and after it
// (post_attention_norm, then the SwiGLU feed-forward). As llama.cpp's llama_model_qwen35::graph with
// the fused GATED_DELTA_NET its CPU backend runs for prompts and decoding alike:
//
// DeltaNet layer: q, k and v from one projection (linear_attn_qkv_mixed) go through a causal conv1d
// whose window starts with the layer's conv state (the last d_conv - 1 inputs it saw: conv_states,
// conv_input, conv_state_last is the new one) and SiLU; q and k are L2-normalised per head
// (RMS_NORM with eps / S, then * 1 / sqrt(S): q_conv_predelta, k_conv_predelta); the decay
// g = softplus(alpha + dt_bias) * A (A = -exp(A_log) as stored: a_softplus, gate) and
// beta = sigmoid(beta); the delta rule updates the layer's state {S, S, H_v} token by token
// (state_predelta before, new_state after, attn_output); the output is RMS-normalised per head,
// weighted, times silu(z) (the gate's projection), and projected by ssm_out (linear_attn_out).
//
// Attention layer: attn_q yields each head's query and its gate side by side (Qcur_full); the query
// is RMS-normalised (Qcur_normed), k too (Kcur_normed), both roped with IMROPE sections (a text
// token's four positions are its position, its position, its position and 0); after attention
// the heads are merged (attn_pregate) and multiplied by sigmoid(gate) (gate_sigmoid, attn_gated)
// before attn_output.
//
// The last layer runs every row; the output norm's rows that reach the logits are picked after it
// (h_nextn, then result_norm).
//
// qwen35moe: the same layers with a mixture-of-experts feed-forward (softmax router, the chosen
// weights renormalised) and one shared expert behind a sigmoid gate of its own.
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/forward/graph.h"

namespace ls {
namespace {

constexpr int64_t kDeltaChunk = 64;  // the chunked form's chunk (Hugging Face's chunk_size)

struct DeltaNetWeights {
    Tensor qkv, gate;         // attn_qkv {n_embd, conv channels}, attn_gate {n_embd, d_inner} (z)
    Tensor conv1d;            // ssm_conv1d {d_conv, conv channels}, f32
    Tensor dt_bias, a;        // ssm_dt.bias, ssm_a {H_v}
    Tensor beta, alpha;       // ssm_beta, ssm_alpha {n_embd, H_v}
    Tensor norm, out;         // ssm_norm {S}, ssm_out {d_inner, n_embd}
};

struct Qwen35Layer {
    Tensor attn_norm, attn_post_norm;
    bool recurrent = false;
    DeltaNetWeights dn;
    AttnWeights attn;  // wq {n_embd, 2 n_q}: each head's query then its gate
    FfnWeights ffn;    // qwen35; qwen35moe: the shared expert
    MoeWeights moe;    // qwen35moe: the routed experts
    Tensor shexp_gate; // qwen35moe: ffn_gate_inp_shexp {n_embd}, the shared expert's gate
};

class Qwen35Graph final : public GraphBuilder {
public:
    using GraphBuilder::GraphBuilder;

    // The conv and delta-rule states start at zero with every new sequence.
    void reset() override {
        GraphBuilder::reset();
        for (const std::vector<Tensor>* states : {&conv_state_, &ssm_state_})
            for (const Tensor& s : *states)
                if (s.data) {
                    const std::vector<float> zeros(static_cast<size_t>(s.n_elements()), 0.0f);
                    be_.upload(s.data, zeros.data(), zeros.size() * sizeof(float));
                }
    }

private:
    std::vector<std::pair<Op, GgmlType>> arch_ops() const override {
        return {{Op::kScale, GgmlType::F32},    {Op::kSigmoid, GgmlType::F32},       {Op::kSilu, GgmlType::F32},
                {Op::kSoftplus, GgmlType::F32}, {Op::kSsmConv, GgmlType::F32},       {Op::kGatedDeltaNet, GgmlType::F32}};
    }

    void allocate_arch_buffers() override {
        const int64_t T = std::min(opt_.n_ubatch, opt_.n_ctx);
        const int64_t S = cfg_.ssm_d_state, H_k = cfg_.ssm_n_k_heads, H_v = cfg_.ssm_n_v_heads;
        const int64_t C = cfg_.ssm_conv_channels(), d_conv = cfg_.ssm_d_conv, d_inner = cfg_.ssm_d_inner;
        const int64_t n_q = cfg_.n_head * cfg_.head_dim_k;
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            const bool recurrent = cfg_.layer_is_recurrent(il);
            conv_state_.push_back(recurrent ? buffer(d_conv - 1, C) : Tensor{});
            ssm_state_.push_back(recurrent ? buffer(S, S, H_v) : Tensor{});
        }
        qkv_mixed_ = buffer(C, T), qkv_t_ = buffer(T, C), conv_input_ = buffer(d_conv - 1 + T, C);
        conv_out_ = buffer(C, T), conv_silu_ = buffer(C, T);
        q_conv_ = buffer(S, H_k, T), q_l2_ = buffer(S, H_k, T), q_pre_ = buffer(S, H_k, T);
        k_conv_ = buffer(S, H_k, T), k_l2_ = buffer(S, H_k, T), k_pre_ = buffer(S, H_k, T);
        v_pre_ = buffer(S, H_v, T), q_rep_ = buffer(S, H_v, T), k_rep_ = buffer(S, H_v, T);
        alpha_ = buffer(H_v, T), alpha_b_ = buffer(H_v, T), a_softplus_ = buffer(H_v, T), gate_ = buffer(H_v, T);
        beta_ = buffer(H_v, T), beta_sigmoid_ = buffer(H_v, T);
        dn_out_ = buffer(S, H_v, T), dn_norm_ = buffer(S, H_v, T), dn_normed_ = buffer(S, H_v, T);
        z_ = buffer(d_inner, T), z_silu_ = buffer(d_inner, T), dn_gated_ = buffer(d_inner, T);
        q_full_ = buffer(2 * n_q, T), attn_gate_ = buffer(n_q, T), gate_sigmoid_ = buffer(n_q, T);
        attn_gated_ = buffer(n_q, T), pregate_ = buffer(n_q, T), mixer_out_ = buffer(cfg_.n_embd, T);
        attn_residual_ = buffer(cfg_.n_embd, T);
        if (cfg_.n_expert > 0) {
            shexp_gate_buf_ = buffer(cfg_.n_ff_shexp, T), shexp_up_ = buffer(cfg_.n_ff_shexp, T);
            shexp_swiglu_ = buffer(cfg_.n_ff_shexp, T), shexp_out_ = buffer(cfg_.n_embd, T);
            shared_gate_ = buffer(1, T), shared_gate_sigmoid_ = buffer(1, T), shexp_gated_ = buffer(cfg_.n_embd, T);
        }
        // IMROPE: a text token's fourth position is 0; the pairs its sections give that position
        // keep angle 0 (imrope_text_factors; the fault: the sections read in reverse order).
        int sections[4];
        for (int i = 0; i < 4; ++i) sections[i] = cfg_.rope_sections[knobs_.imrope_sections_reversed ? 3 - i : i];
        const std::vector<float> factors = imrope_text_factors(sections, cfg_.n_rot);
        if (!factors.empty()) {
            rope_freqs_ = buffer(static_cast<int64_t>(factors.size()));
            be_.upload(rope_freqs_.data, factors.data(), factors.size() * sizeof(float));
        }
    }

    Status load_layer_weights() override {
        layers_.resize(cfg_.n_layer);
        for (int64_t il = 0; il < cfg_.n_layer; ++il) {
            Qwen35Layer& w = layers_[il];
            w.recurrent = cfg_.layer_is_recurrent(il);
            for (Status s : {load_blk(il, "attn_norm.weight", &w.attn_norm),
                             load_blk(il, "post_attention_norm.weight", &w.attn_post_norm)})
                if (!s) return s;
            if (cfg_.n_expert > 0) {
                for (Status s : {load_moe(il, &w.moe), load_blk(il, "ffn_gate_inp_shexp.weight", &w.shexp_gate, true),
                                 load_blk(il, "ffn_gate_shexp.weight", &w.ffn.gate, true),
                                 load_blk(il, "ffn_up_shexp.weight", &w.ffn.up, true),
                                 load_blk(il, "ffn_down_shexp.weight", &w.ffn.down, true)})
                    if (!s) return s;
            } else if (Status s = load_ffn(il, &w.ffn); !s) {
                return s;
            }
            if (w.recurrent) {
                DeltaNetWeights& d = w.dn;
                for (Status s : {load_blk(il, "attn_qkv.weight", &d.qkv, true), load_blk(il, "attn_gate.weight", &d.gate, true),
                                 load_blk(il, "ssm_conv1d.weight", &d.conv1d), load_blk(il, "ssm_dt.bias", &d.dt_bias),
                                 load_blk(il, "ssm_a", &d.a), load_blk(il, "ssm_beta.weight", &d.beta, true),
                                 load_blk(il, "ssm_alpha.weight", &d.alpha, true), load_blk(il, "ssm_norm.weight", &d.norm),
                                 load_blk(il, "ssm_out.weight", &d.out, true)})
                    if (!s) return s;
                // ggml's SSM_CONV reads its taps as f32 (llama-quantize keeps them so).
                if (d.conv1d.type != GgmlType::F32)
                    return make_error(ErrorCode::kBadInput,
                                      fmt::format("{}: tensor blk.{}.ssm_conv1d.weight is {}; ggml's SSM_CONV needs f32 taps",
                                                  model_.path(), il, ggml_type_name(d.conv1d.type)));
            } else {
                for (Status s : {load_blk(il, "attn_q.weight", &w.attn.wq, true), load_blk(il, "attn_k.weight", &w.attn.wk, true),
                                 load_blk(il, "attn_v.weight", &w.attn.wv, true),
                                 load_blk(il, "attn_output.weight", &w.attn.wo, true),
                                 load_blk(il, "attn_q_norm.weight", &w.attn.q_norm),
                                 load_blk(il, "attn_k_norm.weight", &w.attn.k_norm)})
                    if (!s) return s;
            }
        }
        return {};
    }

    void build_graph() override {
        Tensor inpL = build_inp_embd("model.input_embed");
        for (int il = 0; il < static_cast<int>(cfg_.n_layer); ++il) {
            const Qwen35Layer& w = layers_[il];
            const Tensor cur = build_norm(inpL, w.attn_norm, "attn_norm", il);
            const Tensor mixed = w.recurrent ? build_delta_net(cur, w.dn, il) : build_gated_attention(cur, w.attn, il);
            const Tensor residual = build_add(mixed, inpL, "attn_residual", il, attn_residual_);
            const Tensor post = build_norm(residual, w.attn_post_norm, "attn_post_norm", il);
            const Tensor ffn = cfg_.n_expert > 0 ? build_moe_shared(post, w, il) : build_ffn(post, w.ffn, il);
            inpL = build_add(ffn, residual, "l_out", il, buf_.x);
        }
        build_output_all_rows(inpL, "h_nextn");  // every row normed, then the wanted ones picked
    }

    // qwen35moe's feed-forward: the routed experts (ffn_moe_out), plus the shared expert
    // (ffn_shexp) times sigmoid of its gate's one value per token (shared_expert_gate,
    // shared_expert_gate_sigmoid, ffn_shexp_gated), summed (ffn_out).
    Tensor build_moe_shared(const Tensor& cur, const Qwen35Layer& w, int il) {
        const int64_t T = cur.ne[1];
        const Tensor moe = build_moe(cur, w.moe, il);
        const Tensor buffers[4] = {shexp_gate_buf_, shexp_up_, shexp_swiglu_, shexp_out_};
        const Tensor shexp = build_ffn(cur, w.ffn, il, "ffn_shexp", buffers);
        Tensor gate = cols(shared_gate_, T), gate_sig = cols(shared_gate_sigmoid_, T);
        be_.matmul(w.shexp_gate.reshaped(cfg_.n_embd, 1), cur, gate, opt_.mode);
        cb(gate, "shared_expert_gate", il, Op::kMulMat);
        be_.unary(Op::kSigmoid, gate, gate_sig);
        cb(gate_sig, "shared_expert_gate_sigmoid", il, Op::kSigmoid);
        Tensor gated = cols(shexp_gated_, T);
        be_.binary(Op::kMul, shexp, gate_sig, gated);
        cb(gated, "ffn_shexp_gated", il, Op::kMul);
        return build_add(moe, gated, "ffn_out", il, buf_.ffn_out);
    }

    // The first n columns of an arch buffer.
    static Tensor cols(const Tensor& b, int64_t n) { return b.reshaped(b.ne[0], n); }
    // A copy of a strided view into `buf` (shape ne), announced as `name`.
    Tensor gather(const Tensor& src, const int64_t (&ne)[4], const uint64_t (&nb)[4], uint64_t offset, const Tensor& buf,
                  const char* name, int il, Op op) {
        Tensor out = buf.reshaped(ne[0], ne[1], ne[2], ne[3]);
        be_.copy(src.view(ne, nb, offset), out);
        cb(out, name, il, op);
        return out;
    }

    Tensor build_delta_net(const Tensor& cur, const DeltaNetWeights& w, int il) {
        const MathMode mode = opt_.mode;
        const int64_t T = cur.ne[1], S = cfg_.ssm_d_state, H_k = cfg_.ssm_n_k_heads, H_v = cfg_.ssm_n_v_heads;
        const int64_t C = cfg_.ssm_conv_channels(), d_conv = cfg_.ssm_d_conv, key_dim = cfg_.ssm_key_dim();
        const uint64_t f = sizeof(float);
        Tensor& conv_state = conv_state_[il];
        Tensor& state = ssm_state_[il];
        cb(conv_state.reshaped(conv_state.n_elements()), "conv_states", il, Op::kGetRows);
        cb(conv_state, "conv_states_reshaped", il, Op::kReshape);
        // q, k and v in one product, then each channel's window: its conv state, then this ubatch.
        Tensor mixed = cols(qkv_mixed_, T);
        be_.matmul(w.qkv, cur, mixed, mode);
        cb(mixed, "linear_attn_qkv_mixed", il, Op::kMulMat);
        cb(mixed, "linear_attn_qkv_mixed", il, Op::kReshape);
        const Tensor transposed = gather(mixed, {T, C, 1, 1}, {C * f, f, C * f * T, C * f * T}, 0, qkv_t_,
                                         "qkv_mixed_transposed", il, Op::kTranspose);
        Tensor conv_input = conv_input_.reshaped(d_conv - 1 + T, C);
        const uint64_t row = conv_input.nb[1];
        Tensor window_state = conv_input.view({d_conv - 1, C, 1, 1}, {f, row, row * C, row * C}, 0);
        Tensor window_new = conv_input.view({T, C, 1, 1}, {f, row, row * C, row * C}, (d_conv - 1) * f);
        be_.copy(conv_state, window_state);
        be_.copy(transposed, window_new);
        cb(conv_input, "conv_input", il, Op::kConcat);
        // The new conv state: each channel's last d_conv - 1 inputs (the faults: none, or its first).
        const uint64_t keep_from = knobs_.conv_state_first ? 0 : T * f;
        if (!knobs_.conv_state_frozen)
            be_.copy(conv_input.view({d_conv - 1, C, 1, 1}, {f, row, row * C, row * C}, keep_from), conv_state);
        cb(conv_state, "conv_state_last", il, Op::kView);
        Tensor conv_out = cols(conv_out_, T), conv_silu = cols(conv_silu_, T);
        be_.ssm_conv(conv_input, w.conv1d, conv_out);
        cb(conv_out, "conv_output_raw", il, Op::kSsmConv);
        be_.silu(conv_out, conv_silu, mode);
        cb(conv_silu, "conv_output_silu", il, Op::kSilu);
        // q, k and v as views of the channels; q and k L2-normalised per head.
        const uint64_t tok = C * f;
        auto l2 = [&](uint64_t offset, const Tensor& view_buf, const Tensor& norm_buf, const Tensor& out_buf, const char* view_name,
                      const char* out_name) {
            const Tensor heads = gather(conv_silu, {S, H_k, T, 1}, {f, S * f, tok, tok * T}, offset, view_buf, view_name, il, Op::kView);
            Tensor normed = norm_buf.reshaped(S, H_k, T), out = out_buf.reshaped(S, H_k, T);
            be_.rms_norm(heads, rms_eps_ / static_cast<float>(S), normed);
            be_.unary(Op::kScale, normed, out, 1.0f / std::sqrt(static_cast<float>(S)));
            cb(out, out_name, il, Op::kScale);
            return out;
        };
        const Tensor q = l2(0, q_conv_, q_l2_, q_pre_, "q_conv", "q_conv_predelta");
        const Tensor k = l2(key_dim * f, k_conv_, k_l2_, k_pre_, "k_conv", "k_conv_predelta");
        const Tensor v = gather(conv_silu, {S, H_v, T, 1}, {f, S * f, tok, tok * T}, 2 * key_dim * f, v_pre_, "v_conv_predelta",
                                il, Op::kView);
        // The decay gate softplus(alpha + dt_bias) * A and beta = sigmoid(beta).
        Tensor alpha = cols(alpha_, T), alpha_b = cols(alpha_b_, T), a_sp = cols(a_softplus_, T), gate = cols(gate_, T);
        be_.matmul(w.alpha, cur, alpha, mode);
        cb(alpha, "alpha", il, Op::kMulMat);
        cb(alpha, "alpha", il, Op::kReshape);
        be_.add(alpha, w.dt_bias, alpha_b);
        cb(alpha_b, "alpha", il, Op::kAdd);
        be_.unary(Op::kSoftplus, alpha_b, a_sp);
        cb(a_sp, "a_softplus", il, Op::kSoftplus);
        be_.mul_row(a_sp, w.a, gate);
        if (knobs_.decay_sign_flipped) be_.unary(Op::kScale, gate, gate, -1.0f);  // the fault: A = exp(A_log)
        cb(gate, "gate", il, Op::kMul);
        Tensor beta = cols(beta_, T), beta_sig = cols(beta_sigmoid_, T);
        be_.matmul(w.beta, cur, beta, mode);
        cb(beta, "beta", il, Op::kMulMat);
        cb(beta.reshaped(1, H_v, T), "beta", il, Op::kReshape);
        be_.unary(Op::kSigmoid, beta, beta_sig);
        cb(beta_sig.reshaped(1, H_v, T), "beta_sigmoid", il, Op::kSigmoid);
        // The delta rule over the layer's state, token by token.
        cb(state, "state_predelta", il, Op::kReshape);
        Tensor out = dn_out_.reshaped(S, H_v, T);
        if (knobs_.delta_heads_interleaved) {
            // The fault: value head h reads q/k head h / (H_v / H_k); the op, given one q/k head per
            // value head, reads head h.
            const Tensor q_rep = repeat_interleaved(q, q_rep_, T), k_rep = repeat_interleaved(k, k_rep_, T);
            be_.gated_delta_net(q_rep, k_rep, v, gate, beta_sig, state, out, mode);
        } else if (T > 1 && (opt_.delta_chunked || knobs_.delta_chunk_no_decay)) {
            be_.gated_delta_net_chunked(q, k, v, gate, beta_sig, state, out, kDeltaChunk, !knobs_.delta_chunk_no_decay);
        } else {
            be_.gated_delta_net(q, k, v, gate, beta_sig, state, out, mode);
        }
        cb(state, "new_state", il, Op::kView);
        cb(out, "attn_output", il, Op::kView);
        // RMS norm per head, weighted, times silu(z).
        Tensor norm = dn_norm_.reshaped(S, H_v, T), normed = dn_normed_.reshaped(S, H_v, T);
        Tensor z = cols(z_, T), z_silu = cols(z_silu_, T), gated = cols(dn_gated_, T);
        if (knobs_.gate_before_norm) {
            // The fault: rms_norm(out * silu(z)) * w.
            be_.matmul(w.gate, cur, z, mode);
            be_.silu(z, z_silu, mode);
            be_.binary(Op::kMul, out.reshaped(z.ne[0], T), z_silu, gated);
            be_.rms_norm(gated.reshaped(S, H_v, T), rms_eps_, norm);
            cb(norm, "norm", il, Op::kRmsNorm);
            cb(z, "z", il, Op::kMulMat);
            Tensor heads = gated.reshaped(S, H_v, T);
            be_.mul_row(norm, w.norm, heads);
        } else {
            be_.rms_norm(out, rms_eps_, norm);
            cb(norm, "norm", il, Op::kRmsNorm);
            be_.mul_row(norm, w.norm, normed);
            be_.matmul(w.gate, cur, z, mode);
            cb(z, "z", il, Op::kMulMat);
            be_.silu(z, z_silu, mode);
            be_.binary(Op::kMul, normed.reshaped(z.ne[0], T), z_silu, gated);
        }
        cb(gated, "final_output", il, Op::kReshape);
        Tensor y = cols(mixer_out_, T);
        be_.matmul(w.out, gated, y, mode);
        cb(y, "linear_attn_out", il, Op::kMulMat);
        return y;
    }

    // q or k {S, H_k, T} with each head repeated H_v / H_k times in a row: {S, H_v, T}.
    Tensor repeat_interleaved(const Tensor& x, const Tensor& buf, int64_t T) {
        const int64_t S = x.ne[0], H_k = x.ne[1], r = cfg_.ssm_n_v_heads / H_k;
        Tensor out = buf.reshaped(S, H_k * r, T);
        const uint64_t f = sizeof(float);
        for (int64_t j = 0; j < r; ++j) {
            Tensor dst = out.view({S, H_k, T, 1}, {f, r * S * f, out.nb[2], out.nb[2] * T}, j * S * f);
            be_.copy(x, dst);
        }
        return out;
    }

    Tensor build_gated_attention(const Tensor& cur, const AttnWeights& w, int il) {
        const MathMode mode = opt_.mode;
        const int64_t T = cur.ne[1], hd = cfg_.head_dim_k, n_head = cfg_.n_head, n_kv = cfg_.n_head_kv, n_q = n_head * hd;
        const uint64_t f = sizeof(float), tok = 2 * n_q * f;
        // Each head's query and gate side by side.
        Tensor q_full = cols(q_full_, T);
        be_.matmul(w.wq, cur, q_full, mode);
        cb(q_full, "Qcur_full", il, Op::kMulMat);
        Tensor q = gather(q_full, {hd, n_head, T, 1}, {f, 2 * hd * f, tok, tok * T}, 0, buf_.q, "Qcur_reshaped", il, Op::kView);
        q = build_norm(q, w.q_norm, "Qcur_normed", il, buf_.q_norm, buf_.q_normed);
        Qkv qkv;
        qkv.q = build_rope(q, buf_.q_rope, "Qcur", il);
        Tensor v = cols(buf_.v, T);
        be_.matmul(w.wv, cur, v, mode);
        cb(v, "Vcur", il, Op::kMulMat);
        qkv.v = v.reshaped(hd, n_kv, T);
        cb(qkv.v, "Vcur", il, Op::kReshape);
        Tensor k = cols(buf_.k, T);
        be_.matmul(w.wk, cur, k, mode);
        cb(k, "Kcur", il, Op::kMulMat);
        k = build_norm(k.reshaped(hd, n_kv, T), w.k_norm, "Kcur_normed", il, buf_.k_norm, buf_.k_normed);
        qkv.k = build_rope(k, buf_.k_rope, "Kcur", il);
        // Attention, the heads merged, times sigmoid(gate).
        Tensor pregate = cols(pregate_, T);
        Tensor fa_out = pregate.reshaped(hd, n_head, T);
        const Tensor kqv = build_attn_kqv(qkv, il, &fa_out);
        if (!(opt_.flash_attn && mode == MathMode::kLlama)) be_.merge_heads(kqv, pregate);
        cb(pregate, "attn_pregate", il, Op::kCont);
        Tensor gate = attn_gate_.reshaped(hd, n_head, T);
        be_.copy(q_full.view({hd, n_head, T, 1}, {f, 2 * hd * f, tok, tok * T}, hd * f), gate);
        gate = gate.reshaped(n_q, T);
        cb(gate, "gate_reshaped", il, Op::kCont);
        Tensor gate_sig = cols(gate_sigmoid_, T), gated = cols(attn_gated_, T);
        be_.unary(Op::kSigmoid, gate, gate_sig);
        cb(gate_sig, "gate_sigmoid", il, Op::kSigmoid);
        be_.binary(Op::kMul, pregate, gate_sig, gated);
        cb(gated, "attn_gated", il, Op::kMul);
        Tensor y = cols(mixer_out_, T);
        be_.matmul(w.wo, gated, y, mode);
        cb(y, "attn_output", il, Op::kMulMat);
        return y;
    }

    std::vector<Qwen35Layer> layers_;
    std::vector<Tensor> conv_state_, ssm_state_;  // per layer: {d_conv - 1, channels}, {S, S, H_v}; none on attention layers
    Tensor qkv_mixed_, qkv_t_, conv_input_, conv_out_, conv_silu_;
    Tensor q_conv_, q_l2_, q_pre_, k_conv_, k_l2_, k_pre_, v_pre_, q_rep_, k_rep_;
    Tensor alpha_, alpha_b_, a_softplus_, gate_, beta_, beta_sigmoid_;
    Tensor dn_out_, dn_norm_, dn_normed_, z_, z_silu_, dn_gated_;
    Tensor q_full_, attn_gate_, gate_sigmoid_, attn_gated_, pregate_;
    Tensor mixer_out_, attn_residual_;
    Tensor shexp_gate_buf_, shexp_up_, shexp_swiglu_, shexp_out_, shared_gate_, shared_gate_sigmoid_, shexp_gated_;
};

}  // namespace

std::unique_ptr<GraphBuilder> make_qwen35_graph(const Model& model, Backend& backend, const ForwardOptions& options) {
    return std::make_unique<Qwen35Graph>(model, backend, options);
}

}  // namespace ls
