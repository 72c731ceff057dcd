// What each weight's format costs, for a run compared with another format of the same model (or
// with any reference): per layer, a bar for each weight's local error (its op on the reference's
// own inputs, engine/compare/local_error.h, log scale); the weights ranked by it; and the KL of
// the final distributions per position as a line. Clicking a bar or a ranking row moves the
// cursor to that event.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/compare/output_kl.h"
#include "views/debug_context.h"

namespace ls::views {

struct QuantPanel {
    bool open = false;

    void draw(DebugContext& ctx);

    // For tests: the bars (one per weight with a local error, layer order), where one was drawn
    // last frame ((-1, -1) when not), the last click, and the KL per position.
    struct Bar {
        std::string weight;  // the GGUF tensor
        int layer = -1;
        int64_t event = -1;  // its worst event
        double nmse = 0;
    };
    const std::vector<Bar>& bars() const { return bars_; }
    ImVec2 bar_center(const std::string& weight) const;
    int64_t last_clicked() const { return last_clicked_; }
    const std::vector<float>& kl_per_position() const { return kl_; }

private:
    void refresh(DebugContext& ctx);

    SnapshotKey source_;  // the snapshot and the local errors the figures were read from
    uint64_t local_generation_ = UINT64_MAX;
    std::vector<Bar> bars_;
    std::vector<size_t> ranking_;  // indices into bars_, worst first
    std::vector<float> kl_;
    KlStats kl_stats_;
    std::map<std::string, ImVec2> centers_;
    int64_t last_clicked_ = -1;
};

}  // namespace ls::views
