// The window the GUI tests draw into: an OpenGL 3.3 core GLFW window with Dear ImGui set up the
// way the app sets it up (DejaVu Sans, dark style, no ini file). glfwInit() must have succeeded.
#pragma once

#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <cstdio>
#include <filesystem>
#include <functional>

#include "views/frame.h"

namespace ls::test {

// nullptr (after printing why) when the window cannot be created.
inline GLFWwindow* open_gui_test_window(int width, int height, const char* title, float font_px,
                                        const ImWchar* glyph_ranges = nullptr) {
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(width, height, title, nullptr, nullptr);
    if (!window) {
        std::puts("FAIL  cannot create an OpenGL 3.3 core window");
        return nullptr;
    }
    glfwMakeContextCurrent(window);
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;
    const char* font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
    if (std::filesystem::exists(font)) io.Fonts->AddFontFromFileTTF(font, font_px, nullptr, glyph_ranges);
    ImGui::StyleColorsDark();
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");
    return window;
}

// Ends the ImGui frame: renders it on a cleared framebuffer, runs `drawn` (a screenshot, a read
// back) and shows it.
inline void present_gui_frame(GLFWwindow* window, const std::function<void()>& drawn = {}) {
    ImGui::Render();
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    ls::views::render_frame(width, height);
    if (drawn) drawn();
    glfwSwapBuffers(window);
}

// Draws n frames, each what `panels` puts up, presented (`drawn` gets the frame's number, from 1).
inline void draw_gui_frames(GLFWwindow* window, int n, const std::function<void()>& panels,
                            const std::function<void(int frame)>& drawn = {}) {
    for (int frame = 1; frame <= n; ++frame) {
        glfwPollEvents();
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        ImGui::NewFrame();
        panels();
        present_gui_frame(window, [&] {
            if (drawn) drawn(frame);
        });
    }
}

// The next window at (x, y), w by h.
inline void place_next_window(float x, float y, float w, float h) {
    ImGui::SetNextWindowPos(ImVec2(x, y), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(w, h), ImGuiCond_Always);
}

inline void close_gui_test_window(GLFWwindow* window) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
}

}  // namespace ls::test
