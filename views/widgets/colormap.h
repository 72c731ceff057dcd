// Perceptual colormaps for the heatmaps and histograms: a sequential dark-violet-to-yellow map for
// magnitudes and a diverging blue-white-red map centred on zero for differences, plus a legend.
#pragma once

#include <imgui.h>

namespace ls::views::widgets {

enum class Colormap {
    Sequential,  // t in [0, 1]: dark violet -> blue -> teal -> green -> yellow; lightness rises
    Diverging,   // t in [-1, 1]: blue -> near-white at 0 -> red
};

// Sequential map at t in [0, 1] (clamped). Lightness increases monotonically with t, so the
// brightest cell is always the largest value, also in grayscale screenshots.
ImU32 sequential_color(float t);
// Diverging map at t in [-1, 1] (clamped); t = 0 is near-white, so "no difference" disappears.
ImU32 diverging_color(float t);
// The map's own parameter range: [0, 1] for Sequential, [-1, 1] for Diverging.
float colormap_t_min(Colormap map);
// Color of `value` with the map spread over [lo, hi] (Diverging puts lo at -1 and hi at +1, so a
// symmetric range [-m, m] keeps 0 white). NaN gets a flat gray that is on neither map.
ImU32 colormap_color(Colormap map, float value, float lo, float hi);
inline constexpr ImU32 kNanColor = IM_COL32(128, 128, 128, 255);

// CIE L* (0..100) of an sRGB color; the tests use it to check the sequential map's lightness.
float lightness(ImU32 color);

// A vertical legend: `label` on top, the gradient bar (lo at the bottom, hi at the top) and tick
// labels to its right. Occupies `size` (width x height) as one ImGui item; a width of 0 picks one
// wide enough for the labels.
void draw_colorbar(const char* label, float lo, float hi, Colormap map, ImVec2 size);
// Width draw_colorbar picks for a zero width.
float colorbar_auto_width(const char* label, float lo, float hi);

}  // namespace ls::views::widgets
