// Per-layer histograms (see layer_histograms.h): one table row per layer of the cursor's decode
// call, our l_out histogram over the reference's, with NaN/Inf/outlier counts and the NMSE.
#include "views/debug_context.h"
#include "views/layer_histograms.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "views/widgets/axis.h"
#include "views/widgets/plots.h"

namespace ls::views {

namespace pal = widgets::palette;


namespace {

// Values in bins whose centre lies beyond `limit`: the same bins the histogram marks with a
// warning tick, so the count and the picture agree.
int64_t outliers_from_bins(const TensorStats& s, double limit) {
    if (!(limit > 0)) return 0;
    int64_t n = 0;
    for (int k = 0; k < kHistogramBins; ++k) {
        double centre = 0.5 * (static_cast<double>(histogram_bin_edge(s, k)) + histogram_bin_edge(s, k + 1));
        if (std::abs(centre) > limit) n += s.hist[k];
    }
    return n;
}

ImVec4 status_color(CompareStatus status) {
    switch (status) {
        case CompareStatus::kOk: return ImGui::ColorConvertU32ToFloat4(pal::kOk);
        case CompareStatus::kWarn: return ImGui::ColorConvertU32ToFloat4(pal::kWarn);
        case CompareStatus::kDiverged: return ImGui::ColorConvertU32ToFloat4(pal::kBad);
        default: return ImGui::GetStyle().Colors[ImGuiCol_TextDisabled];
    }
}

}  // namespace

const TensorStats* LayerHistograms::reference_stats(const ReferenceDump& ref, const std::string& dump_name) {
    if (cached_reference_ != &ref) {
        reference_cache_.clear();
        cached_reference_ = &ref;
    }
    auto it = reference_cache_.find(dump_name);
    if (it == reference_cache_.end()) {
        std::optional<TensorStats> stats;
        const RefTensor* t = ref.find(dump_name);
        if (t && t->complete()) {
            std::vector<float> values = ref.values(*t);
            stats = tensor_stats(values.data(), static_cast<int64_t>(values.size()));
        }
        it = reference_cache_.emplace(dump_name, stats).first;
    }
    return it->second ? &*it->second : nullptr;
}

void LayerHistograms::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    if (!begin_panel("Layer histograms", &open)) {
        ImGui::End();
        return;
    }
    const SessionSnapshot* snap = ctx.snap.get();
    if (!snap || !snap->events || snap->events->empty()) {
        ImGui::TextDisabled("No run yet: open a model and set a prompt.");
        ImGui::TextDisabled("Each layer's residual output (l_out) is shown here, ours over the reference's.");
        ImGui::End();
        return;
    }
    const int64_t focus = ctx.cursor >= 0 ? ctx.cursor : snap->cursor;
    const EventInfo* at = ctx.event(focus);
    if (!at) {
        ImGui::TextDisabled("Nothing evaluated yet: step (F10) or continue (F5) to fill the histograms.");
        ImGui::End();
        return;
    }
    if (!ctx.reference) reference_cache_.clear(), cached_reference_ = nullptr;

    // The l_out events of the cursor's decode call (and micro-batch), by layer.
    std::vector<const EventInfo*> rows;
    for (const EventInfo& e : *snap->events)
        if (e.decode == at->decode && e.ubatch == at->ubatch && e.layer >= 0 &&
            e.base_name == "l_out-" + std::to_string(e.layer))
            rows.push_back(&e);
    std::sort(rows.begin(), rows.end(), [](const EventInfo* a, const EventInfo* b) { return a->layer < b->layer; });
    shown.decode = at->decode, shown.ubatch = at->ubatch, shown.layers = static_cast<int>(rows.size());
    shown.selected_layer = at->layer;

    ImGui::Text("decode call %d", at->decode);
    if (at->ubatch > 0) ImGui::SameLine(), ImGui::Text("(micro-batch %d)", at->ubatch);
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::series(0)), "ours");
    ImGui::SameLine();
    if (ctx.reference) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::series(1)), "reference");
    else ImGui::TextDisabled("no reference loaded");
    ImGui::SameLine();
    ImGui::Checkbox("log counts", &log_counts);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110);
    ImGui::SliderFloat("outlier rms", &outlier_rms, 2.0f, 50.0f, "%.0f x", ImGuiSliderFlags_Logarithmic);
    if (rows.empty()) {
        ImGui::TextDisabled("This decode call has no l_out events (no transformer layers in the plan).");
        ImGui::End();
        return;
    }

    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerH |
                                  ImGuiTableFlags_Resizable;
    if (ImGui::BeginTable("layers", 2, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("layer", ImGuiTableColumnFlags_WidthFixed, 150.0f);
        ImGui::TableSetupColumn("l_out values: ours over the reference", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();

        // Bring the cursor's layer into view when it changes (stepping moves it off screen).
        if (at->layer != scrolled_to_layer_) {
            scrolled_to_layer_ = at->layer;
            for (size_t r = 0; r < rows.size(); ++r)
                if (rows[r]->layer == at->layer) {
                    float row_px = row_height + ImGui::GetStyle().CellPadding.y * 2;
                    ImGui::SetScrollY(std::max(0.0f, r * row_px - row_px));
                }
        }

        // Totals over every row (the clipper only visits the visible ones).
        for (const EventInfo* e : rows) {
            const EventRecord* rec = ctx.record(e->index);
            if (rec) ++shown.layers_evaluated;
            if (rec && ctx.reference && reference_stats(*ctx.reference, e->name)) ++shown.layers_with_reference;
        }

        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(rows.size()), row_height + ImGui::GetStyle().CellPadding.y * 2);
        while (clipper.Step()) {
            for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
                const EventInfo& e = *rows[static_cast<size_t>(r)];
                const EventRecord* rec = ctx.record(e.index);
                const bool selected = e.layer == at->layer;
                ImGui::PushID(e.layer);
                ImGui::TableNextRow(ImGuiTableRowFlags_None, row_height);
                if (selected)
                    ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(255, 90, 220, 40));

                ImGui::TableSetColumnIndex(0);
                ImVec2 cell = ImGui::GetCursorScreenPos();
                if (ImGui::Selectable("##row", selected,
                                      ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowItemOverlap,
                                      ImVec2(0, row_height)))
                    ctx.select(e.index);
                ImGui::SetCursorScreenPos(cell);
                ImGui::Text("layer %d", e.layer);
                if (!rec) {
                    ImGui::TextDisabled("not evaluated yet");
                    ImGui::PopID();
                    continue;
                }
                const TensorStats& s = rec->stats;
                if (s.nan_count || s.inf_count)
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "NaN %lld  Inf %lld",
                                       static_cast<long long>(s.nan_count), static_cast<long long>(s.inf_count));
                else
                    ImGui::TextDisabled("no NaN/Inf");
                int64_t outliers = outliers_from_bins(s, outlier_rms * s.rms);
                if (outliers)
                    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn), "~%lld outliers",
                                       static_cast<long long>(outliers));
                else
                    ImGui::TextDisabled("rms %.3g", s.rms);
                const TensorStats* ref = ctx.reference ? reference_stats(*ctx.reference, e.name) : nullptr;
                if (rec->compared && rec->comparison.status != CompareStatus::kNoReference)
                    ImGui::TextColored(status_color(rec->comparison.status), "NMSE %.2g %s", rec->comparison.metrics.nmse,
                                       compare_status_name(rec->comparison.status));
                else if (ctx.reference && !ref)
                    ImGui::TextDisabled("no reference tensor");

                ImGui::TableSetColumnIndex(1);
                widgets::HistogramOptions options;
                options.title = "";
                options.size = ImVec2(0, row_height);
                options.log_counts = log_counts;
                options.outlier_rms = outlier_rms;
                ImVec2 plot_min = ImGui::GetCursorScreenPos();
                ImVec2 plot_max(plot_min.x + ImGui::GetContentRegionAvail().x, plot_min.y + row_height);
                widgets::draw_bar_histogram("hist", s, ref, options);
                // The histogram's own button takes the click, so the row selects from it as well.
                if (ImGui::IsWindowHovered() && ImGui::IsMouseClicked(ImGuiMouseButton_Left) &&
                    ImGui::IsMouseHoveringRect(plot_min, plot_max))
                    ctx.select(e.index);
                ImGui::PopID();
            }
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
