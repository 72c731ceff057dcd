// Final distributions compared as llama-perplexity --kl-divergence does (output_kl.h).
#include "engine/compare/output_kl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace ls {
namespace {

// log(sum(exp(x))) in double; -inf for an empty or all -inf row, NaN when a value is NaN.
double log_sum_exp(const float* x, int64_t n) {
    double max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        if (std::isnan(x[i])) return NAN;
        max = std::max(max, static_cast<double>(x[i]));
    }
    if (!std::isfinite(max)) return max;  // all -inf, or a +inf
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
    return max + std::log(sum);
}

int32_t top1(const float* x, int64_t n) {
    int32_t best = -1;
    for (int64_t i = 0; i < n; ++i)
        if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = static_cast<int32_t>(i);
    return best;
}

// Linear between the nearest ranks of sorted values, as llama-perplexity's percentiles.
double percentile(const std::vector<double>& sorted, double fraction) {
    if (sorted.empty()) return NAN;
    const double p = fraction * static_cast<double>(sorted.size() - 1);
    const size_t lo = static_cast<size_t>(p);
    const size_t hi = std::min(lo + 1, sorted.size() - 1);
    const double f = p - static_cast<double>(lo);
    return f == 0 ? sorted[lo] : (1 - f) * sorted[lo] + f * sorted[hi];
}

using Group = std::pair<int, int>;  // (decode call, batch)

}  // namespace

PositionKl compare_distributions(const float* ref, const float* ours, int64_t n) {
    PositionKl r;
    r.ref_top1 = top1(ref, n);
    r.our_top1 = top1(ours, n);
    const double lse_ref = log_sum_exp(ref, n), lse_ours = log_sum_exp(ours, n);
    if (!std::isfinite(lse_ref) || !std::isfinite(lse_ours)) {
        r.kl = NAN;  // a NaN, a +inf or no finite logit: no distribution
        return r;
    }
    double kl = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double log_p = static_cast<double>(ref[i]) - lse_ref;
        const double p = std::exp(log_p);
        if (p == 0) continue;
        kl += p * (log_p - (static_cast<double>(ours[i]) - lse_ours));  // +inf where ours is -inf
    }
    r.kl = kl;
    r.ref_p_top1 = std::exp(static_cast<double>(ref[r.ref_top1]) - lse_ref);
    r.our_p_ref_top1 = std::exp(static_cast<double>(ours[r.ref_top1]) - lse_ours);
    return r;
}

KlStats kl_stats(const std::vector<PositionKl>& rows) {
    KlStats s;
    s.n = static_cast<int64_t>(rows.size());
    if (rows.empty()) return s;
    std::vector<double> kl;
    double sum = 0;
    int64_t same = 0;
    for (const PositionKl& r : rows) {
        kl.push_back(r.kl);
        sum += r.kl;
        same += r.ref_top1 >= 0 && r.ref_top1 == r.our_top1;
    }
    std::sort(kl.begin(), kl.end(), [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : a < b; });
    s.mean = sum / static_cast<double>(s.n);
    s.median = percentile(kl, 0.5);
    s.p99 = percentile(kl, 0.99);
    s.max = kl.back();
    s.min = kl.front();
    s.same_top1 = static_cast<double>(same) / static_cast<double>(s.n);
    return s;
}

std::string kl_stats_text(const KlStats& s) {
    return fmt::format("mean KL {:.6g}, median {:.6g}, p99 {:.6g}, max {:.6g}; same top-1 {:.1f}% ({} positions)", s.mean,
                       s.median, s.p99, s.max, 100 * s.same_top1, s.n);
}

std::map<Group, BatchSpan> batch_spans(const CaptureLog& ours) {
    std::map<Group, BatchSpan> spans;
    int64_t start = 0;
    for (const CapturedEvent& e : ours.events) {
        const Group g{e.decode, e.ubatch};
        if (e.base_name != "embd" || spans.count(g)) continue;
        if (e.ne[1] <= 0) break;
        spans[g] = {start, e.ne[1]};
        start += e.ne[1];
    }
    return spans;
}

int64_t row_position(const std::map<Group, BatchSpan>& spans, int decode, int ubatch, int64_t rows, int64_t row) {
    auto it = spans.find({decode, ubatch});
    if (it == spans.end() || rows > it->second.tokens) return -1;
    return it->second.start + it->second.tokens - rows + row;  // all its tokens, or the last ones
}

OutputKl output_kl(const CaptureLog& ours, const ReferenceDump& reference) {
    OutputKl out;
    // Ours: each batch's last result_output.
    std::map<Group, const CapturedEvent*> our_logits;
    std::vector<Group> order;
    for (const CapturedEvent& e : ours.events) {
        // Two dumps' captures hold the values of one event only; the others stay in the file.
        if (e.base_name != "result_output" || e.data.size() != static_cast<size_t>(e.ne[0] * e.ne[1] * e.ne[2] * e.ne[3]))
            continue;
        const Group g{e.decode, e.ubatch};
        if (!our_logits.count(g)) order.push_back(g);
        our_logits[g] = &e;
    }
    const std::map<Group, BatchSpan> spans = batch_spans(ours);
    // The reference's: the last occurrence in each batch.
    std::map<Group, const RefTensor*> ref_logits;
    for (const RefTensor& t : reference.tensors()) {
        if (t.base_name != "result_output" || t.kind == RefKind::kInput || !t.complete()) continue;
        const RefTensor*& last = ref_logits[{t.decode, t.ubatch}];
        if (!last || t.occurrence > last->occurrence) last = &t;
    }
    std::vector<std::string> why;
    for (const Group& g : order) {
        const CapturedEvent& e = *our_logits[g];
        const int64_t n = e.ne[0], our_rows = e.ne[1] * e.ne[2] * e.ne[3];
        auto it = ref_logits.find(g);
        if (it == ref_logits.end()) {
            why.push_back(fmt::format("{} has no reference logits", e.name));
            continue;
        }
        const RefTensor& t = *it->second;
        const int64_t ref_rows = n > 0 ? t.n_elements() / n : 0;
        if (t.ne()[0] != n) {
            why.push_back(fmt::format("{}: rows of {} logits, the reference's of {}", e.name, n, t.ne()[0]));
            continue;
        }
        if (ref_rows > our_rows) {
            why.push_back(fmt::format("{}: {} rows of logits, the reference's {}", e.name, our_rows, ref_rows));
            continue;
        }
        // A reference that kept fewer rows kept the output rows: its out_ids, else the last.
        const std::vector<int32_t> ids = reference.out_ids(g.first, g.second);
        const bool by_ids = static_cast<int64_t>(ids.size()) == ref_rows && ref_rows < our_rows;
        const std::vector<float> values = reference.values(t);
        for (int64_t r = 0; r < ref_rows; ++r) {
            const int64_t col = by_ids ? ids[r] : our_rows - ref_rows + r;
            if (col < 0 || col >= our_rows) continue;
            PositionKl k = compare_distributions(values.data() + r * n, e.data.data() + col * n, n);
            k.decode = g.first;
            k.position = row_position(spans, g.first, g.second, our_rows, col);
            out.rows.push_back(k);
        }
    }
    for (size_t i = 0; i < why.size() && i < 3; ++i) out.why += (i ? "; " : "") + why[i];
    if (why.size() > 3) out.why += fmt::format("; and {} more", why.size() - 3);
    return out;
}

}  // namespace ls
