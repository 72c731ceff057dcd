// Axis helpers (see axis.h): tick choice, tick labels and the common plot frame.
#include "views/widgets/axis.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ls::views::widgets {

std::vector<double> nice_ticks(double lo, double hi, int max_ticks) {
    std::vector<double> ticks;
    if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi) || max_ticks < 2) return ticks;
    double raw = (hi - lo) / (max_ticks - 1);
    double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
    double step = magnitude;
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
        step = m * magnitude;
        if (step >= raw) break;
    }
    // A tiny epsilon keeps end ticks that land on lo/hi up to rounding.
    double eps = step * 1e-9;
    for (double v = std::ceil((lo - eps) / step) * step; v <= hi + eps; v += step)
        ticks.push_back(std::abs(v) < step * 1e-6 ? 0.0 : v);
    return ticks;
}

std::string format_tick(double v) {
    char buf[32];
    double a = std::abs(v);
    if (v == 0)
        return "0";
    else if (a >= 1e5 || a < 1e-3)
        std::snprintf(buf, sizeof buf, "%.2g", v);
    else
        std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

ImU32 palette::series(int index) {
    static constexpr ImU32 kColors[] = {
        IM_COL32(86, 180, 233, 255),  IM_COL32(230, 159, 0, 255),  IM_COL32(0, 158, 115, 255),
        IM_COL32(204, 121, 167, 255), IM_COL32(240, 228, 66, 255), IM_COL32(213, 94, 0, 255),
        IM_COL32(0, 114, 178, 255),   IM_COL32(200, 200, 200, 255),
    };
    constexpr int n = sizeof kColors / sizeof kColors[0];
    return kColors[((index % n) + n) % n];
}

float PlotFrame::to_px_x(double x) const {
    double t = x_hi > x_lo ? (x - x_lo) / (x_hi - x_lo) : 0.5;
    return static_cast<float>(plot_min.x + t * (plot_max.x - plot_min.x));
}

float PlotFrame::to_px_y(double y) const {
    double t = y_hi > y_lo ? (y - y_lo) / (y_hi - y_lo) : 0.5;
    return static_cast<float>(plot_max.y - t * (plot_max.y - plot_min.y));
}

double PlotFrame::from_px_x(float px) const {
    double w = plot_max.x - plot_min.x;
    return w > 0 ? x_lo + (px - plot_min.x) / w * (x_hi - x_lo) : x_lo;
}

PlotFrame layout_frame(ImVec2 outer_min, ImVec2 outer_max, double x_lo, double x_hi, double y_lo, double y_hi,
                       const char* x_title, const char* y_title) {
    PlotFrame f;
    f.outer_min = outer_min;
    f.outer_max = outer_max;
    f.x_lo = x_lo, f.x_hi = x_hi, f.y_lo = y_lo, f.y_hi = y_hi;
    float line = ImGui::GetTextLineHeight();
    // The widest y tick label decides the left margin, so long numbers never overlap the plot.
    float label_w = 0;
    for (double t : nice_ticks(y_lo, y_hi, 10))
        label_w = std::max(label_w, ImGui::CalcTextSize(format_tick(t).c_str()).x);
    float left = label_w + 8;
    float bottom = line + 6 + (x_title && *x_title ? line + 2 : 0);
    // ImGui 1.86 has no rotated text, so the y title sits above the y axis, read left to right.
    float top = (y_title && *y_title ? line + 4 : line * 0.5f + 2);
    f.plot_min = ImVec2(outer_min.x + left, outer_min.y + top);
    f.plot_max = ImVec2(std::max(f.plot_min.x + 1, outer_max.x - 8), std::max(f.plot_min.y + 1, outer_max.y - bottom));
    return f;
}

void draw_frame(ImDrawList* dl, const PlotFrame& f, const char* x_title, const char* y_title, bool y_log10) {
    float line = ImGui::GetTextLineHeight();
    dl->AddRectFilled(f.plot_min, f.plot_max, palette::kPlotBg);
    // About one tick per two text lines: tall plots get finer steps, short ones stay uncluttered.
    int max_ticks = std::clamp(static_cast<int>((f.plot_max.y - f.plot_min.y) / (line * 2.2f)), 2, 10);
    for (double t : nice_ticks(f.y_lo, f.y_hi, max_ticks)) {
        float y = f.to_px_y(t);
        dl->AddLine(ImVec2(f.plot_min.x, y), ImVec2(f.plot_max.x, y), palette::kGrid);
        dl->AddLine(ImVec2(f.plot_min.x - 4, y), ImVec2(f.plot_min.x, y), palette::kAxis);
        std::string label = y_log10 ? "1e" + format_tick(t) : format_tick(t);
        ImVec2 size = ImGui::CalcTextSize(label.c_str());
        dl->AddText(ImVec2(f.plot_min.x - 6 - size.x, y - size.y * 0.5f), palette::kText, label.c_str());
    }
    dl->AddLine(ImVec2(f.plot_min.x, f.plot_max.y), f.plot_max, palette::kAxis);
    dl->AddLine(f.plot_min, ImVec2(f.plot_min.x, f.plot_max.y), palette::kAxis);
    if (x_title && *x_title) {
        ImVec2 size = ImGui::CalcTextSize(x_title);
        float cx = (f.plot_min.x + f.plot_max.x - size.x) * 0.5f;
        dl->AddText(ImVec2(cx, f.plot_max.y + line + 6), palette::kText, x_title);
    }
    if (y_title && *y_title) dl->AddText(ImVec2(f.outer_min.x, f.outer_min.y), palette::kText, y_title);
}

void draw_x_tick(ImDrawList* dl, const PlotFrame& f, float px, const std::string& label) {
    dl->AddLine(ImVec2(px, f.plot_max.y), ImVec2(px, f.plot_max.y + 4), palette::kAxis);
    dl->AddLine(ImVec2(px, f.plot_min.y), ImVec2(px, f.plot_max.y), palette::kGrid);
    ImVec2 size = ImGui::CalcTextSize(label.c_str());
    float x = std::clamp(px - size.x * 0.5f, f.outer_min.x, f.outer_max.x - size.x);
    dl->AddText(ImVec2(x, f.plot_max.y + 5), palette::kText, label.c_str());
}

}  // namespace ls::views::widgets
