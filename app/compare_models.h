// `compare -m MODEL --against-model OTHER`: two files of one model, opened and checked once for the
// comparison event by event (cmd_compare.cpp) and for --ablate (cmd_ablate.cpp).
#pragma once

#include <memory>
#include <vector>

#include "app/commands.h"
#include "engine/forward/model.h"

namespace ls::app {

struct ModelPair {
    std::unique_ptr<Model> model, other;  // -m, --against-model
    std::vector<int32_t> tokens;          // the prompt's, the same in both
};
// Both files opened, checked to be one model (check_same_model) and the prompt's tokens, which
// must be the same in both.
Result<ModelPair> open_model_pair(const CompareOptions& o);

// --ablate: the reference file with one tensor (or layer) of the other at a time, ranked by the KL
// it causes. Exit 0, 2 on a usage error, 3 on bad input, 130 when interrupted (what was measured
// is still reported).
int run_ablation(const CompareOptions& o);

}  // namespace ls::app
