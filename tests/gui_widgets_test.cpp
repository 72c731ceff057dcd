// Pixel checks of the drawing widgets (views/widgets) in a real GL window, run under xvfb-run:
// colormap properties, heatmap corner colors, a non-blank histogram; saves a screenshot to look at.
#include <GLFW/glfw3.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_opengl3.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "tests/gui_test_window.h"
#include "views/screenshot.h"
#include "views/widgets/axis.h"
#include "views/widgets/colormap.h"
#include "views/widgets/heatmap.h"
#include "views/widgets/plots.h"

namespace w = ls::views::widgets;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
    std::printf("%s  %s\n", ok ? "PASS" : "FAIL", what.c_str());
    if (!ok) ++failures;
}

int channel(ImU32 c, int shift) { return static_cast<int>((c >> shift) & 0xFF); }

bool close_color(ImU32 a, ImU32 b, int tolerance) {
    for (int shift : {IM_COL32_R_SHIFT, IM_COL32_G_SHIFT, IM_COL32_B_SHIFT})
        if (std::abs(channel(a, shift) - channel(b, shift)) > tolerance) return false;
    return true;
}

std::string rgb(ImU32 c) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "(%d,%d,%d)", channel(c, IM_COL32_R_SHIFT), channel(c, IM_COL32_G_SHIFT),
                  channel(c, IM_COL32_B_SHIFT));
    return buf;
}

void check_colormaps() {
    check(close_color(w::sequential_color(0), IM_COL32(70, 6, 90, 255), 0), "sequential map starts dark violet");
    check(close_color(w::sequential_color(1), IM_COL32(250, 232, 40, 255), 0), "sequential map ends yellow");
    float previous = -1, worst_drop = 0;
    for (int i = 0; i <= 255; ++i) {
        float l = w::lightness(w::sequential_color(i / 255.0f));
        if (previous >= 0) worst_drop = std::max(worst_drop, previous - l);
        previous = l;
    }
    // 0.5 L* absorbs the rounding to 8-bit channels; a real dip would be several units.
    check(worst_drop <= 0.5f, "sequential map lightness rises monotonically (worst drop " +
                                  std::to_string(worst_drop) + ")");
    check(w::lightness(w::sequential_color(1)) - w::lightness(w::sequential_color(0)) > 60,
          "sequential map spans a wide lightness range");
    ImU32 mid = w::diverging_color(0);
    check(channel(mid, IM_COL32_R_SHIFT) >= 235 && channel(mid, IM_COL32_G_SHIFT) >= 235 &&
              channel(mid, IM_COL32_B_SHIFT) >= 235,
          "diverging map is white-ish at 0 " + rgb(mid));
    ImU32 neg = w::diverging_color(-1), pos = w::diverging_color(1);
    check(channel(neg, IM_COL32_B_SHIFT) > channel(neg, IM_COL32_R_SHIFT) + 60, "diverging map is blue at -1");
    check(channel(pos, IM_COL32_R_SHIFT) > channel(pos, IM_COL32_B_SHIFT) + 60, "diverging map is red at +1");
    check(std::abs(w::lightness(neg) - w::lightness(pos)) < 12, "diverging ends are about equally dark");
    check(w::colormap_color(w::Colormap::Diverging, 0.0f, -3.0f, 3.0f) == mid, "symmetric range keeps 0 white");
    check(w::colormap_color(w::Colormap::Sequential, NAN, 0, 1) == w::kNanColor, "NaN gets its own color");
}

// Stats of `values` the way the backends fill them (asinh histogram at the rms scale).
ls::TensorStats stats_of(const std::vector<float>& values) {
    ls::TensorStats s;
    double sum = 0, sum2 = 0;
    bool first = true;
    for (float v : values) {
        ++s.count;
        if (std::isnan(v)) { ++s.nan_count; continue; }
        if (std::isinf(v)) { ++s.inf_count; continue; }
        s.min = first ? v : std::min(s.min, v);
        s.max = first ? v : std::max(s.max, v);
        first = false;
        sum += v, sum2 += double(v) * v;
    }
    int64_t n = s.count - s.nan_count - s.inf_count;
    s.mean = sum / n;
    s.rms = std::sqrt(sum2 / n);
    s.hist_scale = static_cast<float>(s.rms);
    for (float v : values)
        if (std::isfinite(v)) ++s.hist[ls::histogram_bin(s, v)];
    return s;
}

struct Scene {
    w::Heatmap gradient;  // known values: 0 at the top-left cell, 1 at the bottom-right
    w::Heatmap diff;
    std::vector<std::vector<float>> head_magnitudes;
    ls::TensorStats ours, reference;
    std::vector<float> nmse;
    std::vector<w::EventStatus> status;
    ImVec2 histogram_min, histogram_max;

    Scene() {
        const int rows = 12, cols = 16;
        std::vector<float> g(rows * cols);
        for (int i = 0; i < rows * cols; ++i) g[i] = static_cast<float>(i) / (rows * cols - 1);
        gradient.set(g.data(), rows, cols, 1);
        gradient.value_name = "p";
        gradient.row_name = "query";
        gradient.col_name = "key";
        gradient.row_label = [](int r) { return "tok" + std::to_string(r); };

        std::vector<float> d(rows * rows);
        for (int r = 0; r < rows; ++r)
            for (int c = 0; c < rows; ++c) d[r * rows + c] = std::sin(r * 0.5f) * std::cos(c * 0.4f) * 0.02f;
        diff.set(d.data(), rows, rows, 1);
        diff.map = w::Colormap::Diverging;
        diff.range = w::HeatmapRange::Symmetric;
        diff.value_name = "diff";

        for (int h = 0; h < 4; ++h) {
            std::vector<float> m;
            for (int pos = 0; pos < 32; ++pos) m.push_back(8.0f + h * 0.6f + std::sin(pos * 0.3f + h));
            head_magnitudes.push_back(m);
        }
        for (int pos = 10; pos < 32; ++pos) head_magnitudes[2][pos] = 58.0f + std::sin(pos * 0.7f) * 3;

        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 1.0f);
        std::vector<float> a, b;
        for (int i = 0; i < 20000; ++i) {
            a.push_back(normal(rng));
            b.push_back(normal(rng) * 1.1f + 0.1f);
        }
        a[5] = 40.0f, a[6] = -25.0f, a[7] = NAN;  // outliers and a NaN in ours only
        ours = stats_of(a);
        reference = stats_of(b);

        for (int i = 0; i < 120; ++i) {
            float v = -9.0f + 0.02f * i + 0.3f * std::sin(i * 0.9f);
            if (i >= 70) v = -3.5f + 0.03f * (i - 70);
            nmse.push_back(v);
            status.push_back(v > -3 ? w::EventStatus::Diverged : v > -6 ? w::EventStatus::Warn : w::EventStatus::Ok);
        }
    }

    void draw() {
        ImGui::SetNextWindowPos(ImVec2(0, 0));
        ImGui::SetNextWindowSize(ImGui::GetIO().DisplaySize);
        ImGui::Begin("widgets", nullptr, ImGuiWindowFlags_NoDecoration);
        ImGui::BeginGroup();
        ImGui::TextUnformatted("attention, layer 0 head 0 (Heatmap::draw)");
        gradient.draw("gradient", ImVec2(520, 330));
        ImGui::TextUnformatted("thumbnails (Heatmap::draw_thumbnail)");
        diff.draw_thumbnail("diff", ImVec2(64, 64), true);
        ImGui::SameLine();
        gradient.draw_thumbnail("gradient_thumb", ImVec2(64, 64));
        ImGui::EndGroup();
        ImGui::SameLine();
        ImGui::BeginGroup();
        std::vector<w::LineSeries> series;
        for (size_t h = 0; h < head_magnitudes.size(); ++h)
            series.push_back({"head " + std::to_string(h), head_magnitudes[h], {}, 0});
        w::LinePlotOptions line;
        line.x_title = "position";
        line.y_title = "|q| per head";
        line.size = ImVec2(0, 240);
        line.warn_above = 20;
        w::draw_line_plot("q_magnitude", series, line);
        w::HistogramOptions hist;
        hist.title = "blk.0.attn_norm values (asinh axis)";
        hist.size = ImVec2(0, 240);
        w::draw_bar_histogram("histogram", ours, &reference, hist);
        histogram_min = ImGui::GetItemRectMin();
        histogram_max = ImGui::GetItemRectMax();
        ImGui::EndGroup();
        w::WaterfallOptions fall;
        fall.size = ImVec2(0, 0);
        fall.warn_level = -6;
        fall.diverged_level = -3;
        fall.first_divergent = 70;
        fall.selected = 40;
        w::draw_waterfall("waterfall", nmse, status, fall);
        ImGui::End();
    }
};

using ls::views::Pixels;

// The colour at window coordinates (x right, y down) of a bottom-up read-back.
ImU32 pixel_at(const Pixels& p, float x, float y) {
    int px = std::clamp(static_cast<int>(x), 0, p.width - 1);
    int py = std::clamp(p.height - 1 - static_cast<int>(y), 0, p.height - 1);
    const unsigned char* c = &p.rgba[(static_cast<size_t>(py) * p.width + px) * 4];
    return IM_COL32(c[0], c[1], c[2], 255);
}

Pixels read_back(GLFWwindow* window) {
    int width = 0, height = 0;
    glfwGetFramebufferSize(window, &width, &height);
    return ls::views::read_back_buffer(width, height);
}

void check_pixels(const Scene& scene, const Pixels& px) {
    const w::Heatmap& h = scene.gradient;
    ImVec2 a = h.image_min(), b = h.image_max();
    float inset = 3;
    ImU32 top_left = pixel_at(px, a.x + inset, a.y + inset), bottom_right = pixel_at(px, b.x - inset, b.y - inset);
    ImU32 top_right = pixel_at(px, b.x - inset, a.y + inset);
    check(close_color(top_left, w::sequential_color(0), 2),
          "heatmap top-left is the map's low end " + rgb(top_left) + " vs " + rgb(w::sequential_color(0)));
    check(close_color(bottom_right, w::sequential_color(1), 2),
          "heatmap bottom-right is the map's high end " + rgb(bottom_right) + " vs " + rgb(w::sequential_color(1)));
    ImU32 expected_tr = w::colormap_color(w::Colormap::Sequential, h.value(0, h.cols() - 1), 0, 1);
    check(close_color(top_right, expected_tr, 2), "heatmap top-right matches its cell " + rgb(top_right));

    int colored = 0, total = 0;
    for (float y = scene.histogram_min.y; y < scene.histogram_max.y; y += 1)
        for (float x = scene.histogram_min.x; x < scene.histogram_max.x; x += 1) {
            ImU32 c = pixel_at(px, x, y);
            int r = channel(c, IM_COL32_R_SHIFT), g = channel(c, IM_COL32_G_SHIFT), bl = channel(c, IM_COL32_B_SHIFT);
            ++total;
            // Bars are saturated (blue or orange); background, grid and text are near-gray.
            if (std::max({r, g, bl}) - std::min({r, g, bl}) > 60) ++colored;
        }
    check(total > 0 && colored > total / 50,
          "histogram has bars (" + std::to_string(colored) + " of " + std::to_string(total) + " pixels colored)");
}

}  // namespace

int main(int argc, char** argv) {
    std::string png = argc > 1 ? argv[1] : "gui_widgets.png";
    check_colormaps();
    if (!glfwInit()) {
        std::puts("SKIP  no display (run under xvfb-run)");
        return 77;
    }
    GLFWwindow* window = ls::test::open_gui_test_window(1280, 800, "widgets", 15.0f);
    if (!window) return 1;

    {
        Scene scene;
        // The pointer over the heatmap's middle, so the screenshot also shows its tooltip.
        glfwSetCursorPos(window, 240, 180);
        constexpr int kFrames = 4;  // layouts settle after the first frame or two
        ls::test::draw_gui_frames(window, kFrames, [&] { scene.draw(); }, [&](int frame) {
            if (frame == kFrames) {
                Pixels px = read_back(window);
                check_pixels(scene, px);
                check(ls::views::save_png(px, png, true).ok(), "screenshot saved to " + png);  // replaces the last run's
            }
        });
        check(glGetError() == GL_NO_ERROR, "no OpenGL error");
    }  // the heatmaps free their textures while the context is alive

    ls::test::close_gui_test_window(window);
    std::printf("%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
