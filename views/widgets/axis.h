// Axis helpers shared by the widgets: "nice" tick positions, compact tick labels, and the frame
// (ticks, labels, axis titles) that every plot draws the same way so they read alike.
#pragma once

#include <imgui.h>

#include <string>
#include <vector>

namespace ls::views::widgets {

// Ticks at 1/2/5 x 10^k steps covering [lo, hi], at most about `max_ticks` of them.
std::vector<double> nice_ticks(double lo, double hi, int max_ticks);

// Short label for a tick or a legend: "0", "0.25", "1.2e-05", "3.5e+04".
std::string format_tick(double v);

// Colors the widgets share, chosen to stay readable on ImGui's dark style.
namespace palette {
inline constexpr ImU32 kAxis = IM_COL32(170, 170, 180, 255);
inline constexpr ImU32 kGrid = IM_COL32(255, 255, 255, 28);
inline constexpr ImU32 kText = IM_COL32(220, 220, 225, 255);
inline constexpr ImU32 kPlotBg = IM_COL32(20, 20, 26, 255);
inline constexpr ImU32 kOk = IM_COL32(90, 180, 110, 255);
inline constexpr ImU32 kWarn = IM_COL32(240, 180, 40, 255);
inline constexpr ImU32 kBad = IM_COL32(235, 70, 60, 255);
inline constexpr ImU32 kMarker = IM_COL32(255, 90, 220, 255);
// Series colors: distinct hues that survive the usual color-vision deficiencies reasonably.
ImU32 series(int index);
}  // namespace palette

// A plot area inside a widget rectangle, with room left for tick labels and axis titles.
struct PlotFrame {
    ImVec2 outer_min, outer_max;  // the widget's rectangle
    ImVec2 plot_min, plot_max;    // where data is drawn
    double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;

    float to_px_x(double x) const;
    float to_px_y(double y) const;
    double from_px_x(float px) const;
};

// Lays out a frame in [outer_min, outer_max] with room for y tick labels as wide as `y_label_chars`
// characters, and draws background, grid, y ticks, axis titles. X ticks are drawn by the caller
// (line plots use nice_ticks, the histogram its asinh axis) through draw_x_tick.
PlotFrame layout_frame(ImVec2 outer_min, ImVec2 outer_max, double x_lo, double x_hi, double y_lo, double y_hi,
                       const char* x_title, const char* y_title);
void draw_frame(ImDrawList* dl, const PlotFrame& f, const char* x_title, const char* y_title, bool y_log10 = false);
void draw_x_tick(ImDrawList* dl, const PlotFrame& f, float px, const std::string& label);

}  // namespace ls::views::widgets
