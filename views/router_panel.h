// MoE router: per layer and token of the cursor's decode call, the experts chosen and their
// weights, ours beside the reference's, the gap between the k-th and (k+1)-th router logit, near
// ties flagged and different choices highlighted. Clicking an expert moves the cursor to that
// layer's ffn_moe_gate event (one column per chosen expert slot).
#pragma once

#include <cstdint>
#include <string>

#include "views/debug_context.h"

namespace ls::views {

struct RouterPanel {
    bool open = true;
    int token = -1;               // the token shown, -1 for every token of the call
    float tie_threshold = 1e-3f;  // near tie without a reference: a gap below this

    struct Shown {
        int decode = -1;
        int layers = 0;
        int64_t tokens = 0, k = 0, n_expert = 0;
        int rows = 0;
        int mismatches = 0;  // choices that differ from the reference
        int near_ties = 0;
        bool reference = false;
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    // What the table was built from: rebuilt when any changes.
    SnapshotKey source_;
    const void* reference_ = nullptr;
    int decode_ = -1, ubatch_ = -1;
    float threshold_ = -1;
    RouterTable table_;
};

}  // namespace ls::views
