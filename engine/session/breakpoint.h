// Breakpoints of a session: a tensor name pattern, NaN/Inf, |x| above a threshold, divergence
// from the reference above an NMSE threshold. Each is checked on every event of a run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "engine/compare/comparison.h"
#include "engine/session/event_plan.h"

namespace ls {

enum class BreakpointKind { kNamePattern, kNanInf, kAbsAbove, kDivergenceAbove };
const char* breakpoint_kind_name(BreakpointKind kind);

struct BreakpointSpec {
    BreakpointKind kind = BreakpointKind::kNamePattern;
    std::string pattern;    // kNamePattern: a glob ('*', '?') over the base or the dump name
    double threshold = 0;   // kAbsAbove: max |x|; kDivergenceAbove: NMSE against the reference

    static BreakpointSpec name(std::string glob) { return {BreakpointKind::kNamePattern, std::move(glob), 0}; }
    static BreakpointSpec nan_inf() { return {BreakpointKind::kNanInf, "", 0}; }
    static BreakpointSpec abs_above(double t) { return {BreakpointKind::kAbsAbove, "", t}; }
    static BreakpointSpec divergence_above(double nmse) { return {BreakpointKind::kDivergenceAbove, "", nmse}; }
};

struct Breakpoint {
    int id = 0;
    BreakpointSpec spec;
    bool enabled = true;
    int hit_count = 0;  // times it stopped the session
};

struct BreakpointHit {
    int breakpoint_id = 0;
    int64_t event_index = -1;
    std::string event_name;  // dump name
    std::string reason;      // "name matches Qcur-*", "max |x| 12.5 > 10", ...
};

// '*' matches any run of characters, '?' one character; everything else literally.
bool glob_match(const std::string& pattern, const std::string& text);

// Why `bp` stops at this event, or nothing. `comparison` is null without a reference.
std::optional<std::string> breakpoint_reason(const BreakpointSpec& bp, const EventInfo& info, const TensorStats& stats,
                                             const EventComparison* comparison);

}  // namespace ls
