// Recurrent state (see state_panel.h): one row per layer, built from the model's config and the
// snapshot's records of the state events.
#include "views/state_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "engine/model/model_summary.h"
#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

namespace {

ImU32 status_colour(CompareStatus s) {
    return s == CompareStatus::kOk ? pal::kOk : s == CompareStatus::kWarn ? pal::kWarn
                                                : s == CompareStatus::kDiverged ? pal::kBad : pal::kText;
}

}  // namespace

void StatePanel::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    const EventInfo* at = begin_event_panel(ctx, "Recurrent state", &open,
                                            "No run yet: what each layer carries from one token to the next appears here.");
    if (!at) return;
    const SessionSnapshot* snap = ctx.snap.get();
    const ModelConfig* c = ctx.model ? &ctx.model->config() : nullptr;
    if (!c) {
        ImGui::TextWrapped("A capture without its model: open the model to see its layers' states.");
        ImGui::End();
        return;
    }
    if (!source_.is(snap) || at->index != cursor_) {
        source_.set(snap), cursor_ = at->index;
        rows_.clear();
        // KV cells filled so far: the tokens of every evaluation that has begun by the cursor.
        int64_t cells = 0;
        for (const EventInfo& e : *snap->events)
            if (e.index <= at->index && e.base_name == "attn_norm-0" && e.occurrence == 1) cells += e.ne[1];
        for (int il = 0; il < c->n_layer; ++il) {
            LayerState r;
            r.layer = il;
            r.recurrent = c->layer_is_recurrent(il);
            r.carries = r.recurrent ? fmt::format("conv {} x {} + delta {} x {} x {}", c->ssm_d_conv - 1, c->ssm_conv_channels(),
                                                  c->ssm_n_v_heads, c->ssm_d_state, c->ssm_d_state)
                                    : fmt::format("KV cache: {} cells of {} x {}", cells, c->n_head_kv, c->head_dim_k);
            rows_.push_back(r);
        }
        const std::string L = "-";
        for (const EventInfo& e : *snap->events) {
            if (e.index > at->index || e.layer < 0 || e.layer >= c->n_layer) continue;
            if (e.base_name == "conv_state_last" + L + std::to_string(e.layer)) rows_[e.layer].conv_event = e.index;
            if (e.base_name == "new_state" + L + std::to_string(e.layer)) rows_[e.layer].delta_event = e.index;
        }
        int recurrent = 0, states = 0;
        for (const LayerState& r : rows_) {
            recurrent += r.recurrent;
            states += (r.conv_event >= 0) + (r.delta_event >= 0);
        }
        if (snap->state != SessionState::kRunning)
            ctx.log(fmt::format("state at event {}: {} recurrent layers ({}), {} attention layers, {} state events", at->index,
                                recurrent, layer_list(*c, true), c->n_layer - recurrent, states));
    }
    for (const LayerState& r : rows_) {
        shown.recurrent += r.recurrent;
        shown.attention += !r.recurrent;
        shown.states += (r.conv_event >= 0) + (r.delta_event >= 0);
    }
    if (!c->hybrid()) {
        ImGui::TextWrapped("%s has no recurrent layers: every layer attends over its KV cache.", c->arch_name.c_str());
    } else {
        for (const SummaryLine& line : hybrid_lines(*c)) ImGui::TextWrapped("%s: %s", line.label.c_str(), line.value.c_str());
    }
    ImGui::Separator();
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("##states", 5, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("layer");
        ImGui::TableSetupColumn("mixer");
        ImGui::TableSetupColumn("carries");
        ImGui::TableSetupColumn("conv state (rms / max|x|)");
        ImGui::TableSetupColumn("delta state (rms / max|x|)");
        ImGui::TableHeadersRow();
        // One state cell: its numbers and comparison, clickable to select its event.
        auto cell = [&](int64_t index) {
            const EventRecord* rec = ctx.record(index);
            if (index < 0 || !rec) {
                ImGui::TextDisabled("-");
                return;
            }
            const TensorStats& s = rec->stats;
            const float peak = std::max(std::fabs(s.min), std::fabs(s.max));
            std::string text = fmt::format("{:.4g} / {:.4g}", s.rms, peak);
            if (s.nan_count + s.inf_count > 0) text += fmt::format("  {} NaN/Inf", s.nan_count + s.inf_count);
            if (rec->compared) text += fmt::format("  {} {:.2g}", compare_status_name(rec->comparison.status), rec->comparison.metrics.nmse);
            ImGui::PushStyleColor(ImGuiCol_Text, rec->compared ? status_colour(rec->comparison.status) : pal::kText);
            if (ImGui::Selectable(fmt::format("{}##{}", text, index).c_str(), ctx.cursor == index)) ctx.select(index);
            ImGui::PopStyleColor();
            if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s (event %lld)", rec->info.name.c_str(), static_cast<long long>(index));
        };
        for (const LayerState& r : rows_) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%d", r.layer);
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(r.recurrent ? "Gated DeltaNet" : "gated attention");
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(r.carries.c_str());
            ImGui::TableNextColumn();
            if (r.recurrent) cell(r.conv_event);
            ImGui::TableNextColumn();
            if (r.recurrent) cell(r.delta_event);
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
