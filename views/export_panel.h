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
#include "views/remote_events.h"

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
    // A session on a server: the evaluated events the current choice selects (indices).
    std::vector<int64_t> selected_events(const DebugContext& ctx) const;
    bool on_server = false;          // a server's session: written on its disk, not fetched here
    bool replace_on_server = false;  // an earlier export there may be replaced
    bool busy() const { return running_.load(); }
    // Exports with the current choices now, as the Export button does (no question asked: an
    // existing target is replaced only with `overwrite`); scripts use it.
    void export_now(const DebugContext& ctx, bool overwrite);

private:
    void start(const DebugContext& ctx, bool overwrite);
    void start_remote(const DebugContext& ctx, bool overwrite);
    // The options of an export of `total` tensors about to start; the panel shows it running.
    ExportOptions begin_export(bool overwrite, size_t total);
    void finish(Result<std::string> outcome);  // on the worker: the line shown and logged
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
