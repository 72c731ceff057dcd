#include "views/frame.h"

#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <GL/gl.h>

namespace ls::views {

void render_frame(int width, int height) {
    glViewport(0, 0, width, height);
    glClearColor(0.10f, 0.10f, 0.12f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
}

}  // namespace ls::views
