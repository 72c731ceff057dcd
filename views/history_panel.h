// Tensor history panel: one coordinate followed through the run (engine/session/tensor_history.h).
// An element (decode call, token, channel) or a head at a token: every event that has it, ours and
// the reference's side by side with the difference, in execution order; a click on a row moves the
// cursor there. A KV cache cell (layer, position): the K and V it was written with and every later
// query's attention to it. The tensor inspector's values (right click) pick an element to follow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/session/tensor_history.h"
#include "views/debug_context.h"

namespace ls::views {

struct HistoryPanel {
    bool open = false;
    enum class Mode { kElement, kHead, kKvCell };

    void draw(DebugContext& ctx);
    // Follows this element (or head, with at.head >= 0).
    void follow(const HistoryCoord& at);
    void follow_kv_cell(int layer, int64_t position);

    // What is shown (tests read it).
    Mode mode() const { return mode_; }
    const std::vector<HistoryRow>& rows() const { return rows_; }
    const KvCellHistory& kv_cell() const { return kv_; }

private:
    void refresh(const DebugContext& ctx);
    void draw_rows(DebugContext& ctx);
    void draw_kv_cell(DebugContext& ctx);

    Mode mode_ = Mode::kElement;
    int decode_ = 0, token_ = 0, channel_ = 0, head_ = 0, layer_ = 0, position_ = 0;
    // Recomputed when the coordinate, the snapshot or the reference changes.
    uint64_t version_ = 0;
    const ReferenceDump* reference_ = nullptr;
    std::string key_;
    std::vector<HistoryRow> rows_;
    KvCellHistory kv_;
};

}  // namespace ls::views
