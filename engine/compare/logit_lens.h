// The logit lens: the residual stream after every layer (l_out-N) read through the model's own
// output head (output_norm, the LM head, its bias, scale and soft cap where the model has them), for
// our run and the reference's, so that one sees at which layer the two stop predicting the same
// tokens, and at which layer each first predicts its final token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/compare/output_kl.h"
#include "engine/compare/reference.h"
#include "engine/forward/model.h"

namespace ls {

struct LensToken {
    int32_t token = -1;
    double p = 0;  // its probability in that layer's distribution
};

// One layer at one position, both sides.
struct LensCell {
    int decode = 0;
    int64_t position = -1;  // -1 when the token counts are unknown
    std::vector<LensToken> ours, reference;  // the top k, most probable first
    double kl = 0;                           // KL(reference || ours) of the two distributions
};

struct LensLayer {
    int layer = 0;
    std::vector<LensCell> cells;  // the positions both sides have, in order
    KlStats kl;                   // over those positions
};

// At one position: the final top-1 token of each side, and the first layer whose lens already
// has it as top-1 (-1: none before the output).
struct LensArrival {
    int decode = 0;
    int64_t position = -1;
    int32_t ours_final = -1, reference_final = -1;
    int ours_layer = -1, reference_layer = -1;
};

// Lens distributions whose mean KL is below this count as the same (rounding between two
// engines' arithmetic is far below it; a format's or a bug's error is above it).
inline constexpr double kLensKlSame = 1e-6;

struct LogitLens {
    int top_k = 5;
    std::vector<LensLayer> layers;
    std::vector<LensArrival> arrivals;
    int first_divergent_layer = -1;  // the first layer whose mean KL exceeds kLensKlSame
    int first_top1_change = -1;      // the first layer where some position's top-1 differs
    std::string why;                 // what was left out, and why ("" when nothing was)
};

// The lens of every layer both runs recorded l_out for. `ours`: a model run's captures (every
// event's values); the head's ops run on the CPU in `mode` (llama mode: as the `isa` build), the
// same for both sides. kBadInput when the model has no output head to read the lens through.
Result<LogitLens> logit_lens(const Model& model, const CaptureLog& ours, const ReferenceDump& reference, MathMode mode,
                             LlamaIsa isa, int top_k = 5);

}  // namespace ls
