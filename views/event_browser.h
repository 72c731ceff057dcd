// Event browser: the planned run as a token > layer > op tree, colored by comparison status; the
// one place the cursor is picked from, and a double-click runs the session to an event.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {

// What an event looks like to every panel: not run, run without a reference, or its comparison.
enum class EventShade { kNotRun, kUncompared, kOk, kWarn, kDiverged, kNoReference };
EventShade event_shade(const DebugContext& ctx, int64_t index);
ImVec4 event_shade_color(EventShade shade);
const char* event_shade_name(EventShade shade);
// "token 2 ('lily')": the label of a decode call, shared with the other panels' tooltips.
std::string decode_label(const DebugContext& ctx, int decode);

struct EventBrowser {
    bool open = true;

    // Usage (main view): `EventBrowser browser; ... browser.draw(ctx);` every frame. Selection goes
    // through ctx.select(); a double-click sends run_to_event (or go_to backwards) to ctx.session.
    void draw(DebugContext& ctx);

    // For tests and the main view: the row of the tree (or of the filtered list) showing the
    // event, -1 when it is folded away or filtered out; the label drawn for the first divergence.
    int64_t shown_row_of(int64_t event) const;

    // Filters beside the name (a flat list of the events that pass): a layer range, an op class,
    // only the warn and diverged events.
    enum class OpClass { kAll, kProducts, kNorms, kAttention, kExperts, kElementwise };
    void set_filter(const std::string& name, int layer_from, int layer_to, OpClass op_class, bool flagged_only);
    int64_t listed() const { return listed_; }  // events listed by the filters (-1: the tree)
    bool first_divergent_shown() const { return first_divergent_row_ >= 0; }
    const std::string& first_divergent_label() const { return first_divergent_label_; }

private:
    // A run of consecutive events of one decode call, ubatch and layer: "embd", "layer 3", "output".
    struct Group {
        int decode = 0, ubatch = 0, layer = -1;
        int64_t first = 0, last = 0;  // event indices, inclusive
        std::string label;
    };
    enum class RowKind : uint8_t { kDecode, kGroup, kEvent };
    struct Row {
        RowKind kind;
        int64_t id;  // decode index, group index or event index
    };

    void rebuild_groups(const DebugContext& ctx);
    void refresh_shades(const DebugContext& ctx);
    void rebuild_rows(const DebugContext& ctx);
    void reveal(int64_t event);  // opens the decode and group holding `event`
    void draw_row(DebugContext& ctx, const Row& row, int64_t row_index);
    void run_to(DebugContext& ctx, int64_t event);

    char filter_[128] = "";
    std::string applied_filter_;
    int layer_from_ = 0, layer_to_ = -1;  // -1: every layer (and the events outside layers)
    int op_class_ = 0;                    // OpClass
    bool flagged_only_ = false;
    std::string logged_filter_;
    int64_t listed_ = -1;
    bool filtered() const { return !applied_filter_.empty() || layer_to_ >= 0 || op_class_ != 0 || flagged_only_; }
    bool passes(const DebugContext& ctx, const EventInfo& e) const;
    bool dim_unrun_ = true;

    // Caches keyed on what they were built from, so a frame costs the visible rows only.
    std::shared_ptr<const std::vector<EventInfo>> events_;  // the plan the groups were built for
    std::vector<Group> groups_;
    std::vector<int> group_of_event_;
    std::vector<int> first_group_of_decode_;     // decode -> its first group index
    std::vector<int> decode_ubatches_;           // decode -> number of ubatches
    uint64_t shades_version_ = UINT64_MAX;
    const SessionSnapshot* shades_snap_ = nullptr;
    std::vector<EventShade> group_shade_;        // the worst shade of each group's events
    std::vector<EventShade> decode_shade_;

    std::set<int> open_decodes_{0};
    std::set<int> open_groups_;
    std::vector<Row> rows_;
    int64_t last_cursor_ = -2;
    int64_t scroll_to_row_ = -1;
    int64_t first_divergent_row_ = -1;
    std::string first_divergent_label_;
};

}  // namespace ls::views
