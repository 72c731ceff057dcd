// The panels' shared window preamble (debug_context.h).
#include <imgui.h>

#include "views/debug_context.h"

namespace ls::views {

bool begin_panel(const char* title, bool* open) {
    constexpr ImGuiWindowFlags kTiled = ImGuiWindowFlags_NoTitleBar | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                                        ImGuiWindowFlags_NoCollapse | ImGuiWindowFlags_NoSavedSettings;
    return ImGui::Begin(title, open, kTiled);
}

const EventInfo* begin_event_panel(DebugContext& ctx, const char* title, bool* open, const char* before_run) {
    if (!begin_panel(title, open)) {
        ImGui::End();
        return nullptr;
    }
    const EventInfo* at = ctx.snap && ctx.snap->events ? ctx.focus() : nullptr;
    if (!at) {
        ImGui::TextDisabled("%s", before_run);
        ImGui::End();
    }
    return at;
}

}  // namespace ls::views
