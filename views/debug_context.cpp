// The panels' shared window preamble (debug_context.h).
#include <imgui.h>

#include "views/debug_context.h"

namespace ls::views {

const EventInfo* begin_event_panel(DebugContext& ctx, const char* title, bool* open, const char* before_run) {
    if (!ImGui::Begin(title, open)) {
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
