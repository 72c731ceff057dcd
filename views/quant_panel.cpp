// Quantization panel (see quant_panel.h).
#include "views/debug_context.h"
#include "views/quant_panel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "engine/capture/snapshot_tools.h"
#include "engine/compare/local_error.h"
#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

ImVec2 QuantPanel::bar_center(const std::string& weight) const {
    auto it = centers_.find(weight);
    return it == centers_.end() ? ImVec2(-1, -1) : it->second;
}

void QuantPanel::refresh(DebugContext& ctx) {
    source_.set(ctx.snap.get()), local_generation_ = ctx.local_errors_generation;
    bars_.clear(), ranking_.clear(), kl_.clear(), kl_stats_ = {};
    if (ctx.local_errors) {
        for (const EventComparison* c : attribution(*ctx.local_errors)) {
            const int64_t index = c - ctx.local_errors->data();  // local_errors is by event index
            const EventInfo* e = ctx.event(index);
            bars_.push_back({c->local_weight, e ? e->layer : -1, index, c->local_nmse});
        }
        for (size_t i = 0; i < bars_.size(); ++i) ranking_.push_back(i);  // attribution's order: worst first
        // The bars in layer order (the embeddings first, the LM head last), each layer's in event order.
        std::vector<size_t> order = ranking_;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bars_[a].event < bars_[b].event; });
        std::vector<Bar> sorted;
        std::vector<size_t> where(bars_.size());
        for (size_t i = 0; i < order.size(); ++i) sorted.push_back(bars_[order[i]]), where[order[i]] = i;
        for (size_t& r : ranking_) r = where[r];
        bars_ = std::move(sorted);
    }
    if (ctx.reference) {
        const OutputKl kl = output_kl(compare_run_from_snapshot(*ctx.snap).captures, *ctx.reference);
        for (const PositionKl& k : kl.rows) kl_.push_back(static_cast<float>(k.kl));
        kl_stats_ = kl_stats(kl.rows);
    }
    if (ctx.snap->state != SessionState::kRunning && (!bars_.empty() || !kl_.empty()))
        ctx.log(fmt::format("quant: {} weights with a local error{}; output KL mean {:.4g} over {} positions, same top-1 {:.0f}%",
                            bars_.size(),
                            ranking_.empty() ? std::string()
                                             : fmt::format(", the worst {} ({:.3g})", bars_[ranking_[0]].weight,
                                                           bars_[ranking_[0]].nmse),
                            kl_stats_.mean, kl_stats_.n, 100 * kl_stats_.same_top1));
}

void QuantPanel::draw(DebugContext& ctx) {
    centers_.clear();
    if (!open) return;
    if (!begin_panel("Quantization", &open)) {
        ImGui::End();
        return;
    }
    if (!ctx.snap || !ctx.snap->events || !ctx.reference) {
        ImGui::TextWrapped("What each weight's format costs: open a quantized model against its F16 file (--against-model, "
                           "or File > Open the demo: what does Q4_K cost?), or any model with a reference.");
        ImGui::End();
        return;
    }
    if (ctx.snap->state == SessionState::kRunning) {
        ImGui::TextDisabled("Running: the costs are read when the run stops.");
        ImGui::End();
        return;
    }
    if (!source_.is(ctx.snap.get()) || ctx.local_errors_generation != local_generation_) refresh(ctx);

    // The final distributions, per position.
    if (!kl_.empty()) {
        ImGui::TextWrapped("Output: KL(reference || ours) per position: mean %.4g, median %.4g, p99 %.4g; same top-1 %.0f%%",
                    kl_stats_.mean, kl_stats_.median, kl_stats_.p99, 100 * kl_stats_.same_top1);
        ImGui::PlotLines("##kl", kl_.data(), static_cast<int>(kl_.size()), 0, "KL per position", 0.0f, FLT_MAX,
                         ImVec2(ImGui::GetContentRegionAvail().x, 70));
    } else {
        ImGui::TextDisabled("No final logits paired with the reference's yet.");
    }
    if (bars_.empty()) {
        ImGui::TextWrapped("No weight has a local error yet: they are measured for the events that warn or diverge, once "
                           "the run stops.");
        ImGui::End();
        return;
    }
    // The bars: log10 of the local NMSE between the smallest and the largest measured.
    double lo = INFINITY, hi = -INFINITY;
    for (const Bar& b : bars_)
        if (b.nmse > 0 && std::isfinite(b.nmse)) lo = std::min(lo, std::log10(b.nmse)), hi = std::max(hi, std::log10(b.nmse));
    if (!(lo <= hi)) lo = -12, hi = 0;
    lo = std::floor(lo) - 1, hi = std::ceil(hi);
    const float half = ImGui::GetContentRegionAvail().y * 0.6f;
    ImGui::TextWrapped("Local error of each weight (its op on the reference's own inputs), log10 NMSE from %.0f to %.0f:", lo, hi);
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("bars", 3, flags, ImVec2(0, half))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("layer");
        ImGui::TableSetupColumn("weight");
        ImGui::TableSetupColumn("local NMSE", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();
        int last_layer = -2;
        for (size_t i = 0; i < bars_.size(); ++i) {
            const Bar& b = bars_[i];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            if (b.layer != last_layer) ImGui::Text("%s", b.layer < 0 ? "-" : std::to_string(b.layer).c_str());
            last_layer = b.layer;
            ImGui::TableNextColumn();
            const size_t dot = b.weight.find('.', b.layer >= 0 ? 4 : 0);  // "blk.3.attn_q.weight" -> "attn_q"
            std::string shown = b.layer >= 0 && dot != std::string::npos ? b.weight.substr(dot + 1) : b.weight;
            if (shown.size() > 7 && shown.compare(shown.size() - 7, 7, ".weight") == 0) shown.resize(shown.size() - 7);
            ImGui::TextUnformatted(shown.c_str());
            ImGui::TableNextColumn();
            ImGui::PushID(static_cast<int>(i));
            const float width = ImGui::GetContentRegionAvail().x, height = ImGui::GetTextLineHeight();
            if (ImGui::InvisibleButton("bar", ImVec2(std::max(width, 1.0f), height))) {
                last_clicked_ = b.event;
                ctx.select(b.event);
            }
            const ImVec2 p0 = ImGui::GetItemRectMin(), p1 = ImGui::GetItemRectMax();
            centers_[b.weight] = ImVec2((p0.x + p1.x) / 2, (p0.y + p1.y) / 2);
            const double v = b.nmse > 0 && std::isfinite(b.nmse) ? std::log10(b.nmse) : (b.nmse > 0 ? hi : lo);
            const float share = static_cast<float>(std::clamp((v - lo) / (hi - lo), 0.0, 1.0));
            const bool worst = !ranking_.empty() && bars_[ranking_[0]].weight == b.weight;
            ImDrawList* dl = ImGui::GetWindowDrawList();
            dl->AddRectFilled(p0, ImVec2(p0.x + share * (p1.x - p0.x - 70), p1.y), worst ? pal::kBad : pal::series(0));
            dl->AddText(ImVec2(p1.x - 66, p0.y), pal::kText, fmt::format("{:.3g}", b.nmse).c_str());
            if (ImGui::IsItemHovered())
                ImGui::SetTooltip("%s: local NMSE %.4g at %s (click: go there)", b.weight.c_str(), b.nmse,
                                  ctx.event(b.event) ? ctx.event(b.event)->name.c_str() : "?");
            ImGui::PopID();
        }
        ImGui::EndTable();
    }
    // The ranking.
    if (ImGui::BeginTable("ranking", 4, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("rank");
        ImGui::TableSetupColumn("weight");
        ImGui::TableSetupColumn("event");
        ImGui::TableSetupColumn("local NMSE", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();
        for (size_t r = 0; r < ranking_.size(); ++r) {
            const Bar& b = bars_[ranking_[r]];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::PushID(static_cast<int>(1000000 + r));
            if (ImGui::Selectable(std::to_string(r + 1).c_str(), ctx.cursor == b.event, ImGuiSelectableFlags_SpanAllColumns)) {
                last_clicked_ = b.event;
                ctx.select(b.event);
            }
            ImGui::PopID();
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(b.weight.c_str());
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(ctx.event(b.event) ? ctx.event(b.event)->name.c_str() : "?");
            ImGui::TableNextColumn();
            ImGui::Text("%.4g", b.nmse);
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
