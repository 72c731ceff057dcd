// The main view (see gui_view.h).
#include "app/gui_view.h"

#include <GLFW/glfw3.h>
#include <fmt/format.h>
#include <imgui.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>

#include "views/attention_panel.h"
#include "kernels/cuda/loader.h"
#include "views/divergence_panel.h"
#include "views/event_browser.h"
#include "views/export_panel.h"
#include "views/backends_panel.h"
#include "views/faults_panel.h"
#include "views/layer_histograms.h"
#include "views/lint_panel.h"
#include "views/logit_lens_panel.h"
#include "views/quant_panel.h"
#include "views/logits_panel.h"
#include "views/model_panel.h"
#include "views/open_dialog.h"
#include "views/prompt_panel.h"
#include "views/qk_panel.h"
#include "views/router_panel.h"
#include "views/status_bar.h"
#include "views/stepping_toolbar.h"
#include "views/tensor_inspector.h"
#include "views/tensor_panel.h"
#include "engine/util/safe_write.h"

namespace ls::app {

struct MainView::Panels {
    views::EventBrowser events;
    views::SteppingToolbar stepping;
    views::TensorInspector inspector;
    views::LayerHistograms histograms;
    views::AttentionPanel attention;
    views::QKPanel qk;
    views::RouterPanel router;
    views::LogitsPanel logits;
    views::LogitLensPanel lens;
    views::QuantPanel quant;
    views::DivergencePanel divergence;
    views::PromptPanel prompt;
    views::FaultsPanel faults;
    views::BackendsPanel backends;
    views::ExportPanel export_panel;
    views::ModelPanel model;
    views::TensorPanel weights;
    views::LintPanel lints;
    views::OpenDialog open_dialog;
    views::StatusBar status;
};

MainView::MainView() : p_(std::make_unique<Panels>()) {
    panels_ = {
        {"events", "Event browser", "Ctrl+1", &p_->events.open},
        {"stepping", "Stepping and breakpoints", "Ctrl+2", &p_->stepping.open},
        {"tensor", "Tensor inspector", "Ctrl+3", &p_->inspector.open},
        {"histograms", "Layer histograms", "Ctrl+4", &p_->histograms.open},
        {"attention", "Attention heatmaps", "Ctrl+5", &p_->attention.open},
        {"qk", "Q/K magnitudes", "Ctrl+6", &p_->qk.open},
        {"logits", "Top-k logits", "Ctrl+7", &p_->logits.open},
        {"divergence", "Divergence", "Ctrl+8", &p_->divergence.open},
        {"prompt", "Prompt and tokens", "Ctrl+9", &p_->prompt.open},
        {"faults", "Faults and lints", "Ctrl+0", &p_->faults.open},
        {"backends", "Backends (A/B)", "", &p_->backends.open},
        {"export", "Export", "Ctrl+E", &p_->export_panel.open},
        {"model", "Model", "", &p_->model.open},
        {"weights", "Weight inspector", "", &p_->weights.open},
        {"lints", "Lints", "", &p_->lints.open},
        {"router", "MoE router", "", &p_->router.open},
        {"lens", "Logit lens", "", &p_->lens.open},
        {"quant", "Quantization", "", &p_->quant.open},
    };
    // A first look that fits 1280x800: the debugger's core panels; the rest from the View menu.
    for (const char* closed : {"histograms", "qk", "prompt", "faults", "backends", "export", "model", "weights", "lints",
                                "router", "lens", "quant"})
        for (PanelEntry& e : panels_)
            if (std::string(e.name) == closed) *e.open = false;
    p_->status.backend = probe_cuda_backend().description;
}

MainView::~MainView() {
    if (state_log_) std::fclose(state_log_);
}

void MainView::set_state_log(const std::string& path) {
    auto opened = open_for_append(path);
    if (!opened) {
        std::fprintf(stderr, "layerscope: cannot write the state log: %s\n", opened.error().message.c_str());
        return;
    }
    state_log_ = opened.value();
}

void MainView::log(const std::string& line) {
    if (!state_log_) return;
    std::fprintf(state_log_, "%s\n", line.c_str());
    std::fflush(state_log_);
}

void MainView::report(const Status& status, const std::string& what) {
    p_->status.message = status ? what : status.error().message;
    p_->status.message_is_error = !status;
    log(status ? "ok " + what : "error " + status.error().message);
}

bool MainView::start_loading(const std::string& what, DocumentJob job) {
    if (loading_.valid()) {
        report(make_error(ErrorCode::kUsage, "still loading " + loading_what_ + "; try again when it is done"), "");
        return false;
    }
    loading_what_ = what;
    log("loading " + what);
    auto run = [job = std::move(job), backend = backend, budget = capture_budget]() {
        Loaded l;
        l.doc = std::make_unique<DebugDocument>();
        l.doc->use_backend(backend);
        l.doc->use_capture_budget(budget);
        l.status = job(*l.doc);
        return l;
    };
    if (load_in_background) {
        loading_ = std::async(std::launch::async, std::move(run));
        return true;
    }
    std::promise<Loaded> done;
    done.set_value(run());
    loading_ = done.get_future();
    return finish_loading(true);
}

bool MainView::finish_loading(bool block) {
    if (!loading_.valid()) return false;
    if (!block && loading_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return false;
    Loaded l = loading_.get();
    report(l.status, loading_what_);
    if (!l.status) return false;
    doc_ = std::move(l.doc);
    p_->faults.active = doc_->fault();
    p_->backends.against = doc_->against_backend();
    cursor_ = -1;
    return true;
}

bool MainView::open(const std::string& path, const std::string& doctor_model_path, const std::string& new_reference) {
    // A new document keeps the reference and the fault of the current one; a dump opened after a
    // model is diagnosed with that model (or with the one at `doctor_model_path`).
    const std::string what = new_reference.empty() ? "opened " + path : "opened " + path + " against " + new_reference;
    auto reference = doc_->reference_ptr();
    std::string reference_path = doc_->reference_path();
    Fault fault = doc_->fault();
    auto model = doc_->diagnosing_model();
    const std::string against = doc_->against_backend();
    return start_loading(what, [=](DebugDocument& d) {
        d.use_reference(reference, reference_path, against);
        d.use_fault(fault);
        d.use_doctor_model(model);
        if (!doctor_model_path.empty()) {
            auto opened = Model::open(doctor_model_path);
            if (!opened) return Status(opened.error());
            d.use_doctor_model(std::move(opened.value()));
        }
        if (Status s = d.open(path); !s || new_reference.empty()) return s;
        return d.load_reference(new_reference);
    });
}

bool MainView::compare_against_backend(const std::string& backend) {
    if (!doc_->has_model()) {
        report(make_error(ErrorCode::kUsage, "open a model first (Ctrl+O): two backends are compared on its run"), "");
        return false;
    }
    std::string current = doc_->path();
    Fault fault = doc_->fault();
    auto reference = doc_->reference_ptr();
    return start_loading("compared against the " + backend + " backend", [=](DebugDocument& d) {
        d.use_fault(fault);
        if (Status s = d.open(current); !s) return s;
        return d.compare_against_backend(backend);
    });
}

bool MainView::load_reference(const std::string& path) {
    if (!doc_->has_anything()) {
        report(make_error(ErrorCode::kUsage, "open a model or a dump first (Ctrl+O), then its reference"), "");
        return false;
    }
    std::string current = doc_->path();
    Fault fault = doc_->fault();
    auto model = doc_->diagnosing_model();
    return start_loading("reference " + path, [=](DebugDocument& d) {
        d.use_fault(fault);
        d.use_doctor_model(model);
        if (Status s = d.open(current); !s) return s;
        return d.load_reference(path);
    });
}

bool MainView::open_demo() {
    return start_loading("demo opened: a fault is injected; the reference is the clean engine's run",
                         [](DebugDocument& d) { return d.open_demo(); });
}

bool MainView::open_quant_demo() {
    set_panel("quant", true);
    return start_loading("demo opened: the demo model in Q4_K, its F16 file's run the reference",
                         [](DebugDocument& d) { return d.open_quant_demo(); });
}

bool MainView::compare_against_model(const std::string& other, const std::string& model_path) {
    const std::string current = model_path.empty() ? doc_->path() : model_path;
    if (model_path.empty() && !doc_->has_model()) {
        report(make_error(ErrorCode::kUsage, "open a model first (Ctrl+O): another format of it is compared with it"), "");
        return false;
    }
    Fault fault = doc_->fault();
    return start_loading("compared against " + other + " (its run is the reference)", [=](DebugDocument& d) {
        d.use_fault(fault);
        if (Status s = d.open(current); !s) return s;
        return d.compare_against_model(other);
    });
}

bool MainView::set_fault(const std::string& name) {
    Fault f;
    if (!fault_from_name(name, &f)) {
        report(make_error(ErrorCode::kUsage, "unknown fault " + name + "; known: " + fault_names()), "");
        return false;
    }
    Status s = doc_->set_fault(f);
    report(s, "fault " + name);
    if (s) p_->faults.active = f;
    return s.ok();
}

bool MainView::step_op() {
    views::DebugContext ctx = make_context();
    log("key F10 step op");
    return p_->stepping.step_op(ctx);
}
bool MainView::step_layer() {
    views::DebugContext ctx = make_context();
    log("key F11 step layer");
    return p_->stepping.step_layer(ctx);
}
bool MainView::step_token() {
    views::DebugContext ctx = make_context();
    log("key Shift+F11 step token");
    return p_->stepping.step_token(ctx);
}
bool MainView::continue_run() {
    views::DebugContext ctx = make_context();
    log("key F5 continue");
    return p_->stepping.continue_run(ctx);
}

bool MainView::set_prompt(const std::string& text) {
    Session* session = doc_->session();
    if (!session) {
        report(make_error(ErrorCode::kUsage, "no model is open: nothing to prompt"), "");
        return false;
    }
    session->set_prompt(text, true, false);
    log(fmt::format("prompt {} bytes", text.size()));
    return true;
}

bool MainView::select_event(const std::string& dump_name) {
    auto snap = doc_->snapshot();
    if (!snap->events) return false;
    for (const EventInfo& e : *snap->events)
        if (e.name == dump_name) {
            cursor_ = e.index;
            log(fmt::format("select {} {}", e.index, e.name));
            return true;
        }
    return false;
}

bool MainView::set_panel(const std::string& name, bool open) {
    for (PanelEntry& e : panels_)
        if (name == e.name) {
            *e.open = open;
            if (open) focus_request_ = e.title;
            log(fmt::format("panel {} {}", name, open ? "on" : "off"));
            return true;
        }
    return false;
}

void MainView::zoom_panel(const std::string& name) {
    if (name.empty() || name == zoom_) {
        if (!zoom_.empty()) zoom_restore_ = zoom_;
        zoom_.clear();
        log("zoom off");
        return;
    }
    set_panel(name, true);
    zoom_ = name;
    log("zoom " + name);
}

void MainView::open_all_panels() {
    for (PanelEntry& e : panels_) *e.open = true;
    log("panels all on");
}

bool MainView::busy() {
    return loading_.valid() || (doc_->session() && doc_->snapshot()->state == SessionState::kRunning);
}

views::DebugContext MainView::make_context() {
    views::DebugContext ctx;
    ctx.snap = doc_->snapshot();
    ctx.session = doc_->session();
    if (ctx.session) p_->status.backend = ctx.session->backend_description();
    ctx.model = doc_->model();
    ctx.reference = doc_->reference();
    ctx.reference_path = doc_->reference_path();
    ctx.local_errors = &doc_->local_errors(*ctx.snap);
    ctx.two_formats = !doc_->against_model().empty();
    ctx.cursor = cursor_;
    ctx.log = [this](const std::string& line) { log(line); };
    return ctx;
}

void MainView::handle_keys() {
    std::vector<KeyPress> presses = std::move(keys);
    keys.clear();
    if (ImGui::GetIO().WantTextInput) return;  // typing in a text field
    for (const KeyPress& k : presses) {
        const bool ctrl = k.mods & GLFW_MOD_CONTROL, shift = k.mods & GLFW_MOD_SHIFT;
        if (ctrl && k.key == GLFW_KEY_O) p_->open_dialog.show(""), reference_dialog_ = false;
        else if (ctrl && k.key == GLFW_KEY_R) p_->open_dialog.show(""), reference_dialog_ = true;
        else if (ctrl && k.key == GLFW_KEY_Q) quit = true;
        else if (ctrl && k.key == GLFW_KEY_E) set_panel("export", true);
        else if (ctrl && k.key >= GLFW_KEY_0 && k.key <= GLFW_KEY_9) {
            const size_t index = k.key == GLFW_KEY_0 ? 9 : static_cast<size_t>(k.key - GLFW_KEY_1);
            if (index < panels_.size()) zoom_panel(panels_[index].name);
        } else if (k.key == GLFW_KEY_ESCAPE && !zoom_.empty()) zoom_panel("");
        else if (k.key == GLFW_KEY_F10) step_op();
        else if (k.key == GLFW_KEY_F11 && !shift) step_layer();
        else if (k.key == GLFW_KEY_F11 && shift) step_token();
        else if (k.key == GLFW_KEY_F5) continue_run();
        else if (k.key == GLFW_KEY_F12) {
            std::string dir = screenshot_dir.empty() ? "." : screenshot_dir;
            // The next number not taken: earlier screenshots are never replaced.
            do pending_screenshot = fmt::format("{}/layerscope-{:03d}.png", dir, ++screenshot_count_);
            while (path_kind(pending_screenshot) != PathKind::kMissing);
            log("screenshot " + pending_screenshot);
        }
    }
}

void MainView::draw_menu() {
    if (!ImGui::BeginMainMenuBar()) return;
    if (ImGui::BeginMenu("File")) {
        if (ImGui::MenuItem("Open model or dump...", "Ctrl+O")) p_->open_dialog.show(""), reference_dialog_ = false;
        if (ImGui::MenuItem("Load reference...", "Ctrl+R")) p_->open_dialog.show(""), reference_dialog_ = true;
        if (ImGui::MenuItem("Open the demo")) open_demo();
        if (ImGui::MenuItem("Open the demo: what does Q4_K cost?")) open_quant_demo();
        if (ImGui::MenuItem("Export...", "Ctrl+E")) set_panel("export", true);
        ImGui::Separator();
        if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit = true;
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Run")) {
        if (ImGui::MenuItem("Step op", "F10")) step_op();
        if (ImGui::MenuItem("Step layer", "F11")) step_layer();
        if (ImGui::MenuItem("Step token", "Shift+F11")) step_token();
        if (ImGui::MenuItem("Continue", "F5")) continue_run();
        ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("View")) {
        for (PanelEntry& e : panels_) ImGui::MenuItem(e.title, e.shortcut, e.open);
        ImGui::Separator();
        if (ImGui::MenuItem("Open every panel")) open_all_panels();
        ImGui::EndMenu();
    }
    ImGui::EndMainMenuBar();
}

void MainView::draw() {
    finish_loading(false);
    handle_keys();
    draw_menu();
    views::DebugContext ctx = make_context();
    if (ctx.snap->first_divergent >= 0) p_->status.doctor = doc_->doctor_verdict(*ctx.snap);
    else p_->status.doctor.clear();
    p_->status.title = doc_->title();
    p_->status.loading = loading_.valid() ? loading_what_ : "";

    // Layout of 1280x800 at first use: left column stepping over the event browser; middle the
    // inspector over attention; right divergence over logits; secondary panels on top where there
    // is room. A zoomed panel (Ctrl+1..0) fills the whole area alone until Escape.
    const std::shared_ptr<const views::ModelDocument>& shared_doc = doc_->model_document();
    const views::ModelDocument* model_doc = shared_doc.get();
    struct Slot {
        const char* name;
        float x, y, w, h;
        std::function<void()> draw;
    };
    const Slot slots[] = {
        {"stepping", 0.0f, 0.0f, 0.27f, 0.30f, [&] { p_->stepping.draw(ctx); }},
        {"events", 0.0f, 0.30f, 0.27f, 0.70f, [&] { p_->events.draw(ctx); }},
        {"tensor", 0.27f, 0.0f, 0.40f, 0.50f, [&] { p_->inspector.draw(ctx); }},
        {"attention", 0.27f, 0.50f, 0.40f, 0.50f, [&] { p_->attention.draw(ctx); }},
        {"divergence", 0.67f, 0.0f, 0.33f, 0.50f, [&] { p_->divergence.draw(ctx); }},
        {"logits", 0.67f, 0.50f, 0.33f, 0.50f, [&] { p_->logits.draw(ctx); }},
        {"histograms", 0.27f, 0.0f, 0.40f, 1.0f, [&] { p_->histograms.draw(ctx); }},
        {"qk", 0.27f, 0.50f, 0.40f, 0.50f, [&] { p_->qk.draw(ctx); }},
        {"router", 0.27f, 0.50f, 0.40f, 0.50f, [&] { p_->router.draw(ctx); }},
        {"lens", 0.27f, 0.50f, 0.40f, 0.50f, [&] { p_->lens.draw(ctx); }},
        {"quant", 0.27f, 0.0f, 0.40f, 1.0f, [&] { p_->quant.draw(ctx); }},
        {"prompt", 0.0f, 0.30f, 0.27f, 0.70f, [&] { p_->prompt.draw(ctx); }},
        {"faults", 0.67f, 0.0f, 0.33f, 0.60f, [&] { p_->faults.draw(ctx); }},
        {"backends", 0.67f, 0.60f, 0.33f, 0.40f, [&] { p_->backends.draw(ctx); }},
        {"export", 0.67f, 0.50f, 0.33f, 0.50f, [&] { p_->export_panel.draw(ctx); }},
        {"model", 0.0f, 0.0f, 0.55f, 1.0f,
         [&] {
             if (p_->model.open && p_->model.draw(model_doc)) p_->weights.select(shared_doc, p_->model.selected_tensor);
         }},
        {"weights", 0.55f, 0.0f, 0.45f, 0.55f, [&] { if (p_->weights.open) p_->weights.draw(shared_doc); }},
        {"lints", 0.55f, 0.55f, 0.45f, 0.45f, [&] { if (p_->lints.open) p_->lints.draw(model_doc); }},
    };
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const float top = ImGui::GetFrameHeight();
    const float bottom = 2 * ImGui::GetTextLineHeightWithSpacing() + 2 * ImGui::GetStyle().WindowPadding.y;
    const float area = vp->Size.y - top - bottom;
    for (const Slot& slot : slots) {
        if (!zoom_.empty() && zoom_ != slot.name) continue;
        if (zoom_ == slot.name) {
            ImGui::SetNextWindowPos(ImVec2(vp->Pos.x, vp->Pos.y + top), ImGuiCond_Always);
            ImGui::SetNextWindowSize(ImVec2(vp->Size.x, area), ImGuiCond_Always);
        } else if (!zoom_restore_.empty()) {
            // Back from a zoom: every panel returns to its place.
            ImGui::SetNextWindowPos(ImVec2(vp->Pos.x + slot.x * vp->Size.x, vp->Pos.y + top + slot.y * area), ImGuiCond_Always);
            ImGui::SetNextWindowSize(ImVec2(slot.w * vp->Size.x, slot.h * area), ImGuiCond_Always);
        } else {
            ImGui::SetNextWindowPos(ImVec2(vp->Pos.x + slot.x * vp->Size.x, vp->Pos.y + top + slot.y * area),
                                    ImGuiCond_FirstUseEver);
            ImGui::SetNextWindowSize(ImVec2(slot.w * vp->Size.x, slot.h * area), ImGuiCond_FirstUseEver);
        }
        slot.draw();
    }
    zoom_restore_.clear();

    if (!focus_request_.empty()) {
        ImGui::SetWindowFocus(focus_request_.c_str());
        focus_request_.clear();
    }
    if (p_->open_dialog.draw()) {
        if (reference_dialog_) load_reference(p_->open_dialog.chosen);
        else open(p_->open_dialog.chosen);
    }
    if (p_->backends.requested_against) {
        const std::string against = *p_->backends.requested_against;
        p_->backends.requested_against.reset();
        compare_against_backend(against);
    }
    if (p_->faults.requested_fault) {
        Fault f = *p_->faults.requested_fault;
        p_->faults.requested_fault.reset();
        set_fault(fault_info(f).name);
    }
    p_->status.draw(model_doc, ctx);

    // The one cursor: panels request, the view applies; it follows the session while running.
    if (ctx.requested_cursor >= -1) {
        cursor_ = ctx.requested_cursor;
        log(fmt::format("select {} {}", cursor_, ctx.event(cursor_) ? ctx.event(cursor_)->name : ""));
    } else if (ctx.snap->version != last_version_) {
        cursor_ = ctx.snap->cursor;
    }
    last_version_ = ctx.snap->version;
    const std::string state = session_state_name(ctx.snap->state);
    if (cursor_ != last_logged_cursor_ || state != last_logged_state_) {
        const EventInfo* e = ctx.event(cursor_);
        log(fmt::format("state {} cursor {} {} first_divergent {}", state, cursor_, e ? e->name : "-", ctx.snap->first_divergent));
        if (state != last_logged_state_)
            log(fmt::format("captures {} tensors {} bytes budget {} evicted {}", ctx.snap->captures ? ctx.snap->captures->size() : 0,
                            ctx.snap->capture_bytes, ctx.snap->capture_budget, ctx.snap->captures_evicted));
        last_logged_cursor_ = cursor_;
        last_logged_state_ = state;
    }
}

void MainView::load_settings(const std::string& path) {
    if (path_kind(path) != PathKind::kRegular) return;  // absent, or nothing we could have written
    std::ifstream in(path);
    if (!in) return;
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object() || !j.contains("panels") || !j["panels"].is_object()) return;
    for (PanelEntry& e : panels_)
        if (j["panels"].contains(e.name) && j["panels"][e.name].is_boolean()) *e.open = j["panels"][e.name].get<bool>();
}

void MainView::save_settings(const std::string& path) const {
    nlohmann::json j;
    for (const PanelEntry& e : panels_) j["panels"][e.name] = *e.open;
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    // Our own settings file: replaced each time, but only if it is a regular file.
    if (Status s = write_file_safely(path, j.dump(2) + "\n", true); !s)
        std::fprintf(stderr, "layerscope: cannot save the settings: %s\n", s.error().message.c_str());
}

}  // namespace ls::app
