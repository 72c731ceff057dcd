// Metrics and shape alignment for comparisons with reference dumps.
#include "engine/compare/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ls {

Metrics compute_metrics(const float* ours, const float* ref, int64_t n) {
    Metrics m;
    double sum_abs = 0, sum_d2 = 0, sum_r2 = 0, sum_o2 = 0, sum_or = 0, sum_o = 0, sum_r = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double o = ours[i], r = ref[i];
        if (!std::isfinite(o) || !std::isfinite(r)) {
            m.nan_ours += std::isnan(o), m.inf_ours += std::isinf(o);
            m.nan_ref += std::isnan(r), m.inf_ref += std::isinf(r);
            if (!(o == r) && !(std::isnan(o) && std::isnan(r))) ++m.n_nonfinite;
            continue;
        }
        const double d = o - r;
        sum_abs += std::fabs(d);
        m.max_abs = std::max(m.max_abs, std::fabs(d));
        sum_d2 += d * d;
        sum_r2 += r * r;
        sum_o2 += o * o;
        sum_or += o * r;
        sum_o += o;
        sum_r += r;
        ++finite;
    }
    m.n = n;
    m.n_finite = finite;
    if (finite == 0) {
        if (n > 0) m.max_abs = m.mean_abs = m.rel_l2 = m.nmse = m.cosine = m.pearson = NAN;  // nothing measured
        return m;
    }
    m.mean_abs = sum_abs / finite;
    m.rel_l2 = sum_r2 > 0 ? std::sqrt(sum_d2 / sum_r2) : (sum_d2 > 0 ? INFINITY : 0.0);
    m.nmse = sum_r2 > 0 ? sum_d2 / sum_r2 : (sum_d2 > 0 ? INFINITY : 0.0);
    m.cosine = (sum_o2 > 0 && sum_r2 > 0) ? sum_or / std::sqrt(sum_o2 * sum_r2) : (sum_d2 == 0 ? 1.0 : 0.0);
    const double cov = sum_or - sum_o * sum_r / finite;
    const double var_o = sum_o2 - sum_o * sum_o / finite, var_r = sum_r2 - sum_r * sum_r / finite;
    m.pearson = (var_o > 0 && var_r > 0) ? cov / std::sqrt(var_o * var_r) : (sum_d2 == 0 ? 1.0 : 0.0);
    if (m.n_nonfinite > 0) m.nmse = m.rel_l2 = INFINITY;
    return m;
}

std::string nonfinite_reason(const Metrics& m) {
    const bool unmeasured = m.n > 0 && m.n_finite == 0;
    if (m.n_nonfinite == 0 && !unmeasured) return "";
    std::string out;
    auto count = [&](int64_t k, const char* side, const char* what) {
        if (k == 0) return;
        out += fmt::format("{}{} has {} in {} of {} values", out.empty() ? "" : ", ", side, what, k, m.n);
    };
    count(m.nan_ref, "reference", "NaN");
    count(m.inf_ref, "reference", "Inf");
    count(m.nan_ours, "ours", "NaN");
    count(m.inf_ours, "ours", "Inf");
    if (unmeasured) out += "; no position where both are finite, nothing measured";
    else out += fmt::format("; they differ at {} position{}", m.n_nonfinite, m.n_nonfinite == 1 ? "" : "s");
    return out;
}

bool kv_cells_along_ne0(const RefTensor& ref) {
    for (const char* prefix : {"kq-", "kq_soft_max-", "kq_scaled_1-", "kq_tanh-", "kq_scaled_2-"})
        if (ref.base_name.rfind(prefix, 0) == 0) return true;
    return false;
}

static std::string ne_text(const int64_t* ne) { return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]); }

bool pairs_one_to_one(const int64_t ne[4], const int64_t rne[4], std::string* note) {
    if (std::equal(ne, ne + 4, rne)) {
        note->clear();
        return true;
    }
    // A reshape that keeps the token axis (the outermost one of size > 1): {head_dim, n_head, T}
    // against {head_dim * n_head, T}, either way round (the flash-attention node, an engine's
    // queries saved as (T, n_head * head_dim)).
    auto outer = [](const int64_t* n) {
        int k = 3;
        while (k > 0 && n[k] == 1) --k;
        return k;
    };
    const int a = outer(ne), b = outer(rne);
    if (ne[a] == rne[b] && ne[0] * ne[1] * ne[2] * ne[3] == rne[0] * rne[1] * rne[2] * rne[3] && a > 0 && b > 0) {
        *note = "reshaped";
        return true;
    }
    return false;
}

bool align_with_reference(const float* ours, const int64_t ne[4], const ReferenceDump& dump, const RefTensor& ref,
                          AlignedValues* out, std::string* why) {
    // The reference's values are read once a pairing is found, and only those paired: a huge
    // reference tensor (a mapped file) that pairs with nothing is never copied.
    const int64_t* rne = ref.ne();
    out->ours.clear();
    out->note.clear();
    if (pairs_one_to_one(ne, rne, &out->note)) {
        out->ours.assign(ours, ours + ref.n_elements());
        out->ref = dump.values(ref);
        return true;
    }
    // llama.cpp keeps only the rows whose logits are needed from the last layer on.
    if (ne[0] == rne[0] && ne[2] == 1 && rne[2] == 1 && ne[3] == 1 && rne[3] == 1 && rne[1] < ne[1]) {
        std::vector<int32_t> ids = dump.out_ids(ref.decode, ref.ubatch);
        if (static_cast<int64_t>(ids.size()) == rne[1]) {
            for (int32_t id : ids) {
                if (id < 0 || id >= ne[1]) break;
                out->ours.insert(out->ours.end(), ours + id * ne[0], ours + (id + 1) * ne[0]);
            }
            if (static_cast<int64_t>(out->ours.size()) == rne[0] * rne[1]) {
                out->ref = dump.values(ref);
                out->note = fmt::format("output rows {}", ids.size() == 1 ? std::to_string(ids[0]) : std::to_string(ids.size()));
                return true;
            }
        }
    }
    // The other way round: the reference kept every row, ours only the output rows (llama.cpp's
    // default: the last token's), which are the reference's last rows.
    if (ne[0] == rne[0] && ne[2] == 1 && rne[2] == 1 && ne[3] == 1 && rne[3] == 1 && rne[1] > ne[1]) {
        out->ours.assign(ours, ours + ne[0] * ne[1]);
        out->ref = dump.values(ref, (rne[1] - ne[1]) * rne[0], ne[0] * ne[1]);
        out->note = ne[1] == 1 ? "the reference's last row" : fmt::format("the reference's last {} rows", ne[1]);
        return true;
    }
        // KV cells: the reference attends over a padded cache (ne0 = 256 cells); ours over the
    // filled cells only. The extra cells hold exact zeros after softmax.
    if (kv_cells_along_ne0(ref) && ne[0] < rne[0] && ne[1] == rne[1] && ne[2] == rne[2] && ne[3] == rne[3]) {
        const int64_t rows = ne[1] * ne[2] * ne[3];
        out->ours.assign(ours, ours + ne[0] * rows);
        out->ref.resize(ne[0] * rows);
        for (int64_t row = 0; row < rows; ++row) {
            const std::vector<float> cells = dump.values(ref, row * rne[0], ne[0]);
            std::copy(cells.begin(), cells.end(), out->ref.begin() + row * ne[0]);
        }
        out->note = fmt::format("first {} of {} KV cells", ne[0], rne[0]);
        return true;
    }
    *why = fmt::format("shape {} cannot be paired with the reference's {}", ne_text(ne), ne_text(rne));
    return false;
}

bool compare_partial(const float* ours, const int64_t ne[4], const RefTensor& ref, PartialComparison* out,
                     std::string* why, const std::vector<int32_t>& out_ids) {
    *out = PartialComparison();
    const int64_t* rne = ref.ne();
    out->n_total = ref.n_elements();
    if (ref.samples.empty() && !ref.has_sum) {
        *why = fmt::format("the reference has no values for {} (its printout is missing or cut off)", ref.name);
        return false;
    }
    const int64_t n_ours = ne[0] * ne[1] * ne[2] * ne[3];
    // ours_index(reference flat index) -> our flat index, or -1 for a reference-only position.
    std::vector<int64_t> rows;  // our row for each reference row (output-rows case)
    std::string how;
    bool padded = false;
    if (std::equal(ne, ne + 4, rne)) {
    } else if (ne[0] == rne[0] && ne[2] == 1 && rne[2] == 1 && ne[3] == 1 && rne[3] == 1 && rne[1] < ne[1]) {
        bool use_ids = static_cast<int64_t>(out_ids.size()) == rne[1];
        for (int32_t id : out_ids) use_ids = use_ids && id >= 0 && id < ne[1];
        for (int64_t r = 0; r < rne[1]; ++r) rows.push_back(use_ids ? out_ids[r] : ne[1] - rne[1] + r);
        how = use_ids ? fmt::format(", output rows {}", rows.size() == 1 ? std::to_string(rows[0]) : std::to_string(rows.size()))
                      : fmt::format(", our last {} row{}", rne[1], rne[1] == 1 ? "" : "s");
    } else if (kv_cells_along_ne0(ref) && ne[0] < rne[0] && ne[1] == rne[1] && ne[2] == rne[2] && ne[3] == rne[3]) {
        padded = true;
        how = fmt::format(", first {} of {} KV cells", ne[0], rne[0]);
    } else {
        *why = fmt::format("shape {} cannot be paired with the reference's {}", ne_text(ne), ne_text(rne));
        return false;
    }
    auto ours_index = [&](int64_t flat) -> int64_t {
        if (flat < 0 || flat >= out->n_total) return -1;
        if (!rows.empty()) return (flat % rne[0]) + rows[flat / rne[0]] * ne[0];
        if (padded) {
            const int64_t i0 = flat % rne[0];
            return i0 < ne[0] ? i0 + (flat / rne[0]) * ne[0] : -1;
        }
        return flat < n_ours ? flat : -1;
    };
    std::vector<float> o, r;
    for (const auto& [flat, value] : ref.samples) {
        const int64_t i = ours_index(flat);
        if (i < 0) continue;
        o.push_back(ours[i]);
        r.push_back(value);
    }
    out->n_samples = static_cast<int64_t>(o.size());
    out->metrics = compute_metrics(o.data(), r.data(), out->n_samples);
    if (ref.has_sum) {
        double sum = 0, l1 = 0;
        if (!rows.empty()) {
            for (int64_t row : rows)
                for (int64_t i = 0; i < ne[0]; ++i) sum += ours[row * ne[0] + i], l1 += std::fabs(ours[row * ne[0] + i]);
        } else {
            for (int64_t i = 0; i < n_ours; ++i) sum += ours[i], l1 += std::fabs(ours[i]);
        }
        out->has_sum = true;
        out->ours_sum = sum;
        out->ref_sum = ref.sum;
        out->sum_abs_err = std::fabs(sum - ref.sum);
        out->sum_rel_err = ref.sum != 0 ? out->sum_abs_err / std::fabs(ref.sum) : (out->sum_abs_err > 0 ? INFINITY : 0.0);
        out->sum_err_l1 = l1 > 0 ? out->sum_abs_err / l1 : (out->sum_abs_err > 0 ? INFINITY : 0.0);
        if (!std::isfinite(sum) || !std::isfinite(ref.sum))
            out->sum_rel_err = out->sum_err_l1 = (std::isnan(sum) && std::isnan(ref.sum)) || sum == ref.sum ? 0.0 : INFINITY;
    }
    out->note = fmt::format("partial: {} of {} values{}{}", out->n_samples, out->n_total,
                            out->has_sum ? " and the sum" : "", how);
    return true;
}

}  // namespace ls
