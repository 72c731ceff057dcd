// Breakpoint conditions.
#include "engine/session/breakpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ls {

const char* breakpoint_kind_name(BreakpointKind kind) {
    switch (kind) {
        case BreakpointKind::kNamePattern: return "name";
        case BreakpointKind::kNanInf: return "nan-inf";
        case BreakpointKind::kAbsAbove: return "abs-above";
        case BreakpointKind::kDivergenceAbove: return "divergence-above";
    }
    return "?";
}

bool glob_match(const std::string& pattern, const std::string& text) {
    // Iterative matcher with one backtrack point: the last '*' seen, so it is linear in practice.
    size_t p = 0, t = 0, star = std::string::npos, star_t = 0;
    while (t < text.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
            ++p, ++t;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++, star_t = t;
        } else if (star != std::string::npos) {
            p = star + 1, t = ++star_t;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

std::optional<std::string> breakpoint_reason(const BreakpointSpec& bp, const EventInfo& info, const TensorStats& stats,
                                             const EventComparison* comparison) {
    switch (bp.kind) {
        case BreakpointKind::kNamePattern:
            // Base names let "*-3" mean layer 3 whatever the occurrence or decode call.
            if (glob_match(bp.pattern, info.base_name) || glob_match(bp.pattern, info.name))
                return fmt::format("name matches {}", bp.pattern);
            return std::nullopt;
        case BreakpointKind::kNanInf:
            if (stats.nan_count > 0 || stats.inf_count > 0)
                return fmt::format("{} NaN, {} Inf", stats.nan_count, stats.inf_count);
            return std::nullopt;
        case BreakpointKind::kAbsAbove: {
            if (stats.inf_count > 0) return fmt::format("{} Inf values", stats.inf_count);
            if (stats.count == stats.nan_count) return std::nullopt;  // no finite values to judge
            const double max_abs = std::max(std::fabs(static_cast<double>(stats.min)), std::fabs(static_cast<double>(stats.max)));
            if (max_abs > bp.threshold) return fmt::format("max |x| {:.6g} > {:.6g}", max_abs, bp.threshold);
            return std::nullopt;
        }
        case BreakpointKind::kDivergenceAbove:
            if (!comparison || comparison->status == CompareStatus::kNoReference) return std::nullopt;
            // NaN metrics (NaN/Inf mismatches) count as divergent, as the comparison treats them.
            if (comparison->metrics.n_nonfinite > 0 || std::isnan(comparison->metrics.nmse) ||
                comparison->metrics.nmse > bp.threshold)
                return fmt::format("nmse {:.3g} > {:.3g} against {}", comparison->metrics.nmse, bp.threshold,
                                   comparison->ref_name);
            return std::nullopt;
    }
    return std::nullopt;
}

}  // namespace ls
