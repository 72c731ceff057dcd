// The llama / qwen2 forward pass:
//   embd -> per layer: rmsnorm -> q,k,v (+bias) -> rope -> KV cache -> softmax(q k^T * scale + mask) v
//   -> wo -> residual -> rmsnorm -> swiglu ffn -> residual; then rmsnorm -> lm_head.
// Every intermediate is announced under llama.cpp's name, in llama.cpp's graph order.
#include <fmt/format.h>

#include <cmath>
#include <map>

#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/dequant.h"
#include "engine/forward/forward.h"

namespace ls {
namespace {

struct LayerWeights {
    Tensor attn_norm, wq, wk, wv, wo;
    Tensor bq, bk, bv;  // qwen2 only (data == nullptr when absent)
    Tensor ffn_norm, w_gate, w_up, w_down;
};

// Preallocated activations, sized for n_ubatch tokens. Shapes in ggml order.
struct RunState {
    Tensor x;         // (n_embd, T) residual stream
    Tensor norm;      // (n_embd, T) rmsnorm without weight
    Tensor cur;       // (n_embd, T) normed * weight
    Tensor q, q_b, q_rope;  // (n_head * head_dim, T): projection, + bias, roped copy
    Tensor k, k_b, k_rope;  // (n_head_kv * head_dim, T)
    Tensor v, v_b;          // (n_head_kv * head_dim_v, T)
    Tensor kq, kq_soft_max; // (n_ctx, T, n_head)
    Tensor kqv;             // (head_dim_v, T, n_head)
    Tensor kqv_out;         // (n_head * head_dim_v, T)
    Tensor attn_out;        // (n_embd, T)
    Tensor out_attn, out_x; // (n_embd, n_outputs): the last layer's output rows
    Tensor ffn_inp;         // (n_embd, T)
    Tensor gate, up, swiglu;// (n_ff, T)
    Tensor ffn_out;         // (n_embd, T)
    Tensor logits;          // (n_vocab, T)
    std::vector<Tensor> cache_k, cache_v;  // per layer (head_dim, n_head_kv, n_ctx)
};

class LlamaForward final : public ForwardPass {
public:
    LlamaForward(const Model& model, Backend& backend, const ForwardOptions& options)
        : model_(model), cfg_(model.config()), be_(backend), opt_(options) {}

    ~LlamaForward() override {
        for (void* p : allocations_) be_.release(p);
    }

    Status init();
    Status prepare_fault();
    Status eval(const std::vector<int32_t>& tokens, EventSink* sink) override;
    void reset() override {
        pos_ = 0;
        decode_ = 0;
    }
    int64_t position() const override { return pos_; }
    int decode_calls() const override { return decode_; }
    const std::vector<float>& last_logits() const override { return last_logits_; }
    const ForwardOptions& options() const override { return opt_; }

private:
    Result<Tensor> load(const std::string& name, std::initializer_list<int64_t> ne, bool optional = false);
    Tensor buffer(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1);
    Tensor owned_weight(GgmlType type, const int64_t ne[4], const void* bytes, size_t n_bytes);
    // out_rows: rows (within this batch) that reach the logits; the last layer keeps only them.
    void eval_ubatch(const int32_t* tokens, int64_t T, int ubatch, const std::vector<int32_t>& out_rows);

    // Announces a tensor. Names repeat within a graph evaluation (Qcur-0, Qcur-0#2, ...).
    void emit(const char* base, int layer, const char* op, const Tensor& t) {
        Event e;
        e.name = layer >= 0 ? fmt::format("{}-{}", base, layer) : base;
        e.occurrence = ++occurrences_[e.name];
        e.index = event_index_++;
        e.decode = decode_;
        e.ubatch = ubatch_;
        e.layer = layer;
        e.op = op;
        e.tensor = t;
        e.backend = &be_;
        if (sink_) sink_->on_event(e);
    }

    const Model& model_;
    const ModelConfig& cfg_;
    Backend& be_;
    ForwardOptions opt_;
    Tensor token_embd_, output_norm_, output_;
    std::vector<LayerWeights> layers_;
    RunState s_;
    std::vector<void*> allocations_;
    std::vector<int32_t> positions_;
    std::vector<float> last_logits_;
    int64_t n_vocab_ = 0;
    int64_t n_logits_ = 0;  // rows of the logits buffer: n_vocab_, more with the padded-vocab fault
    std::vector<int32_t> rope_positions_;
    int64_t pos_ = 0;
    int decode_ = 0;
    int ubatch_ = 0;
    int64_t event_index_ = 0;
    EventSink* sink_ = nullptr;
    std::map<std::string, int> occurrences_;
};

Result<Tensor> LlamaForward::load(const std::string& name, std::initializer_list<int64_t> ne, bool optional) {
    if (optional && !model_.find(name)) return Tensor{};
    auto info = model_.tensor(name, ne);
    if (!info) return info.error();
    const GgufTensorInfo* t = info.value();
    if (!be_.supports_weight(t->type, opt_.mode))
        return make_error(ErrorCode::kUnsupported, fmt::format("{}: {} weights ({}) are not supported by {} in {} mode",
                                                               model_.path(), ggml_type_name(t->type), name, be_.name(),
                                                               math_mode_name(opt_.mode)));
    if (opt_.fault == Fault::kQ4KScaleMinSwapped && t->type == GgmlType::Q4_K) {
        std::vector<uint8_t> bytes(t->data, t->data + t->n_bytes);
        swap_q4k_scales_and_mins(bytes.data(), static_cast<int64_t>(t->n_bytes / sizeof(block_q4_K)));
        return owned_weight(t->type, t->ne, bytes.data(), bytes.size());
    }
    return be_.weight(t->type, t->ne, t->data);
}

Tensor LlamaForward::owned_weight(GgmlType type, const int64_t ne[4], const void* bytes, size_t n_bytes) {
    void* p = be_.alloc(n_bytes);
    allocations_.push_back(p);
    be_.upload(p, bytes, n_bytes);
    return make_tensor(p, ne[0], ne[1], ne[2], ne[3], type);
}

Tensor LlamaForward::buffer(int64_t ne0, int64_t ne1, int64_t ne2) {
    void* p = be_.alloc(static_cast<size_t>(ne0 * ne1 * ne2) * sizeof(float));
    allocations_.push_back(p);
    return make_tensor(p, ne0, ne1, ne2);
}

#define LS_LOAD(dst, ...)                              \
    do {                                               \
        auto r_ = load(__VA_ARGS__);                   \
        if (!r_) return r_.error();                    \
        dst = r_.value();                              \
    } while (0)

Status LlamaForward::init() {
    const int64_t n_embd = cfg_.n_embd, hd = cfg_.head_dim_k, hd_v = cfg_.head_dim_v;
    const int64_t n_q = cfg_.n_head * hd, n_k = cfg_.n_head_kv * hd, n_v = cfg_.n_head_kv * hd_v;
    const GgufTensorInfo* emb = model_.find("token_embd.weight");
    if (!emb) return make_error(ErrorCode::kBadInput, model_.path() + ": tensor token_embd.weight is missing");
    const GgufTensorInfo* out = model_.find("output.weight");
    n_vocab_ = out ? out->ne[1] : emb->ne[1];
    LS_LOAD(token_embd_, "token_embd.weight", {n_embd, emb->ne[1]});
    LS_LOAD(output_norm_, "output_norm.weight", {n_embd});
    // Tied embeddings (qwen2 and others): the LM head is token_embd.
    if (out) LS_LOAD(output_, "output.weight", {n_embd, n_vocab_});
    else output_ = token_embd_;

    layers_.resize(cfg_.n_layer);
    for (int64_t il = 0; il < cfg_.n_layer; ++il) {
        LayerWeights& w = layers_[il];
        auto n = [&](const char* suffix) { return fmt::format("blk.{}.{}", il, suffix); };
        LS_LOAD(w.attn_norm, n("attn_norm.weight"), {n_embd});
        LS_LOAD(w.wq, n("attn_q.weight"), {n_embd, n_q});
        LS_LOAD(w.wk, n("attn_k.weight"), {n_embd, n_k});
        LS_LOAD(w.wv, n("attn_v.weight"), {n_embd, n_v});
        LS_LOAD(w.wo, n("attn_output.weight"), {n_q * hd_v / hd, n_embd});
        LS_LOAD(w.bq, n("attn_q.bias"), {n_q}, true);
        LS_LOAD(w.bk, n("attn_k.bias"), {n_k}, true);
        LS_LOAD(w.bv, n("attn_v.bias"), {n_v}, true);
        LS_LOAD(w.ffn_norm, n("ffn_norm.weight"), {n_embd});
        LS_LOAD(w.w_gate, n("ffn_gate.weight"), {n_embd, cfg_.n_ff});
        LS_LOAD(w.w_up, n("ffn_up.weight"), {n_embd, cfg_.n_ff});
        LS_LOAD(w.w_down, n("ffn_down.weight"), {cfg_.n_ff, n_embd});
    }

    if (Status s = prepare_fault(); !s) return s;

    const int64_t T = opt_.n_ubatch, n_ctx = opt_.n_ctx;
    s_.x = buffer(n_embd, T);
    s_.norm = buffer(n_embd, T);
    s_.cur = buffer(n_embd, T);
    s_.q = buffer(n_q, T), s_.q_b = buffer(n_q, T), s_.q_rope = buffer(n_q, T);
    s_.k = buffer(n_k, T), s_.k_b = buffer(n_k, T), s_.k_rope = buffer(n_k, T);
    s_.v = buffer(n_v, T), s_.v_b = buffer(n_v, T);
    s_.kq = buffer(n_ctx, T, cfg_.n_head);
    s_.kq_soft_max = buffer(n_ctx, T, cfg_.n_head);
    s_.kqv = buffer(hd_v, T, cfg_.n_head);
    s_.kqv_out = buffer(cfg_.n_head * hd_v, T);
    s_.attn_out = buffer(n_embd, T);
    s_.out_attn = buffer(n_embd, T), s_.out_x = buffer(n_embd, T);
    s_.ffn_inp = buffer(n_embd, T);
    s_.gate = buffer(cfg_.n_ff, T), s_.up = buffer(cfg_.n_ff, T), s_.swiglu = buffer(cfg_.n_ff, T);
    s_.ffn_out = buffer(n_embd, T);
    // The padded-vocabulary fault: the logits buffer is sized to a rounded-up vocabulary, and the
    // rows the LM head never writes hold what was there before (deterministic "garbage" here).
    n_logits_ = opt_.fault == Fault::kPaddedVocabArgmax ? (n_vocab_ / 256 + 2) * 256 : n_vocab_;
    s_.logits = buffer(n_logits_, T);
    if (n_logits_ > n_vocab_) {
        std::vector<float> garbage(static_cast<size_t>(n_logits_ * T));
        uint32_t state = 12345;
        for (float& g : garbage) {
            state = state * 1664525u + 1013904223u;
            g = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 40.0f - 20.0f;
        }
        be_.upload(s_.logits.data, garbage.data(), garbage.size() * sizeof(float));
    }
    for (int64_t il = 0; il < cfg_.n_layer; ++il) {
        s_.cache_k.push_back(buffer(hd, cfg_.n_head_kv, n_ctx));
        s_.cache_v.push_back(buffer(hd_v, cfg_.n_head_kv, n_ctx));
    }
    positions_.resize(T);
    last_logits_.resize(n_logits_);
    return {};
}

Status LlamaForward::prepare_fault() {
    const char* name = fault_info(opt_.fault).name;
    auto refuse = [&](const std::string& why) {
        return Status(make_error(ErrorCode::kUsage, fmt::format("fault {}: {}", name, why)));
    };
    switch (opt_.fault) {
        case Fault::kTransposedWeight:
            if (cfg_.n_head * cfg_.head_dim_k != cfg_.n_embd)
                return refuse("needs a square attn_q weight (n_head * head_dim == n_embd)");
            for (LayerWeights& w : layers_) {
                // attn_q as a column-major reader sees it: element (i, j) read at (j, i).
                const int64_t n = cfg_.n_embd;
                std::vector<float> rows(static_cast<size_t>(n * n)), transposed(rows.size());
                std::vector<uint8_t> host(w.wq.n_bytes());
                be_.download(host.data(), w.wq.data, host.size());
                dequantize_rows(w.wq.type, host.data(), 0, rows.data(), n, n);
                for (int64_t i = 0; i < n; ++i)
                    for (int64_t j = 0; j < n; ++j) transposed[j * n + i] = rows[i * n + j];
                const int64_t ne[4] = {n, n, 1, 1};
                w.wq = owned_weight(GgmlType::F32, ne, transposed.data(), transposed.size() * sizeof(float));
            }
            return {};
        case Fault::kYarnMscale:
            if (cfg_.rope_scaling != RopeScaling::kYarn) return refuse("needs a model with YaRN rope scaling");
            return {};
        case Fault::kQkvBiasDropped:
            if (!layers_[0].bq.data && !layers_[0].bk.data && !layers_[0].bv.data)
                return refuse("needs a model with attention biases (qwen2)");
            return {};
        case Fault::kQ4KScaleMinSwapped:
            for (const GgufTensorInfo& t : model_.file().tensors())
                if (t.type == GgmlType::Q4_K) return {};
            return refuse("needs a model with Q4_K weights");
        default:
            return {};
    }
}

Status LlamaForward::eval(const std::vector<int32_t>& tokens, EventSink* sink) {
    if (opt_.fault == Fault::kKvPositionStuck) pos_ = 0;  // the bug: the position never advances
    if (tokens.empty()) return make_error(ErrorCode::kUsage, "no tokens to evaluate");
    if (pos_ + static_cast<int64_t>(tokens.size()) > opt_.n_ctx)
        return make_error(ErrorCode::kUsage, fmt::format("the context is full: {} + {} tokens > n_ctx {}; raise --ctx",
                                                         pos_, tokens.size(), opt_.n_ctx));
    const int64_t n_rows = token_embd_.ne[1];
    for (int32_t id : tokens)
        if (id < 0 || id >= n_rows)
            return make_error(ErrorCode::kUsage, fmt::format("token id {} is out of range (the model has {} embedding rows)", id, n_rows));
    sink_ = sink;
    event_index_ = decode_ == 0 ? 0 : event_index_;
    int ubatch = 0;
    std::vector<int32_t> out_rows;
    for (size_t first = 0; first < tokens.size(); first += opt_.n_ubatch, ++ubatch) {
        const int64_t T = std::min<int64_t>(opt_.n_ubatch, tokens.size() - first);
        const bool last_batch = first + T == tokens.size();
        out_rows.clear();
        for (int64_t t = 0; t < T; ++t)
            if (opt_.all_logits || (last_batch && t == T - 1)) out_rows.push_back(static_cast<int32_t>(t));
        eval_ubatch(tokens.data() + first, T, ubatch, out_rows);
    }
    ++decode_;
    sink_ = nullptr;
    return {};
}

void LlamaForward::eval_ubatch(const int32_t* tokens, const int64_t T, int ubatch, const std::vector<int32_t>& out_rows) {
    const ModelConfig& c = cfg_;
    const int64_t n_embd = c.n_embd, hd = c.head_dim_k, hd_v = c.head_dim_v;
    const int64_t n_kv = pos_ + T;  // cells attended: the cache so far plus this batch
    ubatch_ = ubatch;
    occurrences_.clear();
    for (int64_t t = 0; t < T; ++t) positions_[t] = static_cast<int32_t>(pos_ + t);
    const Fault fault = opt_.fault;
    rope_positions_ = positions_;
    if (fault == Fault::kRopePositionOffByOne)
        for (int32_t& p : rope_positions_) ++p;

    RopeParams rope = rope_params_for(c);
    // The YaRN fault: the magnitude correction applied once more on top of ggml's own.
    if (fault == Fault::kYarnMscale) rope.attn_factor = 1.0f + 0.1f * std::log(static_cast<float>(c.rope_scaling_factor));
    if (fault == Fault::kRopeWrongPairing) rope.mode = rope.mode == RopeMode::kNorm ? RopeMode::kNeox : RopeMode::kNorm;
    const bool rope_on = fault != Fault::kRopeSkipped;
    const bool causal = fault != Fault::kNoCausalMask;
    const bool biases_on = fault != Fault::kQkvBiasDropped;
    const float eps = static_cast<float>(c.rms_eps) * (fault == Fault::kRmsNormEpsilon ? 1000.0f : 1.0f);
    const float kq_scale = fault == Fault::kAttentionScale ? 1.0f / static_cast<float>(hd) : 1.0f / std::sqrt(static_cast<float>(hd));
    // RMSNorm weight: applied twice under the fault (a norm layer multiplying again).
    auto apply_norm_weight = [&](const Tensor& in, const Tensor& weight, Tensor& out) {
        be_.mul_row(in, weight, out);
        if (fault == Fault::kRmsNormWeightTwice) be_.mul_row(out, weight, out);
    };

    // Views of the preallocated buffers with this batch's T.
    auto cols = [T](const Tensor& t) { return t.reshaped(t.ne[0], T); };
    Tensor x = cols(s_.x), norm = cols(s_.norm), cur = cols(s_.cur);
    Tensor q = cols(s_.q), q_b = cols(s_.q_b), q_rope = cols(s_.q_rope);
    Tensor k = cols(s_.k), k_b = cols(s_.k_b), k_rope = cols(s_.k_rope);
    Tensor v = cols(s_.v), v_b = cols(s_.v_b);
    Tensor kq = s_.kq.reshaped(n_kv, T, c.n_head), kq_soft_max = s_.kq_soft_max.reshaped(n_kv, T, c.n_head);
    Tensor kqv = s_.kqv.reshaped(hd_v, T, c.n_head), kqv_out = cols(s_.kqv_out);
    Tensor attn_out = cols(s_.attn_out), ffn_inp = cols(s_.ffn_inp);
    Tensor gate = cols(s_.gate), up = cols(s_.up), swiglu = cols(s_.swiglu), ffn_out = cols(s_.ffn_out);
    Tensor logits = s_.logits.reshaped(n_logits_, T);
    const MathMode mode = opt_.mode;
    int64_t n_out = T;  // columns from the last layer's FFN on

    be_.get_rows(token_embd_, tokens, T, x);                                      // x = embd[tokens]
    emit("embd", -1, "GET_ROWS", x);

    for (int64_t il = 0; il < c.n_layer; ++il) {
        const LayerWeights& w = layers_[il];
        const int L = static_cast<int>(il);
        be_.rms_norm(x, eps, norm);                                                // attention rmsnorm
        emit("norm", L, "RMS_NORM", norm);
        apply_norm_weight(norm, w.attn_norm, cur);
        emit("attn_norm", L, "MUL", cur);

        // q = wq x (+ bq), reshaped to heads, roped.
        be_.matmul(w.wq, cur, q, mode);
        emit("Qcur", L, "MUL_MAT", q);
        Tensor q_in = q;
        if (w.bq.data && biases_on) {
            be_.add(q, w.bq, q_b);
            emit("Qcur", L, "ADD", q_b);
            q_in = q_b;
        }
        emit("Qcur", L, "RESHAPE", q_in.reshaped(hd, c.n_head, T));
        be_.upload(q_rope.data, q_in.data, q_in.n_bytes());
        Tensor q_heads = q_rope.reshaped(hd, c.n_head, T);
        if (rope_on) be_.rope(q_heads, rope_positions_.data(), rope, mode);
        emit("Qcur", L, "ROPE", q_heads);

        // v = wv x (+ bv)
        be_.matmul(w.wv, cur, v, mode);
        emit("Vcur", L, "MUL_MAT", v);
        Tensor v_in = v;
        if (w.bv.data && biases_on) {
            be_.add(v, w.bv, v_b);
            emit("Vcur", L, "ADD", v_b);
            v_in = v_b;
        }
        Tensor v_heads = v_in.reshaped(hd_v, c.n_head_kv, T);
        emit("Vcur", L, "RESHAPE", v_heads);

        // k = wk x (+ bk), reshaped, roped.
        be_.matmul(w.wk, cur, k, mode);
        emit("Kcur", L, "MUL_MAT", k);
        Tensor k_in = k;
        if (w.bk.data && biases_on) {
            be_.add(k, w.bk, k_b);
            emit("Kcur", L, "ADD", k_b);
            k_in = k_b;
        }
        emit("Kcur", L, "RESHAPE", k_in.reshaped(hd, c.n_head_kv, T));
        be_.upload(k_rope.data, k_in.data, k_in.n_bytes());
        Tensor k_heads = k_rope.reshaped(hd, c.n_head_kv, T);
        if (rope_on) be_.rope(k_heads, rope_positions_.data(), rope, mode);
        emit("Kcur", L, "ROPE", k_heads);

        // Attention over the cache: softmax(q k^T * scale + causal mask) v, per head.
        be_.store_kv(k_heads, v_heads, s_.cache_k[il], s_.cache_v[il], pos_, mode);
        be_.attn_scores(q_heads, s_.cache_k[il], n_kv, kq, mode);
        emit("kq", L, "MUL_MAT", kq);
        be_.softmax_masked(kq, kq_scale, positions_.data(), causal, kq_soft_max, mode);
        emit("kq_soft_max", L, "SOFT_MAX", kq_soft_max);
        be_.attn_values(kq_soft_max, s_.cache_v[il], n_kv, kqv, mode);
        emit("kqv", L, "MUL_MAT", kqv);
        be_.merge_heads(kqv, kqv_out);
        if (opt_.flash_attn && mode == MathMode::kLlama) {
            Tensor fa_out = kqv_out.reshaped(hd_v, c.n_head, T);
            be_.attn_flash(q_heads, s_.cache_k[il], s_.cache_v[il], n_kv, kq_scale, positions_.data(), causal, fa_out);
        }
        emit("kqv_out", L, "CONT", kqv_out);
        be_.matmul(w.wo, kqv_out, attn_out, mode);                                 // output projection
        emit("attn_out", L, "MUL_MAT", attn_out);

        Tensor residual = x;
        if (il == c.n_layer - 1 && static_cast<int64_t>(out_rows.size()) < T) {
            // Only the output rows go on (llama.cpp's out_ids); none in a batch without outputs.
            if (out_rows.empty()) {
                pos_ += T;
                return;
            }
            n_out = static_cast<int64_t>(out_rows.size());
            Tensor sel_attn = s_.out_attn.reshaped(n_embd, n_out), sel_x = s_.out_x.reshaped(n_embd, n_out);
            be_.get_rows(attn_out, out_rows.data(), n_out, sel_attn);
            be_.get_rows(x, out_rows.data(), n_out, sel_x);
            attn_out = sel_attn, residual = sel_x;
            auto out_cols = [n_out](const Tensor& t) { return t.reshaped(t.ne[0], n_out); };
            ffn_inp = out_cols(ffn_inp), norm = out_cols(norm), cur = out_cols(cur), gate = out_cols(gate);
            up = out_cols(up), swiglu = out_cols(swiglu), ffn_out = out_cols(ffn_out), x = out_cols(x);
            logits = logits.reshaped(n_logits_, n_out);
        }
        be_.add(attn_out, residual, ffn_inp);                                      // residual
        emit("ffn_inp", L, "ADD", ffn_inp);

        // SwiGLU feed-forward: down(silu(gate x) * up x)
        be_.rms_norm(ffn_inp, eps, norm);
        emit("norm", L, "RMS_NORM", norm);
        apply_norm_weight(norm, w.ffn_norm, cur);
        emit("ffn_norm", L, "MUL", cur);
        be_.matmul(w.w_gate, cur, gate, mode);
        emit("ffn_gate", L, "MUL_MAT", gate);
        be_.matmul(w.w_up, cur, up, mode);
        emit("ffn_up", L, "MUL_MAT", up);
        be_.swiglu(gate, up, swiglu, mode);
        emit("ffn_swiglu", L, "SWIGLU", swiglu);
        be_.matmul(w.w_down, swiglu, ffn_out, mode);
        emit("ffn_out", L, "MUL_MAT", ffn_out);
        be_.add(ffn_out, ffn_inp, x);                                              // residual
        emit("l_out", L, "ADD", x);
    }

    be_.rms_norm(x, eps, norm);                                                    // final norm
    emit("norm", -1, "RMS_NORM", norm);
    apply_norm_weight(norm, output_norm_, cur);
    emit("result_norm", -1, "MUL", cur);
    if (n_logits_ == n_vocab_) {
        be_.matmul(output_, cur, logits, mode);                                    // lm_head
    } else {
        // The LM head writes n_vocab rows per token into a buffer whose rows are n_logits long.
        Tensor head = make_tensor(nullptr, n_vocab_, 1);
        for (int64_t t = 0; t < n_out; ++t) {
            head.data = logits.f32() + t * n_logits_;
            be_.matmul(output_, cur.columns(t, 1), head, mode);
        }
    }
    emit("result_output", -1, "MUL_MAT", logits);

    be_.download(last_logits_.data(), logits.f32() + (n_out - 1) * n_logits_, n_logits_ * sizeof(float));
    pos_ += T;
}

}  // namespace

RopeParams rope_params_for(const ModelConfig& c) {
    RopeParams rope;
    rope.mode = c.rope_type == RopeType::kNeox ? RopeMode::kNeox : RopeMode::kNorm;
    rope.n_rot = static_cast<int>(c.n_rot);
    rope.freq_base = static_cast<float>(c.rope_freq_base);
    if (c.rope_scaling == RopeScaling::kLinear) rope.freq_scale = static_cast<float>(1.0 / c.rope_scaling_factor);
    if (c.rope_scaling == RopeScaling::kYarn) {
        rope.freq_scale = static_cast<float>(1.0 / c.rope_scaling_factor);
        rope.ext_factor = 1.0f;
        rope.n_ctx_orig = static_cast<int>(c.rope_orig_ctx);
        rope.beta_fast = static_cast<float>(c.rope_yarn_beta_fast);
        rope.beta_slow = static_cast<float>(c.rope_yarn_beta_slow);
    }
    return rope;
}

Result<std::unique_ptr<ForwardPass>> make_forward(const Model& model, Backend& backend, const ForwardOptions& options) {
    const ModelConfig& c = model.config();
    if (c.arch != Arch::kLlama && c.arch != Arch::kQwen2)
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: running {} models is not supported yet", model.path(), c.arch_name));
    if (options.n_ctx <= 0 || options.n_ubatch <= 0)
        return make_error(ErrorCode::kUsage, "n_ctx and n_ubatch must be positive");
    auto f = std::make_unique<LlamaForward>(model, backend, options);
    if (Status s = f->init(); !s) return s.error();
    return std::unique_ptr<ForwardPass>(std::move(f));
}

}  // namespace ls
