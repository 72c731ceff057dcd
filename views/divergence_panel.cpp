// Divergence panel (see divergence_panel.h).
#include "views/debug_context.h"
#include "views/divergence_panel.h"

#include <fmt/format.h>

#include <cmath>

#include "engine/compare/local_error.h"
#include "views/event_browser.h"

namespace ls::views {

namespace {

// The waterfall's floor: an exact match has log10 NMSE = -inf.
constexpr float kFloor = -12.0f;

}  // namespace

void draw_local_error(const EventComparison* local) {
    if (!local) return;
    if (local->local_origin == LocalOrigin::kUnknown) {
        ImGui::TextDisabled("unknown");
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", local->local_why.c_str());
        return;
    }
    const bool own = local->local_origin == LocalOrigin::kLocal;
    const ImVec4 color = event_shade_color(own ? EventShade::kDiverged : EventShade::kOk);
    ImGui::TextColored(color, "%s %.2g", local_origin_name(local->local_origin), local->local_nmse);
    if (ImGui::IsItemHovered())
        ImGui::SetTooltip(own ? "Our op on the reference's own inputs disagrees with its output: the error starts here"
                              : "Our op on the reference's own inputs agrees with its output: the error came with the inputs");
}

void DivergencePanel::refresh(const DebugContext& ctx) {
    if (snap_ == ctx.snap.get() && version_ == ctx.snap->version) return;
    snap_ = ctx.snap.get();
    version_ = ctx.snap->version;
    const auto& records = ctx.snap->records;
    log10_nmse_.assign(records.size(), kFloor);
    statuses_.assign(records.size(), widgets::EventStatus::Ok);
    flagged_.clear();
    n_diverged_ = n_warn_ = n_compared_ = 0;
    for (size_t i = 0; i < records.size(); ++i) {
        const EventRecord* r = records[i].get();
        if (!r || !r->compared || r->comparison.status == CompareStatus::kNoReference ||
            r->comparison.status == CompareStatus::kUnusable)
            continue;
        ++n_compared_;
        const double nmse = r->comparison.metrics.nmse;
        // NaN stays NaN: the widget draws it full height, which a NaN mismatch deserves.
        log10_nmse_[i] = nmse > 0 ? std::max(kFloor, static_cast<float>(std::log10(nmse)))
                                  : std::isnan(nmse) ? NAN : kFloor;
        if (r->comparison.status == CompareStatus::kDiverged) {
            statuses_[i] = widgets::EventStatus::Diverged;
            ++n_diverged_;
            flagged_.push_back(static_cast<int64_t>(i));
        } else if (r->comparison.status == CompareStatus::kWarn) {
            statuses_[i] = widgets::EventStatus::Warn;
            ++n_warn_;
            flagged_.push_back(static_cast<int64_t>(i));
        }
    }
}

void DivergencePanel::draw_table(DebugContext& ctx) {
    ImGui::Text("%d diverged, %d warn, of %d compared events", n_diverged_, n_warn_, n_compared_);
    ImGui::SameLine();
    ImGui::Checkbox("diverged only", &only_diverged);
    if (flagged_.empty()) {
        ImGui::TextDisabled("Every compared event is within the warn threshold.");
        return;
    }
    std::vector<int64_t> shown;
    const std::vector<int64_t>* rows = &flagged_;
    if (only_diverged) {
        for (int64_t i : flagged_)
            if (statuses_[static_cast<size_t>(i)] == widgets::EventStatus::Diverged) shown.push_back(i);
        rows = &shown;
    }
    // Columns as wide as their headers and values; a narrow pane scrolls sideways instead of
    // cutting the headers.
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                                  ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("flagged", 8, flags)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#");
    ImGui::TableSetupColumn("event");
    ImGui::TableSetupColumn("status");
    ImGui::TableSetupColumn("NMSE");
    ImGui::TableSetupColumn("max |diff|");
    ImGui::TableSetupColumn("cosine");
    ImGui::TableSetupColumn("local error");
    ImGui::TableSetupColumn("note");
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(rows->size()));
    while (clipper.Step()) {
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
            const int64_t i = (*rows)[static_cast<size_t>(row)];
            const EventRecord* r = ctx.record(i);
            if (!r) continue;
            const EventComparison& c = r->comparison;
            ImGui::PushID(static_cast<int>(i));
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImVec4 color = event_shade_color(event_shade(ctx, i));
            if (ImGui::Selectable(std::to_string(i).c_str(), i == ctx.cursor, ImGuiSelectableFlags_SpanAllColumns))
                ctx.select(i);
            ImGui::TableNextColumn();
            ImGui::TextColored(color, "%s%s", r->info.name.c_str(), i == ctx.snap->first_divergent ? "  (first)" : "");
            ImGui::TableNextColumn();
            ImGui::TextColored(color, "%s", compare_status_name(c.status));
            ImGui::TableNextColumn();
            ImGui::Text("%.3g", c.metrics.nmse);
            ImGui::TableNextColumn();
            ImGui::Text("%.3g", c.metrics.max_abs);
            ImGui::TableNextColumn();
            ImGui::Text("%.5f", c.metrics.cosine);
            ImGui::TableNextColumn();
            draw_local_error(ctx.local_error(i));
            ImGui::TableNextColumn();
            ImGui::TextDisabled("%s", c.note.c_str());
            ImGui::PopID();
        }
    }
    ImGui::EndTable();
}

void DivergencePanel::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Divergence", &open)) {
        ImGui::End();
        return;
    }
    if (!ctx.snap || !ctx.snap->has_reference) {
        ImGui::TextDisabled("Load a reference (Ctrl+R) to compare");
        ImGui::TextDisabled("Every event is then compared with the reference's tensor of the same name as it runs.");
        ImGui::End();
        return;
    }
    refresh(ctx);
    if (log10_nmse_.empty()) {
        ImGui::TextDisabled("Nothing run yet: step (F10) or continue (F5); each event is compared as it runs.");
        ImGui::End();
        return;
    }

    const SessionSnapshot& s = *ctx.snap;
    const ImVec4 bad = event_shade_color(EventShade::kDiverged);
    if (const EventRecord* first = ctx.record(s.first_divergent)) {
        const EventComparison& c = first->comparison;
        const std::string yours = c.ref_source_name.empty() ? "" : " (your engine's " + c.ref_source_name + ")";
        ImGui::TextColored(bad, "First divergence: #%lld %s%s  NMSE %.3g  cosine %.5f%s%s",
                           static_cast<long long>(s.first_divergent), first->info.name.c_str(), yours.c_str(), c.metrics.nmse,
                           c.metrics.cosine, c.note.empty() ? "" : "  - ", c.note.c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("show")) ctx.select(s.first_divergent);
        local_line_ = ctx.local_errors ? local_summary_line(*ctx.local_errors, ctx.two_formats) : "";
        if (!local_line_.empty()) ImGui::TextWrapped("Local error: %s", local_line_.c_str());
    } else {
        ImGui::TextColored(event_shade_color(EventShade::kOk), "No divergence in the %zu events run so far.",
                           s.records.size());
    }

    widgets::WaterfallOptions fall;
    fall.size = ImVec2(0, 180);
    fall.floor = kFloor;
    fall.warn_level = static_cast<float>(std::log10(s.thresholds.warn_nmse));
    fall.diverged_level = static_cast<float>(std::log10(s.thresholds.diverged_nmse));
    fall.first_divergent = static_cast<int>(s.first_divergent);
    fall.selected = static_cast<int>(ctx.cursor);
    fall.event_label = [&ctx](int i) {
        const EventInfo* e = ctx.event(i);
        return e ? fmt::format("{} ({}, layer {})", e->name, decode_label(ctx, e->decode), e->layer) : std::string();
    };
    int clicked = widgets::draw_waterfall("waterfall", log10_nmse_, statuses_, fall);
    waterfall_min_ = ImGui::GetItemRectMin();
    waterfall_max_ = ImGui::GetItemRectMax();
    // Bars are indexed like the records, which are the events in execution order.
    if (clicked >= 0 && ctx.event(clicked)) {
        last_clicked_ = clicked;
        ctx.select(clicked);
    }
    draw_table(ctx);
    ImGui::End();
}

}  // namespace ls::views
