// Colormaps and the colorbar legend (see colormap.h). Control points were picked by hand for a
// steady rise in lightness and interpolated linearly in sRGB; the test checks the lightness.
#include "views/widgets/colormap.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "views/widgets/axis.h"

namespace ls::views::widgets {

namespace {

struct Stop {
    float t;
    float r, g, b;  // 0..255 sRGB
};

// Dark violet through blue, teal and green to yellow. Each step raises L* by roughly the same
// amount (about 10-12 units), which is what makes equal value steps look equal.
constexpr Stop kSequential[] = {
    {0.000f, 70, 6, 90},     {0.125f, 72, 40, 122},  {0.250f, 62, 76, 140},  {0.375f, 48, 108, 144},
    {0.500f, 36, 140, 142},  {0.625f, 38, 170, 130}, {0.750f, 88, 198, 102}, {0.875f, 168, 218, 56},
    {1.000f, 250, 232, 40},
};

// Blue to near-white to red, symmetric in lightness so +d and -d look equally strong.
constexpr Stop kDiverging[] = {
    {-1.00f, 35, 70, 160},   {-0.50f, 110, 155, 215}, {0.00f, 245, 245, 245},
    {0.50f, 225, 130, 105},  {1.00f, 170, 25, 40},
};

template <size_t N>
ImU32 interpolate(const Stop (&stops)[N], float t) {
    if (!(t >= stops[0].t)) t = stops[0].t;  // also catches NaN
    if (t >= stops[N - 1].t) t = stops[N - 1].t;
    size_t i = 1;
    while (i < N - 1 && stops[i].t < t) ++i;
    const Stop& a = stops[i - 1];
    const Stop& b = stops[i];
    float f = (t - a.t) / (b.t - a.t);
    auto mix = [f](float x, float y) { return static_cast<int>(std::lround(x + (y - x) * f)); };
    return IM_COL32(mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b), 255);
}

double srgb_to_linear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }

}  // namespace

ImU32 sequential_color(float t) { return interpolate(kSequential, t); }
ImU32 diverging_color(float t) { return interpolate(kDiverging, t); }

float colormap_t_min(Colormap map) { return map == Colormap::Diverging ? -1.0f : 0.0f; }

ImU32 colormap_color(Colormap map, float value, float lo, float hi) {
    if (std::isnan(value)) return kNanColor;
    float t = hi > lo ? (value - lo) / (hi - lo) : 0.5f;
    if (map == Colormap::Diverging) return diverging_color(t * 2.0f - 1.0f);
    return sequential_color(t);
}

float lightness(ImU32 color) {
    double r = srgb_to_linear(((color >> IM_COL32_R_SHIFT) & 0xFF) / 255.0);
    double g = srgb_to_linear(((color >> IM_COL32_G_SHIFT) & 0xFF) / 255.0);
    double b = srgb_to_linear(((color >> IM_COL32_B_SHIFT) & 0xFF) / 255.0);
    double y = 0.2126 * r + 0.7152 * g + 0.0722 * b;  // relative luminance (D65)
    double f = y > 216.0 / 24389.0 ? std::cbrt(y) : (24389.0 / 27.0 * y + 16.0) / 116.0;
    return static_cast<float>(116.0 * f - 16.0);
}

float colorbar_auto_width(const char* label, float lo, float hi) {
    float w = 0;
    for (double t : nice_ticks(lo, hi, 6)) w = std::max(w, ImGui::CalcTextSize(format_tick(t).c_str()).x);
    float bar = ImGui::GetTextLineHeight();
    return std::max(bar + 6 + w, label ? ImGui::CalcTextSize(label).x : 0.0f) + 2;
}

void draw_colorbar(const char* label, float lo, float hi, Colormap map, ImVec2 size) {
    if (size.x <= 0) size.x = colorbar_auto_width(label, lo, hi);
    ImVec2 origin = ImGui::GetCursorScreenPos();
    ImGui::Dummy(size);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    float line = ImGui::GetTextLineHeight();
    float bar_w = line;
    float top = origin.y + (label && *label ? line + 4 : line * 0.5f);
    float bottom = origin.y + size.y - line * 0.5f;
    if (label && *label) dl->AddText(origin, palette::kText, label);
    if (bottom <= top) return;
    // The gradient as thin vertically-interpolated slices; 32 is smooth at any legend height.
    constexpr int kSlices = 32;
    float t0 = colormap_t_min(map);
    for (int i = 0; i < kSlices; ++i) {
        float a = static_cast<float>(i) / kSlices, b = static_cast<float>(i + 1) / kSlices;
        ImU32 ca = map == Colormap::Diverging ? diverging_color(t0 + a * 2) : sequential_color(a);
        ImU32 cb = map == Colormap::Diverging ? diverging_color(t0 + b * 2) : sequential_color(b);
        float ya = bottom - a * (bottom - top), yb = bottom - b * (bottom - top);
        dl->AddRectFilledMultiColor(ImVec2(origin.x, yb), ImVec2(origin.x + bar_w, ya), cb, cb, ca, ca);
    }
    dl->AddRect(ImVec2(origin.x, top), ImVec2(origin.x + bar_w, bottom), palette::kAxis);
    if (!(hi > lo)) return;
    int max_ticks = std::clamp(static_cast<int>((bottom - top) / (line * 1.6f)), 2, 8);
    for (double t : nice_ticks(lo, hi, max_ticks)) {
        float y = static_cast<float>(bottom - (t - lo) / (hi - lo) * (bottom - top));
        dl->AddLine(ImVec2(origin.x + bar_w, y), ImVec2(origin.x + bar_w + 4, y), palette::kAxis);
        dl->AddText(ImVec2(origin.x + bar_w + 6, y - line * 0.5f), palette::kText, format_tick(t).c_str());
    }
}

}  // namespace ls::views::widgets
