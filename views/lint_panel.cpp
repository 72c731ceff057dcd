// Lints panel (see lint_panel.h).
#include "views/lint_panel.h"

#include <imgui.h>

#include "views/debug_context.h"

namespace ls::views {

namespace {

ImVec4 severity_color(LintSeverity severity) {
    switch (severity) {
        case LintSeverity::kError: return {1.0f, 0.35f, 0.35f, 1.0f};
        case LintSeverity::kWarning: return {1.0f, 0.8f, 0.3f, 1.0f};
        case LintSeverity::kInfo: return {0.55f, 0.75f, 1.0f, 1.0f};
    }
    return {1, 1, 1, 1};
}

}  // namespace

void LintPanel::draw(const ModelDocument* doc) {
    if (!open) return;
    if (!begin_panel("Lints", &open)) {
        ImGui::End();
        return;
    }
    if (!doc) {
        ImGui::TextDisabled("No model open.");
        ImGui::End();
        return;
    }
    const auto& lints = doc->lints;
    ImGui::Text("%d errors, %d warnings, %d infos", count_lints(lints, LintSeverity::kError),
                count_lints(lints, LintSeverity::kWarning), count_lints(lints, LintSeverity::kInfo));
    ImGui::SameLine();
    ImGui::Checkbox("show info", &show_info);
    if (lints.empty()) {
        ImGui::TextColored({0.4f, 0.9f, 0.4f, 1.0f}, "Metadata and tensors agree.");
        ImGui::End();
        return;
    }
    if (ImGui::BeginTable("lints", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders | ImGuiTableFlags_ScrollY |
                                          ImGuiTableFlags_Resizable)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("severity", ImGuiTableColumnFlags_WidthFixed);
        ImGui::TableSetupColumn("subject", ImGuiTableColumnFlags_WidthFixed);
        ImGui::TableSetupColumn("message", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableHeadersRow();
        for (LintSeverity severity : {LintSeverity::kError, LintSeverity::kWarning, LintSeverity::kInfo}) {
            if (severity == LintSeverity::kInfo && !show_info) continue;
            for (const Lint& l : lints) {
                if (l.severity != severity) continue;
                ImGui::TableNextRow();
                ImGui::TableNextColumn();
                ImGui::TextColored(severity_color(l.severity), "%s", lint_severity_name(l.severity));
                ImGui::TableNextColumn();
                ImGui::TextUnformatted(l.subject.c_str());
                ImGui::TableNextColumn();
                ImGui::TextWrapped("%s", l.message.c_str());
            }
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
