// Recurrent state: per layer, which mixer it is and what it carries from one token to the next. A
// Gated DeltaNet layer (qwen35) carries its conv state (the last d_conv - 1 inputs of each
// channel) and its delta-rule state (S x S per value head); an attention layer its KV cache. For
// the cursor's decode call: each state's size, rms and largest magnitude after the call (the
// latest conv_state_last-L / new_state-L at or before the cursor), and its comparison with the
// reference. Clicking a state selects its event (the tensor inspector and histograms show it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {

struct StatePanel {
    bool open = true;

    struct LayerState {
        int layer = 0;
        bool recurrent = false;
        std::string carries;             // "conv 3 x 256 + delta 4 x 32 x 32" / "KV cache: 20 cells of 2 x 64"
        int64_t conv_event = -1, delta_event = -1;  // the latest state events at or before the cursor
    };
    struct Shown {
        int recurrent = 0, attention = 0;
        int states = 0;  // state events found for the cursor's call
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    SnapshotKey source_;
    int64_t cursor_ = -2;
    std::vector<LayerState> rows_;
};

}  // namespace ls::views
