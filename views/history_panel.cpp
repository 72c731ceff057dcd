// Tensor history panel (history_panel.h).
#include "views/history_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "engine/forward/model.h"
#include "views/event_browser.h"

namespace ls::views {

void HistoryPanel::follow(const HistoryCoord& at) {
    mode_ = at.head >= 0 ? Mode::kHead : Mode::kElement;
    decode_ = at.decode;
    token_ = static_cast<int>(at.token);
    channel_ = static_cast<int>(at.channel);
    head_ = std::max(0, at.head);
    open = true;
}

void HistoryPanel::follow_kv_cell(int layer, int64_t position) {
    mode_ = Mode::kKvCell;
    layer_ = layer;
    position_ = static_cast<int>(position);
    open = true;
}

void HistoryPanel::refresh(const DebugContext& ctx) {
    const std::string key = fmt::format("{} {} {} {} {} {} {}", static_cast<int>(mode_), decode_, token_, channel_, head_, layer_,
                                        position_);
    const uint64_t version = ctx.snap ? ctx.snap->version : 0;
    if (key == key_ && version == version_ && ctx.reference == reference_) return;
    const bool moved = key != key_;
    key_ = key, version_ = version, reference_ = ctx.reference;
    rows_.clear();
    kv_ = {};
    if (!ctx.snap || !ctx.snap->events) return;
    if (mode_ == Mode::kKvCell) {
        kv_ = kv_cell_history(*ctx.snap, ctx.reference, layer_, position_);
        if (moved)
            ctx.log(fmt::format("history kv layer {} position {}: written by decode call {}, {} writes, {} reads", layer_,
                                position_, kv_.decode, kv_.writes.size(), kv_.reads.size()));
        return;
    }
    const int64_t n_head = ctx.model ? ctx.model->config().n_head : 1;
    rows_ = tensor_history(*ctx.snap, ctx.reference, {decode_, token_, channel_, mode_ == Mode::kHead ? head_ : -1}, n_head);
    if (moved)
        ctx.log(fmt::format("history {} decode {} token {} {} {}: {} events", mode_ == Mode::kHead ? "head" : "element", decode_,
                            token_, mode_ == Mode::kHead ? "head" : "channel", mode_ == Mode::kHead ? head_ : channel_,
                            rows_.size()));
}

namespace {

void cell(const std::optional<double>& v) {
    ImGui::TableNextColumn();
    if (v) ImGui::Text("%.7g", *v);
    else ImGui::TextDisabled("-");
}

// ours - reference, coloured by its size against the reference's magnitude.
void difference(const std::optional<double>& a, const std::optional<double>& b) {
    ImGui::TableNextColumn();
    if (!a || !b) {
        ImGui::TextDisabled("-");
        return;
    }
    const double d = *a - *b, scale = std::max(1e-30, std::fabs(*b));
    const ImVec4 c = std::fabs(d) > 1e-2 * scale   ? event_shade_color(EventShade::kDiverged)
                     : std::fabs(d) > 1e-4 * scale ? event_shade_color(EventShade::kWarn)
                                                   : ImGui::GetStyleColorVec4(ImGuiCol_Text);
    ImGui::TextColored(c, "%+.3g", d);
}

}  // namespace

void HistoryPanel::draw_rows(DebugContext& ctx) {
    const bool head = mode_ == Mode::kHead;
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_Resizable;
    if (!ImGui::BeginTable("history", head ? 7 : 6, flags)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#");
    ImGui::TableSetupColumn("event");
    ImGui::TableSetupColumn(head ? "|ours|" : "ours");
    ImGui::TableSetupColumn(head ? "|reference|" : "reference");
    ImGui::TableSetupColumn("difference");
    if (head) ImGui::TableSetupColumn("nmse");
    ImGui::TableSetupColumn("note");
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(rows_.size()));
    while (clipper.Step()) {
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
            const HistoryRow& r = rows_[static_cast<size_t>(i)];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::PushID(i);
            const bool at_cursor = r.event == ctx.cursor;
            if (ImGui::Selectable(fmt::format("{}", r.event).c_str(), at_cursor, ImGuiSelectableFlags_SpanAllColumns)) {
                ctx.select(r.event);
                ctx.log(fmt::format("history select {} {}", r.event, r.name));
            }
            ImGui::PopID();
            ImGui::TableNextColumn();
            ImGui::TextColored(event_shade_color(event_shade(ctx, r.event)), "%s", r.name.c_str());
            cell(r.ours);
            cell(r.ref);
            difference(r.ours, r.ref);
            if (head) {
                ImGui::TableNextColumn();
                if (r.ours && r.ref) ImGui::Text("%.3g", r.nmse);
                else ImGui::TextDisabled("-");
            }
            ImGui::TableNextColumn();
            if (!r.note.empty()) ImGui::TextDisabled("%s", r.note.c_str());
        }
    }
    ImGui::EndTable();
}

void HistoryPanel::draw_kv_cell(DebugContext& ctx) {
    if (kv_.decode < 0) {
        ImGui::TextDisabled("%s", kv_.note.empty() ? "not written yet" : kv_.note.c_str());
        return;
    }
    ImGui::Text("written by decode call %d; read by %zu query x head pairs", kv_.decode, kv_.reads.size());
    if (!kv_.note.empty()) ImGui::TextDisabled("%s", kv_.note.c_str());
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable;
    if (ImGui::BeginTable("writes", 5, flags)) {
        ImGui::TableSetupColumn("#");
        ImGui::TableSetupColumn("written from");
        ImGui::TableSetupColumn("KV head");
        ImGui::TableSetupColumn("|ours|");
        ImGui::TableSetupColumn("|reference|");
        ImGui::TableHeadersRow();
        for (size_t i = 0; i < kv_.writes.size(); ++i) {
            const KvCellWrite& w = kv_.writes[i];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::PushID(static_cast<int>(i));
            if (ImGui::Selectable(fmt::format("{}", w.event).c_str(), w.event == ctx.cursor, ImGuiSelectableFlags_SpanAllColumns))
                ctx.select(w.event);
            ImGui::PopID();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(w.name.c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%d", w.kv_head);
            cell(w.ours_norm);
            cell(w.ref_norm);
        }
        ImGui::EndTable();
    }
    ImGui::TextDisabled("attention to this cell, by every later query (kq_soft_max):");
    if (!ImGui::BeginTable("reads", 7, flags | ImGuiTableFlags_ScrollY)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#");
    ImGui::TableSetupColumn("decode");
    ImGui::TableSetupColumn("query pos");
    ImGui::TableSetupColumn("head");
    ImGui::TableSetupColumn("ours");
    ImGui::TableSetupColumn("reference");
    ImGui::TableSetupColumn("difference");
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(kv_.reads.size()));
    while (clipper.Step()) {
        for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
            const KvCellRead& r = kv_.reads[static_cast<size_t>(i)];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::PushID(1000000 + i);
            if (ImGui::Selectable(fmt::format("{}", r.event).c_str(), r.event == ctx.cursor, ImGuiSelectableFlags_SpanAllColumns))
                ctx.select(r.event);
            ImGui::PopID();
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.decode);
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(r.query_position));
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.head);
            cell(r.ours);
            cell(r.ref);
            difference(r.ours, r.ref);
        }
    }
    ImGui::EndTable();
}

void HistoryPanel::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Tensor history", &open)) {
        ImGui::End();
        return;
    }
    int mode = static_cast<int>(mode_);
    ImGui::RadioButton("element", &mode, 0);
    ImGui::SameLine();
    ImGui::RadioButton("head", &mode, 1);
    ImGui::SameLine();
    ImGui::RadioButton("KV cell", &mode, 2);
    mode_ = static_cast<Mode>(mode);
    ImGui::SameLine();
    const EventInfo* focus = ctx.focus();
    ImGui::BeginDisabled(!focus);
    if (ImGui::Button("cursor's decode call and layer") && focus) {
        decode_ = focus->decode;
        if (focus->layer >= 0) layer_ = focus->layer;
    }
    ImGui::EndDisabled();
    const float w = ImGui::GetFontSize() * 5;
    auto field = [&](const char* label, int* v) {
        ImGui::SetNextItemWidth(w);
        ImGui::InputInt(label, v, 0);
        *v = std::max(0, *v);
        ImGui::SameLine();
    };
    if (mode_ == Mode::kKvCell) {
        field("layer", &layer_);
        field("position", &position_);
    } else {
        field("decode call", &decode_);
        field("token", &token_);
        if (mode_ == Mode::kHead) field("head", &head_);
        else field("channel", &channel_);
    }
    ImGui::NewLine();
    refresh(ctx);
    if (!ctx.snap || !ctx.snap->events) {
        ImGui::TextDisabled("Open a model (or a dump): the history follows one coordinate through its run.");
    } else if (mode_ == Mode::kKvCell) {
        draw_kv_cell(ctx);
    } else if (rows_.empty()) {
        ImGui::TextDisabled("No event of decode call %d has this %s: pick another, or right-click a value in the tensor "
                            "inspector",
                            decode_, mode_ == Mode::kHead ? "head at this token" : "token and channel");
    } else {
        ImGui::TextDisabled("%zu events have it, in execution order; a click moves the cursor there", rows_.size());
        draw_rows(ctx);
    }
    ImGui::End();
}

}  // namespace ls::views
