// Metrics and shape alignment for comparisons with reference dumps.
#include "compare/metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace ls {

Metrics compute_metrics(const float* ours, const float* ref, int64_t n) {
    Metrics m;
    double sum_abs = 0, sum_d2 = 0, sum_r2 = 0, sum_o2 = 0, sum_or = 0, sum_o = 0, sum_r = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double o = ours[i], r = ref[i];
        if (!std::isfinite(o) || !std::isfinite(r)) {
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
    if (finite == 0) return m;
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

static std::string ne_text(const int64_t* ne) { return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]); }

bool align_with_reference(const float* ours, const int64_t ne[4], const ReferenceDump& dump, const RefTensor& ref,
                          AlignedValues* out, std::string* why) {
    const int64_t* rne = ref.ne();
    std::vector<float> r = dump.values(ref);
    out->ours.clear();
    out->note.clear();
    if (ne[0] == rne[0] && ne[1] == rne[1] && ne[2] == rne[2] && ne[3] == rne[3]) {
        out->ours.assign(ours, ours + ne[0] * ne[1] * ne[2] * ne[3]);
        out->ref = std::move(r);
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
                out->ref = std::move(r);
                out->note = fmt::format("output rows {}", ids.size() == 1 ? std::to_string(ids[0]) : std::to_string(ids.size()));
                return true;
            }
        }
    }
    // KV cells: the reference attends over a padded cache (ne0 = 256 cells); ours over the
    // filled cells only. The extra cells hold exact zeros after softmax.
    if (ne[0] < rne[0] && ne[1] == rne[1] && ne[2] == rne[2] && ne[3] == rne[3]) {
        const int64_t rows = ne[1] * ne[2] * ne[3];
        out->ours.assign(ours, ours + ne[0] * rows);
        out->ref.resize(ne[0] * rows);
        for (int64_t row = 0; row < rows; ++row)
            std::copy(r.begin() + row * rne[0], r.begin() + row * rne[0] + ne[0], out->ref.begin() + row * ne[0]);
        out->note = fmt::format("first {} of {} KV cells", ne[0], rne[0]);
        return true;
    }
    *why = fmt::format("shape {} cannot be paired with the reference's {}", ne_text(ne), ne_text(rne));
    return false;
}

}  // namespace ls
