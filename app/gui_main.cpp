// The GUI: a GLFW window with an OpenGL 3.3 core context, the Dear ImGui frame loop, the menu
// bar and the list of toggled panels. `--screenshot` renders a few frames, saves a PNG and exits
// (the headless check the smoke test runs under xvfb).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <fmt/format.h>
#include <imgui.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "commands.h"
#include "lint_panel.h"
#include "model_panel.h"
#include "open_dialog.h"
#include "status_bar.h"
#include "tensor_panel.h"

namespace ls::app {

namespace {

constexpr const char* kFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr float kFontPixels = 15.0f;

// Everything the main view owns: the open model and one struct per panel.
struct MainView {
    std::shared_ptr<const views::ModelDocument> doc;
    views::ModelPanel model_panel;
    views::TensorPanel tensor_panel;
    views::LintPanel lint_panel;
    views::OpenDialog open_dialog;
    views::StatusBar status_bar;
    bool quit = false;

    bool open_model(const std::string& path) {
        auto loaded = views::ModelDocument::load(path);
        if (!loaded.ok()) {
            status_bar.message = fmt::format("cannot read {}: {}", path, loaded.error().message);
            status_bar.message_is_error = true;
            return false;
        }
        doc = loaded.value();
        model_panel.selected_tensor.clear();
        tensor_panel.clear();
        status_bar.message = fmt::format("opened {}", path);
        status_bar.message_is_error = false;
        return true;
    }

    void request_open() {
        std::string folder = doc ? std::filesystem::path(doc->file->path()).parent_path().string() : std::string();
        open_dialog.show(folder);
    }

    void draw_menu() {
        if (!ImGui::BeginMainMenuBar()) return;
        if (ImGui::BeginMenu("File")) {
            if (ImGui::MenuItem("Open model...", "Ctrl+O")) request_open();
            ImGui::Separator();
            if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit = true;
            ImGui::EndMenu();
        }
        if (ImGui::BeginMenu("View")) {
            ImGui::MenuItem("Model", nullptr, &model_panel.open);
            ImGui::MenuItem("Tensor", nullptr, &tensor_panel.open);
            ImGui::MenuItem("Lints", nullptr, &lint_panel.open);
            ImGui::EndMenu();
        }
        ImGui::EndMainMenuBar();
    }

    // First-run layout: model on the left, tensor and lints stacked on the right, between the
    // menu bar and the status bar. Computed from the viewport rather than WorkPos, which only
    // accounts for the menu bar from the second frame on.
    static void place(float x, float y, float w, float h) {
        const ImGuiViewport* vp = ImGui::GetMainViewport();
        float menu = ImGui::GetFrameHeight();
        float status = ImGui::GetFrameHeight() + ImGui::GetStyle().WindowPadding.y;
        float height = vp->Size.y - menu - status;
        ImGui::SetNextWindowPos(ImVec2(vp->Pos.x + x * vp->Size.x, vp->Pos.y + menu + y * height),
                                ImGuiCond_FirstUseEver);
        ImGui::SetNextWindowSize(ImVec2(w * vp->Size.x, h * height), ImGuiCond_FirstUseEver);
    }

    void draw() {
        ImGuiIO& io = ImGui::GetIO();
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_O, false)) request_open();
        if (io.KeyCtrl && ImGui::IsKeyPressed(GLFW_KEY_Q, false)) quit = true;
        draw_menu();
        const views::ModelDocument* d = doc.get();
        place(0.0f, 0.0f, 0.62f, 1.0f);
        if (model_panel.draw(d)) tensor_panel.select(d, model_panel.selected_tensor);
        place(0.62f, 0.0f, 0.38f, 0.55f);
        tensor_panel.draw();
        place(0.62f, 0.55f, 0.38f, 0.45f);
        lint_panel.draw(d);
        if (open_dialog.draw()) open_model(open_dialog.chosen);
        status_bar.draw(d);
    }
};

bool save_framebuffer_png(GLFWwindow* window, const std::string& path) {
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    std::vector<unsigned char> pixels(static_cast<size_t>(width) * height * 4);
    glPixelStorei(GL_PACK_ALIGNMENT, 1);
    glReadBuffer(GL_BACK);
    glReadPixels(0, 0, width, height, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    // OpenGL rows start at the bottom; PNG rows at the top.
    std::vector<unsigned char> flipped(pixels.size());
    size_t row_bytes = static_cast<size_t>(width) * 4;
    for (int y = 0; y < height; ++y)
        std::copy_n(&pixels[static_cast<size_t>(height - 1 - y) * row_bytes], row_bytes, &flipped[y * row_bytes]);
    return stbi_write_png(path.c_str(), width, height, 4, flipped.data(), static_cast<int>(row_bytes)) != 0;
}

void glfw_error(int code, const char* description) { std::fprintf(stderr, "GLFW error %d: %s\n", code, description); }

}  // namespace

int run_gui(const GuiOptions& options) {
    glfwSetErrorCallback(glfw_error);
    if (!glfwInit()) {
        std::fputs("layerscope: cannot open a window (no display?). Run it on a desktop, under "
                   "xvfb-run, or use the headless commands (layerscope --help).\n", stderr);
        return 1;
    }
    glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
    glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
    glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
    glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
    GLFWwindow* window = glfwCreateWindow(1280, 800, "Layerscope", nullptr, nullptr);
    if (!window) {
        std::fputs("layerscope: cannot create an OpenGL 3.3 core window.\n", stderr);
        glfwTerminate();
        return 1;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // a fixed first-run layout; saved layouts come with the settings file
    float scale_x = 1.0f, scale_y = 1.0f;
    glfwGetWindowContentScale(window, &scale_x, &scale_y);
    float scale = std::max(1.0f, scale_y);
    // Token pieces need more than Latin-1: SentencePiece's U+2581, BPE's U+0120, Cyrillic, CJK-free.
    static const ImWchar kGlyphRanges[] = {0x0020, 0x024F, 0x0370, 0x052F, 0x2000, 0x206F,
                                           0x2190, 0x22FF, 0x2500, 0x259F, 0};
    if (std::filesystem::exists(kFontPath)) io.Fonts->AddFontFromFileTTF(kFontPath, kFontPixels * scale, nullptr, kGlyphRanges);
    ImGui::StyleColorsDark();
    ImGui::GetStyle().ScaleAllSizes(scale);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    int exit_code = kExitOk;
    auto view = std::make_unique<MainView>();
    if (!options.model_path.empty() && !view->open_model(options.model_path)) {
        std::fprintf(stderr, "layerscope: %s\n", view->status_bar.message.c_str());
        if (!options.screenshot_path.empty()) exit_code = kExitBadInput;
    }

    for (int frame = 1; exit_code == kExitOk && !glfwWindowShouldClose(window) && !view->quit; ++frame) {
        glfwPollEvents();
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        ImGui::NewFrame();
        view->draw();
        ImGui::Render();
        int width = 0, height = 0;
        glfwGetFramebufferSize(window, &width, &height);
        glViewport(0, 0, width, height);
        glClearColor(0.10f, 0.10f, 0.12f, 1.0f);
        glClear(GL_COLOR_BUFFER_BIT);
        ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
        if (!options.screenshot_path.empty() && frame >= options.frames) {
            if (!save_framebuffer_png(window, options.screenshot_path)) {
                std::fprintf(stderr, "layerscope: cannot write %s\n", options.screenshot_path.c_str());
                exit_code = 4;
            }
            break;
        }
        glfwSwapBuffers(window);
    }

    view.reset();
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    return exit_code;
}

}  // namespace ls::app
