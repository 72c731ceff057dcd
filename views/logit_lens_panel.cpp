// Logit lens grid (see logit_lens_panel.h).
#include "views/debug_context.h"
#include "views/logit_lens_panel.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/compare/snapshot_diagnosis.h"
#include "views/remote_events.h"
#include "views/logits_panel.h"
#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

namespace {

std::string piece(const DebugContext& ctx, int32_t token) {
    if (token < 0) return "-";
    const Tokenizer* tok = ctx.model ? ctx.model->tokenizer() : nullptr;
    return tok ? escape_piece(tok->token_to_piece(token)) : std::to_string(token);
}

}  // namespace

ImVec2 LogitLensPanel::cell_center(int layer, int column) const {
    auto it = centers_.find({layer, column});
    return it == centers_.end() ? ImVec2(-1, -1) : it->second;
}

void LogitLensPanel::apply(DebugContext& ctx, const SnapshotLens& made) {
    lens_ = made.lens, error_ = made.error, columns_.clear(), l_out_.clear();
    if (!error_.empty()) {
        ctx.log("lens: " + error_);
        return;
    }
    for (const LensLayer& layer : lens_.layers)
        for (const LensCell& c : layer.cells)
            if (std::find(columns_.begin(), columns_.end(), std::make_pair(c.decode, c.position)) == columns_.end())
                columns_.push_back({c.decode, c.position});
    std::sort(columns_.begin(), columns_.end());
    const int64_t n_events = ctx.snap->events ? static_cast<int64_t>(ctx.snap->events->size()) : 0;
    for (const LensEvent& e : made.events)
        if (e.event < n_events) l_out_[{e.layer, e.decode, e.position}] = e.event;
    ctx.log(fmt::format("lens: {} layers x {} positions, first layer that differs {}, first top-1 change {}{}",
                        lens_.layers.size(), columns_.size(), lens_.first_divergent_layer, lens_.first_top1_change,
                        ctx.remote ? " (worked out on the server)" : ""));
}

void LogitLensPanel::draw(DebugContext& ctx) {
    centers_.clear();
    if (!open) return;
    if (!begin_panel("Logit lens", &open)) {
        ImGui::End();
        return;
    }
    const bool on_server = ctx.model && !ctx.model->has_weights() && ctx.remote;
    if (!ctx.model || !(ctx.reference || (on_server && ctx.snap && ctx.snap->has_reference)) || !ctx.snap || !ctx.snap->events) {
        ImGui::TextWrapped("The logit lens reads each layer's output (l_out) through the model's output head, ours beside "
                           "a reference's: open a model with a reference dump that has l_out-N (llama.cpp's do).");
        ImGui::End();
        return;
    }
    if (!ctx.model->has_weights() && !on_server) {
        ImGui::TextWrapped("The logit lens reads each layer's output through the model's output head, whose weights "
                           "are not here.");
        ImGui::End();
        return;
    }
    if (ctx.snap->state == SessionState::kRunning) {
        ImGui::TextDisabled("Running: the lens is read when the run stops.");
        ImGui::End();
        return;
    }
    if (on_server) {
        // Worked out on the server, asked again when the run there has moved on.
        const auto key = std::make_tuple(ctx.snap->events.get(), ctx.snap->cursor, ctx.snap->records.size(),
                                         ctx.snap->completed_ticket, ctx.snap->first_divergent);
        if (key != remote_key_) {
            remote_key_ = key;
            ctx.remote->ask_lens();
            waiting_ = true;
        }
        bool pending = false;
        auto answer = ctx.remote->lens(&pending);
        if (waiting_ && answer && !pending) {
            waiting_ = false;
            apply(ctx, *answer);
        }
        if (waiting_) {
            ImGui::TextDisabled("Working out the lens on the server ...");
            ImGui::End();
            return;
        }
    } else if (!source_.is(ctx.snap.get()) || ctx.reference != reference_) {
        source_.set(ctx.snap.get()), reference_ = ctx.reference;
        apply(ctx, snapshot_logit_lens(*ctx.snap, *ctx.model, *ctx.reference));
    }
    if (!error_.empty()) {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "%s", error_.c_str());
        ImGui::End();
        return;
    }
    if (lens_.layers.empty()) {
        ImGui::TextWrapped("No layer output of ours pairs with the reference's yet%s%s (step further, or capture l_out-*).",
                           lens_.why.empty() ? "" : ": ", lens_.why.c_str());
        ImGui::End();
        return;
    }
    const ImU32 summary = lens_.first_divergent_layer < 0 ? pal::kOk : pal::kWarn;
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(summary), "%s",
                       lens_.first_divergent_layer < 0
                           ? "The lens agrees with the reference at every layer."
                           : fmt::format("First layer that differs: {} (mean KL above {:g}); first top-1 change: {}",
                                         lens_.first_divergent_layer, kLensKlSame,
                                         lens_.first_top1_change >= 0 ? std::to_string(lens_.first_top1_change) : "none")
                                 .c_str());
    ImGui::TextDisabled("our top-1 per layer and position: green as the reference's, red where it differs; click: that l_out");

    const int n_cols = static_cast<int>(columns_.size()) + 2;
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInner |
                                  ImGuiTableFlags_SizingFixedFit;
    if (n_cols <= 64 && ImGui::BeginTable("lens", n_cols, flags)) {
        ImGui::TableSetupScrollFreeze(1, 1);
        ImGui::TableSetupColumn("layer");
        for (const auto& [decode, position] : columns_)
            ImGui::TableSetupColumn(decode > 0 ? fmt::format("{}@{}", position, decode).c_str() : std::to_string(position).c_str());
        ImGui::TableSetupColumn("mean KL");
        ImGui::TableHeadersRow();
        for (const LensLayer& layer : lens_.layers) {
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%d", layer.layer);
            for (size_t col = 0; col < columns_.size(); ++col) {
                ImGui::TableNextColumn();
                auto cell = std::find_if(layer.cells.begin(), layer.cells.end(), [&](const LensCell& c) {
                    return c.decode == columns_[col].first && c.position == columns_[col].second;
                });
                if (cell == layer.cells.end() || cell->ours.empty()) continue;
                const bool same = !cell->reference.empty() && cell->reference[0].token == cell->ours[0].token;
                ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, same ? IM_COL32(40, 110, 60, 140) : IM_COL32(150, 45, 40, 160));
                ImGui::PushID(layer.layer * 100003 + static_cast<int>(col));
                const std::string text = piece(ctx, cell->ours[0].token);
                if (ImGui::Selectable(text.empty() ? " " : text.c_str(), false, 0, ImVec2(70, 0))) {
                    auto ev = l_out_.find({layer.layer, cell->decode, cell->position});
                    if (ev != l_out_.end()) {
                        last_clicked_ = ev->second;
                        ctx.select(ev->second);
                    }
                }
                const ImVec2 lo = ImGui::GetItemRectMin(), hi = ImGui::GetItemRectMax();
                centers_[{layer.layer, static_cast<int>(col)}] = ImVec2((lo.x + hi.x) / 2, (lo.y + hi.y) / 2);
                if (ImGui::IsItemHovered()) {
                    ImGui::BeginTooltip();
                    ImGui::Text("layer %d, position %lld: KL(reference || ours) %.4g", layer.layer,
                                static_cast<long long>(cell->position), cell->kl);
                    for (size_t k = 0; k < std::max(cell->ours.size(), cell->reference.size()); ++k) {
                        auto side = [&](const std::vector<LensToken>& v) {
                            return k < v.size() ? fmt::format("{:<14} {:.3f}", piece(ctx, v[k].token), v[k].p) : std::string();
                        };
                        ImGui::Text("%zu. ours %-22s reference %s", k + 1, side(cell->ours).c_str(), side(cell->reference).c_str());
                    }
                    ImGui::EndTooltip();
                }
                ImGui::PopID();
            }
            ImGui::TableNextColumn();
            ImGui::Text("%.3g", layer.kl.mean);
        }
        ImGui::EndTable();
    } else if (n_cols > 64) {
        ImGui::TextDisabled("%zu positions: too many columns for the grid; `compare --logit-lens --all` lists them.",
                            columns_.size());
    }
    ImGui::End();
}

}  // namespace ls::views
