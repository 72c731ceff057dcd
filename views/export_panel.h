// Export panel: which captured events (all, the cursor's layer, name globs), GGUF dump or .npy
// folder, where; exports on a background thread with progress and never overwrites unasked.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/capture/export.h"
#include "views/debug_context.h"

namespace ls::views {

struct ExportPanel {
    enum class Selection { kAllCaptured = 0, kCursorLayer = 1, kGlobs = 2 };

    bool open = true;
    Selection selection = Selection::kAllCaptured;
    std::string globs = "attn_norm-*, l_out-*";
    ExportFormat format = ExportFormat::kGgufDump;
    std::string path = "layerscope_export.gguf";

    // Usage (main view): `ExportPanel export_panel; ... export_panel.draw(ctx);` every frame. The
    // panel owns its worker thread; destroying it cancels a running export and joins.
    ExportPanel() = default;
    ExportPanel(const ExportPanel&) = delete;
    ExportPanel& operator=(const ExportPanel&) = delete;
    ~ExportPanel();

    void draw(DebugContext& ctx);
    // The tensors the current choice selects from the snapshot's captures (shared, not copied).
    ExportSet selected_set(const DebugContext& ctx) const;
    bool busy() const { return running_.load(); }

private:
    void start(const DebugContext& ctx, bool overwrite);
    void finish_if_done(DebugContext& ctx);

    std::thread worker_;
    std::atomic<bool> running_{false}, cancel_{false};
    std::atomic<size_t> done_{0}, total_{0};
    std::mutex mutex_;          // guards the result below, written by the worker
    bool have_result_ = false;
    bool result_ok_ = false;
    std::string result_;        // shown under the buttons until the next export
    std::string pending_path_;  // the target the overwrite confirmation is about
};

}  // namespace ls::views
