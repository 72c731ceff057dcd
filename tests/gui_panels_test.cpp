// The debugger panels (event browser, stepping toolbar, tensor inspector, divergence) drawn on a
// real session with a planted RoPE fault, in a GL window under xvfb-run; leaves a screenshot.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>
#include <imgui_internal.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/capture/snapshot_tools.h"
#include "engine/compare/local_error.h"
#include "engine/compare/reference.h"
#include "views/debug_context.h"
#include "tests/gui_test_window.h"
#include "views/screenshot.h"
#include "views/divergence_panel.h"
#include "views/logit_lens_panel.h"
#include "views/quant_panel.h"
#include "views/event_browser.h"
#include "engine/session/session.h"
#include "views/stepping_toolbar.h"
#include "views/tensor_inspector.h"

namespace v = ls::views;
using namespace std::chrono_literals;

namespace {

bool save_screenshot(GLFWwindow* window, const std::string& path) {
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    // The screenshot left to look at replaces the one of the last run.
    return ls::views::save_png(ls::views::read_back_buffer(width, height), path, true).ok();
}

int failures = 0;
std::string screenshot_path;  // when set, the next frame is saved before it is swapped
bool screenshot_saved = false;

bool save_screenshot(GLFWwindow* window, const std::string& path);

void check(bool ok, const std::string& what) {
    std::printf("%s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    if (!ok) ++failures;
}

struct Panels {
    v::EventBrowser browser;
    v::SteppingToolbar toolbar;
    v::TensorInspector inspector;
    v::DivergencePanel divergence;
    v::LogitLensPanel lens;
    v::QuantPanel quant;
};

// Each panel must leave ImGui's stacks as it found them: an unbalanced Begin/End, PushID/PopID,
// style color or BeginDisabled shows here (the system library may be built without its asserts).
bool balanced(const char* panel) {
    ImGuiContext& g = *ImGui::GetCurrentContext();
    bool ok = g.CurrentWindowStack.Size == 1 && g.CurrentWindow->IDStack.Size == 1 && g.ColorStack.Size == 0 &&
              g.StyleVarStack.Size == 0 && g.DisabledStackSize == 0 && g.GroupStack.Size == 0;
    if (!ok) check(false, std::string(panel) + " leaves ImGui's stacks unbalanced");
    return ok;
}

// One frame: the main view's part (fresh snapshot, apply the requested cursor) and the four panels.
// `mouse` (optional) overrides the pointer after the backend read it, so clicks can be scripted.
void frame(GLFWwindow* window, Panels& p, v::DebugContext& ctx, const std::function<void(ImGuiIO&)>& mouse = {}) {
    if (ctx.session) ctx.snap = ctx.session->snapshot();
    glfwPollEvents();
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    if (mouse) mouse(ImGui::GetIO());
    ImGui::NewFrame();
    // A fixed layout for the screenshot (the app places the panels its own way).
    ImGui::SetWindowPos("Stepping", ImVec2(0, 0));
    ImGui::SetWindowSize("Stepping", ImVec2(1000, 250));
    ImGui::SetWindowPos("Event browser", ImVec2(0, 250));
    ImGui::SetWindowSize("Event browser", ImVec2(470, 750));
    ImGui::SetWindowPos("Tensor inspector", ImVec2(470, 250));
    ImGui::SetWindowSize("Tensor inspector", ImVec2(530, 750));
    ImGui::SetWindowPos("Divergence", ImVec2(1000, 0));
    ImGui::SetWindowSize("Divergence", ImVec2(600, 1000));
    p.toolbar.draw(ctx);
    balanced("SteppingToolbar");
    p.browser.draw(ctx);
    balanced("EventBrowser");
    p.inspector.draw(ctx);
    balanced("TensorInspector");
    p.divergence.draw(ctx);
    balanced("DivergencePanel");
    ImGui::SetNextWindowPos(ImVec2(0, 500), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(1000, 500), ImGuiCond_Always);
    p.lens.draw(ctx);
    balanced("LogitLensPanel");
    ImGui::SetNextWindowPos(ImVec2(1000, 0), ImGuiCond_Always);
    ImGui::SetNextWindowSize(ImVec2(600, 1000), ImGuiCond_Always);
    p.quant.draw(ctx);
    balanced("QuantPanel");
    ls::test::present_gui_frame(window, [&] {
        if (!screenshot_path.empty()) {
            screenshot_saved = save_screenshot(window, screenshot_path);
            screenshot_path.clear();
        }
    });
    if (ctx.requested_cursor != -2) {
        ctx.cursor = ctx.requested_cursor;
        ctx.requested_cursor = -2;
    }
}


}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::puts("usage: gui_panels_test MODEL.gguf REFERENCE_DUMP.gguf SCREENSHOT.png");
        return 2;
    }
    const std::string model_path = argv[1], dump_path = argv[2], png = argv[3];
    if (!std::filesystem::exists(model_path) || !std::filesystem::exists(dump_path)) {
        std::puts("SKIP  fixtures missing");
        return 77;
    }
    if (!glfwInit()) {
        std::puts("SKIP  no display (run under xvfb-run)");
        return 77;
    }

    auto reference = ls::ReferenceDump::open(dump_path);
    check(reference.ok(), "reference dump opens");
    if (!reference.ok()) return 1;
    std::shared_ptr<const ls::ReferenceDump> ref = std::move(reference.value());
    ls::SessionOptions options;
    options.forward.fault = ls::Fault::kRopeWrongPairing;
    options.forward.n_ubatch = ref->n_ubatch();
    auto opened = ls::Session::open(model_path, options);
    check(opened.ok(), "session opens on the model");
    if (!opened.ok()) return 1;
    std::unique_ptr<ls::Session> session = std::move(opened.value());
    session->set_tokens({1, 403, 407, 261, 378});
    session->set_reference(ref);
    session->add_breakpoint(ls::BreakpointSpec::divergence_above(1e-4));
    auto snap = session->wait_for_ticket(session->run_to_breakpoint(), 60s);
    check(snap && snap->hit, "the divergence breakpoint stops the run");
    if (!snap || !snap->hit) return 1;

    // Latin, general punctuation (the em dash of unprinted reference values).
    static const ImWchar kRanges[] = {0x0020, 0x024F, 0x2000, 0x206F, 0x2500, 0x259F, 0};
    GLFWwindow* window = ls::test::open_gui_test_window(1600, 1000, "panels", 14.0f, kRanges);
    if (!window) return 1;

    std::vector<std::string> log;
    {
        Panels p;
        // Empty states first: nothing open, no session.
        v::DebugContext empty;
        empty.snap = std::make_shared<ls::SessionSnapshot>();
        for (int i = 0; i < 2; ++i) frame(window, p, empty);

        v::DebugContext ctx;
        ctx.session = session.get();
        ctx.reference = ref.get();
        ctx.log = [&log](const std::string& line) { log.push_back(line); };
        ctx.snap = snap;
        ctx.cursor = snap->cursor;  // the main view follows the session's cursor when it stops
        for (int i = 0; i < 3; ++i) frame(window, p, ctx);
        const ls::EventInfo* fd = ctx.event(snap->first_divergent);
        check(fd && fd->name == "Qcur-0#3", "first divergent event is Qcur-0#3 (" + (fd ? fd->name : "none") + ")");
        check(snap->cursor == snap->first_divergent, "the session stopped at the first divergence");
        check(p.browser.first_divergent_shown() && p.browser.first_divergent_label().find("Qcur-0#3") == 0,
              "event browser shows the first divergent event: '" + p.browser.first_divergent_label() + "'");
        check(p.browser.shown_row_of(ctx.cursor) >= 0, "event browser unfolded the cursor's layer");
        check(p.inspector.ref_mode() == v::TensorInspector::RefMode::kFull && p.inspector.has_reference_stats(),
              "tensor inspector pairs Qcur-0#3 with the reference's values");

        // The toolbar's commands: disable the breakpoint and run to the end of the plan.
        session->enable_breakpoint(snap->breakpoints.front().id, false);
        check(p.toolbar.continue_run(ctx), "continue is accepted with a session");
        std::shared_ptr<const ls::SessionSnapshot> end;
        for (int i = 0; i < 600 && (end = session->snapshot())->state != ls::SessionState::kFinished; ++i)
            std::this_thread::sleep_for(50ms);
        check(end->state == ls::SessionState::kFinished, "the run finishes once the breakpoint is disabled");
        for (int i = 0; i < 2; ++i) frame(window, p, ctx);
        check(p.divergence.bar_count() == static_cast<int>(end->events->size()), "one waterfall bar per event");

        // Local vs inherited error, as the app computes it for the panels: the roped Q is local.
        ls::CompareRunResult run = ls::compare_run_from_snapshot(*end);
        ls::LocalErrorOptions local_options;
        local_options.forward = options.forward;
        local_options.thresholds = end->thresholds;
        run.llama_isa = options.forward.llama_isa;
        ls::compute_local_errors(&session->model(), *ref, local_options, run);
        ctx.local_errors = &run.comparisons;
        ctx.snap = end;
        for (int i = 0; i < 2; ++i) frame(window, p, ctx);
        check(p.divergence.local_line().find("the bug is local to Qcur-0#3 ") == 0,
              "divergence panel names the local event: '" + p.divergence.local_line() + "'");

        // A scripted click in the waterfall's middle: hover, press, release.
        ImVec2 a = p.divergence.waterfall_min(), b = p.divergence.waterfall_max();
        ImVec2 target((a.x + b.x) / 2, (a.y + b.y) / 2);
        for (bool down : {false, true, false, false})
            frame(window, p, ctx, [&](ImGuiIO& io) {
                io.MousePos = target;
                io.MouseDown[0] = down;
            });
        int64_t clicked = p.divergence.last_clicked();
        check(clicked >= 0 && ctx.event(clicked) != nullptr,
              "the waterfall's click maps to an event (#" + std::to_string(clicked) + " " +
                  (ctx.event(clicked) ? ctx.event(clicked)->name : "?") + ")");
        check(ctx.cursor == clicked, "the click moved the cursor");

        // The screenshot: the cursor back on the first divergence, the pointer out of the way.
        ctx.select(end->first_divergent);
        for (int i = 0; i < 4; ++i) {
            if (i == 3) screenshot_path = png;
            frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
        }
        check(p.browser.first_divergent_shown(), "first divergence still listed after the full run");
        check(screenshot_saved, "screenshot saved to " + png);

        // The browser's filters: layer 1's products, then every warn or diverged event, counted
        // here from the plan and the records.
        {
            int64_t products = 0, flagged = 0;
            for (const ls::EventInfo& e : *end->events) {
                if (e.layer == 1 && (e.op == ls::Op::kMulMat || e.op == ls::Op::kMulMatId)) ++products;
                const ls::EventRecord* r = end->record(e.index);
                if (r && r->compared &&
                    (r->comparison.status == ls::CompareStatus::kWarn || r->comparison.status == ls::CompareStatus::kDiverged))
                    ++flagged;
            }
            p.browser.set_filter("", 1, 1, v::EventBrowser::OpClass::kProducts, false);
            frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
            check(products > 0 && p.browser.listed() == products,
                  "event browser: layer 1's products listed (" + std::to_string(p.browser.listed()) + " of " +
                      std::to_string(products) + ")");
            p.browser.set_filter("", 0, -1, v::EventBrowser::OpClass::kAll, true);
            frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
            check(flagged > 0 && p.browser.listed() == flagged,
                  "event browser: the warn and diverged events listed (" + std::to_string(p.browser.listed()) + " of " +
                      std::to_string(flagged) + ")");
            p.browser.set_filter("", 0, -1, v::EventBrowser::OpClass::kAll, false);
            frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
            check(p.browser.listed() == -1, "event browser: the tree again without filters");
        }

        // The logit lens: layer 0's output already differs (the RoPE fault is in layer 0), and a
        // click on a cell moves the cursor to that layer's l_out.
        ctx.model = &session->model();
        p.lens.open = true;
        for (int i = 0; i < 2; ++i) frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
        const ls::LogitLens& lens = p.lens.lens();
        check(static_cast<int64_t>(lens.layers.size()) == session->model().config().n_layer,
              "the lens has every layer (" + std::to_string(lens.layers.size()) + ")");
        check(lens.first_divergent_layer == 0, "the lens differs from layer 0 on (" + std::to_string(lens.first_divergent_layer) + ")");
        check(p.lens.columns() == 5, "one lens column per prompt position (" + std::to_string(p.lens.columns()) + ")");
        const ImVec2 cell = p.lens.cell_center(1, 2);
        check(cell.x > 0, "the lens cell of layer 1, position 2 is drawn");
        for (bool down : {false, true, false, false})
            frame(window, p, ctx, [&](ImGuiIO& io) {
                io.MousePos = cell;
                io.MouseDown[0] = down;
            });
        const ls::EventInfo* at = ctx.event(ctx.cursor);
        check(at && at->name == "l_out-1" && p.lens.last_clicked() == ctx.cursor,
              "a lens click moves the cursor to l_out-1 (" + (at ? at->name : "none") + ")");
        // A second picture with the lens, hovering the clicked cell (its tooltip: both sides' top 5).
        const std::string lens_png = png.substr(0, png.size() - 4) + "_lens.png";
        screenshot_saved = false;
        for (int i = 0; i < 3; ++i) {
            if (i == 2) screenshot_path = lens_png;
            frame(window, p, ctx, [&](ImGuiIO& io) { io.MousePos = cell; });
        }
        check(screenshot_saved, "screenshot saved to " + lens_png);

        // The quantization panel over the same local errors: a bar per weight, a click on one moves
        // the cursor to its event.
        p.lens.open = false;
        p.quant.open = true;
        for (int i = 0; i < 2; ++i) frame(window, p, ctx, [](ImGuiIO& io) { io.MousePos = ImVec2(-FLT_MAX, -FLT_MAX); });
        check(!p.quant.bars().empty(), "the quantization panel has a bar per weight (" + std::to_string(p.quant.bars().size()) + ")");
        check(!p.quant.kl_per_position().empty(), "the quantization panel has the output's KL per position");
        if (!p.quant.bars().empty()) {
            const v::QuantPanel::Bar bar = p.quant.bars().front();
            const ImVec2 at_bar = p.quant.bar_center(bar.weight);
            check(at_bar.x > 0, "the bar of " + bar.weight + " is drawn");
            for (bool down : {false, true, false, false})
                frame(window, p, ctx, [&](ImGuiIO& io) {
                    io.MousePos = at_bar;
                    io.MouseDown[0] = down;
                });
            check(ctx.cursor == bar.event && p.quant.last_clicked() == bar.event,
                  "a click on the bar of " + bar.weight + " moves the cursor to its event");
        }
        // The local errors rebuilt in place (a server's diagnosis arriving for the same snapshot):
        // the panel keys on their generation, not on the vector's address.
        const std::vector<ls::EventComparison> kept = run.comparisons;
        run.comparisons.assign(kept.size(), ls::EventComparison{});
        ++ctx.local_errors_generation;
        frame(window, p, ctx);
        check(p.quant.bars().empty(), "the quantization panel rereads local errors rebuilt in place");
        run.comparisons = kept;
        ++ctx.local_errors_generation;
        frame(window, p, ctx);
        check(!p.quant.bars().empty(), "the quantization panel has its bars back");
        check(glGetError() == GL_NO_ERROR, "no OpenGL error");
    }
    for (const std::string& line : log) std::printf("log: %s\n", line.c_str());

    ls::test::close_gui_test_window(window);
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
