// Plots drawn with ImDrawList (the system ImGui has no ImPlot): line plots of per-head/per-position
// series, the tensor-stats histogram (ours over the reference) and the divergence waterfall.
#pragma once

#include <imgui.h>

#include <cmath>
#include <functional>
#include <span>
#include <string>

#include "kernels/backend.h"

namespace ls::views::widgets {

// One line: y[i] at x[i] (or at i when x is empty). NaN points break the line.
struct LineSeries {
    std::string name;
    std::span<const float> y;
    std::span<const float> x;  // empty: 0, 1, 2, ...
    ImU32 color = 0;           // 0: the palette's color for the series' index
};

struct LinePlotOptions {
    const char* x_title = "";
    const char* y_title = "";
    ImVec2 size = ImVec2(0, 200);  // 0 width: the available width
    // Points above this are drawn as warning-colored dots and listed in the legend (the case of
    // a head whose |q| sits at ~60 when every other head is near 8). NaN: no threshold.
    float warn_above = NAN;
    // Fixed y range; NaN: from the data (always including warn_above, so the line shows).
    float y_min = NAN, y_max = NAN;
    // The x values count things (heads, positions): ticks only at whole numbers.
    bool integer_x = false;
};

// Returns the index of the series whose point is nearest to the mouse (-1 when not hovered) and
// sets *hovered_point to that point's index when given.
int draw_line_plot(const char* id, std::span<const LineSeries> series, const LinePlotOptions& options,
                   int* hovered_point = nullptr);

struct HistogramOptions {
    const char* title = "values";
    ImVec2 size = ImVec2(0, 180);
    bool log_counts = true;  // a log y axis, so the outlier bins (a handful of values) are visible
    // Values beyond this many rms count as outliers: their bins get a warning tick under the axis
    // and the legend reports how many values they hold.
    float outlier_rms = 6.0f;
    const char* ours_name = "ours";
    const char* reference_name = "reference";
};

// The 64-bin asinh histogram of ls::TensorStats; `reference` (optional) is overlaid. Both are
// resampled onto one shared asinh axis (the wider range, the larger scale) so they line up even
// when their ranges differ; bar heights are the share of each tensor's finite values.
void draw_bar_histogram(const char* id, const ls::TensorStats& ours, const ls::TensorStats* reference,
                        const HistogramOptions& options = {});

enum class EventStatus : uint8_t { Ok, Warn, Diverged };

struct WaterfallOptions {
    const char* x_title = "event";
    const char* y_title = "log10 NMSE";
    ImVec2 size = ImVec2(0, 160);
    // Bars rise from this floor (log10 NMSE of an exact match would be -inf).
    float floor = -12.0f;
    float warn_level = NAN, diverged_level = NAN;  // dashed reference lines when finite
    int first_divergent = -1;                      // a vertical marker with its label
    int selected = -1;                             // the cursor event, outlined
    std::function<std::string(int event)> event_label;  // tooltip text ("layer 3 attn_out, token 5")
};

// One bar per event, colored by status. When there are more events than pixels, each pixel column
// shows its worst event. Returns the clicked event's index, or -1.
int draw_waterfall(const char* id, std::span<const float> values, std::span<const EventStatus> status,
                   const WaterfallOptions& options = {});

}  // namespace ls::views::widgets
