// Presenting ImGui's frame: the application's frame loop and the GUI tests draw it the same way.
#pragma once

namespace ls::views {

// After ImGui::Render: the bound framebuffer (width x height) cleared to the GUI's background and
// ImGui's draw data drawn over it (the caller swaps buffers, after any read-back).
void render_frame(int width, int height);

}  // namespace ls::views
