// Metrics and shape alignment for comparisons with reference dumps.
#include "engine/compare/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ls {

namespace {

// compute_metrics' sums, one chain each, every value added in element order.
struct MetricSums {
    double abs = 0, d2 = 0, r2 = 0, o2 = 0, or_ = 0, o = 0, r = 0, max_abs = 0;
    int64_t finite = 0;
};

// One pair of values: the step every element takes, whichever loop runs it.
inline void add_pair(double o, double r, MetricSums& s, Metrics& m) {
    if (!std::isfinite(o) || !std::isfinite(r)) {
        m.nan_ours += std::isnan(o), m.inf_ours += std::isinf(o);
        m.nan_ref += std::isnan(r), m.inf_ref += std::isinf(r);
        if (!(o == r) && !(std::isnan(o) && std::isnan(r))) ++m.n_nonfinite;
        return;
    }
    const double d = o - r;
    s.abs += std::fabs(d);
    s.max_abs = std::max(s.max_abs, std::fabs(d));
    s.d2 += d * d;
    s.r2 += r * r;
    s.o2 += o * o;
    s.or_ += o * r;
    s.o += o;
    s.r += r;
    ++s.finite;
}

#if defined(__x86_64__)
#define LS_AVX2 __attribute__((target("avx2")))

bool metrics_avx2_usable() {
    static const bool yes = __builtin_cpu_supports("avx2");
    return yes;
}

// [a0 b0 c0 d0], [a1 b1 c1 d1], [a2 ..], [a3 ..] from rows a, b, c, d of four elements each.
LS_AVX2 inline void transpose4(__m256d a, __m256d b, __m256d c, __m256d d, __m256d t[4]) {
    const __m256d ab_lo = _mm256_unpacklo_pd(a, b), ab_hi = _mm256_unpackhi_pd(a, b);
    const __m256d cd_lo = _mm256_unpacklo_pd(c, d), cd_hi = _mm256_unpackhi_pd(c, d);
    t[0] = _mm256_permute2f128_pd(ab_lo, cd_lo, 0x20);
    t[1] = _mm256_permute2f128_pd(ab_hi, cd_hi, 0x20);
    t[2] = _mm256_permute2f128_pd(ab_lo, cd_lo, 0x31);
    t[3] = _mm256_permute2f128_pd(ab_hi, cd_hi, 0x31);
}

// add_pair over the first n values (rounded down to a multiple of 4), bit for bit: the sums are
// the lanes of two vectors ([o2 or r2 d2] and [o r abs -]), each lane one chain taking its four
// values of a block in element order; float-to-double conversions are exact and no FMA is used,
// so each lane rounds as the scalar chain does. The maximum is exact in any order. A block holding
// a NaN or Inf goes through add_pair. Returns how many values it took.
LS_AVX2 int64_t add_pairs_avx2(const float* ours, const float* ref, int64_t n, MetricSums& s, Metrics& m) {
    __m256d products = _mm256_setr_pd(s.o2, s.or_, s.r2, s.d2);
    __m256d values = _mm256_setr_pd(s.o, s.r, s.abs, 0.0);
    __m256d max_abs = _mm256_set1_pd(s.max_abs);
    const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
    const __m128i exponent = _mm_set1_epi32(0x7f800000);
    int64_t i = 0, finite = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 of = _mm_loadu_ps(ours + i), rf = _mm_loadu_ps(ref + i);
        const __m128i special =
            _mm_or_si128(_mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(of), exponent), exponent),
                         _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(rf), exponent), exponent));
        if (_mm_movemask_epi8(special) != 0) {
            alignas(32) double p[4], v[4];
            _mm256_store_pd(p, products);
            _mm256_store_pd(v, values);
            MetricSums b{.abs = v[2], .d2 = p[3], .r2 = p[2], .o2 = p[0], .or_ = p[1], .o = v[0], .r = v[1], .max_abs = s.max_abs};
            for (int k = 0; k < 4; ++k) add_pair(ours[i + k], ref[i + k], b, m);
            products = _mm256_setr_pd(b.o2, b.or_, b.r2, b.d2);
            values = _mm256_setr_pd(b.o, b.r, b.abs, 0.0);
            s.max_abs = b.max_abs;
            finite += b.finite;
            continue;
        }
        const __m256d o = _mm256_cvtps_pd(of), r = _mm256_cvtps_pd(rf);
        const __m256d d = _mm256_sub_pd(o, r);
        const __m256d ad = _mm256_and_pd(d, abs_mask);
        max_abs = _mm256_max_pd(max_abs, ad);
        __m256d t[4];
        transpose4(_mm256_mul_pd(o, o), _mm256_mul_pd(o, r), _mm256_mul_pd(r, r), _mm256_mul_pd(d, d), t);
        products = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(_mm256_add_pd(products, t[0]), t[1]), t[2]), t[3]);
        transpose4(o, r, ad, _mm256_setzero_pd(), t);
        values = _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(_mm256_add_pd(values, t[0]), t[1]), t[2]), t[3]);
        finite += 4;
    }
    alignas(32) double p[4], v[4], mx[4];
    _mm256_store_pd(p, products);
    _mm256_store_pd(v, values);
    _mm256_store_pd(mx, max_abs);
    s.o2 = p[0], s.or_ = p[1], s.r2 = p[2], s.d2 = p[3];
    s.o = v[0], s.r = v[1], s.abs = v[2];
    for (double x : mx) s.max_abs = std::max(s.max_abs, x);
    s.finite += finite;
    return i;
}
#endif

}  // namespace

Metrics compute_metrics(const float* ours, const float* ref, int64_t n) {
    Metrics m;
    MetricSums s;
    int64_t i = 0;
#if defined(__x86_64__)
    if (metrics_avx2_usable()) i = add_pairs_avx2(ours, ref, n, s, m);
#endif
    for (; i < n; ++i) add_pair(ours[i], ref[i], s, m);
    const int64_t finite = s.finite;
    m.n = n;
    m.n_finite = finite;
    m.max_abs = s.max_abs;
    if (finite == 0) {
        if (n > 0) m.max_abs = m.mean_abs = m.rel_l2 = m.nmse = m.cosine = m.pearson = NAN;  // nothing measured
        return m;
    }
    const double sum_abs = s.abs, sum_d2 = s.d2, sum_r2 = s.r2, sum_o2 = s.o2, sum_or = s.or_, sum_o = s.o, sum_r = s.r;
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
