// Event-by-event comparison with a reference dump.
#include "engine/compare/comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/compare/ref_names.h"
#include "engine/forward/event.h"

namespace ls {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Appends a clause to an event's note.
void add_note(EventComparison& c, const std::string& more) {
    if (!more.empty()) c.note += (c.note.empty() ? "" : "; ") + more;
}

std::string ne_text(const int64_t* ne) { return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]); }

// Why the printed sum moved an event's status: the two sums side by side.
std::string sum_reason(const PartialComparison& pc) {
    if (!std::isfinite(pc.ref_sum)) return fmt::format("the reference's sum is {} (ours {:.7g})", pc.ref_sum, pc.ours_sum);
    if (!std::isfinite(pc.ours_sum)) return fmt::format("our sum is {} (the reference's {:.7g})", pc.ours_sum, pc.ref_sum);
    return fmt::format("sums differ: ours {:.7g}, the reference's {:.7g}", pc.ours_sum, pc.ref_sum);
}

}  // namespace

const char* compare_status_name(CompareStatus status) {
    switch (status) {
        case CompareStatus::kOk: return "ok";
        case CompareStatus::kWarn: return "warn";
        case CompareStatus::kDiverged: return "diverged";
        case CompareStatus::kNoReference: return "no reference";
        case CompareStatus::kUnusable: return "unusable";
    }
    return "?";
}

const char* local_origin_name(LocalOrigin origin) {
    switch (origin) {
        case LocalOrigin::kNotComputed: return "";
        case LocalOrigin::kUnknown: return "unknown";
        case LocalOrigin::kLocal: return "local";
        case LocalOrigin::kInherited: return "inherited";
    }
    return "?";
}

Comparator::Comparator(const ReferenceDump& reference, CompareThresholds thresholds)
    : ref_(reference), thresholds_(thresholds) {
    // Our name for each reference tensor, following unnamed nodes to what they compute.
    const std::vector<OurName> names = our_names(ref_);
    const std::vector<RefTensor>& tensors = ref_.tensors();
    for (size_t i = 0; i < tensors.size(); ++i) {
        const OurName& n = names[i];
        if (n.kind == OurName::Kind::kNone) continue;
        const RefTensor& t = tensors[i];
        // A tensor computed as ours is goes first; the same values under another node after it.
        auto& refs = by_our_name_[event_dump_name(n.base, n.occurrence, t.decode, t.ubatch)];
        if (n.kind == OurName::Kind::kOwn) refs.insert(refs.begin(), &t);
        else refs.push_back(&t);
    }
}

CompareStatus Comparator::status_of(const Metrics& m) const {
    if (m.n_nonfinite > 0 || !(m.nmse <= thresholds_.diverged_nmse)) return CompareStatus::kDiverged;
    if (m.nmse > thresholds_.warn_nmse) return CompareStatus::kWarn;
    return CompareStatus::kOk;
}

void Comparator::fill_logit_ranks(const float* ours, const float* ref, int64_t n_vocab, EventComparison* c) const {
    const int k = static_cast<int>(std::min<int64_t>(thresholds_.top_k, n_vocab));
    auto top = [&](const float* v) {
        std::vector<int32_t> idx(static_cast<size_t>(n_vocab));
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
            return v[a] > v[b] || (v[a] == v[b] && a < b);
        });
        idx.resize(k);
        return idx;
    };
    std::vector<int32_t> a = top(ours), b = top(ref);
    c->top_k_overlap = 0;
    for (int32_t x : a) c->top_k_overlap += std::count(b.begin(), b.end(), x) > 0;
    const float target = ours[b[0]];
    c->ref_top1_rank = 0;
    for (int64_t i = 0; i < n_vocab; ++i) c->ref_top1_rank += ours[i] > target;
}

EventComparison Comparator::compare(int64_t event_index, const HostTensor& ours) {
    return measure(event_index, ours, pair(ours.name));
}

const RefTensor* Comparator::pair(const std::string& our_name) {
    auto it = by_our_name_.find(our_name);
    if (it == by_our_name_.end()) return nullptr;
    // Several reference tensors may stand for one of ours (result_output and llama_logits):
    // compare with the first, mark all used.
    for (const RefTensor* t : it->second) used_[t->name] = true;
    return it->second.front();
}

EventComparison Comparator::measure(int64_t event_index, const HostTensor& ours, const RefTensor* paired) const {
    EventComparison c;
    c.event_index = event_index;
    c.name = ours.name;
    if (!paired) {
        c.note = "the reference has no tensor for this event";
        return c;
    }
    const RefTensor& r = *paired;
    c.ref_name = r.name;
    c.ref_source_name = r.source_name;

    // A tensor of zero elements (ne [64, 0]) holds nothing to compare: calling it ok would claim an
    // agreement nobody measured, calling it the first divergence would hide the real one.
    const int64_t n_ours = ours.ne[0] * ours.ne[1] * ours.ne[2] * ours.ne[3];
    if (r.n_elements() == 0 || n_ours == 0) {
        c.status = CompareStatus::kUnusable;
        c.metrics.max_abs = c.metrics.mean_abs = c.metrics.rel_l2 = c.metrics.nmse = c.metrics.cosine = c.metrics.pearson = NAN;
        c.note = r.n_elements() == 0 ? fmt::format("the reference tensor holds no values (ne {})", ne_text(r.ne()))
                                     : fmt::format("our tensor holds no values (ne {})", ne_text(ours.ne));
        return c;
    }

    if (!r.complete()) {
        // A text log: the printed values at their positions, and the sum.
        PartialComparison pc;
        std::string why;
        c.partial = true;
        if (!compare_partial(ours.data, ours.ne, r, &pc, &why, ref_.out_ids(r.decode, r.ubatch))) {
            // A printout cut off at the end of a log has nothing to compare: say so, do not diverge.
            c.status = r.samples.empty() && !r.has_sum ? CompareStatus::kNoReference : CompareStatus::kDiverged;
            c.metrics.nmse = INFINITY;
            c.note = why;
            return c;
        }
        c.metrics = pc.metrics;
        c.note = pc.note.rfind("partial", 0) == 0 ? pc.note : "partial: " + pc.note;
        // Logs print 4 decimals: differences within half a printed digit are not differences.
        c.status = c.metrics.n_nonfinite == 0 && c.metrics.max_abs <= 0.6e-4 ? CompareStatus::kOk : status_of(c.metrics);
        add_note(c, nonfinite_reason(c.metrics));
        if (pc.has_sum) {
            // The sum covers every value: relative to the values' magnitude, it catches what the
            // few printed values miss. Printed sums have ~6 significant digits.
            c.sum_rel_error = pc.sum_err_l1;
            if (pc.sum_err_l1 > 1e-3 && c.status == CompareStatus::kOk) c.status = CompareStatus::kWarn;
            if (pc.sum_err_l1 > 1e-2) c.status = CompareStatus::kDiverged;
            if (!(pc.sum_err_l1 <= 1e-3)) add_note(c, sum_reason(pc));
        }
        return c;
    }

    // Values that pair one to one are read in place from the reference's file, nothing copied.
    const float* ref_values = r.f32();
    if (ref_values && pairs_one_to_one(ours.ne, r.ne(), &c.note)) {
        const int64_t n = r.n_elements();
        c.metrics = compute_metrics(ours.data, ref_values, n);
        c.status = status_of(c.metrics);
        add_note(c, nonfinite_reason(c.metrics));
        if (starts_with(ours.name, "result_output") && ours.ne[0] == r.ne()[0]) {
            const int64_t n_vocab = ours.ne[0];
            const int64_t rows = n / n_vocab;
            fill_logit_ranks(ours.data + (rows - 1) * n_vocab, ref_values + (rows - 1) * n_vocab, n_vocab, &c);
        }
        return c;
    }

    AlignedValues aligned;
    std::string why;
    if (!align_with_reference(ours.data, ours.ne, ref_, r, &aligned, &why)) {
        c.status = CompareStatus::kDiverged;
        c.metrics.nmse = c.metrics.max_abs = INFINITY;
        c.metrics.cosine = c.metrics.pearson = NAN;
        c.note = why;
        return c;
    }
    c.note = aligned.note;
    c.metrics = compute_metrics(aligned.ours.data(), aligned.ref.data(), static_cast<int64_t>(aligned.ours.size()));
    c.status = status_of(c.metrics);
    add_note(c, nonfinite_reason(c.metrics));
    if (starts_with(ours.name, "result_output") && ours.ne[0] == r.ne()[0]) {
        const int64_t n_vocab = ours.ne[0];
        const int64_t rows = static_cast<int64_t>(aligned.ref.size()) / n_vocab;
        fill_logit_ranks(aligned.ours.data() + (rows - 1) * n_vocab, aligned.ref.data() + (rows - 1) * n_vocab, n_vocab, &c);
    }
    return c;
}

std::vector<std::pair<std::string, std::string>> Comparator::unmatched() const {
    std::vector<std::pair<std::string, std::string>> out;
    for (const RefTensor& t : ref_.tensors()) {
        if (t.kind == RefKind::kInput || used_.count(t.name)) continue;
        std::string why;
        if (starts_with(t.base_name, "cache_") || t.base_name.find("cache_") != std::string::npos) why = "KV-cache tensor";
        else if (t.op == "VIEW" || t.op == "PERMUTE" || t.op == "RESHAPE" || t.op == "TRANSPOSE" || t.op == "CONT" || t.op == "CPY")
            why = fmt::format("{} of {} (no new values)", t.op, t.src0);
        else if (t.op == "SET_ROWS") why = "KV-cache write";
        out.emplace_back(t.name, why);
    }
    return out;
}

void apply_noise_floor(EventComparison& c, double floor_nmse, const CompareThresholds& th) {
    if (c.status == CompareStatus::kNoReference || c.status == CompareStatus::kUnusable || c.partial) return;
    c.floor_nmse = floor_nmse;
    const Metrics& m = c.metrics;
    if (m.n_nonfinite > 0 || !(m.nmse <= std::max(th.diverged_nmse, kFloorDivergedFactor * floor_nmse)))
        c.status = CompareStatus::kDiverged;
    else if (m.nmse > std::max(th.warn_nmse, kFloorWarnFactor * floor_nmse))
        c.status = CompareStatus::kWarn;
    else
        c.status = CompareStatus::kOk;
}

ComparisonSummary summarize(const std::vector<EventComparison>& comparisons) {
    ComparisonSummary s;
    for (size_t i = 0; i < comparisons.size(); ++i) {
        switch (comparisons[i].status) {
            case CompareStatus::kOk: ++s.ok; break;
            case CompareStatus::kWarn: ++s.warn; break;
            case CompareStatus::kDiverged:
                ++s.diverged;
                if (s.first_divergent < 0) s.first_divergent = static_cast<int64_t>(i);
                break;
            case CompareStatus::kNoReference: ++s.no_reference; break;
            case CompareStatus::kUnusable: ++s.unusable; break;
        }
    }
    return s;
}

}  // namespace ls
