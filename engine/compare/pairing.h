// Whether a comparison paired enough to mean anything: a comparison that pairs nothing, or less
// than a share of the smaller side, is not a pass. What did not pair is listed with the tensors of
// the other side it most likely is, by shape and by position in the execution order.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/compare/compare_run.h"

namespace ls {

// The default share of the smaller side that must pair (--min-paired).
inline constexpr double kDefaultMinPaired = 0.5;

struct PairSuggestion {
    std::string name;
    std::array<int64_t, 4> ne{1, 1, 1, 1};
};

struct UnpairedTensor {
    std::string name;      // as its source names it
    std::string llama_name;  // llama.cpp's name a naming convention gave it ("" none)
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    std::vector<PairSuggestion> suggestions;  // best first
};

struct PairingReport {
    int paired = 0;      // our events paired with a reference tensor
    int ours = 0;        // our events
    int reference = 0;   // reference tensors that could pair: those paired and those left over for no known reason
    double share = 0;    // paired / the smaller side (0 when a side is empty)
    double min_share = kDefaultMinPaired;
    bool enough = true;  // share >= min_share and something paired
    std::string side;    // the smaller side, whose leftovers are listed: "ours" or "reference"
    int n_unpaired = 0;  // its tensors that did not pair
    std::vector<UnpairedTensor> unpaired;  // the first of them (up to a cap), with suggestions
};

// `reference` is the dump the comparison ran against (the ne and order of its leftovers).
PairingReport check_pairing(const CompareRunResult& result, const ReferenceDump& reference, double min_share,
                            size_t max_listed = 20, size_t max_suggestions = 3);

std::string ne_list_text(const std::array<int64_t, 4>& ne);  // "[64, 8, 6]"
// One line per listed tensor: "x: no known name; nearest by shape and order: a [..], b [..]".
std::string unpaired_text(const UnpairedTensor& u, const std::string& other_side);

}  // namespace ls
