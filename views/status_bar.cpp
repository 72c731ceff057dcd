// Status bar (see status_bar.h): a borderless window pinned to the bottom of the viewport.
#include "views/status_bar.h"

#include <fmt/format.h>
#include <imgui.h>

namespace ls::views {

void StatusBar::draw(const ModelDocument* doc, const DebugContext& ctx) {
    const ImGuiViewport* viewport = ImGui::GetMainViewport();
    const float line = ImGui::GetTextLineHeightWithSpacing();
    const float height = 2 * line + ImGui::GetStyle().WindowPadding.y * 2;
    ImGui::SetNextWindowPos(ImVec2(viewport->WorkPos.x, viewport->WorkPos.y + viewport->WorkSize.y - height));
    ImGui::SetNextWindowSize(ImVec2(viewport->WorkSize.x, height));
    ImGuiWindowFlags flags = ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                             ImGuiWindowFlags_NoFocusOnAppearing | ImGuiWindowFlags_NoNav |
                             ImGuiWindowFlags_NoBringToFrontOnFocus;
    ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(8, 3));
    ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0.0f);
    if (ImGui::Begin("##status", nullptr, flags)) {
        const SessionSnapshot* snap = ctx.snap.get();
        // Line 1: backend | what is open | position | memory | progress.
        // The backend, shortly; why CUDA is not used in the tooltip.
        const size_t colon = backend.find(':');
        const std::string short_backend = backend.rfind("CUDA", 0) == 0 ? backend
                                                                          : "CPU backend" + std::string(colon == std::string::npos ? "" : " (no CUDA)");
        ImGui::TextUnformatted(short_backend.c_str());
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", backend.c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("|");
        ImGui::SameLine();
        if (!loading.empty()) {
            // Indeterminate progress: loading has no fraction to report.
            const float t = static_cast<float>(ImGui::GetTime());
            ImGui::ProgressBar(-1.0f * t, ImVec2(120, 0), "loading");
            ImGui::SameLine();
            ImGui::TextDisabled("%s", loading.c_str());
            ImGui::SameLine();
        }
        if (!title.empty()) ImGui::TextUnformatted(title.c_str());
        else if (doc) ImGui::TextUnformatted(doc->file->path().c_str());
        else ImGui::TextDisabled("nothing open: Ctrl+O opens a model or a dump");
        if (snap && snap->events) {
            ImGui::SameLine();
            ImGui::TextDisabled("|");
            ImGui::SameLine();
            const EventInfo* at = ctx.event(snap->cursor);
            ImGui::Text("%s  position %lld  event %lld/%zu %s  |  captures %.1f MiB", session_state_name(snap->state),
                        static_cast<long long>(snap->position), static_cast<long long>(snap->cursor),
                        snap->events->size(), at ? at->name.c_str() : "", double(snap->capture_bytes) / (1 << 20));
            if (snap->state == SessionState::kRunning && !snap->events->empty()) {
                ImGui::SameLine();
                const float done = float(snap->cursor + 1) / float(snap->events->size());
                ImGui::ProgressBar(done, ImVec2(160, 0));
            }
        }
        // Line 2: first divergence and the doctor | last message.
        if (snap && snap->has_reference) {
            const EventInfo* first = ctx.event(snap->first_divergent);
            if (first)
                ImGui::TextColored({1.0f, 0.45f, 0.4f, 1.0f}, "first divergence: %s%s%s", first->name.c_str(),
                                   doctor.empty() ? "" : "  doctor: ", doctor.c_str());
            else
                ImGui::TextColored({0.45f, 0.85f, 0.45f, 1.0f}, "no divergence from the reference so far");
            if (!snap->reference_build.empty()) {
                // Which llama.cpp CPU build llama mode reproduces for this reference.
                ImGui::SameLine();
                ImGui::TextDisabled("| llama.cpp build %.*s", static_cast<int>(snap->reference_build.find(':')),
                                    snap->reference_build.c_str());
                if (ImGui::IsItemHovered())
                    ImGui::SetTooltip("llama mode reproduces %s\nstatuses: the thresholds alone (warn %g, diverged %g), no "
                                      "noise floor; `layerscope compare` adds one where no variant reproduces the reference",
                                      snap->reference_build.c_str(), snap->thresholds.warn_nmse, snap->thresholds.diverged_nmse);
            }
        } else {
            ImGui::TextDisabled("no reference: Ctrl+R loads one");
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
