// Q/K magnitudes: per-head L2 norms of the roped Q and K per position for the cursor's layer
// (in MLA the concatenated Q and K, then the roped q_pe and k_pe alone), and a per-layer summary
// (max and mean), ours and the reference's, with outliers flagged.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {

struct QKPanel {
    bool open = true;
    // Warning threshold: threshold_factor x the median norm of the plotted tensor, unless
    // auto_threshold is off, then fixed_threshold.
    bool auto_threshold = true;
    float threshold_factor = 4.0f;
    float fixed_threshold = 20.0f;
    bool show_reference = true;
    bool per_head_x = false;  // x axis = head (one line per position); forced for single-token calls

    struct Outlier {
        bool is_key = false;
        int head = 0;
        int64_t position = 0;  // index within this call's positions
        float norm = 0, ratio_to_median = 0;
    };
    struct Shown {
        int decode = -1, layer = -1;
        int q_heads = 0, k_heads = 0;
        int64_t positions = 0;
        bool reference = false;
        float q_threshold = NAN, k_threshold = NAN;
        int summary_layers = 0;
        int rope_part_plots = 0;  // MLA: q_pe / k_pe plots of ours shown
        std::vector<Outlier> outliers;  // ours, largest first
        std::string window_note;        // sliding-window models: the cells this layer's keys are kept for
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    int last_layer_ = 0;  // the layer shown while the cursor sits outside any layer
};

}  // namespace ls::views
