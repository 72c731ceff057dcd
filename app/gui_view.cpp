// The main view (see gui_view.h).
#include "app/gui_view.h"

#include <GLFW/glfw3.h>
#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
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
#include "views/history_panel.h"
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
#include "views/state_panel.h"
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
    views::StatePanel state;
    views::LogitsPanel logits;
    views::LogitLensPanel lens;
    views::QuantPanel quant;
    views::HistoryPanel history;
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
        {"history", "Tensor history", "", &p_->history.open},
        {"state", "Recurrent state", "", &p_->state.open},
    };
    // The default layout's panels open, the rest from the View menu.
    for (PanelEntry& e : panels_) *e.open = layout_.contains(e.name);
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
        // One document at a time: this one starts when the one loading now is in (a drop, a
        // script's open while the demo still loads).
        log(fmt::format("queued {} (after {})", what, loading_what_));
        queued_.push_back({what, std::move(job)});
        return true;
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
    if (l.status && reconnecting_.valid()) reconnecting_.wait();  // it reconnects the document being replaced
    if (!queued_.empty()) {
        // The next queued document: it builds on what this one left (its reference, its fault).
        auto [what, job] = std::move(queued_.front());
        queued_.erase(queued_.begin());
        if (l.status) doc_ = std::move(l.doc);
        start_loading(what, std::move(job));
        return false;
    }
    if (!l.status) return false;
    if (uploading_.valid()) uploading_.wait();  // it sends through the session about to go
    uploading_ = {};
    doc_ = std::move(l.doc);
    remote_option_.reset();  // asked of the document just replaced
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

namespace {
const char* remote_ask_name(int kind) { return kind == 0 ? "fault" : kind == 1 ? "backend A/B against" : "comparison against"; }
}  // namespace

bool MainView::ask_remote_option(RemoteAsk kind, const std::string& value) {
    remote::RemoteSession* r = doc_->remote();
    if (remote_option_) {
        report(make_error(ErrorCode::kUsage, fmt::format("the server is still working on the {} {} asked before",
                                                         remote_ask_name(static_cast<int>(remote_option_->kind)),
                                                         remote_option_->value)), "");
        return false;
    }
    remote::Command c;
    c.kind = kind == RemoteAsk::kFault     ? remote::CommandKind::kSetFault
             : kind == RemoteAsk::kBackend ? remote::CommandKind::kCompareBackend
                                           : remote::CommandKind::kCompareModel;
    c.text = value;
    remote_option_ = RemoteOption{r->send(c), kind, value};
    log(fmt::format("{} {} asked of the server", remote_ask_name(static_cast<int>(kind)), value));
    return true;
}

// The server's answer to the fault or backend A/B asked: the session there restarted with it (its
// snapshot follows), or why not.
void MainView::follow_remote_option() {
    remote::RemoteSession* r = doc_->remote();
    if (!remote_option_ || !r) {
        remote_option_.reset();
        return;
    }
    std::optional<remote::CommandDone> done = r->take_answer(remote_option_->request);
    if (!done) return;
    const RemoteOption asked = *std::exchange(remote_option_, std::nullopt);
    const std::string what = fmt::format("{} {} on the server", remote_ask_name(static_cast<int>(asked.kind)), asked.value);
    if (!done->error.empty()) {  // the status bar has it already (take_refusal)
        log(fmt::format("{}: refused: {}", what, done->error));
        return;
    }
    if (asked.kind == RemoteAsk::kFault) {
        Fault f = Fault::kNone;
        fault_from_name(asked.value, &f);
        doc_->use_fault(f);
        p_->faults.active = f;
    } else {  // the reference is the server's run
        doc_->use_remote_run_reference(done->note, asked.kind == RemoteAsk::kBackend ? asked.value : "",
                                       asked.kind == RemoteAsk::kModel ? asked.value : "");
        p_->backends.against = doc_->against_backend();
    }
    log(fmt::format("{}: {}", what, done->note));
}

bool MainView::compare_against_backend(const std::string& backend) {
    if (doc_->remote()) return ask_remote_option(RemoteAsk::kBackend, backend);  // the server runs the other backend
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
    if (remote::RemoteSession* r = doc_->remote()) {
        // A file (or .npy folder) here is uploaded, kept by the server for this session; a path
        // that is not here, or "server:PATH", is opened from the server's disk. The snapshot says
        // when it is compared.
        const bool on_server = path.rfind("server:", 0) == 0;
        std::error_code ec;
        if (on_server || !std::filesystem::exists(path, ec)) {
            remote::Command c;
            c.kind = remote::CommandKind::kSetReference;
            c.text = on_server ? path.substr(7) : path;
            r->send(c);
            (void)doc_->use_uploaded_reference("");  // its side is the server's alone
            log("reference asked of the server: " + c.text);
            return true;
        }
        if (uploading_.valid()) {
            report(make_error(ErrorCode::kUsage, fmt::format("{} is still being uploaded; load the next reference after it", uploading_path_)), "");
            return false;
        }
        uploading_path_ = path;
        upload_sent_ = std::make_shared<std::atomic<uint64_t>>(0);
        upload_total_ = std::make_shared<std::atomic<uint64_t>>(0);
        log("reference uploading " + path);
        uploading_ = std::async(std::launch::async, [r, path, sent = upload_sent_, total = upload_total_] {
            return r->upload(path, [sent, total](uint64_t s, uint64_t t) {
                *sent = s;
                *total = t;
            });
        });
        return true;
    }
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

bool MainView::connect(const std::string& address, const std::string& token_file, const std::string& model,
                       const std::string& reference) {
    return start_loading(fmt::format("connected to {}: {}", address, model), [=](DebugDocument& d) {
        return d.connect(address, token_file, model, reference, "Once upon a time");
    });
}

bool MainView::export_to(const std::string& where, const std::string& path) {
    views::ExportPanel& e = p_->export_panel;
    if ((where != "here" && where != "server") || path.empty() || e.busy()) return false;
    if (where == "server" && !doc_->remote()) return false;
    e.on_server = where == "server";
    e.path = path;
    const bool gguf = path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
    e.format = gguf ? ExportFormat::kGgufDump : ExportFormat::kNpyFolder;
    e.selection = views::ExportPanel::Selection::kAllCaptured;
    set_panel("export", true);  // as Ctrl+E: the panel shows the progress and says what was written
    e.export_now(make_context(), false);
    return true;
}

bool MainView::reconnect() {
    remote::RemoteSession* r = doc_->remote();
    if (!r || r->connected() || reconnecting_.valid()) return false;
    log("remote reconnecting " + r->address());
    reconnecting_ = std::async(std::launch::async, [r] { return r->reconnect(); });
    return true;
}

// A server's session: the focused event's full tensor and its layer's attention map are fetched
// (only what is looked at travels); the connection's state goes to the log and the status bar; a
// lost connection is taken up again every few seconds, everything fetched staying browsable.
void MainView::follow_remote(const views::DebugContext& ctx) {
    remote::RemoteSession* r = doc_->remote();
    if (!r) return;
    const int64_t focus = cursor_ >= 0 ? cursor_ : ctx.snap->cursor;
    if (ctx.snap->record(focus)) r->fetch(focus);
    if (const EventInfo* e = ctx.focus(); e && e->layer >= 0)
        if (const EventRecord* softmax = ctx.snap->latest(fmt::format("kq_soft_max-{}", e->layer)))
            r->fetch(softmax->info.index);
    if (reconnecting_.valid() && reconnecting_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        Status s = reconnecting_.get();
        if (!s) log("remote reconnect failed: " + s.error().message);
        reconnect_after_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    }
    if (uploading_.valid()) {
        if (uploading_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
            auto uploaded = uploading_.get();
            p_->status.message = fmt::format("{} {} to {} ({:.1f} MiB)", uploaded ? "uploaded" : "could not upload", uploading_path_,
                                             r->address(), *upload_total_ / 1048576.0);
            p_->status.message_is_error = !uploaded;
            if (!uploaded) {
                report(uploaded.error(), "");
            } else {
                remote::Command c;
                c.kind = remote::CommandKind::kSetReference;
                c.text = uploaded.value();
                r->send(c);
                log(fmt::format("reference uploaded {} as {}", uploading_path_, uploaded.value()));
                if (Status here = doc_->use_uploaded_reference(uploading_path_); !here) report(here, "");
                else log(fmt::format("reference here {} ({} tensors) for the panels' reference side", uploading_path_,
                                     doc_->reference()->tensors().size()));
            }
        } else {
            p_->status.message = fmt::format("uploading {} to {}: {:.1f} of {:.1f} MiB", uploading_path_, r->address(),
                                             *upload_sent_ / 1048576.0, *upload_total_ / 1048576.0);
            p_->status.message_is_error = false;
        }
    }
    if (const std::string refused = r->take_refusal(); !refused.empty()) report(make_error(ErrorCode::kBadInput, refused), "");
    const std::string lost = r->lost_reason();
    if (lost != logged_remote_) {
        log(lost.empty() ? fmt::format("remote connected {} session {}", r->address(), r->session_id()) : "remote lost " + lost);
        if (lost.empty()) {  // what the panels read here of the model: its header, sent by the server
            const Model& m = *r->model();
            log(fmt::format("remote model {}: {}, {} tensors, {} tokens, header {} bytes, weights on the server",
                            m.path(), m.config().arch_name, m.tensors().size(),
                            m.tokenizer() ? m.tokenizer()->n_tokens() : 0, r->opened().header_bytes));
        }
        p_->status.message = lost.empty() ? fmt::format("connected to {}", r->address())
                                          : fmt::format("connection to {} lost ({}); what was fetched stays, reconnecting", r->address(), lost);
        p_->status.message_is_error = !lost.empty();
        logged_remote_ = lost;
    }
    if (!lost.empty() && !reconnecting_.valid() && std::chrono::steady_clock::now() >= reconnect_after_) reconnect();
}

void MainView::draw_connect_dialog() {
    if (connect_dialog_) {
        ImGui::OpenPopup("Connect to a server");
        connect_dialog_ = false;
    }
    if (!ImGui::BeginPopupModal("Connect to a server", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) return;
    ImGui::TextUnformatted("A `layerscope serve`: through an SSH tunnel (ssh -N -L 7070:127.0.0.1:7070 HOST), or at the\n"
                           "GPU box's address when it serves TLS (its token file, copied here, names its certificate)");
    ImGui::InputText("address", connect_address_, sizeof connect_address_);
    ImGui::InputText("token file", connect_token_, sizeof connect_token_);
    ImGui::InputText("model (server path)", connect_model_, sizeof connect_model_);
    ImGui::InputText("reference (optional: a file here is uploaded; server:PATH is the server's)", connect_reference_,
                     sizeof connect_reference_);
    if (ImGui::Button("Connect") && connect_model_[0]) {
        connect(connect_address_, connect_token_, connect_model_, connect_reference_);
        ImGui::CloseCurrentPopup();
    }
    ImGui::SameLine();
    if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
}

bool MainView::open_quant_demo() {
    set_panel("quant", true);
    return start_loading("demo opened: the demo model in Q4_K, its F16 file's run the reference",
                         [](DebugDocument& d) { return d.open_quant_demo(); });
}

bool MainView::compare_against_model(const std::string& other, const std::string& model_path) {
    // A server's session: `other` is the server's path (inside its folders), run there.
    if (doc_->remote() && model_path.empty()) return ask_remote_option(RemoteAsk::kModel, other);
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
    if (doc_->remote()) return ask_remote_option(RemoteAsk::kFault, name);  // the server's session restarts with it
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
    SessionControl* session = doc_->session();
    if (!session) {
        report(make_error(ErrorCode::kUsage, "no model is open: nothing to prompt"), "");
        return false;
    }
    session->set_prompt(text, true, false);
    log(fmt::format("prompt {} bytes", text.size()));
    return true;
}

bool MainView::select_weight(const std::string& name) {
    const std::shared_ptr<const views::ModelDocument>& doc = doc_->model_document();
    if (!doc || !doc->file->find_tensor(name)) return false;
    p_->model.selected_tensor = name;
    p_->weights.select(doc, name);
    set_panel("weights", true);
    log("weight selected " + name);
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

PanelEntry* MainView::entry(const std::string& name) {
    for (PanelEntry& e : panels_)
        if (name == e.name) return &e;
    return nullptr;
}

bool MainView::set_panel(const std::string& name, bool open) {
    PanelEntry* e = entry(name);
    if (!e) return false;
    *e->open = open;
    if (open) layout_.show(name);
    else layout_.hide(name);
    log(fmt::format("panel {} {}", name, open ? "on" : "off"));
    return true;
}

void MainView::follow_history(const HistoryCoord& at) {
    p_->history.follow(at);
    set_panel("history", true);
}

void MainView::follow_kv_cell(int layer, int64_t position) {
    p_->history.follow_kv_cell(layer, position);
    set_panel("history", true);
}

bool MainView::set_layout(const std::string& name) {
    auto named = views::TileLayout::named(name);
    if (!named) return false;
    layout_ = std::move(named.value());
    for (PanelEntry& e : panels_) *e.open = layout_.contains(e.name);
    zoom_.clear();
    log("layout " + name);
    return true;
}

void MainView::zoom_panel(const std::string& name) {
    if (name.empty() || name == zoom_) {
        zoom_.clear();
        log("zoom off");
        return;
    }
    set_panel(name, true);
    zoom_ = name;
    log("zoom " + name);
}

void MainView::open_all_panels() {
    // Each at home as a tab; the tabs shown stay shown.
    std::vector<std::string> shown;
    for (const views::TileLayout::Pane& p : layout_.panes()) shown.push_back(p.active);
    for (PanelEntry& e : panels_) {
        *e.open = true;
        if (!layout_.contains(e.name)) layout_.show(e.name);
    }
    for (const std::string& name : shown) layout_.activate(name);
    log("panels all on");
}

bool MainView::busy() {
    return loading_.valid() || !queued_.empty() || doc_->doctor_working() || uploading_.valid() || p_->export_panel.busy() ||
           (doc_->remote() && doc_->remote()->busy()) ||
           (doc_->session() && doc_->snapshot()->state == SessionState::kRunning);
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
    ctx.local_errors_generation = doc_->local_errors_generation();
    ctx.two_formats = !doc_->against_model().empty();
    ctx.remote = doc_->remote_events();
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
        else if ((k.mods & GLFW_MOD_ALT) && k.key >= GLFW_KEY_1 && k.key <= GLFW_KEY_9) {
            const size_t index = static_cast<size_t>(k.key - GLFW_KEY_1);
            if (index < views::TileLayout::names().size()) set_layout(views::TileLayout::names()[index]);
        }
        else if (ctrl && k.key >= GLFW_KEY_0 && k.key <= GLFW_KEY_9) {
            const size_t index = k.key == GLFW_KEY_0 ? 9 : static_cast<size_t>(k.key - GLFW_KEY_1);
            if (index < panels_.size()) zoom_panel(panels_[index].name);
        } else if (k.key == GLFW_KEY_ESCAPE && !zoom_.empty()) zoom_panel("");
        else if (k.key == GLFW_KEY_ESCAPE && doc_->doctor_working()) {
            doc_->cancel_doctor();
            log("doctor cancel");
        }
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
        if (ImGui::MenuItem("Connect to a server...")) connect_dialog_ = true;
        if (doc_->remote() && ImGui::MenuItem("Reconnect", nullptr, false, !doc_->remote()->connected())) reconnect();
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
        if (ImGui::BeginMenu("Layout")) {
            const auto& names = views::TileLayout::names();
            for (size_t i = 0; i < names.size(); ++i)
                if (ImGui::MenuItem(names[i].c_str(), fmt::format("Alt+{}", i + 1).c_str(), layout_.name() == names[i]))
                    set_layout(names[i]);
            ImGui::EndMenu();
        }
        ImGui::EndMenu();
    }
    ImGui::EndMainMenuBar();
}

void MainView::draw() {
    finish_loading(false);
    handle_keys();
    draw_menu();
    draw_connect_dialog();
    views::DebugContext ctx = make_context();
    follow_remote(ctx);
    follow_remote_option();
    if (ctx.snap->first_divergent >= 0) {
        p_->status.doctor = doc_->doctor_verdict(ctx.snap);
        // Its verdict once in the state log (not each step while it works).
        if (!doc_->doctor_working() && p_->status.doctor != logged_doctor_) log("doctor " + p_->status.doctor);
        if (!doc_->doctor_working()) logged_doctor_ = p_->status.doctor;
    } else {
        p_->status.doctor.clear();
    }
    p_->status.title = doc_->title();
    p_->status.loading = loading_.valid() ? loading_what_ : "";

    // The panels by name; the workspace places them.
    const std::shared_ptr<const views::ModelDocument>& shared_doc = doc_->model_document();
    const views::ModelDocument* model_doc = shared_doc.get();
    draw_workspace([&](const std::string& name) {
        if (name == "stepping") p_->stepping.draw(ctx);
        else if (name == "events") p_->events.draw(ctx);
        else if (name == "tensor") p_->inspector.draw(ctx);
        else if (name == "attention") p_->attention.draw(ctx);
        else if (name == "divergence") p_->divergence.draw(ctx);
        else if (name == "logits") p_->logits.draw(ctx);
        else if (name == "histograms") p_->histograms.draw(ctx);
        else if (name == "qk") p_->qk.draw(ctx);
        else if (name == "router") p_->router.draw(ctx);
        else if (name == "state") p_->state.draw(ctx);
        else if (name == "lens") p_->lens.draw(ctx);
        else if (name == "quant") p_->quant.draw(ctx);
        else if (name == "history") p_->history.draw(ctx);
        else if (name == "prompt") p_->prompt.draw(ctx);
        else if (name == "faults") p_->faults.draw(ctx);
        else if (name == "backends") p_->backends.draw(ctx);
        else if (name == "export") p_->export_panel.draw(ctx);
        else if (name == "model" && p_->model.draw(model_doc)) p_->weights.select(shared_doc, p_->model.selected_tensor);
        else if (name == "weights") p_->weights.draw(shared_doc, ctx.remote.get());
        else if (name == "lints") p_->lints.draw(model_doc);
    });

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
    if (std::string news = p_->weights.take_news(); !news.empty()) log(news);
    p_->status.draw(model_doc, ctx);

    if (ctx.requested_history) {
        p_->history.follow(*ctx.requested_history);
        set_panel("history", true);
    }
    // The one cursor: panels request, the view applies; it follows the session when the session
    // moves (its cursor, state, plan or a finished command), not when a snapshot only adds a
    // fetched tensor (a server's session) or edits a breakpoint.
    const SessionMove move{ctx.snap->cursor, ctx.snap->state, ctx.snap->events.get(), ctx.snap->completed_ticket};
    if (ctx.requested_cursor >= -1) {
        cursor_ = ctx.requested_cursor;
        log(fmt::format("select {} {}", cursor_, ctx.event(cursor_) ? ctx.event(cursor_)->name : ""));
    } else if (move != last_move_) {
        cursor_ = ctx.snap->cursor;
    }
    last_move_ = move;
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

void MainView::draw_workspace(const std::function<void(const std::string&)>& draw_panel) {
    const ImGuiViewport* vp = ImGui::GetMainViewport();
    const ImGuiStyle& style = ImGui::GetStyle();
    const float scale = ui_scale;
    const float top = ImGui::GetFrameHeight();
    const float bottom = 2 * ImGui::GetTextLineHeightWithSpacing() + 2 * style.WindowPadding.y;
    const views::LayoutRect area{vp->Pos.x, vp->Pos.y + top, vp->Size.x, std::max(0.0f, vp->Size.y - top - bottom)};
    const float gap = std::round(6 * scale), strip = ImGui::GetFrameHeight() + 2 * std::round(3 * scale);
    // Arranged before the panels opened since the last frame are placed (one without a home goes
    // to the largest pane, by these rectangles), and again after.
    layout_.arrange(area, gap, std::round(240 * scale), std::round(160 * scale));
    const ImGuiIO& io = ImGui::GetIO();

    // Panels opened or closed since the last frame (View menu, keys, a tab's close button).
    for (PanelEntry& e : panels_) {
        if (*e.open && !layout_.contains(e.name)) layout_.show(e.name);
        if (!*e.open && layout_.contains(e.name)) layout_.hide(e.name);
    }
    layout_.arrange(area, gap, std::round(240 * scale), std::round(160 * scale));

    // One pane: its tab strip (titles, close buttons; a drag takes a tab elsewhere) and the panel
    // it shows, fixed to the rest of its rectangle.
    std::vector<std::pair<std::string, views::LayoutRect>> shown;
    auto draw_pane = [&](const std::string& key, const views::LayoutRect& r, const std::vector<std::string>& tabs,
                         const std::string& active, bool movable) {
        ImGui::SetNextWindowPos(ImVec2(r.x, r.y), ImGuiCond_Always);
        ImGui::SetNextWindowSize(ImVec2(r.w, strip), ImGuiCond_Always);
        ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(std::round(4 * scale), std::round(3 * scale)));
        ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
        constexpr ImGuiWindowFlags kStrip = ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoResize | ImGuiWindowFlags_NoMove |
                                            ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse |
                                            ImGuiWindowFlags_NoSavedSettings | ImGuiWindowFlags_NoCollapse;
        if (ImGui::Begin(("##tabs " + key).c_str(), nullptr, kStrip) &&
            ImGui::BeginTabBar("tabs", ImGuiTabBarFlags_FittingPolicyScroll)) {
            std::string& last = tab_shown_[key];
            for (const std::string& tab : tabs) {
                PanelEntry* e = entry(tab);
                if (!e) continue;
                bool keep = true;
                // The layout says which tab shows; the tab bar follows it when it changed.
                const ImGuiTabItemFlags flags = tab == active && last != active ? ImGuiTabItemFlags_SetSelected : 0;
                const bool selected = ImGui::BeginTabItem(fmt::format("{}###{}", e->title, tab).c_str(), &keep, flags);
                if (ImGui::IsItemClicked(ImGuiMouseButton_Left) && tab != active) {
                    layout_.activate(tab);
                    log(fmt::format("tab {}", tab));
                }
                if (movable && dragging_tab_.empty() && ImGui::IsItemActive() && ImGui::IsMouseDragging(ImGuiMouseButton_Left, 12 * scale))
                    dragging_tab_ = tab;
                if (selected) {
                    last = tab;
                    ImGui::EndTabItem();
                }
                if (!keep) set_panel(tab, false);
            }
            ImGui::EndTabBar();
        }
        ImGui::End();
        ImGui::PopStyleVar(2);
        if (active.empty()) return;
        ImGui::SetNextWindowPos(ImVec2(r.x, r.y + strip), ImGuiCond_Always);
        ImGui::SetNextWindowSize(ImVec2(r.w, std::max(1.0f, r.h - strip)), ImGuiCond_Always);
        ImGui::SetNextWindowBgAlpha(1.0f);
        draw_panel(active);
        shown.push_back({active, r});
    };

    if (!zoom_.empty() && layout_.contains(zoom_)) {
        // A zoomed panel (Ctrl+1..0) fills the whole area alone until Escape.
        draw_pane("zoom", area, {zoom_}, zoom_, false);
        log_layout(shown);
        return;
    }
    const std::vector<views::TileLayout::Pane> panes = layout_.panes();
    for (const views::TileLayout::Pane& pane : panes) draw_pane(std::to_string(pane.id), pane.rect, pane.tabs, pane.active, true);

    // The splitters: the gaps between panes, dragged with the left button.
    const ImVec2 mouse = io.MousePos;
    if (active_splitter_ < 0 && dragging_tab_.empty()) {
        for (const views::TileLayout::Splitter& bar : layout_.splitters()) {
            if (!bar.rect.contains(mouse.x, mouse.y)) continue;
            ImGui::SetMouseCursor(bar.columns ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
            if (ImGui::IsMouseClicked(ImGuiMouseButton_Left)) active_splitter_ = bar.id;
            break;
        }
    }
    if (active_splitter_ >= 0) {
        bool columns = true;
        for (const views::TileLayout::Splitter& bar : layout_.splitters())
            if (bar.id == active_splitter_) columns = bar.columns;
        ImGui::SetMouseCursor(columns ? ImGuiMouseCursor_ResizeEW : ImGuiMouseCursor_ResizeNS);
        layout_.drag(active_splitter_, columns ? mouse.x : mouse.y);
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
            log(fmt::format("splitter {} share {:.3f}", active_splitter_, layout_.share(active_splitter_)));
            active_splitter_ = -1;
        }
    }

    // A dragged tab: into the pane under the mouse (its tab strip or middle) or a new pane at the
    // edge it is near; the target is shaded until the button is let go.
    if (!dragging_tab_.empty()) {
        const views::TileLayout::Pane* target = nullptr;
        for (const views::TileLayout::Pane& pane : panes)
            if (pane.rect.contains(mouse.x, mouse.y)) target = &pane;
        views::TileLayout::Edge edge = views::TileLayout::Edge::kCenter;
        views::LayoutRect zone;
        if (target) {
            const views::LayoutRect& r = target->rect;
            const float fx = (mouse.x - r.x) / r.w, fy = (mouse.y - r.y) / r.h;
            zone = r;
            if (mouse.y >= r.y + strip) {
                const float d[4] = {fx, 1 - fx, fy, 1 - fy};  // left, right, top, bottom
                const int nearest = static_cast<int>(std::min_element(d, d + 4) - d);
                if (d[nearest] < 0.25f) {
                    edge = nearest == 0 ? views::TileLayout::Edge::kLeft : nearest == 1 ? views::TileLayout::Edge::kRight
                           : nearest == 2 ? views::TileLayout::Edge::kTop : views::TileLayout::Edge::kBottom;
                    if (nearest == 0) zone.w = r.w / 2;
                    if (nearest == 1) zone.x += r.w / 2, zone.w = r.w / 2;
                    if (nearest == 2) zone.h = r.h / 2;
                    if (nearest == 3) zone.y += r.h / 2, zone.h = r.h / 2;
                }
            }
            ImGui::GetForegroundDrawList()->AddRectFilled(ImVec2(zone.x, zone.y), ImVec2(zone.x + zone.w, zone.y + zone.h),
                                                          IM_COL32(80, 140, 255, 70));
        }
        if (!ImGui::IsMouseDown(ImGuiMouseButton_Left)) {
            static const char* const kEdges[] = {"into", "left of", "right of", "above", "below"};
            if (target && layout_.move(dragging_tab_, target->id, edge))
                log(fmt::format("move {} {} pane {}", dragging_tab_, kEdges[static_cast<int>(edge)], target->id));
            dragging_tab_.clear();
        }
    }
    log_layout(shown);
}

// After each change of the layout (or of the window's size): every shown panel's rectangle in
// window pixels, and the splitters', for tests and scripts.
void MainView::log_layout(const std::vector<std::pair<std::string, views::LayoutRect>>& shown) {
    if (!state_log_) return;
    const ImVec2 origin = ImGui::GetMainViewport()->Pos;
    std::string lines;
    for (const auto& [name, r] : shown)
        lines += fmt::format("panel {} {:.0f} {:.0f} {:.0f} {:.0f}\n", name, r.x - origin.x, r.y - origin.y, r.w, r.h);
    if (zoom_.empty())
        for (const views::TileLayout::Splitter& bar : layout_.splitters())
            lines += fmt::format("splitter {} {} {:.0f} {:.0f} {:.0f} {:.0f}\n", bar.id, bar.columns ? "columns" : "rows",
                                 bar.rect.x - origin.x, bar.rect.y - origin.y, bar.rect.w, bar.rect.h);
    if (lines == logged_layout_) return;
    logged_layout_ = lines;
    log(fmt::format("layout {} {} panels", layout_.name().empty() ? "custom" : layout_.name(), shown.size()));
    std::fputs(lines.c_str(), state_log_);
    std::fflush(state_log_);
}

void MainView::load_settings(const std::string& path) {
    if (path_kind(path) != PathKind::kRegular) return;  // absent, or nothing we could have written
    std::ifstream in(path);
    if (!in) return;
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (!j.is_object()) return;
    if (j.contains("layout")) {
        // The workspace as it was left: its panes, splits and panels.
        std::vector<std::string> known;
        for (const PanelEntry& e : panels_) known.push_back(e.name);
        std::string why;
        if (auto saved = views::TileLayout::from_json(j["layout"], known, &why)) {
            layout_ = std::move(saved.value());
            for (PanelEntry& e : panels_) *e.open = layout_.contains(e.name);
            return;
        }
        std::fprintf(stderr, "layerscope: %s: the saved layout is not usable (%s); the default layout is used\n", path.c_str(),
                     why.c_str());
    }
    if (!j.contains("panels") || !j["panels"].is_object()) return;
    for (PanelEntry& e : panels_)
        if (j["panels"].contains(e.name) && j["panels"][e.name].is_boolean()) *e.open = j["panels"][e.name].get<bool>();
}

void MainView::save_settings(const std::string& path) const {
    nlohmann::json j;
    for (const PanelEntry& e : panels_) j["panels"][e.name] = *e.open;
    j["layout"] = layout_.to_json();
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
    // Our own settings file: replaced each time, but only if it is a regular file.
    if (Status s = write_file_safely(path, j.dump(2) + "\n", true); !s)
        std::fprintf(stderr, "layerscope: cannot save the settings: %s\n", s.error().message.c_str());
}

}  // namespace ls::app
