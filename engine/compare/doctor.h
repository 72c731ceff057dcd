// The divergence doctor: for a diverged event, tries the transforms that turn the classic engine
// bugs into each other (transpose, NORM <-> NEOX, position shifts, attention scales, the causal
// mask, RMSNorm epsilon and weight, biases, vocabulary crop, f16 rounding, Q4_K scale/min roles)
// on our side of the comparison, and says in plain words which one explains the reference.
#pragma once

#include <string>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/forward/model.h"

namespace ls {

struct DoctorFinding {
    std::string transform;  // short id, e.g. "rope-pairing"
    std::string verdict;    // "Qcur-0#3 matches the reference if RoPE pairs are ... "
    double nmse_before = 0, nmse_after = 0;
};

struct DoctorReport {
    std::vector<std::string> tried;        // transforms that applied to this event
    std::vector<DoctorFinding> findings;   // those that explain the reference, best first
};

// `event` is the index of a diverged comparison in `run`. `model` gives weights and the config
// (nullptr for dump-vs-dump comparisons: then only transforms that need no model are tried).
DoctorReport diagnose(const CompareRunResult& run, size_t event, const ReferenceDump& reference, const Model* model,
                      const CompareThresholds& thresholds);

}  // namespace ls
