// Logit lens: each layer's output (l_out) read through the model's output head, ours and the
// reference's (engine/compare/logit_lens.h), as a grid of layer x position: our top-1 piece,
// green where the reference's is the same, red where it differs. Hovering shows both sides' top 5
// and the KL; clicking a cell moves the cursor to that layer's l_out event.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include <imgui.h>

#include "engine/compare/logit_lens.h"
#include "engine/compare/snapshot_diagnosis.h"
#include "views/debug_context.h"

namespace ls::views {

struct LogitLensPanel {
    bool open = false;

    void draw(DebugContext& ctx);

    // For tests: what the last lens holds, and where a cell was drawn (its centre; (-1, -1) when it
    // was not drawn this frame).
    const LogitLens& lens() const { return lens_; }
    ImVec2 cell_center(int layer, int column) const;
    int columns() const { return static_cast<int>(columns_.size()); }
    int64_t last_clicked() const { return last_clicked_; }

private:
    void apply(DebugContext& ctx, const SnapshotLens& made);

    SnapshotKey source_;  // the snapshot the lens was read from
    // A session on a server: the state of the run the lens was last asked for, and whether the
    // answer is still to come.
    std::tuple<const void*, int64_t, size_t, uint64_t, int64_t> remote_key_{nullptr, -2, 0, 0, -2};
    bool waiting_ = false;
    const void* reference_ = nullptr;
    LogitLens lens_;
    std::string error_;
    std::vector<std::pair<int, int64_t>> columns_;          // (decode, position), in order
    std::map<std::tuple<int, int, int64_t>, int64_t> l_out_;  // (layer, decode, position) -> l_out event
    std::map<std::pair<int, int>, ImVec2> centers_;          // (layer, column) -> drawn centre
    int64_t last_clicked_ = -1;
};

}  // namespace ls::views
