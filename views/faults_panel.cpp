// Faults panel (see faults_panel.h).
#include "views/debug_context.h"
#include "views/faults_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include "engine/forward/model.h"

namespace ls::views {

void FaultsPanel::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Faults", &open)) {
        ImGui::End();
        return;
    }
    ImGui::TextWrapped("Inject a known inference bug, re-run, and see where the comparison first diverges "
                       "(load a reference to compare with).");
    ImGui::Text("active: %s", active == Fault::kNone ? "none" : fault_info(active).name);
    ImGui::Separator();

    if (ImGui::BeginChild("catalogue", ImVec2(0, ImGui::GetContentRegionAvail().y * 0.6f), false)) {
        if (ImGui::RadioButton("none (the correct forward pass)", selected == Fault::kNone)) selected = Fault::kNone;
        for (const FaultInfo& f : fault_catalogue()) {
            if (f.fault == Fault::kNone) continue;
            ImGui::PushID(static_cast<int>(f.fault));
            if (ImGui::RadioButton(f.name, selected == f.fault)) selected = f.fault;
            ImGui::Indent();
            ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled));
            ImGui::TextWrapped("%s", f.description);
            if (f.first_event && f.first_event[0]) ImGui::TextWrapped("first shows at: %s", f.first_event);
            ImGui::PopStyleColor();
            ImGui::Unindent();
            ImGui::PopID();
        }
    }
    ImGui::EndChild();

    // The session is rebuilt by the main view (the fault is a forward option fixed at creation);
    // a session on a server is rebuilt there.
    const bool here = ctx.model && ctx.model->has_weights();
    ImGui::BeginDisabled(!(here || ctx.remote) || selected == active || requested_fault.has_value());
    const char* label = selected == Fault::kNone ? "Re-run without a fault" : "Re-run with this fault";
    if (ImGui::Button(label)) {
        requested_fault = selected;
        ctx.log(fmt::format("fault requested: {}", selected == Fault::kNone ? "none" : fault_info(selected).name));
    }
    ImGui::EndDisabled();
    if (ctx.model && !here && ctx.remote) {
        ImGui::SameLine();
        ImGui::TextDisabled("(the server re-runs its session)");
    }
    if (requested_fault) {
        ImGui::SameLine();
        ImGui::TextDisabled("re-creating the session...");
    }
    ImGui::Separator();
    draw_lints(ctx);
    ImGui::End();
}

void FaultsPanel::draw_lints(const DebugContext& ctx) {
    if (!ctx.model) {
        ImGui::TextDisabled("No model open: no lints.");
        return;
    }
    if (linted_ != ctx.model) {
        lints_ = lint_model(ctx.model->file());
        linted_ = ctx.model;
    }
    const int errors = count_lints(lints_, LintSeverity::kError), warnings = count_lints(lints_, LintSeverity::kWarning);
    if (!ImGui::CollapsingHeader(fmt::format("Model lints: {} errors, {} warnings###lints", errors, warnings).c_str(),
                                 errors + warnings > 0 ? ImGuiTreeNodeFlags_DefaultOpen : 0))
        return;
    if (lints_.empty()) {
        ImGui::TextColored({0.4f, 0.9f, 0.4f, 1.0f}, "Metadata and tensors agree.");
        return;
    }
    for (const Lint& l : lints_) {
        const ImVec4 color = l.severity == LintSeverity::kError     ? ImVec4(1.0f, 0.35f, 0.35f, 1.0f)
                             : l.severity == LintSeverity::kWarning ? ImVec4(1.0f, 0.8f, 0.3f, 1.0f)
                                                                    : ImVec4(0.55f, 0.75f, 1.0f, 1.0f);
        ImGui::TextColored(color, "%s", lint_severity_name(l.severity));
        ImGui::SameLine();
        ImGui::TextWrapped("%s%s%s", l.subject.c_str(), l.subject.empty() ? "" : ": ", l.message.c_str());
    }
}

}  // namespace ls::views
