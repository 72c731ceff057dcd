// Status bar (see status_bar.h): a borderless window pinned to the bottom of the viewport.
#include "status_bar.h"

#include <fmt/format.h>
#include <imgui.h>

namespace ls::views {

void StatusBar::draw(const ModelDocument* doc) {
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    float height = ImGui::GetFrameHeight() + ImGui::GetStyle().WindowPadding.y;
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x, viewport->WorkPos.y + viewport->WorkSize.y - height));
    ImGui::SetNextWindowSize(ImVec2(viewport->WorkSize.x, height));
    ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                             ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav |
                             ImGuiWindowFlags_NoBringToFrontOnFocus;
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 3));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
    if (ImGui::Begin("##status", nullptr, flags)) {
        if (doc) {
            std::string arch = doc->config ? doc->config->arch_name : std::string("?");
            ImGui::Text("%s  |  %s  |  %zu tensors, %.2f MiB  |  lints: %d errors, %d warnings", doc->file->path().c_str(),
                        arch.c_str(), doc->file->tensors().size(), double(doc->tensor_bytes) / (1 << 20),
                        count_lints(doc->lints, LintSeverity::kError), count_lints(doc->lints, LintSeverity::kWarning));
        } else {
            ImGui::TextDisabled("no model");
        }
        if (!message.empty()) {
            ImGui::SameLine();
            ImGui::TextDisabled("|");
            ImGui::SameLine();
            if (message_is_error) ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", message.c_str());
            else ImGui::TextUnformatted(message.c_str());
        }
    }
    ImGui::End();
    ImGui::PopStyleVar(2);
}

}  // namespace ls::views
