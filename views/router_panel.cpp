// MoE router (see router_panel.h): a table of RouterRows (engine/session/derived.h) built from the
// captured router events of the cursor's decode call and the reference's tensors of those names.
#include "views/router_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <string>

#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

namespace {

std::string expert_list(const std::vector<RouterChoice>& choices) {
    std::string s;
    for (const RouterChoice& c : choices) s += fmt::format("{}{}", s.empty() ? "" : ",", c.expert);
    return s.empty() ? "-" : s;
}

// " groups 1,4,6" (" groups 1,4,6 (reference 1,4,7)" when they differ); "" without grouped routing.
std::string group_text(const RouterRow& r) {
    if (r.groups.empty()) return "";
    auto list = [](const std::vector<int32_t>& g) {
        std::string s;
        for (int32_t v : g) s += fmt::format("{}{}", s.empty() ? "" : ",", v);
        return s;
    };
    std::string s = " groups " + list(r.groups);
    if (r.groups_differ) s += " (reference " + list(r.ref_groups) + ")";
    return s;
}

}  // namespace

void RouterPanel::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    const EventInfo* at = begin_event_panel(ctx, "MoE router", &open,
                                            "No run yet: the experts each MoE layer chooses per token appear here.");
    if (!at) return;
    const SessionSnapshot* snap = ctx.snap.get();
    if (!source_.is(snap) || ctx.reference != reference_ || at->decode != decode_ || at->ubatch != ubatch_ ||
        tie_threshold != threshold_) {
        source_.set(snap), reference_ = ctx.reference, decode_ = at->decode, ubatch_ = at->ubatch, threshold_ = tie_threshold;
        table_ = router_table(*snap->events, at->decode, at->ubatch,
                              [snap](int64_t index) -> std::shared_ptr<const std::vector<float>> {
                                  auto c = snap->capture(index);
                                  return c ? c->values : nullptr;
                              },
                              ctx.reference, tie_threshold);
        // The state log (tests read it): once per finished table, the first rows in full.
        if (snap->state != SessionState::kRunning && !table_.rows.empty()) {
            int mismatches = 0;
            for (const RouterRow& r : table_.rows) mismatches += r.mismatch;
            ctx.log(fmt::format("router decode {}: {} MoE layers x {} tokens, {} of {} experts, {} differ from the reference",
                                at->decode, table_.layers.size(), table_.n_tokens, table_.k, table_.n_expert, mismatches));
            for (size_t i = 0; i < table_.rows.size() && i < 64; ++i) {
                const RouterRow& r = table_.rows[i];
                ctx.log(fmt::format("router layer {} token {}: ours {} reference {} gap {:.4g}{}{}{}", r.layer, r.token,
                                    expert_list(r.ours), expert_list(r.ref), r.gap, r.mismatch ? " differs" : "",
                                    r.near_tie ? " near-tie" : "", group_text(r)));
            }
        }
    }
    const RouterTable& t = table_;
    shown.decode = at->decode;
    shown.reference = t.has_reference;
    shown.layers = static_cast<int>(t.layers.size());
    shown.tokens = t.n_tokens, shown.k = t.k, shown.n_expert = t.n_expert;
    if (t.layers.empty()) {
        ImGui::TextDisabled("Decode call %d has no MoE router events (ffn_moe_logits / ffn_moe_topk).", at->decode);
        ImGui::End();
        return;
    }
    for (const RouterRow& r : t.rows) shown.mismatches += r.mismatch, shown.near_ties += r.near_tie;

    ImGui::Text("decode call %d: %d MoE layers x %lld tokens, top %lld of %lld experts", at->decode, shown.layers,
                static_cast<long long>(t.n_tokens), static_cast<long long>(t.k), static_cast<long long>(t.n_expert));
    ImGui::SetNextItemWidth(160);
    int shown_token = token;
    ImGui::SliderInt("token (-1: all)", &shown_token, -1, static_cast<int>(std::max<int64_t>(t.n_tokens - 1, 0)));
    token = std::min(shown_token, static_cast<int>(t.n_tokens) - 1);
    if (!t.has_reference) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(100);
        ImGui::DragFloat("near tie below", &tie_threshold, 1e-4f, 0.0f, 10.0f, "%.4g");
    }
    const char* gap_unit = t.gap_of_logits ? "logit" : "probability";
    if (t.has_reference) {
        const ImU32 color = shown.mismatches == 0 ? pal::kOk : pal::kWarn;
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%d choices differ from the reference; %d near ties",
                           shown.mismatches, shown.near_ties);
        ImGui::TextDisabled("near tie: the k-th and (k+1)-th %s closer than twice ours - reference on that token", gap_unit);
    } else {
        ImGui::TextDisabled("No reference: near tie when the k-th and (k+1)-th %s are closer than %.4g", gap_unit,
                            tie_threshold);
    }

    const int columns = t.has_reference ? 6 : 5;
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("router", columns, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("layer");
        ImGui::TableSetupColumn("token");
        ImGui::TableSetupColumn("ours: expert weight");
        if (t.has_reference) ImGui::TableSetupColumn("reference");
        ImGui::TableSetupColumn(fmt::format("gap k/k+1 ({})", gap_unit).c_str());
        ImGui::TableSetupColumn("note", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();
        for (size_t i = 0; i < t.rows.size(); ++i) {
            const RouterRow& r = t.rows[i];
            if (token >= 0 && r.token != token) continue;
            ++shown.rows;
            size_t li = 0;
            while (li < t.layers.size() && t.layers[li] != r.layer) ++li;
            const int64_t gate = li < t.gate_event.size() ? t.gate_event[li] : -1;
            ImGui::PushID(static_cast<int>(i));
            ImGui::TableNextRow();
            ImGui::TableSetColumnIndex(0);
            if (r.layer == at->layer) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kMarker), "L%d", r.layer);
            else ImGui::Text("L%d", r.layer);
            ImGui::TableSetColumnIndex(1);
            ImGui::Text("%lld", static_cast<long long>(r.token));
            ImGui::TableSetColumnIndex(2);
            for (size_t s = 0; s < r.ours.size(); ++s) {
                const RouterChoice& c = r.ours[s];
                if (s) ImGui::SameLine();
                const bool differs = !r.ref.empty() && !r.ref_chose(c.expert);
                if (differs) ImGui::PushStyleColor(ImGuiCol_Button, ImGui::ColorConvertU32ToFloat4(pal::kBad));
                ImGui::PushID(static_cast<int>(s));
                if (ImGui::SmallButton(fmt::format("e{} {:.3f}", c.expert, c.weight).c_str()) && gate >= 0) {
                    ctx.select(gate);
                    ctx.log(fmt::format("router: expert {} of layer {} token {} is column {} of ffn_moe_gate-{}", c.expert,
                                        r.layer, r.token, s, r.layer));
                }
                if (ImGui::IsItemHovered())
                    ImGui::SetTooltip("slot %zu: column %zu of ffn_moe_gate-%d (click to go there)%s", s, s, r.layer,
                                      differs ? "\nthe reference did not choose this expert" : "");
                ImGui::PopID();
                if (differs) ImGui::PopStyleColor();
            }
            if (t.has_reference) {
                ImGui::TableSetColumnIndex(3);
                if (r.ref.empty()) ImGui::TextDisabled("-");
                for (size_t s = 0; s < r.ref.size(); ++s) {
                    const RouterChoice& c = r.ref[s];
                    if (s) ImGui::SameLine();
                    const std::string text = fmt::format("e{} {:.3f}", c.expert, c.weight);
                    if (!r.ours_chose(c.expert)) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "%s", text.c_str());
                    else ImGui::TextUnformatted(text.c_str());
                }
            }
            ImGui::TableSetColumnIndex(t.has_reference ? 4 : 3);
            ImGui::Text("%.4g", r.gap);
            if (ImGui::IsItemHovered() && t.has_reference)
                ImGui::SetTooltip("reference's gap %.4g; max |ours - reference| over this token's router %ss: %.3g", r.ref_gap,
                                  gap_unit, r.difference);
            ImGui::TableSetColumnIndex(t.has_reference ? 5 : 4);
            if (!r.groups.empty()) {
                // Grouped routing: the groups kept, and the reference's when they differ.
                const std::string g = group_text(r).substr(1);
                if (r.groups_differ) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "%s", g.c_str());
                else ImGui::TextDisabled("%s", g.c_str());
                ImGui::SameLine();
            }
            if (r.mismatch && r.near_tie)
                ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn), "near tie: a different choice is not a bug");
            else if (r.mismatch)
                ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "different choice, not a near tie");
            else if (r.near_tie)
                ImGui::TextDisabled("near tie");
            ImGui::PopID();
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
