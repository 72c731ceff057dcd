// Local vs inherited error (see local_error.h): each flagged event's op recomputed on the host
// from the reference's tensors, with the CPU backend's kernels in the comparison's math mode, so
// that the op is ours bit for bit (faults included) and only its inputs are the reference's.
#include "engine/compare/local_error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "engine/compare/ref_names.h"
#include "engine/model/model_config.h"

namespace ls {
namespace {

// How the reason of an event whose op is not recomputed (yet) begins; the others lack an input.
constexpr std::string_view kNotRecomputed = "no local recomputation";


// "Qcur-12" -> ("Qcur", 12); "embd" -> ("embd", -1).
std::pair<std::string, int> split_base(const std::string& base) {
    const size_t dash = base.rfind('-');
    if (dash == std::string::npos || dash + 1 >= base.size() ||
        base.find_first_not_of("0123456789", dash + 1) != std::string::npos)
        return {base, -1};
    return {base.substr(0, dash), std::stoi(base.substr(dash + 1))};
}

// Our base name for a reference tensor: its own, or for llama.cpp's unnamed nodes what they
// compute (ref_names.h); "" for the rest and for the output rows (GET_ROWS of out_ids).
std::string our_base(const OurName& n, const RefTensor& t) {
    if (n.kind == OurName::Kind::kNone || (t.op == "GET_ROWS" && t.src1 == "out_ids")) return "";
    return n.base;
}

using Group = std::pair<int, int>;  // decode call, ubatch

// Host values in ggml order with their shape.
struct Values {
    std::vector<float> v;
    int64_t ne[4] = {1, 1, 1, 1};
    int64_t cols() const { return ne[1] * ne[2] * ne[3]; }
};

class LocalPass {
public:
    LocalPass(const Model& model, const ReferenceDump& ref, const LocalErrorOptions& o, const CompareRunResult& run)
        : model_(model), cfg_(model.config()), ref_(ref), opt_(o), run_(run) {
        be_ = make_cpu_backend(0);
        be_->set_llama_isa(run.llama_isa);
        be_->set_llama_threads(ref.n_threads());
        mode_ = o.forward.mode;
        // The knobs our engine runs the fault with (a fault the model cannot have leaves them clean:
        // the comparison would not have run).
        if (auto k = fault_knobs(o.forward.fault, fault_model_facts(model))) knobs_ = k.value();
        if (!knobs_.rope_freqs_ignored) rope_freqs_ = rope_freq_factors(model);
        // Biases on the outputs of attention, the FFN or the LM head: the products and their sums
        // share names, and the recomputations below know only the products.
        for (const GgufTensorInfo& t : model.tensors())
            for (const char* tail : {".attn_output.bias", ".ffn_gate.bias", ".ffn_up.bias", ".ffn_down.bias"})
                if (t.name.size() > std::strlen(tail) && t.name.compare(t.name.size() - std::strlen(tail), std::string::npos, tail) == 0)
                    output_biases_ = true;
        output_biases_ = output_biases_ || model.find("output.bias") != nullptr;
        gemma_ = cfg_.arch == Arch::kGemma2 || cfg_.arch == Arch::kGemma3;
        scaled_q_ = cfg_.arch == Arch::kPhi3 || gemma_;
        rope_ = rope_params_for(cfg_);
        if (knobs_.rope_swap_pairing) rope_.mode = rope_.mode == RopeMode::kNorm ? RopeMode::kNeox : RopeMode::kNorm;
        rope_.attn_factor *= knobs_.rope_attn_factor;
        kq_scale_ = knobs_.scale_by_head_dim ? 1.0f / static_cast<float>(cfg_.head_dim_k) : attention_kq_scale(cfg_);
        rms_eps_ = static_cast<float>(cfg_.rms_eps) * knobs_.rms_eps_factor;

        // The reference's tensors by (group, our base name), in file order.
        const std::vector<OurName> names = our_names(ref);
        for (size_t i = 0; i < ref.tensors().size(); ++i) {
            const RefTensor& t = ref.tensors()[i];
            if (t.kind == RefKind::kInput) {
                inputs_[{t.decode, t.ubatch, t.base_name}] = &t;
                continue;
            }
            const std::string base = our_base(names[i], t);
            if (!base.empty()) by_base_[{t.decode, t.ubatch, base}].push_back(&t);
        }
        // Our groups in execution order, their token counts and our positions.
        int64_t pos = 0;
        int last_decode = -1;
        for (const CapturedEvent& e : run.captures.events) {
            const Group g{e.decode, e.ubatch};
            if (e.base_name != "embd" || starts_.count(g)) continue;
            if (knobs_.position_stuck && e.decode != last_decode) pos = 0;
            last_decode = e.decode;
            order_.push_back(g);
            starts_[g] = pos;
            n_tokens_[g] = e.ne[1];
            pos += e.ne[1];
        }
        // A dump without the embeddings (an engine that dumps only some modules): the token
        // counts from its tokens, each decode call split into batches as the forward pass does.
        if (order_.empty()) {
            std::vector<int32_t> per_call = ref.decode_n_tokens();
            if (per_call.empty() && !ref.prompt_tokens().empty()) {
                per_call.push_back(static_cast<int32_t>(ref.prompt_tokens().size()));
                per_call.resize(1 + ref.generated_tokens().size(), 1);
            }
            const int64_t batch = std::max<int64_t>(1, o.forward.n_ubatch);
            for (size_t d = 0; d < per_call.size(); ++d) {
                if (knobs_.position_stuck) pos = 0;
                for (int64_t done = 0, u = 0; done < per_call[d]; ++u) {
                    const Group g{static_cast<int>(d), static_cast<int>(u)};
                    const int64_t n = std::min<int64_t>(batch, per_call[d] - done);
                    order_.push_back(g);
                    starts_[g] = pos;
                    n_tokens_[g] = n;
                    pos += n;
                    done += n;
                }
            }
        }
    }

    void measure(size_t index, EventComparison& c) {
        why_.clear();
        op_weight_.clear();
        const CapturedEvent& e = run_.captures.events[index];
        const Group g{e.decode, e.ubatch};
        Values out;
        const RefTensor* target = nullptr;
        if (!starts_.count(g)) why_ = "the token count of this decode call is unknown (no embd event)";
        const bool computed = why_.empty() && compute(index, e, g, &out, &target);
        if (!computed || !target) {
            c.local_origin = LocalOrigin::kUnknown;
            c.local_why = why_.empty() ? fmt::format("{} has no tensor for this op's output", opt_.source) : why_;
            return;
        }
        // A reference that kept only the output rows: ours too.
        const int64_t target_cols = target->ne()[0] > 0 ? target->n_elements() / target->ne()[0] : 0;
        if (target->ne()[0] == out.ne[0] && target_cols > 0 && out.cols() > target_cols &&
            out.ne[2] * out.ne[3] == 1)
            keep_rows(&out, target_cols, g);
        // Ours in the reference's shape when they hold as many values (a reshape moves none).
        if (static_cast<int64_t>(out.v.size()) == target->n_elements())
            for (int d = 0; d < 4; ++d) out.ne[d] = target->ne()[d];
        AlignedValues a;
        std::string why;
        if (!align_with_reference(out.v.data(), out.ne, ref_, *target, &a, &why)) {
            // Our op's output does not even pair with the reference's: the op itself differs.
            c.local_origin = LocalOrigin::kLocal;
            c.local_nmse = INFINITY;
            c.local_why = fmt::format("the op's output cannot be paired with {}'s: {}", opt_.source, why);
            return;
        }
        const Metrics m = compute_metrics(a.ours.data(), a.ref.data(), static_cast<int64_t>(a.ours.size()));
        c.local_nmse = m.nmse;
        c.local_weight = op_weight_;
        const double limit = std::max(opt_.thresholds.warn_nmse, kFloorWarnFactor * std::max(0.0, c.floor_nmse));
        c.local_origin = m.n_nonfinite > 0 || !(m.nmse <= limit) ? LocalOrigin::kLocal : LocalOrigin::kInherited;
    }

private:
    // ---- the reference's tensors

    const std::vector<const RefTensor*>* list(const Group& g, const std::string& base) const {
        auto it = by_base_.find({g.first, g.second, base});
        return it == by_base_.end() ? nullptr : &it->second;
    }
    static bool ops_known(const std::vector<const RefTensor*>& l) {
        return std::any_of(l.begin(), l.end(), [](const RefTensor* t) { return !t->op.empty(); });
    }
    const RefTensor* nth(const Group& g, const std::string& base, int occurrence) const {
        if (const auto* l = list(g, base))
            for (const RefTensor* t : *l)
                if (t->occurrence == occurrence || (occurrence == 1 && t->base_name != base)) return t;
        return nullptr;
    }
    // Q/K/V of a layer: the projection, the value that goes to RoPE (or attention, for V) and the
    // roped one, by the op the reference records, or by position when it records none.
    const RefTensor* projection(const Group& g, const std::string& base) const {
        const auto* l = list(g, base);
        if (!l) return nullptr;
        if (ops_known(*l))
            for (const RefTensor* t : *l)
                if (t->op == "MUL_MAT") return t;
        return l->front();
    }
    const RefTensor* roped(const Group& g, const std::string& base) const {
        const auto* l = list(g, base);
        if (!l) return nullptr;
        if (ops_known(*l)) {
            for (const RefTensor* t : *l)
                if (t->op == "ROPE") return t;
            return nullptr;
        }
        return l->size() >= 2 ? l->back() : nullptr;
    }
    const RefTensor* before_rope(const Group& g, const std::string& base, bool has_rope) const {
        const auto* l = list(g, base);
        if (!l) return nullptr;
        if (!has_rope) return l->back();
        const RefTensor* r = roped(g, base);
        const RefTensor* last = nullptr;
        for (const RefTensor* t : *l) {
            if (t == r) break;
            last = t;
        }
        return r ? last : (l->size() >= 2 ? (*l)[l->size() - 2] : l->front());
    }

    // The values of a reference tensor as an input with rows of `ne0` values; KV cells beyond
    // `ne0` (llama.cpp pads them) are dropped when `cells` is set.
    bool input(const RefTensor* t, const std::string& what, int64_t ne0, Values* out, int64_t cells_rows = 0) {
        if (!t) {
            why_ = fmt::format("{} has no {}", opt_.source, what);
            return false;
        }
        if (!t->complete()) {
            why_ = fmt::format("{}'s {} holds only printed values", opt_.source, t->name);
            return false;
        }
        std::vector<float> v = ref_.values(*t);
        const int64_t n = static_cast<int64_t>(v.size());
        if (cells_rows > 0 && t->ne()[0] > ne0 && kv_cells_along_ne0(*t) && n / t->ne()[0] == cells_rows) {
            out->v.clear();
            for (int64_t r = 0; r < cells_rows; ++r) out->v.insert(out->v.end(), v.begin() + r * t->ne()[0], v.begin() + r * t->ne()[0] + ne0);
        } else if (ne0 > 0 && n % ne0 == 0 && n > 0) {
            out->v = std::move(v);
        } else {
            why_ = fmt::format("{}'s {} has ne [{}, {}, {}, {}], not rows of {}", opt_.source, t->name, t->ne()[0], t->ne()[1],
                               t->ne()[2], t->ne()[3], ne0);
            return false;
        }
        out->ne[0] = ne0;
        out->ne[1] = static_cast<int64_t>(out->v.size()) / ne0;
        out->ne[2] = out->ne[3] = 1;
        return true;
    }

    // ---- the model's weights, as our engine loads them (a fault may rewrite one)

    bool weight(const std::string& name, Tensor* out) {
        auto it = weights_.find(name);
        if (it == weights_.end()) {
            const GgufTensorInfo* info = model_.find(name);
            if (!info) {
                why_ = fmt::format("the model has no {}", name);
                return false;
            }
            Loaded l;
            l.rewritten = fault_weight(opt_.forward.fault, name, info->type, info->ne, info->data, info->n_bytes);
            l.tensor = l.rewritten.rewrote ? make_tensor(l.rewritten.bytes.data(), info->ne[0], info->ne[1], info->ne[2],
                                                         info->ne[3], l.rewritten.type)
                                           : be_->weight(info->type, info->ne, info->data);
            it = weights_.emplace(name, std::move(l)).first;
            if (it->second.rewritten.rewrote) it->second.tensor.data = it->second.rewritten.bytes.data();
        }
        *out = it->second.tensor;
        return true;
    }
    static std::string blk(int L, const std::string& name) { return fmt::format("blk.{}.{}", L, name); }

    // The prefix of the base name of our event after `index` in its evaluation ("attn_norm" for
    // "attn_norm-3"), "" when none follows.
    std::string next_base(size_t index) const {
        const auto& events = run_.captures.events;
        if (index + 1 >= events.size()) return "";
        const CapturedEvent &e = events[index], &next = events[index + 1];
        return next.decode == e.decode && next.ubatch == e.ubatch ? split_base(next.base_name).first : "";
    }
    // The occurrence of `base` just before our event `index` in its evaluation; `fallback` when the
    // event before it is something else.
    int previous_occurrence(size_t index, const std::string& base, int fallback) const {
        const auto& events = run_.captures.events;
        if (index == 0) return fallback;
        const CapturedEvent &e = events[index], &prev = events[index - 1];
        return prev.decode == e.decode && prev.ubatch == e.ubatch && prev.base_name == base ? prev.occurrence : fallback;
    }

    // ---- our ops on host values

    bool matmul(const std::string& w_name, const Values& x, Values* y) {
        Tensor w;
        if (!weight(w_name, &w)) return false;
        op_weight_ = w_name;
        if (w.ne[0] != x.ne[0]) {
            why_ = fmt::format("{} takes rows of {}, {}'s input has rows of {}", w_name, w.ne[0], opt_.source, x.ne[0]);
            return false;
        }
        const int64_t T = x.cols();
        y->v.assign(static_cast<size_t>(w.ne[1] * T), 0.0f);
        y->ne[0] = w.ne[1], y->ne[1] = T, y->ne[2] = y->ne[3] = 1;
        Tensor xt = make_tensor(const_cast<float*>(x.v.data()), x.ne[0], T);
        Tensor yt = make_tensor(y->v.data(), w.ne[1], T);
        be_->matmul(w, xt, yt, mode_);
        return true;
    }
    // Per head h: y_h = w[:, :, h] x_h with w {K, N, H} (deepseek2's absorbed products, one product
    // per head as the graph runs them). x holds the heads' {K} columns as {K, T, H} (`x_heads_outer`)
    // or {K, H, T}; y gets {N, T, H}.
    bool head_matmul(const std::string& w_name, const Values& x, bool x_heads_outer, Values* y) {
        Tensor w;
        if (!weight(w_name, &w)) return false;
        op_weight_ = w_name;
        const int64_t K = w.ne[0], N = w.ne[1], H = w.ne[2];
        const int64_t n = static_cast<int64_t>(x.v.size());
        if (x.ne[0] != K || n == 0 || n % (K * H) != 0) {
            why_ = fmt::format("{} takes {} heads of rows of {}, {}'s input holds {} values", w_name, H, K, opt_.source, n);
            return false;
        }
        const int64_t T = n / (K * H);
        y->v.assign(static_cast<size_t>(N * T * H), 0.0f);
        std::vector<float> xh(static_cast<size_t>(K * T));
        for (int64_t h = 0; h < H; ++h) {
            for (int64_t t = 0; t < T; ++t)
                std::copy_n(x.v.begin() + (x_heads_outer ? h * T + t : t * H + h) * K, K, xh.begin() + t * K);
            Tensor wh = w;
            wh.ne[2] = 1;
            wh.data = static_cast<char*>(w.data) + static_cast<uint64_t>(h) * w.nb[2];
            Tensor xt = make_tensor(xh.data(), K, T), yt = make_tensor(y->v.data() + h * N * T, N, T);
            be_->matmul(wh, xt, yt, mode_);
        }
        y->ne[0] = N, y->ne[1] = T, y->ne[2] = H, y->ne[3] = 1;
        return true;
    }
    // MUL_MAT_ID: the experts `ids` ({k, T}) chose, each applied to its token's column of x (one
    // column per token, shared by its k slots, or one per slot): y {N, k, T}.
    bool matmul_id(const std::string& w_name, const Values& x, const std::vector<int32_t>& ids, int64_t k, Values* y) {
        const int64_t T = static_cast<int64_t>(ids.size()) / k;
        Tensor w;
        if (!weight(w_name, &w)) return false;
        op_weight_ = w_name;
        const int64_t cols = x.cols();
        if (w.ne[0] != x.ne[0] || (cols != T && cols != k * T)) {
            why_ = fmt::format("{} takes rows of {} for {} tokens of {} experts each, {}'s input has {} rows of {}", w_name,
                               w.ne[0], T, k, opt_.source, cols, x.ne[0]);
            return false;
        }
        y->v.assign(static_cast<size_t>(w.ne[1] * k * T), 0.0f);
        y->ne[0] = w.ne[1], y->ne[1] = k, y->ne[2] = T, y->ne[3] = 1;
        Tensor xt = make_tensor(const_cast<float*>(x.v.data()), x.ne[0], cols == T ? 1 : k, T);
        Tensor it = make_tensor(const_cast<int32_t*>(ids.data()), k, T, 1, 1, GgmlType::I32);
        Tensor yt = make_tensor(y->v.data(), w.ne[1], k, T);
        be_->matmul_id(w, xt, it, yt, mode_);
        return true;
    }
    bool add_row(const std::string& b_name, Values* x) {
        Tensor b;
        if (!weight(b_name, &b)) return false;
        Tensor xt = make_tensor(x->v.data(), x->ne[0], x->cols());
        be_->add(xt, b, xt);
        return true;
    }
    bool mul_row(const std::string& w_name, Values* x, bool twice) {
        Tensor w;
        if (!weight(w_name, &w)) return false;
        Tensor xt = make_tensor(x->v.data(), x->ne[0], x->cols());
        be_->mul_row(xt, w, xt);
        if (twice) be_->mul_row(xt, w, xt);
        return true;
    }
    Values add(const Values& a, const Values& b) {
        Values y = a;
        Tensor at = make_tensor(const_cast<float*>(a.v.data()), a.ne[0], a.cols());
        Tensor bt = make_tensor(const_cast<float*>(b.v.data()), b.ne[0], b.cols());
        Tensor yt = make_tensor(y.v.data(), y.ne[0], y.cols());
        be_->add(at, bt, yt);
        return y;
    }
    Values rms(const Values& x) {
        Values y = x;
        Tensor xt = make_tensor(const_cast<float*>(x.v.data()), x.ne[0], x.cols());
        Tensor yt = make_tensor(y.v.data(), y.ne[0], y.cols());
        be_->rms_norm(xt, rms_eps_, yt);
        return y;
    }
    // Only `keep` columns of `x`: the output rows llama.cpp keeps in its last layer (the
    // reference's out_ids when it records them, else the last rows).
    void keep_rows(Values* x, int64_t keep, const Group& g) const {
        const std::vector<int32_t> ids = ref_.out_ids(g.first, g.second);
        const int64_t n = x->ne[0];
        Values sel;
        sel.ne[0] = n, sel.ne[1] = keep;
        for (int64_t i = 0; i < keep; ++i) {
            const int64_t col = static_cast<int64_t>(ids.size()) == keep ? ids[i] : x->cols() - keep + i;
            sel.v.insert(sel.v.end(), x->v.begin() + col * n, x->v.begin() + (col + 1) * n);
        }
        *x = std::move(sel);
    }

    std::vector<int32_t> positions(const Group& g, int offset) const {
        const int64_t start = starts_.at(g), T = n_tokens_.at(g);
        std::vector<int32_t> pos(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(start + t + offset);
        return pos;
    }

    // The KV cache of layer L as our engine holds it when group `g` runs: the reference's roped K
    // and V of every group so far, written at our positions.
    bool kv_cache(int L, const Group& g, std::vector<float>* k, std::vector<float>* v, int64_t* n_kv) {
        const int64_t hd = cfg_.head_dim_k, hd_v = cfg_.head_dim_v, nkv = cfg_.n_head_kv;
        // Cells: as many as any group so far wrote (a stuck position rewrites the first ones).
        *n_kv = 0;
        for (const Group& h : order_) {
            *n_kv = std::max(*n_kv, starts_.at(h) + n_tokens_.at(h));
            if (h == g) break;
        }
        k->assign(static_cast<size_t>(hd * nkv * *n_kv), 0.0f);
        v->assign(static_cast<size_t>(hd_v * nkv * *n_kv), 0.0f);
        Tensor ck = make_tensor(k->data(), hd, nkv, *n_kv), cv = make_tensor(v->data(), hd_v, nkv, *n_kv);
        for (const Group& h : order_) {
            Values kh, vh;
            const std::string kb = fmt::format("Kcur-{}", L), vb = fmt::format("Vcur-{}", L);
            if (!input(roped(h, kb), fmt::format("roped {}{}", kb, h.first ? fmt::format(" of decode call {}", h.first) : ""), hd, &kh) ||
                !input(before_rope(h, vb, false), fmt::format("{}{}", vb, h.first ? fmt::format(" of decode call {}", h.first) : ""), hd_v, &vh))
                return false;
            const int64_t T = n_tokens_.at(h);
            if (kh.v.size() != static_cast<size_t>(hd * nkv * T) || vh.v.size() != static_cast<size_t>(hd_v * nkv * T)) {
                why_ = fmt::format("{}'s K/V of layer {} do not hold {} tokens", opt_.source, L, T);
                return false;
            }
            Tensor kt = make_tensor(kh.v.data(), hd, nkv, T), vt = make_tensor(vh.v.data(), hd_v, nkv, T);
            be_->store_kv(kt, vt, ck, cv, starts_.at(h), mode_);
            if (h == g) break;
        }
        return true;
    }

    // ---- mixture of experts: the router's product, the chosen experts' products on the experts the
    // reference chose, the shared experts

    // The experts the reference's router chose in layer L: {k, T} (T: the tokens the layer's FFN
    // runs on, only the output rows in the last layer).
    bool chosen_experts(const Group& g, int L, std::vector<int32_t>* ids) {
        const std::string name = fmt::format("ffn_moe_topk-{}", L);
        Values v;
        if (!input(nth(g, name, 1), name, cfg_.n_expert_used, &v)) return false;
        ids->resize(v.v.size());
        for (size_t i = 0; i < v.v.size(); ++i) {
            const float f = v.v[i];
            if (!(f >= 0 && f < static_cast<float>(cfg_.n_expert)) || f != std::floor(f)) {
                why_ = fmt::format("{}'s {} holds {}, not one of the {} experts", opt_.source, name, f, cfg_.n_expert);
                return false;
            }
            (*ids)[i] = static_cast<int32_t>(f);
        }
        return true;
    }

    bool moe_event(const std::string& prefix, int L) const {
        if (L < 0 || !cfg_.layer_is_moe(L)) return false;
        return prefix == "ffn_moe_logits" || prefix == "ffn_moe_up" || prefix == "ffn_moe_gate" || prefix == "ffn_moe_gate_up" ||
               prefix == "ffn_moe_swiglu" || prefix == "ffn_moe_down" || prefix == "ffn_shexp" ||
               (prefix == "ffn_out" && model_.find(blk(L, "ffn_down_shexp.weight")));
    }

    bool compute_moe(const std::string& prefix, int L, const Group& g, Values* out, const RefTensor** target) {
        const std::string lname = fmt::format("{}-{}", prefix, L);
        *target = nth(g, lname, 1);
        if (prefix == "ffn_shexp") {  // the shared experts' down product
            const std::string in = fmt::format("ffn_swiglu-{}", L), w = blk(L, "ffn_down_shexp.weight");
            Tensor wt;
            Values x;
            return weight(w, &wt) && input(nth(g, in, 1), in, wt.ne[0], &x) && matmul(w, x, out);
        }
        if (prefix == "ffn_out") {  // the routed and the shared experts' sum
            const std::string a = fmt::format("ffn_moe_out-{}", L), b = fmt::format("ffn_shexp-{}", L);
            Values x, y;
            if (!input(nth(g, a, 1), a, cfg_.n_embd, &x) || !input(nth(g, b, 1), b, cfg_.n_embd, &y)) return false;
            if (x.v.size() != y.v.size()) {
                why_ = fmt::format("{}'s {} and {} differ in size", opt_.source, a, b);
                return false;
            }
            *out = add(x, y);
            return true;
        }
        const bool scaled_or_biased = [&] {
            for (const char* w : {"ffn_up_exps", "ffn_gate_exps", "ffn_gate_up_exps"})
                for (const char* tail : {".scale", ".bias"})
                    if (model_.find(blk(L, std::string(w) + tail))) return true;
            return false;
        }();
        if (prefix == "ffn_moe_swiglu") {
            const std::string a = fmt::format("ffn_moe_gate-{}", L), b = fmt::format("ffn_moe_up-{}", L);
            if (scaled_or_biased) {
                why_ = fmt::format("no local recomputation for {}: it reads the experts' scaled or biased products", lname);
                return false;
            }
            Values gate, up;
            if (!input(nth(g, a, 1), a, cfg_.n_ff_expert, &gate) || !input(nth(g, b, 1), b, cfg_.n_ff_expert, &up)) return false;
            if (gate.v.size() != up.v.size()) {
                why_ = fmt::format("{}'s {} and {} differ in size", opt_.source, a, b);
                return false;
            }
            *out = gate;
            Tensor gt = make_tensor(gate.v.data(), gate.ne[0], gate.cols()), ut = make_tensor(up.v.data(), up.ne[0], up.cols());
            Tensor y = make_tensor(out->v.data(), out->ne[0], out->cols());
            be_->swiglu(gt, ut, y, mode_);
            return true;
        }
        // What the router and the experts read: the normed FFN input (gpt-oss: the post-attention norm).
        const std::string norm = list(g, fmt::format("ffn_norm-{}", L)) ? fmt::format("ffn_norm-{}", L) : fmt::format("attn_post_norm-{}", L);
        Values x;
        if (prefix == "ffn_moe_logits")
            return input(nth(g, norm, 1), norm, cfg_.n_embd, &x) && matmul(blk(L, "ffn_gate_inp.weight"), x, out);
        if (model_.find(blk(L, "ffn_gate_up_exps.weight")) && (prefix == "ffn_moe_up" || prefix == "ffn_moe_gate")) {
            why_ = fmt::format("{} is a view of ffn_moe_gate_up-{}, the product recomputed", lname, L);
            return false;
        }
        std::vector<int32_t> ids;
        if (!chosen_experts(g, L, &ids)) return false;
        if (prefix == "ffn_moe_down") {
            const std::string plain = fmt::format("ffn_moe_swiglu-{}", L);
            const std::string in = list(g, plain) ? plain : fmt::format("ffn_moe_swiglu_oai-{}", L);
            if (!input(nth(g, in, 1), in, cfg_.n_ff_expert, &x)) return false;
        } else if (!input(nth(g, norm, 1), norm, cfg_.n_embd, &x)) {
            return false;
        }
        const char* w = prefix == "ffn_moe_up"     ? "ffn_up_exps.weight"
                        : prefix == "ffn_moe_gate" ? "ffn_gate_exps.weight"
                        : prefix == "ffn_moe_down" ? "ffn_down_exps.weight"
                                                   : "ffn_gate_up_exps.weight";
        return matmul_id(blk(L, w), x, ids, cfg_.n_expert_used, out);
    }

    // ---- deepseek2's latent attention: the products after the first ones (the query's
    // up-projection, the legacy kv_b, the absorbed key and value products per head)

    bool mla_event(const std::string& prefix, const CapturedEvent& e) const {
        if (cfg_.arch != Arch::kDeepseek2) return false;
        if (prefix == "q")  // q_b's product: the third q event (q_a's product, its norm, q_b's)
            return cfg_.q_lora_rank > 0 && (e.op == Op::kMulMat || (e.op == Op::kNone && e.occurrence == 3)) && e.occurrence > 1;
        return prefix == "kv" || prefix == "q_nope_absorbed" || prefix == "kqv_mla" || prefix == "fattn_mla";
    }

    bool compute_mla(const std::string& prefix, int L, const Group& g, Values* out, const RefTensor** target) {
        const std::string lname = fmt::format("{}-{}", prefix, L);
        Values x;
        if (prefix == "q") {
            const auto* l = list(g, lname);
            const RefTensor* in = nth(g, lname, 2);
            *target = nth(g, lname, 3);
            if (l && ops_known(*l)) {  // the products by their op: q_b's is the second
                std::vector<const RefTensor*> products;
                for (const RefTensor* t : *l)
                    if (t->op == "MUL_MAT") products.push_back(t);
                *target = products.size() >= 2 ? products[1] : nullptr;
            }
            return input(in, lname + " (normed)", cfg_.q_lora_rank, &x) && matmul(blk(L, "attn_q_b.weight"), x, out);
        }
        if (prefix == "kv") {  // the legacy kv_b on the normed latent (kv_cmpr's last event)
            const auto* l = list(g, fmt::format("kv_cmpr-{}", L));
            *target = nth(g, lname, 1);
            return input(l ? l->back() : nullptr, fmt::format("kv_cmpr-{} (normed)", L), cfg_.kv_lora_rank, &x) &&
                   matmul(blk(L, "attn_kv_b.weight"), x, out);
        }
        *target = nth(g, lname, 1);
        if (prefix == "q_nope_absorbed") {  // k_b per head on q_nope {nope, T, H}
            const std::string in = fmt::format("q_nope_perm-{}", L);
            return input(nth(g, in, 1), in, cfg_.qk_nope_dim(), &x) &&
                   head_matmul(blk(L, "attn_k_b.weight"), x, true, out);
        }
        if (prefix == "kqv_mla")  // v_b per head on the heads' latent outputs {kv_lora, T, H}
            return input(nth(g, fmt::format("kqv-{}", L), 1), fmt::format("kqv-{}", L), cfg_.kv_lora_rank, &x) &&
                   head_matmul(blk(L, "attn_v_b.weight"), x, true, out);
        // fattn_mla: v_b per head on flash attention's output {kv_lora, H, T}
        const RefTensor* fa = nullptr;
        if (const auto* l = list(g, fmt::format("kqv_out-{}", L)))
            for (const RefTensor* t : *l)
                if (t->op == "FLASH_ATTN_EXT") fa = t;
        return input(fa, fmt::format("flash attention's output of layer {}", L), cfg_.kv_lora_rank, &x) &&
               head_matmul(blk(L, "attn_v_b.weight"), x, false, out);
    }

    // Our op of event `index` on the reference's inputs: `out` and the reference tensor to compare
    // it with. False with why_ when an input is missing.
    bool compute(size_t index, const CapturedEvent& e, const Group& g, Values* out, const RefTensor** target) {
        const auto [prefix, L] = split_base(e.base_name);
        const int64_t n_embd = cfg_.n_embd, hd = cfg_.head_dim_k, hd_v = cfg_.head_dim_v;
        const int64_t n_head = cfg_.n_head, n_head_kv = cfg_.n_head_kv, T = n_tokens_.at(g);
        const std::string lname = L >= 0 ? fmt::format("{}-{}", prefix, L) : prefix;
        // The residual stream entering layer L.
        auto residual_in = [&](int layer) {
            return layer == 0 ? nth(g, "embd", 1) : nth(g, fmt::format("l_out-{}", layer - 1), 1);
        };
        auto residual_name = [&](int layer) { return layer == 0 ? std::string("embd") : fmt::format("l_out-{}", layer - 1); };

        if (prefix == "embd") {
            std::vector<int32_t> tokens;
            auto it = inputs_.find({g.first, g.second, "inp_tokens"});
            if (it != inputs_.end() && it->second->complete())
                for (float f : ref_.values(*it->second)) tokens.push_back(static_cast<int32_t>(f));
            else if (g == Group{0, 0} && static_cast<int64_t>(run_.prompt.size()) == T)
                tokens = run_.prompt;
            if (tokens.empty()) {
                why_ = fmt::format("{} records no token ids (inp_tokens) for this call", opt_.source);
                return false;
            }
            Tensor table;
            if (!weight("token_embd.weight", &table)) return false;
            op_weight_ = "token_embd.weight";
            out->v.assign(static_cast<size_t>(table.ne[0] * tokens.size()), 0.0f);
            out->ne[0] = table.ne[0], out->ne[1] = static_cast<int64_t>(tokens.size());
            Tensor ids = make_tensor(tokens.data(), out->ne[1], 1, 1, 1, GgmlType::I32);
            Tensor y = make_tensor(out->v.data(), out->ne[0], out->ne[1]);
            be_->get_rows(table, ids, y);
            *target = nth(g, "embd", 1);
            return true;
        }
        if (prefix == "norm") {  // RMSNorm: before attention, before the FFN, before the head (no layer)
            // What a layer's norm normalizes: the MUL by its weight that follows it names it. Others
            // (deepseek2's query and latent norms, gemma's post norms) are not recomputed.
            const std::string role = next_base(index);
            if (L >= 0 && (role == "Qcur_normed" || role == "Kcur_normed")) {
                // qwen3's per-head norm of Q or K: over each head's rows, before RoPE.
                const std::string qk = fmt::format("{}-{}", role.substr(0, 4), L);
                Values x;
                if (!input(before_rope(g, qk, true), qk + " before RoPE", hd, &x)) return false;
                *out = rms(x);
                *target = nth(g, lname, e.occurrence);
                return true;
            }
            if (L < 0 ? !role.empty() && role != "result_norm" : role != "attn_norm" && role != "ffn_norm") {
                why_ = fmt::format("no local recomputation for the norm of {}", role.empty() ? "an unnamed op" : role);
                return false;
            }
            // The FFN's input: the attention's residual sum (gemma names it sa_out).
            std::string ffn_in = fmt::format("ffn_inp-{}", L);
            if (L >= 0 && !list(g, ffn_in) && list(g, fmt::format("sa_out-{}", L))) ffn_in = fmt::format("sa_out-{}", L);
            const std::string what = L < 0 ? fmt::format("l_out-{}", cfg_.n_layer - 1) : role == "attn_norm" ? residual_name(L) : ffn_in;
            const RefTensor* in = L >= 0 && role == "attn_norm" ? residual_in(L) : nth(g, what, 1);
            Values x;
            if (!input(in, what, n_embd, &x)) return false;
            *out = rms(x);
            *target = nth(g, lname, e.occurrence);
            return true;
        }
        if (prefix == "Qcur_normed" || prefix == "Kcur_normed") {  // the per-head norm times its weight
            const int k = previous_occurrence(index, fmt::format("norm-{}", L), prefix == "Qcur_normed" ? 2 : 3);
            Values x;
            if (!input(nth(g, fmt::format("norm-{}", L), k), fmt::format("norm-{}#{}", L, k), hd, &x) ||
                !mul_row(blk(L, prefix == "Qcur_normed" ? "attn_q_norm.weight" : "attn_k_norm.weight"), &x,
                         knobs_.norm_weight_twice))
                return false;
            *out = std::move(x);
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "attn_norm" || prefix == "ffn_norm" || prefix == "result_norm") {
            Values x;
            // Its input: the norm just before it (the second of a llama layer's, the last of deepseek2's).
            const int k = L < 0 ? previous_occurrence(index, "norm", 1)
                                : previous_occurrence(index, fmt::format("norm-{}", L), prefix == "attn_norm" ? 1 : 2);
            const RefTensor* in = L < 0 ? nth(g, "norm", k) : nth(g, fmt::format("norm-{}", L), k);
            const std::string w = L < 0 ? "output_norm.weight" : blk(L, prefix == "attn_norm" ? "attn_norm.weight" : "ffn_norm.weight");
            if (!input(in, fmt::format("{}{}", L < 0 ? "norm" : fmt::format("norm-{}", L), k > 1 ? fmt::format("#{}", k) : ""), n_embd, &x))
                return false;
            if (!mul_row(w, &x, knobs_.norm_weight_twice)) return false;
            *out = std::move(x);
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "wqkv") {  // phi3's fused q/k/v product
            Values x;
            if (!input(nth(g, fmt::format("attn_norm-{}", L), 1), fmt::format("attn_norm-{}", L), n_embd, &x) ||
                !matmul(blk(L, "attn_qkv.weight"), x, out))
                return false;
            *target = nth(g, lname, 1);
            return true;
        }
        if (cfg_.arch == Arch::kDeepseek2 && e.occurrence == 1 && (prefix == "q" || prefix == "kv_cmpr_pe")) {
            // deepseek2's first products of the normed input: the query (or its low-rank half) and
            // the compressed KV with the roped key.
            const std::string w = prefix == "kv_cmpr_pe"                      ? "attn_kv_a_mqa.weight"
                                  : model_.find(blk(L, "attn_q_a.weight")) ? "attn_q_a.weight"
                                                                             : "attn_q.weight";
            Values x;
            if (!input(nth(g, fmt::format("attn_norm-{}", L), 1), fmt::format("attn_norm-{}", L), n_embd, &x)) return false;
            if (!matmul(blk(L, w), x, out)) return false;
            *target = nth(g, lname, 1);
            return true;
        }
        if (moe_event(prefix, L)) return compute_moe(prefix, L, g, out, target);
        if (mla_event(prefix, e)) return compute_mla(prefix, L, g, out, target);
        if (cfg_.arch == Arch::kDeepseek2 && (prefix == "Qcur" || prefix == "Kcur" || prefix == "Vcur" || prefix == "kq" ||
                                              prefix == "kq_soft_max" || prefix == "kqv" || prefix == "kqv_out")) {
            why_ = fmt::format("no local recomputation for {} events of a deepseek2 model yet (multi-head latent attention)",
                               prefix);
            return false;
        }
        // phi3 and gemma scale Q after RoPE (phi3 with long-rope factors, gemma with per-layer RoPE
        // bases, windows and soft caps): their products and reshapes are recomputed, not RoPE or the
        // scores.
        if (scaled_q_ && (prefix == "kq" || prefix == "kq_soft_max" ||
                          ((prefix == "Qcur" || prefix == "Kcur") && e.op != Op::kMulMat && e.op != Op::kAdd &&
                           e.op != Op::kReshape && e.op != Op::kView))) {
            why_ = fmt::format("no local recomputation for {} events of a {} model yet (a scaled Q, RoPE factors or "
                               "bases of its own, soft caps)", prefix, cfg_.arch_name);
            return false;
        }
        if (cfg_.arch == Arch::kGptOss && (prefix == "kq_soft_max" || prefix == "kqv" || prefix == "kqv_out" ||
                                           prefix == "attn_post_norm")) {
            why_ = fmt::format("no local recomputation for {} events of a gpt-oss model yet (attention sinks, post norm)",
                               prefix);
            return false;
        }
        if (prefix == "Qcur" || prefix == "Kcur" || prefix == "Vcur") {
            const char* which = prefix == "Qcur" ? "attn_q" : prefix == "Kcur" ? "attn_k" : "attn_v";
            const bool has_rope = prefix != "Vcur";
            // Rows as the projection writes them: every head of a token in one row.
            const int64_t head = (prefix == "Qcur" ? n_head : n_head_kv) * (prefix == "Vcur" ? hd_v : hd);
            // What our event is: the product, the bias added, a reshape, or RoPE (by its op, or by
            // its place among our events of that name when a dump of ours records no op).
            Op op = e.op;
            if (op == Op::kNone) {
                int last = 0;
                for (const CapturedEvent& o : run_.captures.events)
                    if (o.decode == e.decode && o.ubatch == e.ubatch && o.base_name == e.base_name) last = std::max(last, o.occurrence);
                op = e.occurrence == 1 ? Op::kMulMat : has_rope && e.occurrence == last ? Op::kRope : Op::kReshape;
            }
            if (op == Op::kMulMat) {
                Values x;
                if (!input(nth(g, fmt::format("attn_norm-{}", L), 1), fmt::format("attn_norm-{}", L), n_embd, &x)) return false;
                if (!matmul(blk(L, fmt::format("{}.weight", which)), x, out)) return false;
                *target = projection(g, lname);
                return true;
            }
            if (op == Op::kAdd) {
                if (!input(projection(g, lname), lname + " (the product)", head, out)) return false;
                if (!add_row(blk(L, fmt::format("{}.bias", which)), out)) return false;
                *target = before_rope(g, lname, has_rope);
                return true;
            }
            if (op == Op::kRope) {
                // RoPE reads the per-head normed Q or K where the model norms them (qwen3).
                const std::string normed = fmt::format("{}_normed-{}", prefix, L);
                const bool qk_normed = list(g, normed) != nullptr;
                if (!input(qk_normed ? nth(g, normed, 1) : before_rope(g, lname, true), qk_normed ? normed : lname + " before RoPE",
                           hd, out))
                    return false;
                out->ne[0] = hd, out->ne[1] = prefix == "Qcur" ? n_head : n_head_kv, out->ne[2] = static_cast<int64_t>(out->v.size()) / (hd * out->ne[1]);
                if (out->ne[2] != T) {
                    why_ = fmt::format("{}'s {} before RoPE does not hold {} tokens", opt_.source, lname, T);
                    return false;
                }
                if (!knobs_.rope_skipped) {
                    std::vector<int32_t> pos = positions(g, knobs_.rope_position_offset);
                    Tensor xt = make_tensor(out->v.data(), out->ne[0], out->ne[1], out->ne[2]);
                    const Tensor pt = make_tensor(pos.data(), T, 1, 1, 1, GgmlType::I32);
                    const Tensor ff = rope_freqs_.empty() ? Tensor{} : make_tensor(rope_freqs_.data(), static_cast<int64_t>(rope_freqs_.size()));
                    be_->rope(xt, pt, ff, rope_, mode_);
                }
                *target = roped(g, lname);
                return true;
            }
            // A reshape: the value before RoPE as our engine has it, from the previous event of ours
            // of that name (the product, so a bias our engine adds is added here; or the bias ADD).
            const CapturedEvent* prev = nullptr;
            for (size_t i = index; i-- > 0;) {
                const CapturedEvent& o = run_.captures.events[i];
                if (o.decode != e.decode || o.ubatch != e.ubatch) break;
                if (o.base_name == e.base_name) {
                    prev = &o;
                    break;
                }
            }
            const bool after_product = !prev || prev->op == Op::kMulMat || (prev->op == Op::kNone && prev->occurrence == 1);
            if (!input(after_product ? projection(g, lname) : before_rope(g, lname, has_rope), lname, head, out)) return false;
            *target = before_rope(g, lname, has_rope);
            return true;
        }
        if (prefix == "kq" || prefix == "kq_soft_max" || prefix == "kqv") {
            const std::vector<int32_t> pos = positions(g, 0);
            const Tensor pt = make_tensor(const_cast<int32_t*>(pos.data()), T, 1, 1, 1, GgmlType::I32);
            const int64_t n_kv = starts_.at(g) + T;
            if (prefix == "kq") {
                Values q;
                std::vector<float> k, v;
                int64_t cells = 0;
                if (!input(roped(g, fmt::format("Qcur-{}", L)), fmt::format("roped Qcur-{}", L), hd, &q)) return false;
                if (q.v.size() != static_cast<size_t>(hd * n_head * T)) {
                    why_ = fmt::format("{}'s roped Qcur-{} does not hold {} tokens", opt_.source, L, T);
                    return false;
                }
                if (!kv_cache(L, g, &k, &v, &cells)) return false;
                Tensor qt = make_tensor(q.v.data(), hd, n_head, T);
                Tensor ck = make_tensor(k.data(), hd, n_head_kv, cells);
                out->v.assign(static_cast<size_t>(n_kv * T * n_head), 0.0f);
                out->ne[0] = n_kv, out->ne[1] = T, out->ne[2] = n_head;
                Tensor y = make_tensor(out->v.data(), n_kv, T, n_head);
                be_->attn_scores(qt, ck, n_kv, y, mode_);
            } else if (prefix == "kq_soft_max") {
                Values kq;
                if (!input(nth(g, fmt::format("kq-{}", L), 1), fmt::format("kq-{}", L), n_kv, &kq, T * n_head)) return false;
                out->v.assign(kq.v.size(), 0.0f);
                out->ne[0] = n_kv, out->ne[1] = T, out->ne[2] = n_head;
                Tensor in = make_tensor(kq.v.data(), n_kv, T, n_head), y = make_tensor(out->v.data(), n_kv, T, n_head);
                be_->softmax_masked(in, kq_scale_, pt, knobs_.causal_mask, y, mode_);
            } else {
                Values p;
                std::vector<float> k, v;
                int64_t cells = 0;
                if (!input(nth(g, fmt::format("kq_soft_max-{}", L), 1), fmt::format("kq_soft_max-{}", L), n_kv, &p, T * n_head))
                    return false;
                if (!kv_cache(L, g, &k, &v, &cells)) return false;
                Tensor pt2 = make_tensor(p.v.data(), n_kv, T, n_head), cv = make_tensor(v.data(), hd_v, n_head_kv, cells);
                out->v.assign(static_cast<size_t>(hd_v * T * n_head), 0.0f);
                out->ne[0] = hd_v, out->ne[1] = T, out->ne[2] = n_head;
                Tensor y = make_tensor(out->v.data(), hd_v, T, n_head);
                be_->attn_values(pt2, cv, n_kv, y, mode_);
            }
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "kqv_out") {
            out->v.assign(static_cast<size_t>(hd_v * n_head * T), 0.0f);
            out->ne[0] = hd_v * n_head, out->ne[1] = T;
            Tensor y = make_tensor(out->v.data(), hd_v * n_head, T);
            if (opt_.forward.flash_attn && mode_ == MathMode::kLlama) {
                // Flash attention reads the Q the graph hands it: scaled after RoPE in phi3 and gemma,
                // and gemma's windows and caps are not recomputed here yet.
                if (scaled_q_) {
                    why_ = fmt::format("no local recomputation for flash attention's kqv_out in a {} model yet (a scaled "
                                       "Q, sliding windows or soft caps)", cfg_.arch_name);
                    return false;
                }
                Values q;
                std::vector<float> k, v;
                int64_t cells = 0;
                if (!input(roped(g, fmt::format("Qcur-{}", L)), fmt::format("roped Qcur-{}", L), hd, &q)) return false;
                if (q.v.size() != static_cast<size_t>(hd * n_head * T)) {
                    why_ = fmt::format("{}'s roped Qcur-{} does not hold {} tokens", opt_.source, L, T);
                    return false;
                }
                if (!kv_cache(L, g, &k, &v, &cells)) return false;
                const std::vector<int32_t> pos = positions(g, 0);
                const Tensor pt = make_tensor(const_cast<int32_t*>(pos.data()), T, 1, 1, 1, GgmlType::I32);
                Tensor qt = make_tensor(q.v.data(), hd, n_head, T), ck = make_tensor(k.data(), hd, n_head_kv, cells),
                       cv = make_tensor(v.data(), hd_v, n_head_kv, cells);
                Tensor fa = y.reshaped(hd_v, n_head, T);
                be_->attn_flash(qt, ck, cv, starts_.at(g) + T, kq_scale_, pt, knobs_.causal_mask, fa);
            } else {
                Values kqv;
                if (!input(nth(g, fmt::format("kqv-{}", L), 1), fmt::format("kqv-{}", L), hd_v, &kqv)) return false;
                if (kqv.v.size() != out->v.size()) {
                    why_ = fmt::format("{}'s kqv-{} does not hold {} tokens", opt_.source, L, T);
                    return false;
                }
                Tensor x = make_tensor(kqv.v.data(), hd_v, T, n_head);
                be_->merge_heads(x, y);
            }
            *target = nth(g, lname, 1);
            return true;
        }
        // Products are recomputed in every model; what gemma does after them (post norms, its scaled
        // embeddings, the final soft cap) and the sums of models with output biases are not yet.
        const bool product = e.op == Op::kMulMat;
        if (gemma_ && (prefix == "sa_out" || prefix == "l_out" || prefix == "inp_scaled" || (prefix == "result_output" && !product))) {
            why_ = fmt::format("no local recomputation for {} events of a {} model yet (post norms, scaled embeddings, soft "
                               "caps)", prefix, cfg_.arch_name);
            return false;
        }
        if (output_biases_ && !product &&
            (prefix == "attn_out" || (prefix.rfind("ffn_", 0) == 0 && prefix != "ffn_norm") || prefix == "ffn_inp" ||
             prefix == "l_out" || prefix == "result_output")) {
            why_ = fmt::format("no local recomputation for {} events of a model with output or feed-forward biases yet", prefix);
            return false;
        }
        if (prefix == "attn_out" || prefix == "ffn_gate" || prefix == "ffn_up" || prefix == "ffn_out" || prefix == "ffn_down") {
            // The down product reads the gated activation (GEGLU in gemma); it is ffn_down where a
            // bias follows it.
            const bool down = prefix == "ffn_out" || prefix == "ffn_down";
            const std::string act = list(g, fmt::format("ffn_geglu-{}", L)) ? "ffn_geglu" : "ffn_swiglu";
            const std::string in = prefix == "attn_out" ? fmt::format("kqv_out-{}", L)
                                   : down               ? fmt::format("{}-{}", act, L)
                                                        : fmt::format("ffn_norm-{}", L);
            const std::string stem = prefix == "attn_out" ? "attn_output" : prefix == "ffn_gate" ? "ffn_gate"
                                     : prefix == "ffn_up"   ? "ffn_up"      : "ffn_down";
            std::string w = blk(L, stem + ".weight");
            // A MoE layer's gate and up products are its shared experts'.
            const std::string shexp = blk(L, stem + "_shexp.weight");
            if (!model_.find(w) && prefix != "attn_out" && model_.find(shexp)) w = shexp;
            Tensor wt;
            if (!weight(w, &wt)) return false;
            // attn_out reads llama.cpp's kqv_out, the last of that name (flash attention's output comes
            // first, under our name for it).
            const auto* l = list(g, in);
            const RefTensor* x_ref = prefix == "attn_out" && l ? l->back() : nth(g, in, 1);
            Values x;
            if (!input(x_ref, in, wt.ne[0], &x) || !matmul(w, x, out)) return false;
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "ffn_swiglu" || prefix == "ffn_geglu") {
            // The layer's FFN width: its gate's rows (a MoE layer's shared experts have their own).
            const GgufTensorInfo* gate_w = model_.find(blk(L, "ffn_gate.weight"));
            if (!gate_w) gate_w = model_.find(blk(L, "ffn_gate_shexp.weight"));
            const int64_t n_ff = gate_w ? gate_w->ne[1] : cfg_.n_ff;
            Values gate, up;
            if (!gate_w && model_.find(blk(L, "ffn_up.weight"))) {
                // phi3's fused up: each column's first half is the gate, the second the up.
                Values both;
                if (!input(nth(g, fmt::format("ffn_up-{}", L), 1), fmt::format("ffn_up-{}", L), 2 * n_ff, &both)) return false;
                gate.ne[0] = up.ne[0] = n_ff;
                gate.ne[1] = up.ne[1] = both.cols();
                for (int64_t t = 0; t < both.cols(); ++t) {
                    gate.v.insert(gate.v.end(), both.v.begin() + t * 2 * n_ff, both.v.begin() + t * 2 * n_ff + n_ff);
                    up.v.insert(up.v.end(), both.v.begin() + t * 2 * n_ff + n_ff, both.v.begin() + (t + 1) * 2 * n_ff);
                }
            } else if (!input(nth(g, fmt::format("ffn_gate-{}", L), 1), fmt::format("ffn_gate-{}", L), n_ff, &gate) ||
                       !input(nth(g, fmt::format("ffn_up-{}", L), 1), fmt::format("ffn_up-{}", L), n_ff, &up)) {
                return false;
            }
            if (gate.v.size() != up.v.size()) {
                why_ = fmt::format("{}'s ffn_gate-{} and ffn_up-{} differ in size", opt_.source, L, L);
                return false;
            }
            *out = gate;
            Tensor gt = make_tensor(gate.v.data(), gate.ne[0], gate.cols()), ut = make_tensor(up.v.data(), up.ne[0], up.cols());
            Tensor y = make_tensor(out->v.data(), out->ne[0], out->cols());
            if (prefix == "ffn_geglu") be_->geglu(gt, ut, y, mode_);
            else be_->swiglu(gt, ut, y, mode_);
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "ffn_inp" || prefix == "l_out") {
            std::string a = prefix == "ffn_inp" ? fmt::format("attn_out-{}", L) : fmt::format("ffn_out-{}", L);
            if (prefix == "l_out" && cfg_.layer_is_moe(L) && !list(g, a)) a = fmt::format("ffn_moe_out-{}", L);
            const std::string b = prefix == "ffn_inp" ? residual_name(L) : fmt::format("ffn_inp-{}", L);
            Values x, r;
            if (!input(nth(g, a, 1), a, n_embd, &x) || !input(nth(g, b, 1), b, n_embd, &r)) return false;
            // The last layer keeps only the output rows: both operands take them.
            if (x.cols() > r.cols()) keep_rows(&x, r.cols(), g);
            if (r.cols() > x.cols()) keep_rows(&r, x.cols(), g);
            *out = add(x, r);
            *target = nth(g, lname, 1);
            return true;
        }
        if (prefix == "result_output") {
            Values x;
            const std::string w = model_.find("output.weight") ? "output.weight" : "token_embd.weight";
            if (!input(nth(g, "result_norm", 1), "result_norm", n_embd, &x) || !matmul(w, x, out)) return false;
            if (knobs_.logits_rows > out->ne[0]) {
                // Our logits rows are padded: the extra rows are not the LM head's.
                Values padded;
                padded.ne[0] = knobs_.logits_rows, padded.ne[1] = out->ne[1];
                padded.v.assign(static_cast<size_t>(padded.ne[0] * padded.ne[1]), 0.0f);
                for (int64_t t = 0; t < out->ne[1]; ++t)
                    std::copy(out->v.begin() + t * out->ne[0], out->v.begin() + (t + 1) * out->ne[0], padded.v.begin() + t * padded.ne[0]);
                *out = std::move(padded);
            }
            *target = run_.comparisons[index].ref_name.empty() ? nth(g, "result_output", 1) : ref_.find(run_.comparisons[index].ref_name);
            return true;
        }
        why_ = fmt::format("no local recomputation for {} events", prefix);
        return false;
    }

    struct Loaded {
        FaultWeight rewritten;
        Tensor tensor;
    };

    const Model& model_;
    const ModelConfig& cfg_;
    const ReferenceDump& ref_;
    const LocalErrorOptions& opt_;
    const CompareRunResult& run_;
    std::unique_ptr<Backend> be_;
    MathMode mode_ = MathMode::kLlama;
    FaultKnobs knobs_;
    RopeParams rope_;
    std::vector<float> rope_freqs_;  // the model's frequency factors, empty without (or with the fault)
    bool output_biases_ = false;     // attn_output / ffn / output biases: products not recomputed
    bool scaled_q_ = false;          // phi3, gemma: Q scaled after RoPE (and long-rope factors, per-layer RoPE
                                     // bases, windows, soft caps): RoPE and the scores not recomputed
    bool gemma_ = false;             // gemma2/gemma3: post norms, GEGLU, soft caps and windows not recomputed
    float kq_scale_ = 1, rms_eps_ = 0;
    std::map<std::tuple<int, int, std::string>, std::vector<const RefTensor*>> by_base_;
    std::map<std::tuple<int, int, std::string>, const RefTensor*> inputs_;
    std::vector<Group> order_;
    std::map<Group, int64_t> starts_, n_tokens_;
    std::map<std::string, Loaded> weights_;
    std::string why_;
    std::string op_weight_;  // the weight the current event's op read rows of (a product's, or the embeddings)
};

}  // namespace

double compute_local_errors(const Model* model, const ReferenceDump& reference, const LocalErrorOptions& options,
                            CompareRunResult& run) {
    if (!model) return 0;
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<LocalPass> pass;
    for (size_t i = 0; i < run.comparisons.size() && i < run.captures.events.size(); ++i) {
        EventComparison& c = run.comparisons[i];
        if (c.status != CompareStatus::kWarn && c.status != CompareStatus::kDiverged) continue;
        if (c.partial) {
            c.local_origin = LocalOrigin::kUnknown;
            c.local_why = options.source + " holds only printed values";
            continue;
        }
        if (!pass) pass = std::make_unique<LocalPass>(*model, reference, options, run);
        pass->measure(i, c);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<const EventComparison*> attribution(const std::vector<EventComparison>& comparisons) {
    std::map<std::string, const EventComparison*> worst;
    for (const EventComparison& c : comparisons) {
        if (c.local_weight.empty() || (c.local_origin != LocalOrigin::kLocal && c.local_origin != LocalOrigin::kInherited))
            continue;
        const EventComparison*& w = worst[c.local_weight];
        if (!w || c.local_nmse > w->local_nmse) w = &c;
    }
    std::vector<const EventComparison*> out;
    for (const auto& [name, c] : worst) out.push_back(c);
    std::stable_sort(out.begin(), out.end(), [](const EventComparison* a, const EventComparison* b) {
        return a->local_nmse > b->local_nmse || (a->local_nmse == b->local_nmse && a->event_index < b->event_index);
    });
    return out;
}

LocalSummary summarize_local(const std::vector<EventComparison>& comparisons) {
    LocalSummary s;
    for (size_t i = 0; i < comparisons.size(); ++i) {
        switch (comparisons[i].local_origin) {
            case LocalOrigin::kNotComputed: break;
            case LocalOrigin::kUnknown:
                ++s.unknown;
                if (comparisons[i].local_why.rfind(kNotRecomputed, 0) == 0) ++s.not_recomputed;
                break;
            case LocalOrigin::kInherited: ++s.inherited; break;
            case LocalOrigin::kLocal:
                if (s.origin < 0) s.origin = static_cast<int64_t>(i);
                ++s.local;
                break;
        }
    }
    return s;
}

std::string local_summary_line(const std::vector<EventComparison>& comparisons, bool two_formats) {
    const LocalSummary s = summarize_local(comparisons);
    if (s.local + s.inherited + s.unknown == 0) return "";
    std::string unknown;
    if (s.unknown > 0) {
        const int missing = s.unknown - s.not_recomputed;
        unknown = fmt::format("; {} unknown ({}{}{})", s.unknown,
                              s.not_recomputed ? fmt::format("{} not recomputed yet", s.not_recomputed) : "",
                              s.not_recomputed && missing ? ", " : "", missing ? fmt::format("{} lacking an input", missing) : "");
    }
    if (s.origin < 0)
        return fmt::format("no event has a large local error: {} warn/diverged events only inherited theirs{}", s.inherited, unknown);
    const EventComparison& c = comparisons[static_cast<size_t>(s.origin)];
    std::string more = s.local > 1 ? fmt::format("; {} more with a large local error of their own", s.local - 1) : "";
    // Two formats of one model: every weight adds its own error, none of them is "the bug".
    if (two_formats)
        return fmt::format("the first op with a large error of its own is {} (event {}): local nmse {:.3g}; {} other "
                           "warn/diverged events only inherited theirs{}{}",
                           c.name, c.event_index, c.local_nmse, s.inherited, more, unknown);
    return fmt::format("the bug is local to {} (event {}): local nmse {:.3g}; {} other warn/diverged events only inherited it{}{}",
                       c.name, c.event_index, c.local_nmse, s.inherited, more, unknown);
}

}  // namespace ls
