// Doctor transforms: each recomputes our side of a diverged event with one known bug undone (or
// done), on the host, and checks the reference.
#include "engine/compare/doctor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "kernels/common/fp16.h"
#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/common/host_memory.h"
#include "kernels/cpu/dequant.h"
#include "kernels/host_ops.h"
#include "engine/compare/llama_variant.h"
#include "engine/forward/faults.h"
#include "engine/forward/forward.h"
#include "engine/forward/model.h"
#include "engine/model/model_config.h"

namespace ls {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Whether a copy of the whole reference tensor fits in half the memory left (a mapped .npy file
// may be far larger than anything it could be paired with).
bool fits_in_memory(const RefTensor& t) {
    const HostMemory host = available_host_memory();
    return !host.known || t.n_bytes() <= host.available_bytes / 2;
}

int layer_of(const std::string& base) {
    size_t dash = base.rfind('-');
    if (dash == std::string::npos) return -1;
    try {
        return std::stoi(base.substr(dash + 1));
    } catch (...) {
        return -1;
    }
}

// The event of ours just before `index` in the same graph evaluation with base name `base`, when
// its values are at hand (a dump comparison reads only those the doctor needs).
const CapturedEvent* previous(const CaptureLog& log, size_t index, const std::string& base) {
    for (size_t i = index; i-- > 0;) {
        const CapturedEvent& e = log.events[i];
        if (e.decode != log.events[index].decode || e.ubatch != log.events[index].ubatch) break;
        if (e.base_name == base) return e.data.empty() ? nullptr : &e;
    }
    return nullptr;
}

double finite_nmse(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || a.empty()) return std::numeric_limits<double>::infinity();
    const Metrics m = compute_metrics(a.data(), b.data(), static_cast<int64_t>(a.size()));
    return m.n_nonfinite == 0 && std::isfinite(m.nmse) ? m.nmse : std::numeric_limits<double>::infinity();
}

std::vector<float> dequantized(const Model& model, const std::string& name, int64_t* rows, int64_t* cols) {
    const GgufTensorInfo* t = model.find(name);
    if (!t || !can_dequantize(t->type)) return {};
    *cols = t->ne[0];
    *rows = t->n_rows();
    std::vector<float> out(static_cast<size_t>(t->n_elements()));
    dequantize_rows(t->type, t->data, 0, out.data(), *rows, *cols);
    return out;
}

class Doctor {
public:
    Doctor(const CompareRunResult& run, size_t event, const ReferenceDump& ref, const Model* model, const CompareThresholds& th,
           const DoctorProgress& progress)
        : run_(run), index_(event), ref_(ref), model_(model), th_(th), ours_(run.captures.events[event]),
          cmp_(run.comparisons[event]), progress_(progress) {
        if (const RefTensor* r = ref.find(cmp_.ref_name)) {
            ref_tensor_ = r;
            // The reference's values as paired with ours (output rows, KV cells); all of them when
            // the shapes cannot be paired (transforms may then fix the shape, e.g. a vocab crop).
            AlignedValues a;
            std::string why;
            if (!r->complete()) {
                // A text log: transforms are checked at the printed positions (same shape only).
                if (r->n_elements() == static_cast<int64_t>(ours_.data.size())) samples_ = &r->samples;
            } else {
                if (align_with_reference(ours_.data.data(), ours_.ne, ref, *r, &a, &why)) ref_values_ = a.ref;
                else if (fits_in_memory(*r)) ref_values_ = ref.values(*r);
            }
        }
        before_ = cmp_.metrics.nmse;
        // The per-event noise floor the comparison was judged against, when it had one.
        floor_ = std::max(0.0, cmp_.floor_nmse);
    }

    DoctorReport run() {
        if (!ref_tensor_ || (ref_values_.empty() && !samples_)) return report_;
        const std::string& base = ours_.base_name;
        const int L = layer_of(base);
        if (ours_.op == Op::kRope) try_rope(L);
        if (ours_.op == Op::kView && (starts_with(base, "Qcur") || starts_with(base, "Kcur") || starts_with(base, "Vcur")))
            try_qkv_split(base, L);
        if (ours_.op == Op::kMulMat && (starts_with(base, "Qcur") || starts_with(base, "Kcur") ||
                                                   starts_with(base, "Vcur") || starts_with(base, "attn_out") ||
                                                   starts_with(base, "ffn_")))
            try_transpose(base, L);
        if (starts_with(base, "Qcur") || starts_with(base, "Kcur") || starts_with(base, "Vcur")) try_bias(base, L);
        if (starts_with(base, "kq_soft_max")) try_softmax(L);
        if (ours_.op == Op::kRmsNorm) try_epsilon();
        if (starts_with(base, "attn_norm") || starts_with(base, "ffn_norm") || base == "result_norm" ||
            starts_with(base, "attn_post_norm") || base == "h_nextn")
            try_norm_weight(base, L);
        if (model_ && model_->config().layer_is_recurrent(L)) {  // qwen35's Gated DeltaNet layers
            if (starts_with(base, "conv_state_last-")) try_conv_state(L);
            if (starts_with(base, "gate-")) try_decay_gate(L);
            if (base == fmt::format("norm-{}", L) && ours_.occurrence == 2) try_gated_norm(L);
            if (starts_with(base, "new_state-") || (starts_with(base, "attn_output-") && ours_.op == Op::kView))
                try_delta_rule(base, L);
        }
        if (base == "result_output") try_vocab_crop();
        if (base == "inp_scaled") try_embd_scale();
        if (base == "embd") try_q4k_swap();
        if (starts_with(base, "Qcur") || starts_with(base, "Kcur") || starts_with(base, "Vcur")) try_mla_form(base);
        if (starts_with(base, "ffn_moe_argsort")) try_moe_ranking(L);
        if (starts_with(base, "ffn_moe_weights-")) try_moe_bias_weights(L);
        if (starts_with(base, "ffn_moe_group_topk")) try_moe_groups(L);
        if (starts_with(base, "ffn_moe_gate-") || starts_with(base, "ffn_moe_up-")) try_moe_gate_up(base, L);
        if (starts_with(base, "ffn_moe_weighted")) try_moe_weights(L);
        if (starts_with(base, "ffn_moe_probs-")) try_moe_gating(L);
        if (starts_with(base, "ffn_moe_swiglu_oai")) try_swiglu_oai(L);
        if (starts_with(base, "ffn_moe_up-") || starts_with(base, "ffn_moe_gate-") || starts_with(base, "ffn_moe_down-"))
            try_mxfp4(base, L);
        try_scales();
        try_f16();
        if (report_.findings.empty() && !report_.cancelled) try_span();
        std::stable_sort(report_.findings.begin(), report_.findings.end(),
                         [](const DoctorFinding& a, const DoctorFinding& b) { return a.nmse_after < b.nmse_after; });
        return report_;
    }

private:
    // Accepts `candidate` (our values with a transform) when it matches the reference element for
    // element (any shape with the same element count), well within the divergence threshold.
    void consider(const std::string& transform, const std::string& verdict, const std::vector<float>& candidate) {
        if (!keep_going(transform)) return;
        report_.tried.push_back(transform);
        Metrics m;
        if (samples_) {
            std::vector<float> a, b;
            for (const auto& [index, value] : *samples_)
                if (index >= 0 && index < static_cast<int64_t>(candidate.size())) a.push_back(candidate[index]), b.push_back(value);
            if (a.empty() || candidate.size() != ours_.data.size()) return;
            m = compute_metrics(a.data(), b.data(), static_cast<int64_t>(a.size()));
            // Printed with 4 decimals: within half a digit is a match.
            if (m.max_abs <= 0.6e-4) m.nmse = 0;
        } else {
            if (candidate.size() != ref_values_.size()) return;
            m = compute_metrics(candidate.data(), ref_values_.data(), static_cast<int64_t>(candidate.size()));
        }
        const bool explains = m.n_nonfinite == 0 && m.nmse <= bar(floor_) && !(m.nmse * 100 > before_ && before_ > 0);
        if (explains) report_.findings.push_back(finding(transform, verdict, m.nmse, floor_));
    }

    // The NMSE under which a transform explains the reference: a tenth of the divergence
    // threshold, or, where the weight format and math mode leave more than that between two
    // correct engines (quantized weights, activations quantized for their dot products), 10x that
    // floor.
    double bar(double floor) const { return std::max(th_.diverged_nmse / 10, kFloorWarnFactor * floor); }

    DoctorFinding finding(const std::string& transform, std::string verdict, double after, double floor) const {
        const bool raised = kFloorWarnFactor * floor > th_.diverged_nmse / 10;
        if (raised)
            verdict += fmt::format(" (judged against the noise floor nmse {:.3g}: {})", floor,
                                   floor_source_.empty() ? "the comparison's per-event floor" : floor_source_);
        DoctorFinding f{transform, std::move(verdict), before_, after};
        f.floor_nmse = raised ? floor : 0;
        return f;
    }

    // Rows of ours that the reference kept (its last layer keeps only output rows).
    std::vector<float> ours_aligned(const std::vector<float>& full) const {
        if (samples_) return full;
        AlignedValues a;
        std::string why;
        if (align_with_reference(full.data(), ours_.ne, ref_, *ref_tensor_, &a, &why)) return a.ours;
        return full;
    }

    // Candidate recomputations: which one the reference matches and which one ours matches name
    // the difference ("pairs are X instead of Y").
    struct Candidate {
        std::string what;  // "interleaved pairs (NORM) at positions 0..", ...
        std::vector<float> values;
    };
    bool close(const std::vector<float>& a, const std::vector<float>& b) const {
        if (a.size() != b.size() || a.empty()) return false;
        Metrics m = compute_metrics(a.data(), b.data(), static_cast<int64_t>(a.size()));
        return m.n_nonfinite == 0 && m.nmse <= th_.diverged_nmse / 10;
    }
    void judge(const std::string& transform, const std::string& subject, const std::vector<Candidate>& candidates) {
        const std::vector<float> ours = ours_aligned(ours_.data);
        const Candidate* ours_is = nullptr;
        for (const Candidate& c : candidates)
            if (close(c.values, ours)) {
                ours_is = &c;
                break;
            }
        for (const Candidate& c : candidates) {
            if (&c == ours_is) continue;
            std::string verdict = fmt::format("{} matches the reference if {} is {}", ours_.name, subject, c.what);
            if (ours_is) verdict += fmt::format(" instead of {}", ours_is->what);
            consider(transform, verdict, c.values);
        }
    }

    void try_rope(int L) {
        if (!model_) return;
        // The rope input is the last Q/K tensor before this one (reshape, or the bias ADD; qwen3's
        // per-head norm, Qcur_normed-L). `raw` is the last of the same name (before any norm).
        const std::string prefix = ours_.base_name.substr(0, ours_.base_name.find('-'));
        const std::string normed = fmt::format("{}_normed-{}", prefix, L);
        const CapturedEvent* in = nullptr;
        const CapturedEvent* raw = nullptr;
        for (size_t i = index_; i-- > 0;) {
            const CapturedEvent& e = run_.captures.events[i];
            if (e.decode != ours_.decode || e.ubatch != ours_.ubatch) continue;
            if (!in && (e.base_name == ours_.base_name || e.base_name == normed)) in = &e;
            if (e.base_name == ours_.base_name) {
                raw = &e;
                break;
            }
        }
        if (!in || in->data.size() != ours_.data.size()) return;
        const ModelConfig& cfg = model_->config();
        RopeParams clean = rope_params_for(cfg);
        // gemma's local layers rotate at their own base, scale 1; `swapped_kind` is this layer's
        // RoPE had the pattern made it the other kind.
        RopeParams swapped_kind = clean;
        swapped_kind.freq_base = static_cast<float>(cfg.rope_freq_base_swa);
        swapped_kind.freq_scale = 1.0f;
        if (cfg.layer_is_swa(L)) std::swap(clean, swapped_kind);
        RopeParams other = clean;
        other.mode = clean.mode == RopeMode::kNorm ? RopeMode::kNeox : RopeMode::kNorm;
        const int64_t T = ours_.ne[2];
        // Frequency factors divide the angles: Llama 3.1+'s rope_freqs, or one of phi3's LongRoPE
        // sets (short within the original context, long beyond: the set ours used is the one that
        // reproduces it, the other is a candidate).
        std::vector<RopeFactorSet> sets = rope_factor_sets(*model_);
        const std::vector<float>* factors = nullptr;
        auto roped_with = [&](const RopeParams& p, const std::vector<int32_t>& pos, const std::vector<float>* ff) {
            std::vector<float> v = in->data;
            Tensor t = make_tensor(v.data(), ours_.ne[0], ours_.ne[1], ours_.ne[2]);
            const Tensor pos_t = make_tensor(const_cast<int32_t*>(pos.data()), T, 1, 1, 1, GgmlType::I32);
            const Tensor ft = ff ? make_tensor(const_cast<float*>(ff->data()), static_cast<int64_t>(ff->size())) : Tensor{};
            backend()->rope(t, pos_t, ft, p, MathMode::kLlama);
            return ours_aligned(v);
        };
        auto roped = [&](const RopeParams& p, const std::vector<int32_t>& pos, bool with_factors = true) {
            return roped_with(p, pos, with_factors ? factors : nullptr);
        };
        auto positions = [&](int64_t first) {
            std::vector<int32_t> pos(static_cast<size_t>(T));
            for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(first + t);
            return pos;
        };
        const RopeFactorSet* base_set = sets.empty() ? nullptr : &sets[0];
        if (sets.size() > 1 && start_position() >= 0) {
            const std::vector<float> ours_now = ours_aligned(ours_.data);
            for (const RopeFactorSet& s : sets)
                if (close(roped_with(clean, positions(start_position()), &s.factors), ours_now)) base_set = &s;
        }
        if (base_set) factors = &base_set->factors;
        const char* pairing = clean.mode == RopeMode::kNorm ? "interleaved pairs (NORM)" : "halves (NEOX)";
        const char* other_pairing = clean.mode == RopeMode::kNorm ? "halves (NEOX)" : "interleaved pairs (NORM)";
        std::vector<int64_t> starts;
        const int64_t ours_start = start_position();
        if (ours_start >= 0) starts.push_back(ours_start);
        const int64_t ref_start = reference_start_position();
        if (ref_start >= 0 && ref_start != ours_start) starts.push_back(ref_start);
        std::vector<Candidate> cands;
        const std::string factor_name = base_set ? base_set->tensor.substr(0, base_set->tensor.find('.')) : "";
        const std::string with = base_set ? fmt::format(" with the {} factors", factor_name) : "";
        for (int64_t s : starts) {
            cands.push_back({fmt::format("{} at positions from {}{}", pairing, s, with), roped(clean, positions(s))});
            if (base_set)
                cands.push_back({fmt::format("{} at positions from {} without the {} factors (plain RoPE frequencies: "
                                             "{} ignored)", pairing, s, factor_name, base_set->tensor),
                                 roped(clean, positions(s), false)});
            for (const RopeFactorSet& other_set : sets)
                if (&other_set != base_set)
                    cands.push_back({fmt::format("{} at positions from {} with the {} factors", pairing, s,
                                                 other_set.tensor.substr(0, other_set.tensor.find('.'))),
                                     roped_with(clean, positions(s), &other_set.factors)});
            cands.push_back({fmt::format("{} at positions from {}", other_pairing, s), roped(other, positions(s))});
            if (cfg.has_swa() && (swapped_kind.freq_base != clean.freq_base || swapped_kind.freq_scale != clean.freq_scale))
                cands.push_back({fmt::format("{} at positions from {} at base {:g}, scale {:g} (layer {} taken as a {} layer: "
                                             "the sliding-window pattern on the wrong layers)", pairing, s,
                                             swapped_kind.freq_base, swapped_kind.freq_scale, L,
                                             cfg.layer_is_swa(L) ? "global" : "local"),
                                 roped(swapped_kind, positions(s))});
            for (int64_t shift : {-1, 1})
                if (s + shift >= 0)
                    cands.push_back({fmt::format("{} at positions from {}", pairing, s + shift), roped(clean, positions(s + shift))});
        }
        if (cfg.rope_type == RopeType::kImrope && !starts.empty()) {
            // qwen35's IMROPE with text positions: the sections as stored, or read in reverse.
            const int* sec = cfg.rope_sections;
            const int reversed[4] = {sec[3], sec[2], sec[1], sec[0]};
            const std::vector<float> stored = imrope_text_factors(sec, cfg.n_rot), back = imrope_text_factors(reversed, cfg.n_rot);
            if (stored != back)
                cands.push_back({fmt::format("{} at positions from {} with the IMROPE sections reversed ([{}, {}, {}, {}] for "
                                             "[{}, {}, {}, {}]: the pairs given the fourth position, 0 for text, unrotated)",
                                             pairing, starts[0], reversed[0], reversed[1], reversed[2], reversed[3], sec[0],
                                             sec[1], sec[2], sec[3]),
                                 roped_with(clean, positions(starts[0]), back.empty() ? nullptr : &back)});
        }
        if (model_->config().rope_scaling == RopeScaling::kYarn && !starts.empty()) {
            // YaRN's magnitude correction applied to cos/sin once more (it belongs in the scale).
            RopeParams twice = clean;
            twice.attn_factor = clean.attn_factor * (1.0f + 0.1f * std::log(static_cast<float>(model_->config().rope_scaling_factor)));
            cands.push_back({fmt::format("{} at positions from {} with cos/sin scaled once more by YaRN's mscale {:.6g}",
                                         pairing, starts[0], twice.attn_factor / clean.attn_factor),
                             roped(twice, positions(starts[0]))});
        }
        cands.push_back({"not applied", ours_aligned(in->data)});
        // qwen3: the per-head RMS norm belongs before RoPE.
        const char* norm_weight = prefix == "Qcur" ? "attn_q_norm" : prefix == "Kcur" ? "attn_k_norm" : nullptr;
        int64_t w_rows = 0, w_cols = 0;
        std::vector<float> w = norm_weight && raw && !starts.empty()
                                   ? dequantized(*model_, fmt::format("blk.{}.{}.weight", L, norm_weight), &w_rows, &w_cols)
                                   : std::vector<float>{};
        if (!w.empty() && w_cols == ours_.ne[0] && raw->data.size() == ours_.data.size()) {
            std::vector<float> x = raw->data;
            Tensor xt = make_tensor(x.data(), ours_.ne[0], ours_.ne[1], ours_.ne[2]);
            backend()->rms_norm(xt, static_cast<float>(model_->config().rms_eps), xt);
            backend()->mul_row(xt, make_tensor(w.data(), w_cols), xt);
            // rope of the normed heads, as llama.cpp's qwen3 graph runs them
            std::vector<int32_t> pos = positions(starts[0]);
            Tensor pos_t = make_tensor(pos.data(), T, 1, 1, 1, GgmlType::I32);
            backend()->rope(xt, pos_t, Tensor{}, clean, MathMode::kLlama);
            cands.push_back({fmt::format("applied to the heads after their RMS norm ({} before RoPE)", norm_weight),
                             ours_aligned(x)});
        }
        judge("rope", "RoPE", cands);
    }

    // A fused attn_qkv's product split into Q, K and V (phi3): this view against each of the three
    // row ranges of the product (wqkv-L, or wqkv_b-L with its bias), llama.cpp's order being Q, K, V.
    void try_qkv_split(const std::string& base, int L) {
        if (!model_ || L < 0) return;
        const CapturedEvent* qkv = nullptr;
        for (size_t i = index_; i-- > 0;) {
            const CapturedEvent& e = run_.captures.events[i];
            if (e.decode != ours_.decode || e.ubatch != ours_.ubatch) continue;
            if (e.base_name == fmt::format("wqkv_b-{}", L) || e.base_name == fmt::format("wqkv-{}", L)) {
                qkv = &e;
                break;
            }
        }
        const ModelConfig& c = model_->config();
        const int64_t n_q = c.n_head * c.head_dim_k, n_k = c.n_head_kv * c.head_dim_k, n_v = c.n_head_kv * c.head_dim_v;
        if (!qkv || qkv->ne[0] != n_q + n_k + n_v) return;
        const int64_t rows = qkv->ne[0], T = qkv->ne[1], width = ours_.ne[0] * ours_.ne[1];
        if (ours_.ne[2] != T || static_cast<int64_t>(qkv->data.size()) != rows * T) return;
        struct Part { const char* what; int64_t first, count; };
        const Part parts[] = {{"Q's", 0, n_q}, {"K's, after Q's", n_q, n_k}, {"V's, after Q's and K's", n_q + n_k, n_v}};
        std::vector<Candidate> cands;
        for (const Part& p : parts) {
            if (p.count != width) continue;
            std::vector<float> v(static_cast<size_t>(width * T));
            for (int64_t t = 0; t < T; ++t)
                std::copy(qkv->data.begin() + t * rows + p.first, qkv->data.begin() + t * rows + p.first + width,
                          v.begin() + t * width);
            cands.push_back({fmt::format("rows {}..{} ({})", p.first, p.first + p.count - 1, p.what), ours_aligned(v)});
        }
        if (cands.size() > 1) judge("qkv-split", fmt::format("its part of {} (llama.cpp's order: Q, K, V)", qkv->name), cands);
        (void)base;
    }

    // The reference's position of this call's first token, from its inp_pos input.
    int64_t reference_start_position() const {
        for (const RefTensor& t : ref_.tensors())
            if (t.kind == RefKind::kInput && t.base_name == "inp_pos" && t.decode == ours_.decode && t.ubatch == ours_.ubatch &&
                t.complete()) {
                std::vector<float> v = ref_.values(t);
                if (!v.empty()) return static_cast<int64_t>(v[0]);
            }
        return -1;
    }

    // Position of our first token in this ubatch: n_kv - T from an attention event of the same
    // ubatch in a global layer (a local layer's cache may have slid, its cell 0 no longer holding
    // position 0), or 0 for the prompt's first ubatch.
    int64_t start_position() const {
        for (const CapturedEvent& e : run_.captures.events) {
            if (e.decode != ours_.decode || e.ubatch != ours_.ubatch || !starts_with(e.base_name, "kq-")) continue;
            const int L = layer_of(e.base_name);
            if (model_ && L >= 0 && model_->config().layer_is_swa(L)) continue;
            return e.ne[0] - e.ne[1];
        }
        if (ours_.decode == 0 && ours_.ubatch == 0) return 0;
        return -1;
    }

    void try_transpose(const std::string& base, int L) {
        if (!model_ || L < 0) return;
        static const std::pair<const char*, std::pair<const char*, const char*>> kMatmuls[] = {
            {"Qcur", {"attn_q", "attn_norm"}},  {"Kcur", {"attn_k", "attn_norm"}},
            {"Vcur", {"attn_v", "attn_norm"}},  {"attn_out", {"attn_output", "kqv_out"}},
            {"ffn_gate", {"ffn_gate", "ffn_norm"}}, {"ffn_up", {"ffn_up", "ffn_norm"}},
            {"ffn_out", {"ffn_down", "ffn_swiglu"}},
        };
        for (const auto& [prefix, wi] : kMatmuls) {
            if (!starts_with(base, std::string(prefix) + "-")) continue;
            const CapturedEvent* x = previous(run_.captures, index_, fmt::format("{}-{}", wi.second, L));
            int64_t rows = 0, cols = 0;
            std::vector<float> w = dequantized(*model_, fmt::format("blk.{}.{}.weight", L, wi.first), &rows, &cols);
            if (!x || w.empty() || rows != cols || x->ne[0] != cols) return;
            const int64_t T = x->ne[1];
            if (static_cast<int64_t>(x->data.size()) != cols * T) return;
            matmul_floor(*model_->find(fmt::format("blk.{}.{}.weight", L, wi.first)), *x);
            std::vector<float> stored(static_cast<size_t>(rows * T)), transposed(stored.size());
            for (int64_t t = 0; t < T; ++t)
                for (int64_t r = 0; r < rows; ++r) {
                    double a = 0, b = 0;
                    for (int64_t k = 0; k < cols; ++k) {
                        a += static_cast<double>(w[r * cols + k]) * x->data[t * cols + k];
                        b += static_cast<double>(w[k * cols + r]) * x->data[t * cols + k];
                    }
                    stored[t * rows + r] = static_cast<float>(a);
                    transposed[t * rows + r] = static_cast<float>(b);
                }
            consider("transpose", fmt::format("{} matches the reference if blk.{}.{}.weight is read row-major as stored "
                                              "(ne0 = input dim): ours multiplies by its transpose (CUBLAS_OP_T vs _N, "
                                              "or the wrong leading dimension)", ours_.name, L, wi.first),
                     ours_aligned(stored));
            consider("transpose-other-way", fmt::format("{} matches the reference if blk.{}.{}.weight is transposed",
                                                        ours_.name, L, wi.first),
                     ours_aligned(transposed));
            return;
        }
    }

    // What the weight's format and llama mode leave anyway in this product: the NMSE between our
    // exact (dequantized weights, f32 activations) and llama-mode (activations converted for the
    // weight's dot product as ggml does, its summation order) products of `w` with `x`. Raises
    // floor_ when larger.
    void matmul_floor(const GgufTensorInfo& w, const CapturedEvent& x) {
        const int64_t N = w.ne[1], T = x.ne[1];
        std::vector<float> exact(static_cast<size_t>(N * T)), llama(exact.size());
        Tensor wt = backend()->weight(w.type, w.ne, w.data);
        Tensor xt = make_tensor(const_cast<float*>(x.data.data()), x.ne[0], T);
        Tensor e = make_tensor(exact.data(), N, T), l = make_tensor(llama.data(), N, T);
        backend()->matmul(wt, xt, e, MathMode::kExact);
        backend()->matmul(wt, xt, l, MathMode::kLlama);
        const double nmse = finite_nmse(exact, llama);
        if (std::isfinite(nmse) && nmse > floor_) {
            floor_ = nmse;
            floor_source_ = fmt::format("what {}'s {} format leaves in llama mode, from our exact vs llama-mode product "
                                        "on {}", w.name, ggml_type_name(w.type), x.name);
        }
    }

    void try_bias(const std::string& base, int L) {
        if (!model_ || L < 0) return;
        const char* which = starts_with(base, "Qcur") ? "attn_q" : starts_with(base, "Kcur") ? "attn_k" : "attn_v";
        int64_t rows = 0, cols = 0;
        std::vector<float> bias = dequantized(*model_, fmt::format("blk.{}.{}.bias", L, which), &rows, &cols);
        if (bias.empty()) return;
        std::vector<float> plus = ours_.data, minus = ours_.data;
        for (size_t i = 0; i < plus.size(); ++i) {
            plus[i] += bias[i % bias.size()];
            minus[i] -= bias[i % bias.size()];
        }
        consider("bias-added", fmt::format("{} matches the reference if blk.{}.{}.bias is added (ours leaves it out)",
                                           ours_.name, L, which), ours_aligned(plus));
        consider("bias-removed", fmt::format("{} matches the reference if blk.{}.{}.bias is not added", ours_.name, L, which),
                 ours_aligned(minus));
    }

    void try_softmax(int L) {
        const CapturedEvent* kq = previous(run_.captures, index_, fmt::format("kq-{}", L));
        if (!kq || !model_) return;
        const int64_t n_kv = kq->ne[0], T = kq->ne[1];
        const int64_t start = n_kv - T;
        const double hd = static_cast<double>(model_->config().head_dim_k);
        std::vector<int32_t> pos(static_cast<size_t>(T));
        for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(start + t);
        const ModelConfig& c = model_->config();
        // gemma2 caps the scores between kq and the softmax: the softmax's input is the last step.
        if (c.attn_softcap > 0)
            if (const CapturedEvent* capped = previous(run_.captures, index_, fmt::format("kq_scaled_2-{}", L))) kq = capped;
        // gpt-oss's sinks join every candidate but the one that leaves them out.
        int64_t sink_rows = 0, sink_cols = 0;
        const std::vector<float> sinks =
            c.arch == Arch::kGptOss ? dequantized(*model_, fmt::format("blk.{}.attn_sinks.weight", L), &sink_rows, &sink_cols)
                                    : std::vector<float>{};
        auto softmax = [&](float scale, AttnMask mask, bool with_sinks = true) {
            if (with_sinks && static_cast<int64_t>(sinks.size()) == kq->ne[2]) mask.sinks = sinks.data();
            std::vector<float> p(kq->data.size());
            Tensor in = make_tensor(const_cast<float*>(kq->data.data()), kq->ne[0], kq->ne[1], kq->ne[2]);
            Tensor out = make_tensor(p.data(), kq->ne[0], kq->ne[1], kq->ne[2]);
            const Tensor pos_t = make_tensor(pos.data(), T, 1, 1, 1, GgmlType::I32);
            backend()->softmax_masked(in, scale, pos_t, mask, out, MathMode::kLlama);
            return ours_aligned(p);
        };
        const float s = attention_kq_scale(c);
        const int64_t window = c.layer_is_swa(L) ? c.n_swa : 0;  // this layer's sliding window, as the model says
        const bool mla = c.arch == Arch::kDeepseek2;
        const bool q_scaled = c.arch == Arch::kPhi3 || c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3;
        const char* clean = mla ? "mscale^2/sqrt(head_dim)" : q_scaled ? "1 (the graph scales Q instead)" : "1/sqrt(head_dim)";
        const std::string mask_name = window > 0 ? fmt::format("the causal mask and layer {}'s sliding window of {}", L, window)
                                                 : std::string("the causal mask");
        std::vector<Candidate> cands = {
            {fmt::format("scale {} = {:.6g} with {}", clean, s, mask_name), softmax(s, AttnMask(true, window))},
            {fmt::format("scale 1/head_dim = {:.6g} with {}", 1.0 / hd, mask_name),
             softmax(static_cast<float>(1.0 / hd), AttnMask(true, window))},
        };
        if (s != 1.0f) cands.push_back({fmt::format("scale 1 (none) with {}", mask_name), softmax(1.0f, AttnMask(true, window))});
        cands.insert(cands.end(), {
            {fmt::format("scale {:.6g} without the causal mask (tokens see later tokens)", s), softmax(s, AttnMask(false, window))},
        });
        if (!sinks.empty())
            cands.push_back({fmt::format("scale {:.6g} with {} and no attention sinks (attn_sinks left out of the softmax)", s,
                                         mask_name),
                             softmax(s, AttnMask(true, window), false)});
        if (c.has_swa()) {
            // The sliding windows: one position too wide, or on the wrong layers (a local layer taken as
            // global, or the other way round).
            if (window > 0)
                cands.push_back({fmt::format("scale {:.6g} with a window of {} + 1 (p - j <= n_swa: the sliding window off by "
                                             "one)", s, window), softmax(s, AttnMask(true, window + 1))});
            cands.push_back(window > 0 ? Candidate{fmt::format("scale {:.6g} with the causal mask only (layer {} taken as a "
                                                               "global layer: the sliding window on the wrong layers)", s, L),
                                                   softmax(s, AttnMask(true, 0))}
                                       : Candidate{fmt::format("scale {:.6g} with a sliding window of {} (layer {} taken as "
                                                               "a local layer: the sliding window on the wrong layers)", s,
                                                               c.n_swa, L),
                                                   softmax(s, AttnMask(true, c.n_swa))});
        }
        if (mla) {
            // MLA's head width is nope + rope (head_dim_k_mla) whatever the form; the absorbed form's
            // key is the latent plus rope, a different width.
            const int64_t head = c.head_dim_k_mla, latent = c.kv_lora_rank + c.n_rot;
            const float plain = 1.0f / std::sqrt(static_cast<float>(head));
            cands.push_back({fmt::format("scale 1/sqrt(head_dim {}) = {:.6g} (YaRN's mscale^2 left out)", head, plain),
                             softmax(plain, true)});
            ModelConfig wide = c;
            wide.head_dim_k_mla = latent;
            const float w = attention_kq_scale(wide);
            cands.push_back({fmt::format("scale mscale^2/sqrt({}) = {:.6g} (the absorbed form's latent key width kv_lora_rank "
                                         "+ rope instead of the head's nope + rope {})", latent, w, head),
                             softmax(w, true)});
        }
        judge("attention", "the attention softmax", cands);
    }

    void try_epsilon() {
        if (!model_) return;
        // The norm's input: the residual stream before it.
        const CapturedEvent* in = nullptr;
        const int L = layer_of(ours_.base_name);
        if (ours_.occurrence == 1 && L == 0) in = previous(run_.captures, index_, "embd");
        else if (ours_.occurrence == 1 && L > 0) in = previous(run_.captures, index_, fmt::format("l_out-{}", L - 1));
        else if (ours_.occurrence == 2) in = previous(run_.captures, index_, fmt::format("ffn_inp-{}", L));
        else if (L < 0) in = previous(run_.captures, index_, fmt::format("l_out-{}", model_->config().n_layer - 1));
        if (!in) return;
        const float eps = static_cast<float>(model_->config().rms_eps);
        std::vector<float> y(in->data.size());
        Tensor tin = make_tensor(const_cast<float*>(in->data.data()), in->ne[0], in->ne[1]);
        Tensor tout = make_tensor(y.data(), in->ne[0], in->ne[1]);
        backend()->rms_norm(tin, eps, tout);
        consider("rmsnorm-epsilon", fmt::format("{} matches the reference with RMSNorm epsilon {:g} from the model's "
                                                "metadata", ours_.name, eps), ours_aligned(y));
    }

    void try_norm_weight(const std::string& base, int L) {
        if (!model_) return;
        std::string weight = base == "result_norm" || base == "h_nextn"
                                 ? "output_norm.weight"
                                 : fmt::format("blk.{}.{}.weight", L,
                                               starts_with(base, "attn_post_norm") ? "post_attention_norm"
                                               : starts_with(base, "attn")         ? "attn_norm"
                                                                                   : "ffn_norm");
        int64_t rows = 0, cols = 0;
        std::vector<float> w = dequantized(*model_, weight, &rows, &cols);
        if (w.empty()) return;
        std::vector<float> once = ours_.data, twice = ours_.data;
        for (size_t i = 0; i < once.size(); ++i) {
            once[i] /= w[i % w.size()];
            twice[i] *= w[i % w.size()];
        }
        consider("norm-weight-twice", fmt::format("{} matches the reference if {} is applied once (ours applies it twice)",
                                                  ours_.name, weight), ours_aligned(once));
        consider("norm-weight-missing", fmt::format("{} matches the reference if {} is applied", ours_.name, weight),
                 ours_aligned(twice));
        const Arch arch = model_->config().arch;
        if (arch == Arch::kGemma2 || arch == Arch::kGemma3 || model_->config().hybrid()) {
            // gemma's (and Qwen3.5's) norms are (1 + w) in the checkpoint; the converter stores 1 + w,
            // so an engine that adds the 1 again computes x (1 + w'), w' = 1 + w.
            std::vector<float> plain = ours_.data;
            for (size_t i = 0; i < plain.size(); ++i) plain[i] *= w[i % w.size()] / (1.0f + w[i % w.size()]);
            consider("norm-plus-one", fmt::format("{} matches the reference if {} is applied as stored (ours applies 1 + w: "
                                                  "the 1 of a zero-centred norm added again though the converter already added it)",
                                                  ours_.name, weight),
                     ours_aligned(plain));
        }
    }

    // ---- qwen35's Gated DeltaNet layers: what a reference tensor of this evaluation holds.
    // The reference's node `base` of this event's evaluation (its first occurrence), or none.
    const RefTensor* ref_tensor_named(const std::string& base) const {
        for (const RefTensor& t : ref_.tensors())
            if (t.base_name == base && t.occurrence == 1 && t.decode == ours_.decode && t.ubatch == ours_.ubatch &&
                t.kind == RefKind::kNode && t.complete())
                return &t;
        return nullptr;
    }
    std::vector<float> ref_named(const std::string& base) const {
        const RefTensor* t = ref_tensor_named(base);
        return t ? ref_.values(*t) : std::vector<float>{};
    }

    // The new conv state: the last d_conv - 1 inputs of each channel's window (the reference's
    // conv_input-L), its first ones, or the old state unchanged.
    void try_conv_state(int L) {
        const ModelConfig& c = model_->config();
        const RefTensor* in = ref_tensor_named(fmt::format("conv_input-{}", L));
        const std::vector<float> old = ref_named(fmt::format("conv_states-{}", L));
        if (!in) return;
        const std::vector<float> window = ref_.values(*in);
        const int64_t n = in->ne()[0], C = in->ne()[1], keep = c.ssm_d_conv - 1;
        if (keep < 1 || n < keep || C * keep != static_cast<int64_t>(ours_.data.size())) return;
        auto columns = [&](int64_t first) {
            std::vector<float> v(static_cast<size_t>(C * keep));
            for (int64_t ch = 0; ch < C; ++ch)
                for (int64_t i = 0; i < keep; ++i) v[ch * keep + i] = window[ch * n + first + i];
            return v;
        };
        std::vector<Candidate> cands = {
            {fmt::format("each channel's last {} inputs of the window (conv_input-{}: the newest)", keep, L), columns(n - keep)}};
        // In an evaluation whose window starts with the old state (the first one of a sequence:
        // zeros), its first inputs are the old state: rolled the wrong way and never rolled agree.
        const std::vector<float> first = columns(0);
        if (old == first)
            cands.push_back({fmt::format("each channel's first {} inputs of the window, which are the old state here "
                                         "(conv_states-{}: rolled the wrong way, or never rolled)", keep, L), first});
        else {
            cands.push_back({fmt::format("each channel's first {} inputs of the window (rolled the wrong way)", keep), first});
            if (old.size() == ours_.data.size())
                cands.push_back({fmt::format("the state before this evaluation, unchanged (conv_states-{}: never rolled)", L), old});
        }
        judge("conv-state", "the new conv state", cands);
    }

    // The decay gate softplus(alpha + dt_bias) * A with ssm_a = A = -exp(A_log) as stored, the sign
    // flipped, or -exp applied to the stored value again.
    void try_decay_gate(int L) {
        const std::vector<float> sp = ref_named(fmt::format("a_softplus-{}", L));
        int64_t rows = 0, cols = 0;
        const std::vector<float> a = dequantized(*model_, fmt::format("blk.{}.ssm_a", L), &rows, &cols);
        if (sp.size() != ours_.data.size() || a.empty()) return;
        std::vector<float> stored(sp.size()), flipped(sp.size()), twice(sp.size());
        for (size_t i = 0; i < sp.size(); ++i) {
            const float ai = a[i % a.size()];
            stored[i] = sp[i] * ai, flipped[i] = sp[i] * -ai, twice[i] = sp[i] * -std::exp(ai);
        }
        judge("decay-gate", "the decay gate",
              {{"softplus(alpha + dt_bias) * ssm_a (ssm_a is A = -exp(A_log) already: every decay e^g below 1)", stored},
               {"softplus(alpha + dt_bias) * -ssm_a (A = exp(A_log): the sign flipped, the state grows)", flipped},
               {"softplus(alpha + dt_bias) * -exp(ssm_a) (-exp applied again to the stored A)", twice}});
    }

    // The DeltaNet output's per-head RMS norm: of the delta rule's output (the gate silu(z) after the
    // weighted norm), or of the output already times silu(z).
    void try_gated_norm(int L) {
        const ModelConfig& c = model_->config();
        const std::vector<float> out = ref_named(fmt::format("attn_output-{}", L)), z = ref_named(fmt::format("z-{}", L));
        if (out.size() != ours_.data.size() || z.size() != out.size()) return;
        const int64_t S = c.ssm_d_state, rows = static_cast<int64_t>(out.size()) / S;
        std::vector<float> z_silu(z.size()), gated(out.size()), plain(out.size()), before(out.size());
        host_silu(z.data(), static_cast<int64_t>(z.size()), z_silu.data(), 8);
        for (size_t i = 0; i < out.size(); ++i) gated[i] = out[i] * z_silu[i];
        const float eps = static_cast<float>(c.rms_eps);
        Tensor t_out = make_tensor(const_cast<float*>(out.data()), S, rows), t_gated = make_tensor(gated.data(), S, rows);
        Tensor t_plain = make_tensor(plain.data(), S, rows), t_before = make_tensor(before.data(), S, rows);
        backend()->rms_norm(t_out, eps, t_plain);
        backend()->rms_norm(t_gated, eps, t_before);
        judge("output-gate", "the per-head RMS norm's input",
              {{fmt::format("the delta rule's output (attn_output-{}), silu(z) multiplied in after the weighted norm", L),
                ours_aligned(plain)},
               {fmt::format("the delta rule's output times silu(z-{}) (the output gate before the norm)", L),
                ours_aligned(before)}});
    }

    // The delta rule rerun on the reference's inputs: token by token with each value head h
    // reading q/k head h % H_k (llama.cpp), or h / (H_v / H_k) (interleaved), or in chunks without
    // the decay between a chunk's tokens.
    void try_delta_rule(const std::string& base, int L) {
        const ModelConfig& c = model_->config();
        const std::string l = std::to_string(L);
        const std::vector<float> q = ref_named("q_conv_predelta-" + l), k = ref_named("k_conv_predelta-" + l),
                                 v = ref_named("v_conv_predelta-" + l), g = ref_named("gate-" + l),
                                 beta = ref_named("beta_sigmoid-" + l), state = ref_named("state_predelta-" + l);
        const int64_t S = c.ssm_d_state, H_k = c.ssm_n_k_heads, H_v = c.ssm_n_v_heads;
        if (q.empty() || v.empty() || state.size() != static_cast<size_t>(S * S * H_v)) return;
        const int64_t T = static_cast<int64_t>(v.size()) / (S * H_v), r = H_v / H_k;
        if (q.size() != k.size() || static_cast<int64_t>(q.size()) != S * H_k * T || static_cast<int64_t>(g.size()) != H_v * T ||
            beta.size() != g.size())
            return;
        const bool want_state = starts_with(base, "new_state-");
        enum Form { kTiled, kInterleaved, kChunkNoDecay };
        auto run = [&](Form form) {
            std::vector<float> s = state, out(v.size()), qr = q, kr = k;
            int64_t heads = H_k;
            if (form == kInterleaved) {
                qr.assign(v.size(), 0.0f), kr.assign(v.size(), 0.0f), heads = H_v;
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t h = 0; h < H_v; ++h)
                        for (int64_t i = 0; i < S; ++i) {
                            qr[(t * H_v + h) * S + i] = q[(t * H_k + h / r) * S + i];
                            kr[(t * H_v + h) * S + i] = k[(t * H_k + h / r) * S + i];
                        }
            }
            if (form == kChunkNoDecay)
                host_gated_delta_net_chunked(qr.data(), kr.data(), v.data(), g.data(), beta.data(), s.data(), out.data(), S,
                                             heads, H_v, T, 64, 0, H_v, false);
            else
                host_gated_delta_net(qr.data(), kr.data(), v.data(), g.data(), beta.data(), s.data(), out.data(), S, heads,
                                     H_v, T, 8, 0, H_v);
            return want_state ? s : ours_aligned(out);
        };
        std::vector<Candidate> cands = {
            {fmt::format("run token by token, value head h reading q/k head h % {} (as llama.cpp's converted weights pair "
                         "them)", H_k), run(kTiled)}};
        if (r > 1)
            cands.push_back({fmt::format("run token by token, value head h reading q/k head h / {} (interleaved, Hugging "
                                         "Face's repeat_interleave)", r), run(kInterleaved)});
        if (T > 1)
            cands.push_back({"run in chunks of 64 without the decay between a chunk's tokens (the chunked form's masks "
                             "left out)", run(kChunkNoDecay)});
        if (cands.size() > 1) judge("delta-rule", "the delta rule", cands);
    }

    void try_embd_scale() {
        if (!model_) return;
        const int64_t n_embd = model_->config().n_embd;
        const float s = std::sqrt(static_cast<float>(n_embd));
        std::vector<float> scaled = ours_.data;
        for (float& x : scaled) x *= s;
        consider("embd-scale", fmt::format("{} matches the reference if the embeddings are multiplied by sqrt(n_embd) = "
                                           "sqrt({}) = {:.6g} (ours leaves gemma's scale out)", ours_.name, n_embd, s),
                 ours_aligned(scaled));
    }

    void try_vocab_crop() {
        const int64_t n_vocab = ref_tensor_->ne()[0];
        if (ours_.ne[0] <= n_vocab) return;
        std::vector<float> cropped;
        for (int64_t t = 0; t < ours_.ne[1]; ++t)
            cropped.insert(cropped.end(), ours_.data.begin() + t * ours_.ne[0], ours_.data.begin() + t * ours_.ne[0] + n_vocab);
        // The reference may keep fewer rows (only the output rows): compare the last ones.
        const size_t want = ref_values_.size();
        if (cropped.size() > want) cropped.erase(cropped.begin(), cropped.end() - static_cast<int64_t>(want));
        consider("vocab-crop", fmt::format("{} matches the reference if the logits are cropped to the {} rows of the LM head: "
                                           "ours has {} rows per token, and an argmax over the extra rows reads values "
                                           "nothing wrote (a padded vocabulary)", ours_.name, n_vocab, ours_.ne[0]),
                 cropped);
    }

    void try_q4k_swap() {
        if (!model_) return;
        const GgufTensorInfo* emb = model_->find("token_embd.weight");
        if (!emb || emb->type != GgmlType::Q4_K) return;
        // Re-read the embedding rows of this call's tokens with the clean unpacking.
        std::vector<int32_t> tokens = run_.prompt;
        if (ours_.decode > 0) {
            std::vector<int32_t> gen = ref_.generated_tokens();
            if (ours_.decode - 1 >= static_cast<int>(gen.size())) return;
            tokens = {gen[ours_.decode - 1]};
        }
        if (static_cast<int64_t>(tokens.size()) != ours_.ne[1]) return;
        const uint64_t row_bytes = emb->n_bytes / emb->n_rows();
        std::vector<float> rows(static_cast<size_t>(ours_.ne[0] * ours_.ne[1]));
        for (size_t t = 0; t < tokens.size(); ++t)
            dequantize_row(GgmlType::Q4_K, emb->data + tokens[t] * row_bytes, rows.data() + t * ours_.ne[0], ours_.ne[0]);
        consider("q4k-scale-min", fmt::format("{} matches the reference with Q4_K unpacked as ggml does (6-bit scale in "
                                              "the low bits of scales[j], min in scales[j+4]): ours swaps scales and mins",
                                              ours_.name),
                 ours_aligned(rows));
    }

    // MLA's two forms give Q, K and V other shapes: the absorbed form's heads are the latent plus
    // the rope part (one KV head), the unabsorbed form's nope plus rope (n_head KV heads). Shapes
    // that are the two forms' say which each side runs; the values cannot be compared here.
    void try_mla_form(const std::string& base) {
        if (!model_ || !ref_tensor_ || model_->config().arch != Arch::kDeepseek2) return;
        const ModelConfig& c = model_->config();
        const int64_t absorbed = (starts_with(base, "Vcur") ? c.kv_lora_rank : c.kv_lora_rank + c.n_rot);
        const int64_t unabsorbed = starts_with(base, "Vcur") ? c.head_dim_v_mla : c.head_dim_k_mla;
        const int64_t ours = ours_.ne[0], theirs = ref_tensor_->ne()[0];
        if (ours == theirs || absorbed == unabsorbed) return;
        auto form = [&](int64_t w) { return w == absorbed ? "absorbed" : w == unabsorbed ? "unabsorbed" : ""; };
        if (!*form(ours) || !*form(theirs)) return;
        DoctorFinding f;
        f.transform = "mla-form";
        f.verdict = fmt::format("{} is {} wide in ours and {} in the reference: ours runs multi-head latent attention {} "
                                "and the reference {} (absorbed: heads over the latent kv_lora_rank {} + rope {}, one KV "
                                "head; unabsorbed: nope {} + rope {} per head). Run ours with --mla {}, or compare the "
                                "events both forms share (kq, kq_soft_max, kqv_out, attn_out, l_out)",
                                ours_.name, ours, theirs, form(ours), form(theirs), c.kv_lora_rank, c.n_rot, c.qk_nope_dim(),
                                c.n_rot, form(theirs));
        f.nmse_before = before_;
        f.nmse_after = before_;
        report_.findings.push_back(std::move(f));
    }

    // The router's ranking of the experts, from the values ours ranked (the probabilities, biased by
    // a selection bias, masked by grouped routing): largest first (ggml's argsort_top_k) or
    // smallest first, equal values in the order ggml's std::sort leaves them.
    void try_moe_ranking(int L) {
        const CapturedEvent* probs = nullptr;
        for (const char* name : {"ffn_moe_probs_masked", "ffn_moe_probs_biased", "ffn_moe_probs"})
            if (!probs) probs = previous(run_.captures, index_, fmt::format("{}-{}", name, L));
        if (!probs || probs->data.size() != ours_.data.size()) return;
        const int64_t E = probs->ne[0], T = static_cast<int64_t>(probs->data.size()) / std::max<int64_t>(E, 1);
        auto ranking = [&](bool largest_first) {
            std::vector<float> out(probs->data.size());
            std::vector<int32_t> idx(static_cast<size_t>(E));
            for (int64_t t = 0; t < T; ++t) {
                const float* p = probs->data.data() + t * E;
                for (int64_t e = 0; e < E; ++e) idx[e] = static_cast<int32_t>(e);
                std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return largest_first ? p[a] > p[b] : p[a] < p[b]; });
                for (int64_t e = 0; e < E; ++e) out[t * E + e] = static_cast<float>(idx[e]);
            }
            return ours_aligned(out);
        };
        judge("moe-topk", "the experts' ranking",
              {{"largest probability first (the k most likely experts chosen)", ranking(true)},
               {"smallest probability first (the k least likely experts chosen)", ranking(false)}});
        if (const CapturedEvent* p = previous(run_.captures, index_, fmt::format("ffn_moe_probs-{}", L))) near_tie(L, *p);
    }

    // A ranking that differs only where the reference's probabilities of the swapped experts lie
    // within twice the largest difference between ours and the reference's is a near tie: either
    // order is what a correct engine may give, so it is named, not loosened into a pass.
    void near_tie(int L, const CapturedEvent& probs) {
        const RefTensor* ref_probs = ref_tensor_named(fmt::format("ffn_moe_probs-{}", L));
        if (!ref_probs || ref_values_.empty()) return;
        const std::vector<float> rp = ref_.values(*ref_probs), op = ours_aligned(probs.data), ours = ours_aligned(ours_.data);
        const int64_t E = probs.ne[0];
        if (rp.size() != op.size() || ours.size() != ref_values_.size() || ours.size() != rp.size() || E <= 0) return;
        double delta = 0, widest = 0;
        for (size_t i = 0; i < rp.size(); ++i) delta = std::max(delta, std::fabs(static_cast<double>(op[i]) - rp[i]));
        int swapped = 0, chosen_differ = 0;
        const int64_t k = model_ ? model_->config().n_expert_used : 0;
        for (size_t row = 0; row * E < rp.size(); ++row)
            for (int64_t j = 0; j < E; ++j) {
                const size_t at = row * E + j;
                const int a = static_cast<int>(ours[at]), b = static_cast<int>(ref_values_[at]);
                if (a == b) continue;
                if (a < 0 || b < 0 || a >= E || b >= E) return;
                const double gap = std::fabs(static_cast<double>(rp[row * E + a]) - rp[row * E + b]);
                if (gap > 2 * delta) return;  // a clear gap: not a tie
                widest = std::max(widest, gap);
                ++swapped;
            }
        // Whether the top k, as sets, differ anywhere.
        for (size_t row = 0; row * E < rp.size() && k > 0 && k <= E; ++row) {
            std::vector<int> a(ours.begin() + row * E, ours.begin() + row * E + k);
            std::vector<int> b(ref_values_.begin() + row * E, ref_values_.begin() + row * E + k);
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            chosen_differ += a != b;
        }
        if (swapped == 0) return;
        DoctorFinding f;
        f.transform = "moe-near-tie";
        f.verdict = fmt::format("{}: near tie: the experts ranked differently have probabilities within {:.3g} of each "
                                "other in the reference, within twice the largest difference between our router "
                                "probabilities and the reference's ({:.3g}); {}. A different order is not a bug",
                                ours_.name, widest, delta,
                                chosen_differ ? "the chosen experts differ, so the layer's output differs legitimately"
                                              : "the chosen experts are the same");
        f.nmse_before = before_;
        f.nmse_after = 0;
        report_.findings.push_back(std::move(f));
    }

    // The chosen experts' weights gathered from the router's probabilities or from the biased
    // selection values (DeepSeek-V3's exp_probs_b is only for choosing).
    void try_moe_bias_weights(int L) {
        const CapturedEvent* probs = previous(run_.captures, index_, fmt::format("ffn_moe_probs-{}", L));
        const CapturedEvent* biased = previous(run_.captures, index_, fmt::format("ffn_moe_probs_biased-{}", L));
        const CapturedEvent* topk = previous(run_.captures, index_, fmt::format("ffn_moe_topk-{}", L));
        if (!probs || !biased || !topk || probs->data.size() != biased->data.size()) return;
        const int64_t E = probs->ne[0], k = topk->ne[0];
        const int64_t T = static_cast<int64_t>(probs->data.size()) / std::max<int64_t>(E, 1);
        if (k * T != static_cast<int64_t>(ours_.data.size()) || static_cast<int64_t>(topk->data.size()) != k * T) return;
        auto gather = [&](const CapturedEvent& table) {
            std::vector<float> out(static_cast<size_t>(k * T));
            for (int64_t t = 0; t < T; ++t)
                for (int64_t s = 0; s < k; ++s) {
                    const int64_t e = static_cast<int64_t>(topk->data[t * k + s]);
                    out[t * k + s] = e >= 0 && e < E ? table.data[t * E + e] : 0.0f;
                }
            return ours_aligned(out);
        };
        judge("moe-bias-in-weights", "the experts' weighting",
              {{"the router's probabilities (ffn_moe_probs: the selection bias only chooses)", gather(*probs)},
               {"the biased selection values (ffn_moe_probs_biased: the bias in the weights too)", gather(*biased)}});
    }

    // gpt-oss's router: the experts chosen from the biased logits and weighted by a softmax over
    // the k chosen (ffn_moe_probs is the biased logits), or a softmax over every expert first.
    void try_moe_gating(int L) {
        if (!model_ || model_->config().expert_gating_func != 3) return;
        const CapturedEvent* logits = previous(run_.captures, index_, fmt::format("ffn_moe_logits-{}", L));
        int64_t rows = 0, cols = 0;
        const std::vector<float> bias = dequantized(*model_, fmt::format("blk.{}.ffn_gate_inp.bias", L), &rows, &cols);
        if (!logits || logits->data.size() != ours_.data.size() || bias.empty()) return;
        const int64_t E = logits->ne[0], T = static_cast<int64_t>(logits->data.size()) / std::max<int64_t>(E, 1);
        if (static_cast<int64_t>(bias.size()) != E) return;
        std::vector<float> biased(logits->data.size()), soft(logits->data.size());
        for (size_t i = 0; i < biased.size(); ++i) biased[i] = logits->data[i] + bias[i % bias.size()];
        AttnMask whole(false);
        whole.whole_row = true;
        std::vector<int32_t> pos(static_cast<size_t>(T), 0);
        Tensor in = make_tensor(biased.data(), E, T, 1), out = make_tensor(soft.data(), E, T, 1);
        backend()->softmax_masked(in, 1.0f, make_tensor(pos.data(), T, 1, 1, 1, GgmlType::I32), whole, out, MathMode::kLlama);
        judge("moe-gating", "the router's gating",
              {{"the biased logits themselves (gpt-oss: the top k of them, then a softmax over those k alone)",
                ours_aligned(biased)},
               {"a softmax over every expert's biased logit (Mixtral's order: softmax, then the top k)", ours_aligned(soft)}});
    }

    // gpt-oss's SwiGLU of the experts' biased gate and up: clamped (gate <= 7, |up| <= 7), not
    // clamped, or with the gate clamped from below.
    void try_swiglu_oai(int L) {
        const CapturedEvent* gate = previous(run_.captures, index_, fmt::format("ffn_moe_gate_biased-{}", L));
        const CapturedEvent* up = previous(run_.captures, index_, fmt::format("ffn_moe_up_biased-{}", L));
        if (!gate) gate = previous(run_.captures, index_, fmt::format("ffn_moe_gate-{}", L));
        if (!up) up = previous(run_.captures, index_, fmt::format("ffn_moe_up-{}", L));
        if (!gate || !up || gate->data.size() != ours_.data.size() || up->data.size() != ours_.data.size()) return;
        auto oai = [&](float limit) {
            std::vector<float> y(ours_.data.size());
            host_swiglu_oai(gate->data.data(), up->data.data(), static_cast<int64_t>(y.size()), y.data(), 1.702f, limit, true);
            return ours_aligned(y);
        };
        const float inf = std::numeric_limits<float>::infinity();
        std::vector<float> below_gate(gate->data.size()), below_up(up->data.size()), below(ours_.data.size());
        for (size_t i = 0; i < below.size(); ++i) {
            below_gate[i] = std::max(gate->data[i], -7.0f);
            below_up[i] = std::clamp(up->data[i], -7.0f, 7.0f);
        }
        host_swiglu_oai(below_gate.data(), below_up.data(), static_cast<int64_t>(below.size()), below.data(), 1.702f, inf, true);
        judge("swiglu-oai", "the experts' SwiGLU",
              {{"clamped: min(gate, 7) * sigmoid(1.702 min(gate, 7)) * (clamp(up, -7, 7) + 1), as llama.cpp", oai(7.0f)},
               {"without the clamp: gate * sigmoid(1.702 gate) * (up + 1)", oai(inf)},
               {"with the gate clamped from below: max(gate, -7) * sigmoid(1.702 max(gate, -7)) * (clamp(up, -7, 7) + 1)",
                ours_aligned(below)}});
    }

    // An expert product of MXFP4 weights recomputed (llama mode, as the comparison ran) with the
    // blocks decoded as ggml does, with the nibbles swapped, and with the exponent one too large.
    void try_mxfp4(const std::string& base, int L) {
        if (!model_) return;
        const char* which = starts_with(base, "ffn_moe_up-") ? "ffn_up_exps" : starts_with(base, "ffn_moe_gate-") ? "ffn_gate_exps"
                                                                                                        : "ffn_down_exps";
        const GgufTensorInfo* w = model_->find(fmt::format("blk.{}.{}.weight", L, which));
        if (!w || w->type != GgmlType::MXFP4 || w->n_dims != 3) return;
        const bool down = std::string(which) == "ffn_down_exps";
        const CapturedEvent* x = nullptr;
        static constexpr const char* kDownInputs[] = {"ffn_moe_swiglu_oai", "ffn_moe_swiglu"};
        static constexpr const char* kUpInputs[] = {"attn_post_norm", "ffn_norm"};
        for (const char* in : down ? kDownInputs : kUpInputs)
            if (!x) x = previous(run_.captures, index_, fmt::format("{}-{}", in, L));
        const CapturedEvent* topk = previous(run_.captures, index_, fmt::format("ffn_moe_topk-{}", L));
        const int64_t K = w->ne[0], N = w->ne[1], E = w->ne[2];
        if (!x || !topk || ours_.ne[0] != N || x->ne[0] != K) return;
        const int64_t k = topk->ne[0], T = static_cast<int64_t>(topk->data.size()) / std::max<int64_t>(k, 1);
        if (static_cast<int64_t>(ours_.data.size()) != N * k * T) return;
        const int64_t x_slots = static_cast<int64_t>(x->data.size()) / (K * T);
        if (x_slots != 1 && x_slots != k) return;
        std::vector<int32_t> ids(topk->data.begin(), topk->data.end());
        for (int32_t id : ids)
            if (id < 0 || id >= E) return;
        auto product = [&](Fault variant) {
            std::vector<uint8_t> bytes(w->data, w->data + w->n_bytes);
            if (variant != Fault::kNone) rewrite_mxfp4(variant, bytes.data(), static_cast<int64_t>(bytes.size() / sizeof(block_mxfp4)));
            std::vector<float> xs(x->data.begin(), x->data.end()), y(static_cast<size_t>(N * k * T));
            const Tensor wt = make_tensor(bytes.data(), K, N, E, 1, GgmlType::MXFP4);
            const Tensor xt = make_tensor(xs.data(), K, x_slots, T);
            const Tensor it = make_tensor(ids.data(), k, T, 1, 1, GgmlType::I32);
            Tensor yt = make_tensor(y.data(), N, k, T);
            backend()->matmul_id(wt, xt, it, yt, MathMode::kLlama);
            return ours_aligned(y);
        };
        judge("mxfp4", fmt::format("the MXFP4 decoding of blk.{}.{}.weight", L, which),
              {{"ggml's (element j in the low nibble of byte j, j + 16 in the high one; scale 2^(e - 128) for the doubled "
                "levels)", product(Fault::kNone)},
               {"with the nibbles swapped (element j from the high nibble)", product(Fault::kMxfp4NibbleOrder)},
               {"with the scale one power of two too large (2^(e - 127))", product(Fault::kMxfp4ScaleExponent)}});
    }

    // The halves of a fused gate_up product (gate's rows, then up's): which one this view is.
    void try_moe_gate_up(const std::string& base, int L) {
        const CapturedEvent* fused = previous(run_.captures, index_, fmt::format("ffn_moe_gate_up-{}", L));
        if (!fused || fused->data.size() != 2 * ours_.data.size() || fused->ne[0] % 2 != 0) return;
        const int64_t two_ff = fused->ne[0], n_ff = two_ff / 2, cols = static_cast<int64_t>(fused->data.size()) / two_ff;
        auto half = [&](int64_t second) {
            std::vector<float> out(static_cast<size_t>(n_ff * cols));
            for (int64_t c = 0; c < cols; ++c)
                std::copy_n(fused->data.begin() + c * two_ff + second * n_ff, n_ff, out.begin() + c * n_ff);
            return ours_aligned(out);
        };
        const bool gate = starts_with(base, "ffn_moe_gate-");
        judge("moe-gate-up", fmt::format("the {} view of ffn_moe_gate_up-{}", gate ? "gate" : "up", L),
              {{fmt::format("its first half of each expert's rows ({})", gate ? "gate's, as llama.cpp splits it" : "gate's: swapped"),
                half(0)},
               {fmt::format("its second half ({})", gate ? "up's: swapped" : "up's, as llama.cpp splits it"), half(1)}});
    }

    // The expert groups kept by grouped routing: ranked by the sum of each group's two best
    // selection values (llama.cpp, DeepSeek-V3) or by its best one alone.
    void try_moe_groups(int L) {
        if (!model_) return;
        const ModelConfig& c = model_->config();
        const CapturedEvent* sel = previous(run_.captures, index_, fmt::format("ffn_moe_probs_biased-{}", L));
        if (!sel) sel = previous(run_.captures, index_, fmt::format("ffn_moe_probs-{}", L));
        const int64_t E = c.n_expert, G = c.n_expert_groups, used = c.n_group_used;
        if (!sel || G <= 1 || used <= 0 || E % G != 0 || sel->ne[0] != E) return;
        const int64_t P = E / G, T = static_cast<int64_t>(sel->data.size()) / E;
        if (used * T != static_cast<int64_t>(ours_.data.size())) return;
        auto groups = [&](bool two_best) {
            std::vector<float> out(static_cast<size_t>(used * T)), score(static_cast<size_t>(G));
            std::vector<int32_t> idx(static_cast<size_t>(P)), order(static_cast<size_t>(G));
            for (int64_t t = 0; t < T; ++t) {
                const float* v = sel->data.data() + t * E;
                for (int64_t g = 0; g < G; ++g) {
                    std::iota(idx.begin(), idx.end(), 0);
                    std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return v[g * P + a] > v[g * P + b]; });
                    const double second = two_best && P > 1 ? v[g * P + idx[1]] : 0.0;
                    score[g] = static_cast<float>(v[g * P + idx[0]] + second);
                }
                std::iota(order.begin(), order.end(), 0);
                std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
                for (int64_t u = 0; u < used; ++u) out[t * used + u] = static_cast<float>(order[u]);
            }
            return ours_aligned(out);
        };
        judge("moe-group-score", "each expert group's score",
              {{"the sum of its two best experts (DeepSeek-V3's, llama.cpp's)", groups(true)},
               {"its best expert alone", groups(false)}});
    }

    // The experts' outputs weighted by the router's weights as given, or renormalised to sum 1.
    void try_moe_weights(int L) {
        const CapturedEvent* down = previous(run_.captures, index_, fmt::format("ffn_moe_down-{}", L));
        const CapturedEvent* weights = previous(run_.captures, index_, fmt::format("ffn_moe_weights-{}", L));
        if (!down || !weights || !model_ || down->data.size() != ours_.data.size()) return;
        const int64_t n_embd = down->ne[0], k = weights->ne[1];
        const int64_t T = static_cast<int64_t>(weights->data.size()) / std::max<int64_t>(k, 1);
        if (n_embd * k * T != static_cast<int64_t>(down->data.size())) return;
        const float scale = static_cast<float>(model_->config().expert_weights_scale);
        auto weighted = [&](bool renormalised) {
            std::vector<float> out(down->data.size());
            for (int64_t t = 0; t < T; ++t) {
                const float* w = weights->data.data() + t * k;
                double sum = 0;
                for (int64_t s = 0; s < k; ++s) sum += w[s];
                const float denom = std::max(static_cast<float>(sum), 6.103515625e-5f);
                for (int64_t s = 0; s < k; ++s) {
                    float ws = renormalised ? w[s] / denom : w[s];
                    if (scale != 0.0f && scale != 1.0f) ws *= scale;
                    for (int64_t i = 0; i < n_embd; ++i)
                        out[(t * k + s) * n_embd + i] = down->data[(t * k + s) * n_embd + i] * ws;
                }
            }
            return ours_aligned(out);
        };
        judge("moe-weights-norm", "the experts' weighting",
              {{"as the router gives them (not renormalised)", weighted(false)},
               {"renormalised to sum 1 over the chosen experts", weighted(true)}});
    }

    void try_scales() {
        const double hd = model_ ? static_cast<double>(model_->config().head_dim_k) : 0;
        std::vector<std::pair<double, std::string>> factors = {{2.0, "2"}, {0.5, "1/2"}};
        if (hd > 0) {
            factors.push_back({std::sqrt(hd), "sqrt(head_dim)"});
            factors.push_back({1.0 / std::sqrt(hd), "1/sqrt(head_dim)"});
            factors.push_back({hd, "head_dim"});
            factors.push_back({1.0 / hd, "1/head_dim"});
        }
        if (model_ && model_->config().rope_scaling == RopeScaling::kYarn) {
            // YaRN's magnitude correction 1 + 0.1 ln(factor), applied once too often or missing.
            const double m = 1.0 + 0.1 * std::log(model_->config().rope_scaling_factor);
            factors.push_back({1.0 / m, "1/mscale (YaRN's 1 + 0.1 ln factor applied once too often)"});
            factors.push_back({m, "mscale (YaRN's magnitude correction missing)"});
            factors.push_back({1.0 / (m * m), "1/mscale^2"});
        }
        std::vector<float> base = ours_aligned(ours_.data);
        for (const auto& [f, name] : factors) {
            std::vector<float> v = base;
            for (float& x : v) x = static_cast<float>(x * f);
            consider("scale", fmt::format("{} matches the reference if ours is multiplied by {} (a missing or extra scale "
                                          "factor)", ours_.name, name), v);
        }
    }

    // The span doctor. When ours lacks the events between the last matching one and this one (an
    // engine that dumps only some tensors), no transform of this event's inputs can be tried; our
    // forward pass is re-run on the reference's tokens under each fault of the catalogue that
    // applies to the model instead, and a fault whose run gives ours where a clean run gives the
    // reference names the bug. Each run stops at this event.
    //
    // A run from the prompt stands for a run of the span alone: everything before the span matched
    // the reference, so a clean run enters the span with the inputs ours had (within the noise
    // between correct engines). A fault that also changes an event before the span is not ours
    // (ours matched there): each run checks the last matching event still matches.
    void try_span() {
        if (!model_ || samples_ || ours_.data.empty()) return;
        std::vector<int32_t> prompt = ref_.prompt_tokens();
        if (prompt.empty()) prompt = run_.prompt;
        const std::vector<int32_t> generated = ref_.generated_tokens();
        if (prompt.empty() || ours_.decode > static_cast<int>(generated.size())) return;
        // The last event of ours that matched before this one, and its reference tensor.
        const EventComparison* last_ok = nullptr;
        for (size_t i = index_; i-- > 0;) {
            const EventComparison& c = run_.comparisons[i];
            if ((c.status == CompareStatus::kOk || c.status == CompareStatus::kWarn) && !c.partial) {
                last_ok = &c;
                break;
            }
        }

        const FaultModelFacts facts = fault_model_facts(*model_);

        ForwardOptions fo;
        fo.mode = MathMode::kLlama;
        fo.n_ubatch = std::max<int64_t>(1, ref_.n_ubatch());
        fo.flash_attn = ref_.flash_attention();
        fo.all_logits = ref_.all_logits();
        const LlamaIsaGuess guess = guess_llama_isa(ref_);
        if (!guess.candidates.empty()) fo.llama_isa = guess.candidates.front();
        fo.llama_threads = ref_.n_threads();
        fo.n_ctx = std::max<int64_t>(ref_.n_ctx(), (static_cast<int64_t>(prompt.size()) + ours_.decode + 1 + 255) / 256 * 256);

        // The clean run: the events our engine computes up to this one (where the span starts) and
        // what a correct engine shows against the reference here (the floor of the verdict).
        if (!keep_going("clean re-run")) return;
        SpanRun clean = rerun(fo, prompt, generated, last_ok ? last_ok->name : "");
        if (!clean.ok) return;
        const auto at = std::find(clean.names.begin(), clean.names.end(), ours_.name);
        if (at == clean.names.end()) return;
        auto from = clean.names.begin();
        if (last_ok) {
            auto l = std::find(clean.names.begin(), at, last_ok->name);
            if (l == at) return;
            from = l + 1;
        }
        if (at - from < 1) return;  // every input of this event was compared: no span
        // A clean run that does not match the reference here cannot tell a fault that reproduces ours.
        const double clean_nmse = reference_nmse(clean.target);
        if (!(clean_nmse <= th_.diverged_nmse)) return;
        const double floor = std::max(floor_, clean_nmse);
        const std::string span = span_name(std::vector<std::string>(from, at + 1));

        for (const FaultInfo& f : fault_catalogue()) {
            if (f.fault == Fault::kNone || !fault_knobs(f.fault, facts)) continue;
            fo.fault = f.fault;
            if (!keep_going(std::string("re-run with fault ") + f.name)) break;
            SpanRun run = rerun(fo, prompt, generated, last_ok ? last_ok->name : "");
            report_.tried.push_back(std::string("re-run with fault ") + f.name);
            if (!run.ok || run.target.size() != ours_.data.size()) continue;
            if (last_ok && !(last_ok_nmse(*last_ok, run.last_ok) <= bar(floor))) continue;  // changes what matched
            const double after = finite_nmse(run.target, ours_.data);
            if (!(after <= bar(floor)) || (before_ > 0 && after * 100 > before_)) continue;
            std::string verdict = fmt::format("{}: reproduced by re-running our forward pass with fault {} ({}); the "
                                              "clean run matches the reference there",
                                              span, f.name, f.description);
            const std::string saved = floor_source_;
            floor_source_ = "our clean re-run against the reference at this event";
            DoctorFinding found = finding(std::string("re-run:") + f.name, std::move(verdict), after, floor);
            floor_source_ = saved;
            found.from_rerun = true;
            report_.findings.push_back(std::move(found));
        }
    }

    struct SpanRun {
        bool ok = false;
        std::vector<std::string> names;  // our events up to the target, in execution order
        std::vector<float> target, last_ok;
    };

    // Records event names, keeps the values of the target and of the last matching event, and
    // stops the evaluation at the target.
    class SpanSink : public EventSink {
    public:
        SpanSink(SpanRun& run, const std::string& target, const std::string& last_ok)
            : run_(run), target_(target), last_ok_(last_ok) {}
        void on_event(const Event& e) override {
            run_.names.push_back(e.dump_name());
            const std::string& name = run_.names.back();
            if (name != target_ && name != last_ok_) return;
            std::vector<float>& out = name == target_ ? run_.target : run_.last_ok;
            out.resize(static_cast<size_t>(e.tensor.n_elements()));
            e.backend->download(out.data(), e.tensor.data, out.size() * sizeof(float));
            if (name == target_) throw EvalCancelled{};
        }

    private:
        SpanRun& run_;
        const std::string& target_;
        const std::string& last_ok_;
    };

    SpanRun rerun(const ForwardOptions& fo, const std::vector<int32_t>& prompt, const std::vector<int32_t>& generated,
                  const std::string& last_ok) {
        SpanRun run;
        if (!span_backend_) span_backend_ = make_cpu_backend(0);
        auto forward = make_forward(*model_, *span_backend_, fo);
        if (!forward) return run;
        SpanSink sink(run, ours_.name, last_ok);
        std::vector<int32_t> input = prompt;
        try {
            for (int d = 0; d <= ours_.decode; ++d) {
                if (!forward.value()->eval(input, &sink)) return run;
                if (d < ours_.decode) input = {generated[static_cast<size_t>(d)]};
            }
        } catch (const EvalCancelled&) {
            run.ok = true;
        }
        return run;
    }

    // NMSE of values of ours (this event) against the reference, as the comparison paired them.
    double reference_nmse(const std::vector<float>& values) const {
        AlignedValues a;
        std::string why;
        if (values.size() != ours_.data.size() || !align_with_reference(values.data(), ours_.ne, ref_, *ref_tensor_, &a, &why))
            return std::numeric_limits<double>::infinity();
        return finite_nmse(a.ours, a.ref);
    }
    double last_ok_nmse(const EventComparison& c, const std::vector<float>& values) const {
        const RefTensor* r = ref_.find(c.ref_name);
        const CapturedEvent* e = run_.captures.find(c.name);
        AlignedValues a;
        std::string why;
        if (!r || !e || static_cast<int64_t>(values.size()) != e->ne[0] * e->ne[1] * e->ne[2] * e->ne[3] ||
            !align_with_reference(values.data(), e->ne, ref_, *r, &a, &why))
            return std::numeric_limits<double>::infinity();
        return finite_nmse(a.ours, a.ref);
    }

    // "layer 0 attention (attn_norm-0 .. kqv_out-0)" for the events of a span.
    static std::string span_name(const std::vector<std::string>& names) {
        int lo = 1 << 30, hi = -1;
        bool attention = false, ffn = false;
        for (const std::string& n : names) {
            const std::string base = n.substr(0, n.find_first_of("#@"));
            const int L = layer_of(base);
            if (L < 0) continue;
            lo = std::min(lo, L), hi = std::max(hi, L);
            const bool f = starts_with(base, "ffn_") || starts_with(base, "l_out");
            (f ? ffn : attention) = true;
        }
        std::string where;
        if (hi < 0) where = "outside the layers";
        else if (lo != hi) where = fmt::format("layers {}..{}", lo, hi);
        else where = fmt::format("layer {}{}", lo, attention && !ffn ? " attention" : ffn && !attention ? " feed-forward" : "");
        if (hi >= 0 && layer_of(names.front().substr(0, names.front().find_first_of("#@"))) < 0) where = "the embeddings and " + where;
        if (hi >= 0 && layer_of(names.back().substr(0, names.back().find_first_of("#@"))) < 0) where += " and the output";
        return fmt::format("{} ({} .. {}: {} of our events in between not compared)", where, names.front(), names.back(),
                           names.size() - 1);
    }

    void try_f16() {
        std::vector<float> v = ours_aligned(ours_.data);
        for (float& x : v) x = fp16_to_fp32(fp32_to_fp16(x));
        consider("f16-rounding", fmt::format("{} matches the reference once ours is rounded to f16 (the reference keeps "
                                             "this tensor in f16)", ours_.name), v);
    }

    // The progress callback before each step; false once it asked to stop.
    bool keep_going(const std::string& step) {
        if (report_.cancelled) return false;
        if (progress_ && !progress_(step, report_.tried.size())) report_.cancelled = true;
        return !report_.cancelled;
    }

    Backend* backend() {
        if (!backend_) {
            backend_ = make_cpu_backend(1);
            backend_->set_llama_isa(run_.llama_isa);  // recompute as the comparison ran
        }
        return backend_.get();
    }

    const CompareRunResult& run_;
    size_t index_;
    const ReferenceDump& ref_;
    const Model* model_;
    const CompareThresholds& th_;
    const CapturedEvent& ours_;
    const EventComparison& cmp_;
    double floor_ = 0;
    std::string floor_source_;  // what floor_ was measured from ("" the comparison's floor)
    const RefTensor* ref_tensor_ = nullptr;
    std::vector<float> ref_values_;
    const std::vector<std::pair<int64_t, float>>* samples_ = nullptr;  // partial reference
    double before_ = 0;
    std::unique_ptr<Backend> backend_;
    std::unique_ptr<Backend> span_backend_;  // the span doctor's re-runs, on every core
    const DoctorProgress& progress_;
    DoctorReport report_;
};

}  // namespace

DoctorReport diagnose(const CompareRunResult& run, size_t event, const ReferenceDump& reference, const Model* model,
                      const CompareThresholds& thresholds, const DoctorProgress& progress) {
    if (event >= run.comparisons.size() || event >= run.captures.events.size()) return {};
    if (run.captures.events[event].data.empty()) return {};  // not captured: nothing to transform
    return Doctor(run, event, reference, model, thresholds, progress).run();
}

}  // namespace ls
