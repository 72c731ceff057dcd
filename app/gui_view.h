// The main view: the open document, one struct per panel, the menu bar, the keyboard, the status
// bar and the state log. Everything the GUI does is an action here, so keys, menus, drag and
// drop and --script all take the same path.
#pragma once

#include <cstdio>
#include <chrono>
#include <functional>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/debug_document.h"
#include "engine/session/tensor_history.h"
#include "views/layout.h"

namespace ls::app {

struct KeyPress {
    int key;   // GLFW_KEY_*
    int mods;  // GLFW_MOD_*
};

struct PanelEntry {
    const char* name;      // script / settings name: "events", "attention", ...
    const char* title;     // View menu label
    const char* shortcut;  // "Ctrl+1"
    bool* open;
};

class MainView {
public:
    MainView();
    ~MainView();

    // Actions (keys, menus, scripts).
    // Opens a model or a dump; with `doctor_model_path`, a dump is diagnosed with that model; with
    // `reference`, that reference is loaded in the same step.
    bool open(const std::string& path, const std::string& doctor_model_path = "", const std::string& reference = "");
    bool load_reference(const std::string& path);
    // Backend A/B: the model's run on `backend` becomes the reference (see DebugDocument).
    bool compare_against_backend(const std::string& backend);
    bool open_demo();
    // A session on a server: `model` and `reference` are the server's paths.
    bool connect(const std::string& address, const std::string& token_file, const std::string& model,
                 const std::string& reference = "");
    bool reconnect();  // takes up the lost server session again
    // "What does Q4_K cost": the demo model in Q4_K against its F16 run, the quantization panel open.
    bool open_quant_demo();
    // The open model (or `model_path`) against another format of it: that file's run is the reference.
    bool compare_against_model(const std::string& other, const std::string& model_path = "");
    bool set_fault(const std::string& name);
    bool step_op();
    bool step_layer();
    bool step_token();
    bool continue_run();
    bool select_event(const std::string& dump_name);
    // The model's tensor `name` in the weight inspector (a server's model: its bytes fetched).
    bool select_weight(const std::string& name);
    // Swaps the loaded document in when ready (or waits for it); true when one was swapped in.
    bool finish_loading(bool block);
    // The session's prompt (tokenized with the special tokens, as the prompt panel's default).
    bool set_prompt(const std::string& text);
    // The export panel's export of every evaluated (or captured) event to `path`: "here", or
    // "server" for a server's session (a path on its disk); a .gguf name writes a GGUF dump, any
    // other a .npy folder. Its line goes to the log when it is done.
    bool export_to(const std::string& where, const std::string& path);
    bool set_panel(const std::string& name, bool open);  // also makes it its pane's shown tab
    void open_all_panels();
    // The tensor history panel on an element or head (at.head >= 0), or on a KV cache cell.
    void follow_history(const HistoryCoord& at);
    void follow_kv_cell(int layer, int64_t position);
    // One of the named layouts (views::TileLayout::names(); Alt+1..5): its panes and its panels.
    bool set_layout(const std::string& name);
    // Shows one panel alone over the whole area (Ctrl+1..0); the same name or "" restores.
    void zoom_panel(const std::string& name);
    // True while a model, dump or reference loads, or the session evaluates.
    bool busy();
    uint64_t snapshot_version() { return doc_->snapshot()->version; }
    // Loading happens on a background thread so the window stays responsive; screenshot and
    // measurement runs load in place so their first frames show the loaded state.
    bool load_in_background = true;
    std::string backend = "auto";  // where sessions run models (--backend)
    std::string capture_budget;    // --capture-budget ("": the default share of the memory)
    float ui_scale = 1.0f;         // the monitor's content scale: fonts and sizes follow it

    void draw();  // one frame of UI
    std::vector<KeyPress> keys;  // presses since the last frame (the loop fills it)
    bool quit = false;

    // The state log: one line per action and per change of cursor or state, for tests.
    void set_state_log(const std::string& path);
    void log(const std::string& line);
    // Screenshots requested by F12 go here (the loop saves them after rendering).
    std::string screenshot_dir;
    std::string pending_screenshot;

    const std::vector<PanelEntry>& panels() const { return panels_; }
    void load_settings(const std::string& path);
    void save_settings(const std::string& path) const;

private:
    struct Panels;
    void handle_keys();
    void draw_menu();
    // The workspace: the panes of layout_ over the area between the menu and the status bar, each
    // with a tab strip and its shown panel; the splitters and tab drags; `draws` by panel name.
    void draw_workspace(const std::function<void(const std::string&)>& draw_panel);
    void log_layout(const std::vector<std::pair<std::string, views::LayoutRect>>& shown);
    PanelEntry* entry(const std::string& name);
    void report(const Status& status, const std::string& what);
    views::DebugContext make_context();

    // Builds a new document off the UI thread (or in place) and swaps it in when ready.
    using DocumentJob = std::function<Status(DebugDocument&)>;
    bool start_loading(const std::string& what, DocumentJob job);
    struct Loaded {
        Status status;
        std::unique_ptr<DebugDocument> doc;
    };

    std::unique_ptr<DebugDocument> doc_ = std::make_unique<DebugDocument>();
    std::future<Loaded> loading_;
    std::string loading_what_;
    std::vector<std::pair<std::string, DocumentJob>> queued_;  // documents asked for while one loads
    std::unique_ptr<Panels> p_;
    std::vector<PanelEntry> panels_;
    int64_t cursor_ = -1;
    // Where the session stood at the last frame: the cursor follows it when it moves.
    struct SessionMove {
        int64_t cursor = -1;
        SessionState state = SessionState::kEmpty;
        const void* events = nullptr;
        uint64_t completed_ticket = 0;
        bool operator!=(const SessionMove& o) const {
            return cursor != o.cursor || state != o.state || events != o.events || completed_ticket != o.completed_ticket;
        }
    };
    SessionMove last_move_;
    int64_t last_logged_cursor_ = -2;
    std::string last_logged_state_;
    int screenshot_count_ = 0;
    std::FILE* state_log_ = nullptr;
    views::TileLayout layout_ = views::TileLayout::named("default").value();
    std::string zoom_;            // the panel shown alone, "" for the layout
    std::string dragging_tab_;    // a tab being dragged to another pane or edge
    int active_splitter_ = -1;    // a splitter being dragged
    std::map<std::string, std::string> tab_shown_;  // per tab strip, the tab ImGui showed last frame
    std::string logged_layout_;   // the panel rectangles last written to the state log
    std::string logged_doctor_;   // the doctor's verdict last written to it
    bool reference_dialog_ = false;
    std::string logged_remote_ = "-";  // the connection state last written to the state log
    std::future<Status> reconnecting_;
    std::chrono::steady_clock::time_point reconnect_after_;
    // A reference from this machine on its way to the server (then set as the session's reference).
    std::future<Result<std::string>> uploading_;
    std::string uploading_path_;
    std::shared_ptr<std::atomic<uint64_t>> upload_sent_, upload_total_;
    // File > Connect's fields.
    bool connect_dialog_ = false;
    char connect_address_[128] = "127.0.0.1:7070", connect_token_[512] = "", connect_model_[1024] = "",
         connect_reference_[1024] = "";
    void draw_connect_dialog();
    void follow_remote(const views::DebugContext& ctx);
    // A fault or a backend A/B asked of a server's session: the answer is awaited between frames.
    enum class RemoteAsk { kFault, kBackend, kModel };
    struct RemoteOption {
        uint64_t request = 0;
        RemoteAsk kind = RemoteAsk::kFault;
        std::string value;  // the fault's or the backend's name, the other model's path on the server
    };
    std::optional<RemoteOption> remote_option_;
    bool ask_remote_option(RemoteAsk kind, const std::string& value);
    void follow_remote_option();
};

}  // namespace ls::app
