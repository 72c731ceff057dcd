// GUI scripts (see gui_script.h).
#include "app/gui_script.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "app/gui_view.h"

namespace ls::app {

Result<GuiScript> GuiScript::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) return make_error(ErrorCode::kUsage, "--script: cannot read " + path);
    GuiScript s;
    s.path_ = path;
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        size_t a = line.find_first_not_of(" \t");
        if (a == std::string::npos || line[a] == '#') continue;
        size_t b = line.find_last_not_of(" \t\r");
        s.lines_.emplace_back(n, line.substr(a, b - a + 1));
    }
    return s;
}

Result<std::string> GuiScript::step(MainView& view) {
    if (frames_left_ > 0) {
        --frames_left_;
        return std::string();
    }
    if (waiting_) {
        // Idle: not running and no new snapshot for a few frames (commands may still be queued).
        const uint64_t v = view.snapshot_version();
        quiet_frames_ = (view.busy() || v != last_version_) ? 0 : quiet_frames_ + 1;
        last_version_ = v;
        if (quiet_frames_ < 5) return std::string();
        waiting_ = false;
    }
    while (next_ < lines_.size()) {
        const auto& [number, text] = lines_[next_++];
        std::istringstream in(text);
        std::string cmd, arg;
        in >> cmd;
        std::getline(in >> std::ws, arg);
        auto bad = [&](const std::string& why) {
            return make_error(ErrorCode::kUsage, fmt::format("{}:{}: {}: {}", path_, number, text, why));
        };
        view.log("script " + text);
        if (cmd == "open") {
            if (!view.open(arg)) return bad("cannot open");
        } else if (cmd == "reference") {
            if (!view.load_reference(arg)) return bad("cannot load the reference");
        } else if (cmd == "demo") {
            if (arg == "quant" ? !view.open_quant_demo() : !view.open_demo()) return bad("cannot prepare the demo");
        } else if (cmd == "against-model") {
            if (!view.compare_against_model(arg)) return bad("cannot compare against that model");
        } else if (cmd == "fault") {
            if (!view.set_fault(arg)) return bad("unknown fault");
        } else if (cmd == "against") {
            if (!view.compare_against_backend(arg)) return bad("cannot compare against that backend");
        } else if (cmd == "key") {
            if (arg == "F10") view.step_op();
            else if (arg == "F11") view.step_layer();
            else if (arg == "Shift+F11") view.step_token();
            else if (arg == "F5") view.continue_run();
            else return bad("unknown key (F10, F11, Shift+F11, F5)");
        } else if (cmd == "panel") {
            std::istringstream a(arg);
            std::string name, state;
            a >> name >> state;
            if (!view.set_panel(name, state != "off")) return bad("unknown panel");
        } else if (cmd == "history") {
            std::istringstream a(arg);
            std::string what;
            long long x = -1, y = -1, z = -1;
            a >> what >> x >> y;
            if (what != "kv") a >> z;
            if (!a || x < 0 || y < 0 || (what != "kv" && z < 0) || (what != "element" && what != "head" && what != "kv"))
                return bad("history element DECODE TOKEN CHANNEL | history head DECODE TOKEN HEAD | history kv LAYER POSITION");
            if (what == "kv") view.follow_kv_cell(static_cast<int>(x), y);
            else view.follow_history({static_cast<int>(x), y, what == "element" ? z : 0, what == "head" ? static_cast<int>(z) : -1});
        } else if (cmd == "layout") {
            if (!view.set_layout(arg)) return bad("unknown layout (default, divergence hunt, attention, moe, quantization)");
        } else if (cmd == "zoom") {
            view.zoom_panel(arg == "off" ? "" : arg);
        } else if (cmd == "panels" && arg == "all") {
            view.open_all_panels();
        } else if (cmd == "prompt") {
            if (!view.set_prompt(arg)) return bad("no session to prompt");
        } else if (cmd == "export") {
            std::istringstream a(arg);
            std::string where, path;
            a >> where >> path;
            if (!view.export_to(where, path)) return bad("export here|server PATH (server: in a server's session), one at a time");
        } else if (cmd == "select") {
            if (!view.select_event(arg)) return bad("no such event");
        } else if (cmd == "weight") {
            if (!view.select_weight(arg)) return bad("no such tensor in the model");
        } else if (cmd == "wait") {
            waiting_ = true;
            quiet_frames_ = 0;
            return std::string();
        } else if (cmd == "frames") {
            frames_left_ = std::max(0, std::atoi(arg.c_str()) - 1);
            return std::string();
        } else if (cmd == "screenshot") {
            if (arg.empty()) return bad("screenshot needs a path");
            return arg;
        } else if (cmd == "log") {
            view.log("note " + arg);
        } else if (cmd == "quit") {
            view.quit = true;
            return std::string();
        } else {
            return bad("unknown command");
        }
    }
    return std::string();
}

}  // namespace ls::app
