// Divergence panel: every run event's log10 NMSE against the reference as a waterfall in execution
// order, the first divergence marked and summarized, and a table of the events that warn or diverge.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <string>
#include <vector>

#include "views/debug_context.h"
#include "views/widgets/plots.h"

namespace ls::views {

// A local-error cell: "local 0.31" / "inherited 1e-14" / "unknown" (why in the tooltip); nothing
// for nullptr.
void draw_local_error(const EventComparison* local);

struct DivergencePanel {
    bool open = true;
    bool only_diverged = false;  // the table: diverged events only (warn rows hidden)

    // Usage (main view): `DivergencePanel divergence; ... divergence.draw(ctx);` every frame. A click
    // on a bar or a table row selects that event through ctx.select().
    void draw(DebugContext& ctx);

    // For tests: the event the waterfall's last click picked (-1 before any), and where it is drawn.
    int64_t last_clicked() const { return last_clicked_; }
    ImVec2 waterfall_min() const { return waterfall_min_; }
    ImVec2 waterfall_max() const { return waterfall_max_; }
    int bar_count() const { return static_cast<int>(log10_nmse_.size()); }
    // The local-error summary line drawn last frame ("" when none).
    const std::string& local_line() const { return local_line_; }

private:
    void refresh(const DebugContext& ctx);
    void draw_table(DebugContext& ctx);

    // Rebuilt once per snapshot: a frame never walks every record.
    const SessionSnapshot* snap_ = nullptr;
    uint64_t version_ = UINT64_MAX;
    std::vector<float> log10_nmse_;                // by event index, the waterfall's floor when not compared
    std::vector<widgets::EventStatus> statuses_;
    std::vector<int64_t> flagged_;                 // warn or diverged events, execution order
    int n_diverged_ = 0, n_warn_ = 0, n_compared_ = 0;

    std::string local_line_;
    int64_t last_clicked_ = -1;
    ImVec2 waterfall_min_{0, 0}, waterfall_max_{0, 0};
};

}  // namespace ls::views
