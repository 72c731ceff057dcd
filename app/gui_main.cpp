// The GUI: a GLFW window with an OpenGL 3.3 core context and the Dear ImGui frame loop around the
// main view. Also the test hooks: --script (UI actions), --screenshot (save a PNG and exit),
// --state-log (the app's own log of what happened) and --measure-frames (UI CPU time per frame).
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <fmt/format.h>
#include <imgui.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "app/commands.h"
#include "app/gui_script.h"
#include "app/gui_view.h"
#include "engine/util/safe_write.h"
#include "views/frame.h"
#include "views/screenshot.h"

namespace ls::app {

namespace {

// A screenshot never replaces a file: 0, or the exit code of the failure (2: the path is taken or
// cannot be written), with the message printed.
int save_framebuffer_png(GLFWwindow* window, const std::string& path) {
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    Status s = views::save_png(views::read_back_buffer(width, height), path);
    if (s) return kExitOk;
    std::fprintf(stderr, "layerscope: cannot save the screenshot: %s\n", s.error().message.c_str());
    return exit_code_for(s.error());
}

// ImGui's layout file, read and written here (not by ImGui's own fopen) so that it goes through
// the same safe writes as everything else.
void load_layout(const std::string& path) {
    if (path.empty() || path_kind(path) != PathKind::kRegular) return;
    std::ifstream in(path, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ImGui::LoadIniSettingsFromMemory(text.data(), text.size());
}

void save_layout(const std::string& path) {
    ImGuiIO& io = ImGui::GetIO();
    io.WantSaveIniSettings = false;
    if (path.empty()) return;
    size_t size = 0;
    const char* text = ImGui::SaveIniSettingsToMemory(&size);
    if (Status s = write_file_safely(path, std::string_view(text, size), true); !s)
        std::fprintf(stderr, "layerscope: cannot save the window layout: %s\n", s.error().message.c_str());
}

constexpr const char* kFontPath = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
constexpr float kFontPixels = 15.0f;


void glfw_error(int code, const char* description) { std::fprintf(stderr, "GLFW error %d: %s\n", code, description); }

std::vector<std::string> g_dropped;  // paths dropped on the window, taken by the loop
std::vector<KeyPress> g_keys;        // key presses since the last frame, taken by the loop

// ImGui 1.86 sees a key only if it is still down at the next frame, so a quick tap during a slow
// frame would be lost: presses are queued here, then passed on to ImGui.
void on_key(GLFWwindow* window, int key, int scancode, int action, int mods) {
    if (action == GLFW_PRESS) g_keys.push_back({key, mods});
    ImGui_ImplGlfw_KeyCallback(window, key, scancode, action, mods);
}
void on_drop(GLFWwindow*, int count, const char** paths) {
    for (int i = 0; i < count; ++i) g_dropped.emplace_back(paths[i]);
}
float g_content_scale = 0;  // the monitor's new content scale (the window moved); 0: unchanged
void on_content_scale(GLFWwindow*, float, float y) { g_content_scale = y; }

// Token pieces need more than Latin-1: SentencePiece's U+2581, BPE's U+0120, Cyrillic, CJK-free.
const ImWchar kGlyphRanges[] = {0x0020, 0x024F, 0x0370, 0x052F, 0x2000, 0x206F, 0x2190, 0x22FF, 0x2500, 0x259F, 0};

// Fonts and sizes for a content scale: the font rasterized at that size, the style's sizes scaled.
void apply_ui_scale(float scale) {
    ImGuiIO& io = ImGui::GetIO();
    io.Fonts->Clear();
    if (std::filesystem::exists(kFontPath)) io.Fonts->AddFontFromFileTTF(kFontPath, kFontPixels * scale, nullptr, kGlyphRanges);
    else io.Fonts->AddFontDefault();
    ImGuiStyle& style = ImGui::GetStyle();
    style = ImGuiStyle();
    ImGui::StyleColorsDark();
    // Tiled panes never overlap: opaque windows (the dark style's are slightly see-through).
    style.Colors[ImGuiCol_WindowBg].w = 1.0f;
    style.ScaleAllSizes(scale);
}

double thread_cpu_ms() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

std::string settings_directory() {
    namespace fs = std::filesystem;
    if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) return (fs::path(xdg) / "layerscope").string();
    if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".config" / "layerscope").string();
    return "";
}

}  // namespace

int run_gui(const GuiOptions& options) {
    // A screenshot that could not be saved is refused before a window opens.
    if (!options.screenshot_path.empty()) {
        if (Status s = check_file_target(options.screenshot_path, false); !s) {
            std::fprintf(stderr, "layerscope: cannot save the screenshot: %s\n", s.error().message.c_str());
            return exit_code_for(s.error());
        }
    }
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
    GLFWwindow* window = glfwCreateWindow(options.window_width, options.window_height, "Layerscope", nullptr, nullptr);
    if (!window) {
        std::fputs("layerscope: cannot create an OpenGL 3.3 core window.\n", stderr);
        glfwTerminate();
        return 1;
    }
    glfwMakeContextCurrent(window);
    glfwSwapInterval(1);
    glfwSetDropCallback(window, on_drop);

    // Scripted and screenshot runs start from the same layout every time; interactive runs keep
    // the user's layout and panel choices.
    const bool reproducible = !options.screenshot_path.empty() || !options.script_path.empty() || options.measure_frames > 0;
    const std::string settings_dir = reproducible ? "" : settings_directory();
    const std::string ini_path = settings_dir.empty() ? "" : settings_dir + "/imgui.ini";
    const std::string settings_path = settings_dir.empty() ? "" : settings_dir + "/settings.json";
    std::error_code ec;
    if (!settings_dir.empty()) std::filesystem::create_directories(settings_dir, ec);

    IMGUI_CHECKVERSION();
    ImGui::CreateContext();
    ImGuiIO& io = ImGui::GetIO();
    io.IniFilename = nullptr;  // load_layout / save_layout
    load_layout(ini_path);
    // HiDPI: the monitor's content scale (or --ui-scale), followed when the window moves to another.
    float scale_x = 1.0f, scale_y = 1.0f;
    glfwGetWindowContentScale(window, &scale_x, &scale_y);
    float scale = options.ui_scale > 0 ? options.ui_scale : std::max(1.0f, scale_y);
    apply_ui_scale(scale);
    ImGui_ImplGlfw_InitForOpenGL(window, true);
    glfwSetKeyCallback(window, on_key);
    if (options.ui_scale <= 0) glfwSetWindowContentScaleCallback(window, on_content_scale);
    ImGui_ImplOpenGL3_Init("#version 330 core");

    int exit_code = kExitOk;
    auto view = std::make_unique<MainView>();
    if (!settings_path.empty()) view->load_settings(settings_path);
    if (!options.layout.empty() && !view->set_layout(options.layout)) {
        std::string known;
        for (const std::string& n : views::TileLayout::names()) known += (known.empty() ? "" : ", ") + n;
        std::fprintf(stderr, "layerscope: unknown --layout '%s'; the layouts are: %s\n", options.layout.c_str(), known.c_str());
        exit_code = kExitUsage;
    }
    if (!options.state_log_path.empty()) view->set_state_log(options.state_log_path);
    view->screenshot_dir = options.screenshot_dir;
    view->backend = options.backend;
    view->capture_budget = options.capture_budget;
    view->ui_scale = scale;
    // Screenshots and measurements need the loaded state in their first frames.
    view->load_in_background = options.screenshot_path.empty() && options.measure_frames == 0;
    std::optional<GuiScript> script;
    if (!options.script_path.empty()) {
        auto loaded = GuiScript::load(options.script_path);
        if (!loaded) {
            std::fprintf(stderr, "layerscope: %s\n", loaded.error().message.c_str());
            exit_code = kExitUsage;
        } else {
            script = std::move(loaded.value());
        }
    }
    if (exit_code == kExitOk) {
        // The model (or dump) and its reference load as one step: a reference cannot wait for a
        // document still loading in the background.
        bool opened = !options.connect.empty()         ? view->connect(options.connect, options.token_file, options.model_path,
                                                                       options.reference_path)
                      : options.model_path.empty()        ? view->open_demo()
                      : !options.against_model.empty() ? view->compare_against_model(options.against_model, options.model_path)
                                                       : view->open(options.model_path, options.doctor_model_path,
                                                                    options.reference_path);
        // A server's session compares once it is open (the other file is the server's, run there).
        if (opened && !options.connect.empty() && !options.against_model.empty())
            opened = view->finish_loading(true) && view->compare_against_model(options.against_model);
        if (opened && !options.against_model.empty()) view->set_panel("quant", true);
        if (opened && options.connect.empty() && options.model_path.empty() && !options.reference_path.empty())
            opened = view->load_reference(options.reference_path);
        if (!opened && !options.screenshot_path.empty()) exit_code = kExitBadInput;
        if (options.all_panels) view->open_all_panels();
    }

    std::vector<double> frame_ms;
    for (int frame = 1; exit_code == kExitOk && !glfwWindowShouldClose(window) && !view->quit; ++frame) {
        glfwPollEvents();
        for (const std::string& path : g_dropped) view->open(path);
        g_dropped.clear();
        view->keys = std::move(g_keys);
        g_keys.clear();
        if (g_content_scale > 0) {
            scale = std::max(1.0f, g_content_scale);
            g_content_scale = 0;
            apply_ui_scale(scale);
            ImGui_ImplOpenGL3_DestroyFontsTexture();
            ImGui_ImplOpenGL3_CreateFontsTexture();
            view->ui_scale = scale;
            view->log(fmt::format("scale {:.2f}", scale));
        }
        std::string script_shot;
        if (script) {
            auto r = script->step(*view);
            if (!r) {
                std::fprintf(stderr, "layerscope: %s\n", r.error().message.c_str());
                exit_code = kExitUsage;
                break;
            }
            script_shot = r.value();
        }
        const double cpu_start = thread_cpu_ms();
        ImGui_ImplOpenGL3_NewFrame();
        ImGui_ImplGlfw_NewFrame();
        ImGui::NewFrame();
        view->draw();
        ImGui::Render();
        // --measure-frames counts the frames of the settled UI: after the script, nothing loading or running.
        if (!view->busy() && (!script || script->done())) frame_ms.push_back(thread_cpu_ms() - cpu_start);
        int width = 0, height = 0;
        glfwGetFramebufferSize(window, &width, &height);
        views::render_frame(width, height);
        for (const std::string& shot : {script_shot, view->pending_screenshot})
            if (!shot.empty())
                if (int code = save_framebuffer_png(window, shot); code != kExitOk) exit_code = code;
        view->pending_screenshot.clear();
        if (io.WantSaveIniSettings) save_layout(ini_path);
        if (!options.screenshot_path.empty() && frame >= options.frames) {
            if (int code = save_framebuffer_png(window, options.screenshot_path); code != kExitOk) exit_code = code;
            break;
        }
        if (options.measure_frames > 0 && static_cast<int>(frame_ms.size()) >= options.measure_frames + 10) break;
        if (options.measure_frames > 0 && frame > 100 * (options.measure_frames + 10)) break;  // never settled: report what was
        if (script && script->done() && options.screenshot_path.empty() && options.measure_frames == 0 && !options.keep_open)
            break;
        glfwSwapBuffers(window);
    }

    if (options.measure_frames > 0 && frame_ms.size() > 10) {
        // The first frames build font atlases and textures: measure the steady state.
        std::vector<double> steady(frame_ms.begin() + 10, frame_ms.end());
        std::sort(steady.begin(), steady.end());
        double sum = 0;
        for (double v : steady) sum += v;
        int win_w = 0, win_h = 0;
        glfwGetWindowSize(window, &win_w, &win_h);
        std::printf("UI CPU time per frame over %zu frames at %dx%d: mean %.2f ms, median %.2f ms, p95 %.2f ms, max %.2f ms\n",
                    steady.size(), win_w, win_h, sum / steady.size(), steady[steady.size() / 2],
                    steady[std::min(steady.size() - 1, steady.size() * 95 / 100)], steady.back());
    }
    if (!settings_path.empty()) view->save_settings(settings_path);
    if (!ini_path.empty()) save_layout(ini_path);
    view.reset();
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    glfwDestroyWindow(window);
    glfwTerminate();
    return exit_code;
}

}  // namespace ls::app
