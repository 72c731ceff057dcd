// Per-layer histograms: the residual output (l_out-L) of every layer in the cursor's decode call,
// ours over the reference's, stacked so the layer where a distribution drifts stands out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "views/debug_context.h"

namespace ls::views {


struct LayerHistograms {
    bool open = true;
    float row_height = 72.0f;  // px per layer
    bool log_counts = true;
    float outlier_rms = 6.0f;  // values beyond this many rms count as outliers

    // What the last frame showed; the tests and the status bar read it.
    struct Shown {
        int decode = -1, ubatch = -1;
        int layers = 0;            // rows (l_out events in the call)
        int layers_evaluated = 0;  // rows with our stats
        int layers_with_reference = 0;
        int selected_layer = -1;
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    // Reference stats by dump name, for the reference they were computed from; nullopt when the
    // reference has no complete tensor of that name.
    const TensorStats* reference_stats(const ReferenceDump& ref, const std::string& dump_name);
    const ReferenceDump* cached_reference_ = nullptr;
    std::map<std::string, std::optional<TensorStats>> reference_cache_;
    int scrolled_to_layer_ = -2;
};

}  // namespace ls::views
