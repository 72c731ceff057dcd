// Export panel (see export_panel.h).
#include "views/debug_context.h"
#include "views/export_panel.h"

#include <fmt/format.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include <algorithm>

#include "engine/forward/model.h"

namespace ls::views {

ExportPanel::~ExportPanel() {
    cancel_ = true;
    if (worker_.joinable()) worker_.join();
}

ExportSet ExportPanel::selected_set(const DebugContext& ctx) const {
    ExportSet set;
    if (!ctx.snap || !ctx.snap->captures) return set;
    const EventInfo* at = ctx.event(ctx.cursor);
    const std::vector<std::string> patterns = split_export_globs(globs);
    std::vector<std::shared_ptr<const CapturedTensor>> picked;
    for (const auto& [index, c] : *ctx.snap->captures) {
        if (!c) continue;
        if (selection == Selection::kCursorLayer && (!at || c->info.layer != at->layer)) continue;
        if (selection == Selection::kGlobs && !export_selected(patterns, c->info.base_name, c->info.name)) continue;
        picked.push_back(c);
    }
    set = export_set_from_captures(picked, {});
    // The run's facts, so the export reads as a reference with its prompt.
    set.info.prompt_tokens = ctx.snap->tokens;
    set.info.prompt_token_pieces = ctx.snap->pieces;
    set.info.generated_tokens = ctx.snap->generated;
    if (ctx.model) {
        set.info.model_path = ctx.model->path();
        set.info.model_desc = ctx.model->config().arch_name;
    }
    return set;
}

std::vector<int64_t> ExportPanel::selected_events(const DebugContext& ctx) const {
    std::vector<int64_t> events;
    if (!ctx.snap) return events;
    const EventInfo* at = ctx.event(ctx.cursor);
    const std::vector<std::string> patterns = split_export_globs(globs);
    for (size_t i = 0; i < ctx.snap->records.size(); ++i) {
        const EventRecord* r = ctx.snap->records[i].get();
        if (!r) continue;
        if (selection == Selection::kCursorLayer && (!at || r->info.layer != at->layer)) continue;
        if (selection == Selection::kGlobs && !export_selected(patterns, r->info.base_name, r->info.name)) continue;
        events.push_back(static_cast<int64_t>(i));
    }
    return events;
}

void ExportPanel::finish(Result<std::string> outcome) {
    std::lock_guard<std::mutex> lock(mutex_);
    result_ok_ = static_cast<bool>(outcome);
    result_ = outcome ? outcome.value() : outcome.error().message;
    have_result_ = true;
    running_ = false;
}

ExportOptions ExportPanel::begin_export(bool overwrite, size_t total) {
    ExportOptions o;
    o.format = format;
    o.path = path;
    o.overwrite = overwrite;
    o.cancel = &cancel_;
    o.progress = [this](size_t done, size_t n) {
        done_ = done, total_ = n;
        return true;
    };
    {
        std::lock_guard<std::mutex> lock(mutex_);
        have_result_ = false;
        result_.clear();
    }
    cancel_ = false;
    done_ = 0;
    total_ = total;
    running_ = true;
    return o;
}

void ExportPanel::start_remote(const DebugContext& ctx, bool overwrite) {
    if (running_ || worker_.joinable()) return;
    std::vector<int64_t> events = selected_events(ctx);
    std::vector<std::string> names;
    for (int64_t e : events) names.push_back(ctx.snap->records[static_cast<size_t>(e)]->info.name);
    ExportOptions o = begin_export(overwrite, events.size());
    // The worker holds the session (shared), so a document replaced meanwhile does not end it.
    worker_ = std::thread([this, remote = ctx.remote, events = std::move(events), names = std::move(names), o = std::move(o),
                           server = on_server]() {
        if (server) {
            auto written = remote->export_on_server(names, o);
            return finish(std::move(written));
        }
        size_t skipped = 0;
        auto r = remote->export_here(events, o, &skipped);
        if (!r) return finish(r.error());
        if (r->cancelled) return finish(make_error(ErrorCode::kUsage, "Cancelled; nothing was written."));
        finish(fmt::format("Wrote {} tensors ({:.2f} MiB) to {}, fetched from the server{}", r->n_tensors, r->bytes / 1048576.0,
                           r->path, skipped ? fmt::format(" ({} without values there left out)", skipped) : ""));
    });
}

void ExportPanel::export_now(const DebugContext& ctx, bool overwrite) {
    if (ctx.remote) start_remote(ctx, on_server ? overwrite || replace_on_server : overwrite);
    else start(ctx, overwrite);
}

void ExportPanel::start(const DebugContext& ctx, bool overwrite) {
    if (running_ || worker_.joinable()) return;
    ExportSet set = selected_set(ctx);
    ExportOptions o = begin_export(overwrite, set.tensors.size());
    // The set shares the captures, so the snapshot may be replaced while the worker writes.
    worker_ = std::thread([this, set = std::move(set), o = std::move(o)]() {
        auto r = export_tensors(set, o);
        if (!r) return finish(r.error());
        if (r->cancelled) return finish(make_error(ErrorCode::kUsage, "Cancelled; nothing was written."));
        finish(fmt::format("Wrote {} tensors ({:.2f} MiB) to {}", r->n_tensors, r->bytes / 1048576.0, r->path));
    });
}

void ExportPanel::finish_if_done(DebugContext& ctx) {
    // The worker has left its function once running_ is false, so join() returns at once.
    if (running_ || !worker_.joinable()) return;
    worker_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    if (have_result_) ctx.log("export: " + result_);
}

void ExportPanel::draw(DebugContext& ctx) {
    finish_if_done(ctx);  // even when hidden, so that a finished thread is joined
    if (!open) return;
    if (!begin_panel("Export", &open)) {
        ImGui::End();
        return;
    }
    const bool idle = !running_;
    ImGui::BeginDisabled(!idle);

    const bool remote = ctx.remote != nullptr;
    if (remote) {
        int where = on_server ? 1 : 0;
        ImGui::TextUnformatted("To:");
        ImGui::SameLine();
        ImGui::RadioButton("this machine (each tensor fetched)", &where, 0);
        ImGui::SameLine();
        ImGui::RadioButton("the server's disk (inside its folders)", &where, 1);
        on_server = where == 1;
    }
    int sel = static_cast<int>(selection);
    ImGui::TextUnformatted("Events:");
    ImGui::SameLine();
    ImGui::RadioButton(remote ? "all evaluated" : "all captured", &sel, 0);
    ImGui::SameLine();
    ImGui::RadioButton("cursor's layer", &sel, 1);
    ImGui::SameLine();
    ImGui::RadioButton("names", &sel, 2);
    selection = static_cast<Selection>(sel);
    if (selection == Selection::kGlobs) {
        ImGui::SetNextItemWidth(-1);
        ImGui::InputTextWithHint("##globs", "globs, comma-separated: Qcur-*, *-3, result_output", &globs);
    } else if (selection == Selection::kCursorLayer) {
        const EventInfo* at = ctx.event(ctx.cursor);
        if (!at) ImGui::TextDisabled("No event selected.");
        else if (at->layer < 0) ImGui::TextDisabled("%s is outside the layers: tensors outside the layers are exported", at->name.c_str());
        else ImGui::Text("layer %d (from %s)", at->layer, at->name.c_str());
    }

    int fmt_index = format == ExportFormat::kGgufDump ? 0 : 1;
    ImGui::TextUnformatted("Format:");
    ImGui::SameLine();
    ImGui::RadioButton("GGUF dump", &fmt_index, 0);
    ImGui::SameLine();
    ImGui::RadioButton(".npy folder + manifest.json", &fmt_index, 1);
    const ExportFormat chosen = fmt_index == 0 ? ExportFormat::kGgufDump : ExportFormat::kNpyFolder;
    if (chosen != format) {
        // Keep the name and switch what it looks like: "x.gguf" <-> folder "x".
        const std::string ext = ".gguf";
        const bool has_ext = path.size() > ext.size() && path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
        if (chosen == ExportFormat::kNpyFolder && has_ext) path.resize(path.size() - ext.size());
        if (chosen == ExportFormat::kGgufDump && !has_ext && !path.empty()) path += ext;
        format = chosen;
    }
    ImGui::SetNextItemWidth(-1);
    ImGui::InputTextWithHint("##path", format == ExportFormat::kGgufDump ? "out.gguf" : "folder", &path);

    size_t n_selected = 0;
    uint64_t bytes = 0;
    if (remote) {
        // The server's events: what the plan says of their sizes (their values are there).
        const std::vector<int64_t> events = selected_events(ctx);
        n_selected = events.size();
        for (int64_t e : events) {
            uint64_t n = 1;
            for (int64_t d : ctx.snap->records[static_cast<size_t>(e)]->info.ne) n *= static_cast<uint64_t>(std::max<int64_t>(d, 1));
            bytes += n * sizeof(float);
        }
        if (n_selected == 0) ImGui::TextDisabled("No evaluated event selected: step or run the session first.");
        else ImGui::Text("%zu evaluated events selected, %.2f MiB%s", n_selected, bytes / 1048576.0,
                         on_server ? "" : " to fetch (events the server dropped are left out)");
        if (on_server) ImGui::Checkbox("replace an earlier export of that name", &replace_on_server);
    } else {
        const ExportSet preview = selected_set(ctx);
        n_selected = preview.tensors.size();
        for (const ExportTensor& t : preview.tensors) bytes += t.n_bytes();
        const size_t n_captured = ctx.snap && ctx.snap->captures ? ctx.snap->captures->size() : 0;
        if (n_captured == 0)
            ImGui::TextDisabled("No captured tensors yet: run the model (the capture policy decides what is kept).");
        else
            ImGui::Text("%zu of %zu captured tensors selected, %.2f MiB", n_selected, n_captured, bytes / 1048576.0);
        if (ctx.snap && ctx.snap->captures_evicted > 0)
            ImGui::TextDisabled("(%lld tensors were evicted by the capture budget and cannot be exported)",
                                static_cast<long long>(ctx.snap->captures_evicted));
    }

    ImGui::BeginDisabled(n_selected == 0 || path.empty());
    if (ImGui::Button("Export")) {
        if (remote && on_server) {
            start_remote(ctx, replace_on_server);  // the server refuses to replace unasked
        } else if (export_target_exists(path)) {
            pending_path_ = path;
            ImGui::OpenPopup("Replace existing?");
        } else if (remote) {
            start_remote(ctx, false);
        } else {
            start(ctx, false);
        }
    }
    ImGui::EndDisabled();
    ImGui::EndDisabled();  // the settings stay locked while an export runs

    if (ImGui::BeginPopupModal("Replace existing?", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
        ImGui::Text("%s already exists.", pending_path_.c_str());
        ImGui::TextDisabled(format == ExportFormat::kNpyFolder
                                ? "Only a folder an earlier export wrote (its .layerscope-folder.json marker, and "
                                  "nothing else added) is replaced."
                                : "The file is replaced once the new one is completely written.");
        if (ImGui::Button("Replace")) {
            if (path == pending_path_) remote ? start_remote(ctx, true) : start(ctx, true);
            ImGui::CloseCurrentPopup();
        }
        ImGui::SameLine();
        if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
        ImGui::EndPopup();
    }

    if (running_) {
        const size_t total = total_.load(), done = done_.load();
        const float fraction = total ? static_cast<float>(done) / static_cast<float>(total) : 0.0f;
        ImGui::ProgressBar(fraction, ImVec2(-80, 0), fmt::format("{} / {}", done, total).c_str());
        ImGui::SameLine();
        if (ImGui::Button("Cancel##export")) cancel_ = true;
    } else {
        std::lock_guard<std::mutex> lock(mutex_);
        if (have_result_) {
            if (result_ok_) ImGui::TextColored({0.4f, 0.9f, 0.4f, 1.0f}, "%s", result_.c_str());
            else ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", result_.c_str());
        }
    }
    ImGui::End();
}

}  // namespace ls::views
