// Backends panel (see backends_panel.h).
#include "views/debug_context.h"
#include "views/backends_panel.h"

#include <fmt/format.h>
#include <imgui.h>

namespace ls::views {
namespace {

constexpr const char* kAgainstBackends[] = {"cpu", "cuda-emulated", "cuda"};

}  // namespace

void BackendsPanel::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Backends", &open)) {
        ImGui::End();
        return;
    }
    ImGui::TextWrapped("ours: %s", ctx.session ? ctx.session->backend_description().c_str() : "no session (open a model)");
    ImGui::TextWrapped("reference: %s", !against.empty()            ? fmt::format("the {} backend's run of the same tokens", against).c_str()
                                        : ctx.reference_path.empty() ? "none"
                                                                     : ctx.reference_path.c_str());
    ImGui::Separator();
    ImGui::TextWrapped("Run the same model and tokens on another backend and compare every event with it: the event "
                       "browser is then coloured by agreement between the two backends.");
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 10);
    ImGui::Combo("##against", &choice, kAgainstBackends, IM_ARRAYSIZE(kAgainstBackends));
    ImGui::SameLine();
    // A run alongside needs the weights: here, or the server's (its session runs the other backend there).
    ImGui::BeginDisabled(!ctx.model || !(ctx.model->has_weights() || ctx.remote) || requested_against.has_value());
    if (ImGui::Button("Run alongside and compare")) {
        requested_against = kAgainstBackends[choice];
        ctx.log(fmt::format("backend A/B requested: against {}", *requested_against));
    }
    ImGui::EndDisabled();
    if (requested_against) {
        ImGui::SameLine();
        ImGui::TextDisabled("running...");
    }
    if (against.empty() || !ctx.snap) {
        ImGui::End();
        return;
    }
    int ok = 0, warn = 0, diverged = 0;
    for (const auto& r : ctx.snap->records) {
        if (!r) continue;
        ok += r->comparison.status == CompareStatus::kOk;
        warn += r->comparison.status == CompareStatus::kWarn;
        diverged += r->comparison.status == CompareStatus::kDiverged;
    }
    ImGui::Separator();
    ImGui::Text("agreement with %s: %d ok, %d warn, %d diverged", against.c_str(), ok, warn, diverged);
    if (const EventInfo* e = ctx.event(ctx.snap->first_divergent)) {
        ImGui::TextColored(ImVec4(1.0f, 0.35f, 0.35f, 1.0f), "first divergent event: #%lld %s",
                           static_cast<long long>(ctx.snap->first_divergent), e->name.c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("show")) ctx.requested_cursor = ctx.snap->first_divergent;
    } else if (ok + warn + diverged > 0) {
        ImGui::TextColored(ImVec4(0.4f, 0.9f, 0.4f, 1.0f), "the two backends agree on every event compared so far");
    }
    ImGui::End();
}

}  // namespace ls::views
