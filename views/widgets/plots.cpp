// Line plot, tensor-stats histogram and divergence waterfall (see plots.h), on the shared frame
// from axis.h so that ticks, titles and legends look the same in every panel.
#include "views/widgets/plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "views/widgets/axis.h"

namespace ls::views::widgets {

namespace {

ImU32 with_alpha(ImU32 color, int alpha) {
    return (color & ~IM_COL32_A_MASK) | (static_cast<ImU32>(alpha) << IM_COL32_A_SHIFT);
}

// Reserves the widget's rectangle as one item (so the caller's layout flows past it) and makes
// it hoverable and clickable.
struct WidgetRect {
    ImVec2 min, max;
    bool hovered = false, clicked = false;
};

WidgetRect reserve(const char* id, ImVec2 size) {
    if (size.x <= 0) size.x = std::max(50.0f, ImGui::GetContentRegionAvail().x);
    if (size.y <= 0) size.y = std::max(50.0f, ImGui::GetContentRegionAvail().y);
    WidgetRect r;
    r.min = ImGui::GetCursorScreenPos();
    r.max = ImVec2(r.min.x + size.x, r.min.y + size.y);
    r.clicked = ImGui::InvisibleButton(id, size);
    r.hovered = ImGui::IsItemHovered();
    return r;
}

// Legend entries stacked in the plot's top-right corner on a dark backing so lines under it
// don't make it unreadable.
struct LegendEntry {
    std::string text;
    ImU32 color;
};

void draw_legend(ImDrawList* dl, const PlotFrame& f, const std::vector<LegendEntry>& entries) {
    if (entries.empty()) return;
    float line = ImGui::GetTextLineHeight();
    float w = 0;
    for (const auto& e : entries) w = std::max(w, ImGui::CalcTextSize(e.text.c_str()).x);
    ImVec2 max(f.plot_max.x - 4, f.plot_min.y + 4 + entries.size() * line + 4);
    ImVec2 min(max.x - w - line - 10, f.plot_min.y + 4);
    dl->AddRectFilled(min, max, IM_COL32(10, 10, 14, 200), 3.0f);
    float y = min.y + 2;
    for (const auto& e : entries) {
        dl->AddRectFilled(ImVec2(min.x + 4, y + line * 0.3f), ImVec2(min.x + 4 + line * 0.6f, y + line * 0.7f),
                          e.color);
        dl->AddText(ImVec2(min.x + 8 + line * 0.6f, y), palette::kText, e.text.c_str());
        y += line;
    }
}

void dashed_hline(ImDrawList* dl, const PlotFrame& f, float y, ImU32 color) {
    for (float x = f.plot_min.x; x < f.plot_max.x; x += 8)
        dl->AddLine(ImVec2(x, y), ImVec2(std::min(x + 4, f.plot_max.x), y), color, 1.0f);
}

}  // namespace

int draw_line_plot(const char* id, std::span<const LineSeries> series, const LinePlotOptions& options,
                   int* hovered_point) {
    WidgetRect r = reserve(id, options.size);
    auto x_at = [](const LineSeries& s, size_t i) { return s.x.empty() ? static_cast<float>(i) : s.x[i]; };
    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    for (const auto& s : series) {
        size_t n = s.x.empty() ? s.y.size() : std::min(s.x.size(), s.y.size());
        for (size_t i = 0; i < n; ++i) {
            if (!std::isfinite(s.y[i])) continue;
            x_lo = std::min<double>(x_lo, x_at(s, i)), x_hi = std::max<double>(x_hi, x_at(s, i));
            y_lo = std::min<double>(y_lo, s.y[i]), y_hi = std::max<double>(y_hi, s.y[i]);
        }
    }
    bool has_data = x_lo <= x_hi;
    if (!has_data) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
    if (std::isfinite(options.warn_above)) y_lo = std::min<double>(y_lo, options.warn_above),
                                           y_hi = std::max<double>(y_hi, options.warn_above);
    double pad = (y_hi - y_lo) * 0.06 + (y_hi == y_lo ? std::max(1e-6, std::abs(y_hi) * 0.1) : 0);
    y_lo = std::isfinite(options.y_min) ? options.y_min : y_lo - pad;
    y_hi = std::isfinite(options.y_max) ? options.y_max : y_hi + pad;
    if (x_hi == x_lo) x_lo -= 0.5, x_hi += 0.5;

    PlotFrame f = layout_frame(r.min, r.max, x_lo, x_hi, y_lo, y_hi, options.x_title, options.y_title);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    draw_frame(dl, f, options.x_title, options.y_title);
    int max_x_ticks = std::max(2, static_cast<int>((f.plot_max.x - f.plot_min.x) / 70));
    for (double t : nice_ticks(x_lo, x_hi, max_x_ticks))
        if (!options.integer_x || t == std::floor(t)) draw_x_tick(dl, f, f.to_px_x(t), format_tick(t));
    if (!has_data) {
        dl->AddText(ImVec2(f.plot_min.x + 8, f.plot_min.y + 8), palette::kAxis, "no data");
        return -1;
    }

    dl->PushClipRect(f.plot_min, f.plot_max, true);
    bool warn = std::isfinite(options.warn_above);
    if (warn) dashed_hline(dl, f, f.to_px_y(options.warn_above), with_alpha(palette::kWarn, 160));
    int n_warn_points = 0;
    std::vector<ImVec2> run;
    for (size_t si = 0; si < series.size(); ++si) {
        const LineSeries& s = series[si];
        ImU32 color = s.color ? s.color : palette::series(static_cast<int>(si));
        size_t n = s.x.empty() ? s.y.size() : std::min(s.x.size(), s.y.size());
        run.clear();
        auto flush = [&] {
            if (run.size() == 1) dl->AddCircleFilled(run[0], 2.0f, color);
            if (run.size() > 1) dl->AddPolyline(run.data(), static_cast<int>(run.size()), color, 0, 1.5f);
            run.clear();
        };
        for (size_t i = 0; i < n; ++i) {
            if (!std::isfinite(s.y[i])) {
                flush();
                continue;
            }
            run.emplace_back(f.to_px_x(x_at(s, i)), f.to_px_y(s.y[i]));
        }
        flush();
        if (!warn) continue;
        for (size_t i = 0; i < n; ++i) {
            if (!(s.y[i] > options.warn_above)) continue;
            ++n_warn_points;
            ImVec2 p(f.to_px_x(x_at(s, i)), f.to_px_y(s.y[i]));
            dl->AddCircleFilled(p, 3.5f, palette::kWarn);
            dl->AddCircle(p, 3.5f, IM_COL32(0, 0, 0, 255));
        }
    }

    // Nearest point in screen distance: with many series stacked, x alone would be ambiguous.
    int best_series = -1, best_point = -1;
    if (r.hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        float best = 24.0f * 24.0f;
        for (size_t si = 0; si < series.size(); ++si) {
            const LineSeries& s = series[si];
            size_t n = s.x.empty() ? s.y.size() : std::min(s.x.size(), s.y.size());
            for (size_t i = 0; i < n; ++i) {
                if (!std::isfinite(s.y[i])) continue;
                float dx = f.to_px_x(x_at(s, i)) - m.x, dy = f.to_px_y(s.y[i]) - m.y;
                if (dx * dx + dy * dy < best) best = dx * dx + dy * dy, best_series = int(si), best_point = int(i);
            }
        }
    }
    if (best_series >= 0) {
        const LineSeries& s = series[best_series];
        ImVec2 p(f.to_px_x(x_at(s, best_point)), f.to_px_y(s.y[best_point]));
        dl->AddCircle(p, 5.0f, palette::kText, 0, 1.5f);
    }
    dl->PopClipRect();

    std::vector<LegendEntry> legend;
    for (size_t si = 0; si < series.size() && si < 12; ++si)
        legend.push_back({series[si].name, series[si].color ? series[si].color : palette::series(int(si))});
    if (series.size() > 12) legend.push_back({"+" + std::to_string(series.size() - 12) + " more", palette::kAxis});
    if (n_warn_points > 0)
        legend.push_back({std::to_string(n_warn_points) + " points > " + format_tick(options.warn_above), palette::kWarn});
    draw_legend(dl, f, legend);

    if (best_series >= 0) {
        const LineSeries& s = series[best_series];
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(s.name.c_str());
        ImGui::Text("%s = %.6g", *options.x_title ? options.x_title : "x", x_at(s, best_point));
        ImGui::Text("%s = %.6g", *options.y_title ? options.y_title : "y", s.y[best_point]);
        if (warn && s.y[best_point] > options.warn_above)
            ImGui::TextColored(ImColor(palette::kWarn), "above %.6g", options.warn_above);
        ImGui::EndTooltip();
    }
    if (hovered_point) *hovered_point = best_point;
    return best_series;
}

namespace {

// One histogram resampled onto the shared axis, as shares of the tensor's finite values.
std::vector<double> resample_shares(const ls::TensorStats& s, double scale, double u_lo, double u_hi) {
    std::vector<double> out(kHistogramBins, 0.0);
    int64_t total = 0;
    for (int64_t c : s.hist) total += c;
    if (total == 0) return out;
    double width = (u_hi - u_lo) / kHistogramBins;
    for (int k = 0; k < kHistogramBins; ++k) {
        if (s.hist[k] == 0) continue;
        double share = static_cast<double>(s.hist[k]) / total;
        double a = (std::asinh(histogram_bin_edge(s, k) / scale) - u_lo) / width;
        double b = (std::asinh(histogram_bin_edge(s, k + 1) / scale) - u_lo) / width;
        if (b - a < 1e-9) {  // a single-valued tensor: the whole share lands in one bin
            out[std::clamp(static_cast<int>(a), 0, kHistogramBins - 1)] += share;
            continue;
        }
        // Spread the bin over the shared bins it overlaps, assuming it is flat on the asinh axis.
        for (int j = std::max(0, int(std::floor(a))); j < std::min(kHistogramBins, int(std::ceil(b))); ++j) {
            double overlap = std::min<double>(b, j + 1) - std::max<double>(a, j);
            if (overlap > 0) out[j] += share * overlap / (b - a);
        }
    }
    return out;
}

int64_t outlier_count(const ls::TensorStats& s, float outlier_rms) {
    double limit = outlier_rms * s.rms;
    int64_t n = 0;
    for (int k = 0; k < kHistogramBins; ++k) {
        double centre = 0.5 * (histogram_bin_edge(s, k) + histogram_bin_edge(s, k + 1));
        if (limit > 0 && std::abs(centre) > limit) n += s.hist[k];
    }
    return n;
}

}  // namespace

void draw_bar_histogram(const char* id, const ls::TensorStats& ours, const ls::TensorStats* reference,
                        const HistogramOptions& options) {
    WidgetRect r = reserve(id, options.size);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ls::TensorStats* both[2] = {&ours, reference};
    double scale = 0, v_lo = INFINITY, v_hi = -INFINITY;
    for (const ls::TensorStats* s : both) {
        if (!s || s->count - s->nan_count - s->inf_count <= 0) continue;
        scale = std::max<double>(scale, s->hist_scale);
        v_lo = std::min<double>(v_lo, s->min), v_hi = std::max<double>(v_hi, s->max);
    }
    bool has_data = v_lo <= v_hi;
    if (!(scale > 0)) scale = 1;
    if (!has_data) v_lo = -1, v_hi = 1;
    double u_lo = std::asinh(v_lo / scale), u_hi = std::asinh(v_hi / scale);
    if (!(u_hi > u_lo)) u_lo -= 0.5, u_hi += 0.5;

    std::vector<double> shares[2];
    double min_share = 1, max_share = 0;
    for (int i = 0; i < 2; ++i) {
        if (!both[i]) continue;
        shares[i] = resample_shares(*both[i], scale, u_lo, u_hi);
        for (double v : shares[i])
            if (v > 0) min_share = std::min(min_share, v), max_share = std::max(max_share, v);
    }
    if (!(max_share > 0)) min_share = 0.01, max_share = 1;
    // The y axis is in percent: log10 of it when log_counts, so a single outlier among millions
    // of values still gets a visible bar above the floor.
    double y_lo, y_hi;
    if (options.log_counts) {
        y_lo = std::floor(std::log10(min_share * 100)) - 0.5;
        y_hi = std::log10(max_share * 100) + 0.2;
    } else {
        y_lo = 0, y_hi = max_share * 100 * 1.08;
    }
    auto bar_y = [&](double share) { return options.log_counts ? std::log10(share * 100) : share * 100; };

    const char* y_title = options.log_counts ? "% of finite values (log)" : "% of finite values";
    PlotFrame f = layout_frame(r.min, r.max, u_lo, u_hi, y_lo, y_hi, options.title, y_title);
    draw_frame(dl, f, options.title, y_title, options.log_counts);

    // X ticks at round values on the asinh axis: 0 first, then powers of ten, then 2x and 5x,
    // each kept only where its label does not collide with one already placed.
    std::vector<std::pair<float, float>> placed;  // label spans in px
    auto try_tick = [&](double v) {
        if (v < v_lo || v > v_hi) return;
        float px = f.to_px_x(std::asinh(v / scale));
        std::string label = format_tick(v);
        float w = ImGui::CalcTextSize(label.c_str()).x;
        float a = px - w / 2 - 6, b = px + w / 2 + 6;
        for (auto [pa, pb] : placed)
            if (a < pb && b > pa) return;
        placed.emplace_back(a, b);
        draw_x_tick(dl, f, px, label);
    };
    try_tick(0);
    for (double m : {1.0, 2.0, 5.0})
        for (int e = 6; e >= -6; --e)
            for (double sign : {1.0, -1.0}) try_tick(sign * m * std::pow(10.0, e));

    // Outlier zones: tinted where |v| > outlier_rms * rms of our tensor.
    double limit = options.outlier_rms * ours.rms;
    if (has_data && limit > 0) {
        float left = f.to_px_x(std::asinh(-limit / scale)), right = f.to_px_x(std::asinh(limit / scale));
        ImU32 tint = with_alpha(palette::kWarn, 22);
        if (left > f.plot_min.x) dl->AddRectFilled(f.plot_min, ImVec2(left, f.plot_max.y), tint);
        if (right < f.plot_max.x) dl->AddRectFilled(ImVec2(right, f.plot_min.y), f.plot_max, tint);
    }

    const ImU32 colors[2] = {palette::series(0), palette::series(1)};
    float bin_px = (f.plot_max.x - f.plot_min.x) / kHistogramBins;
    for (int i = 1; i >= 0; --i) {  // the reference underneath, ours on top
        if (shares[i].empty()) continue;
        for (int j = 0; j < kHistogramBins; ++j) {
            if (shares[i][j] <= 0) continue;
            float x0 = f.plot_min.x + j * bin_px, x1 = x0 + bin_px;
            float y = std::max(f.plot_min.y, f.to_px_y(std::max(bar_y(shares[i][j]), y_lo)));
            dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, f.plot_max.y), with_alpha(colors[i], i == 0 ? 140 : 110));
            dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), colors[i], 1.5f);
            double centre = std::sinh(f.x_lo + (j + 0.5) * (f.x_hi - f.x_lo) / kHistogramBins) * scale;
            if (i == 0 && limit > 0 && std::abs(centre) > limit)
                dl->AddTriangleFilled(ImVec2((x0 + x1) / 2, f.plot_max.y - 7), ImVec2((x0 + x1) / 2 - 4, f.plot_max.y),
                                      ImVec2((x0 + x1) / 2 + 4, f.plot_max.y), palette::kWarn);
        }
    }
    if (!has_data) dl->AddText(ImVec2(f.plot_min.x + 8, f.plot_min.y + 8), palette::kAxis, "no finite values");

    std::vector<LegendEntry> legend;
    auto describe = [&](const ls::TensorStats& s, const char* name) {
        std::string text = name;
        if (s.nan_count || s.inf_count)
            text += "  NaN " + std::to_string(s.nan_count) + "  Inf " + std::to_string(s.inf_count);
        int64_t outliers = outlier_count(s, options.outlier_rms);
        if (outliers) text += "  " + std::to_string(outliers) + " beyond " + format_tick(options.outlier_rms) + " rms";
        return text;
    };
    legend.push_back({describe(ours, options.ours_name), colors[0]});
    if (reference) legend.push_back({describe(*reference, options.reference_name), colors[1]});
    if (ours.nan_count || ours.inf_count || (reference && (reference->nan_count || reference->inf_count)))
        legend.push_back({"non-finite values present", palette::kBad});
    draw_legend(dl, f, legend);

    if (r.hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int j = static_cast<int>((m.x - f.plot_min.x) / bin_px);
        if (j >= 0 && j < kHistogramBins && m.y >= f.plot_min.y && m.y <= f.plot_max.y) {
            double a = std::sinh(f.x_lo + j * (f.x_hi - f.x_lo) / kHistogramBins) * scale;
            double b = std::sinh(f.x_lo + (j + 1) * (f.x_hi - f.x_lo) / kHistogramBins) * scale;
            dl->AddRect(ImVec2(f.plot_min.x + j * bin_px, f.plot_min.y),
                        ImVec2(f.plot_min.x + (j + 1) * bin_px, f.plot_max.y), palette::kText);
            ImGui::BeginTooltip();
            ImGui::Text("values in [%.4g, %.4g)", a, b);
            ImGui::Text("%s: %.4g%%", options.ours_name, shares[0][j] * 100);
            if (reference) ImGui::Text("%s: %.4g%%", options.reference_name, shares[1][j] * 100);
            ImGui::EndTooltip();
        }
    }
}

int draw_waterfall(const char* id, std::span<const float> values, std::span<const EventStatus> status,
                   const WaterfallOptions& options) {
    WidgetRect r = reserve(id, options.size);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    int n = static_cast<int>(values.size());
    auto status_of = [&](int i) { return i < static_cast<int>(status.size()) ? status[i] : EventStatus::Ok; };
    auto color_of = [](EventStatus s) {
        return s == EventStatus::Diverged ? palette::kBad : s == EventStatus::Warn ? palette::kWarn : palette::kOk;
    };
    double y_hi = options.floor + 1;
    for (float v : values)
        if (std::isfinite(v)) y_hi = std::max<double>(y_hi, v);
    for (float level : {options.warn_level, options.diverged_level})
        if (std::isfinite(level)) y_hi = std::max<double>(y_hi, level);
    y_hi += (y_hi - options.floor) * 0.08;
    PlotFrame f = layout_frame(r.min, r.max, 0, std::max(n, 1), options.floor, y_hi, options.x_title, options.y_title);
    draw_frame(dl, f, options.x_title, options.y_title);
    int max_x_ticks = std::max(2, static_cast<int>((f.plot_max.x - f.plot_min.x) / 70));
    for (double t : nice_ticks(0, std::max(n - 1, 1), max_x_ticks))
        if (t == std::floor(t)) draw_x_tick(dl, f, f.to_px_x(t + 0.5), format_tick(t));
    if (n == 0) {
        dl->AddText(ImVec2(f.plot_min.x + 8, f.plot_min.y + 8), palette::kAxis, "no events compared yet");
        return -1;
    }

    // A NaN metric means the comparison itself broke (non-finite output): a full-height bar.
    auto height_of = [&](int i) { return std::isfinite(values[i]) ? static_cast<double>(values[i]) : y_hi; };
    auto worse = [&](int a, int b) {  // which of two events a pixel column should show
        if (status_of(a) != status_of(b)) return status_of(a) > status_of(b) ? a : b;
        return height_of(a) >= height_of(b) ? a : b;
    };
    float width = f.plot_max.x - f.plot_min.x;
    int columns = std::min(n, std::max(1, static_cast<int>(width)));
    std::vector<int> shown(columns, -1);  // event drawn in each column
    for (int i = 0; i < n; ++i) {
        int c = std::min(columns - 1, static_cast<int>(static_cast<int64_t>(i) * columns / n));
        shown[c] = shown[c] < 0 ? i : worse(shown[c], i);
    }
    float col_px = width / columns;
    float gap = col_px > 4 ? 1.0f : 0.0f;
    for (int c = 0; c < columns; ++c) {
        int i = shown[c];
        if (i < 0) continue;
        float x0 = f.plot_min.x + c * col_px, x1 = x0 + col_px - gap;
        float y = f.to_px_y(std::clamp(height_of(i), static_cast<double>(options.floor), y_hi));
        dl->AddRectFilled(ImVec2(x0, y), ImVec2(std::max(x1, x0 + 1), f.plot_max.y), color_of(status_of(i)));
    }
    if (std::isfinite(options.warn_level)) dashed_hline(dl, f, f.to_px_y(options.warn_level), palette::kWarn);
    if (std::isfinite(options.diverged_level)) dashed_hline(dl, f, f.to_px_y(options.diverged_level), palette::kBad);

    auto column_of = [&](int i) { return std::min(columns - 1, static_cast<int>(static_cast<int64_t>(i) * columns / n)); };
    if (options.selected >= 0 && options.selected < n) {
        float x0 = f.plot_min.x + column_of(options.selected) * col_px;
        dl->AddRect(ImVec2(x0 - 1, f.plot_min.y), ImVec2(x0 + std::max(col_px, 2.0f) + 1, f.plot_max.y), palette::kText,
                    0, 0, 1.5f);
    }
    if (options.first_divergent >= 0 && options.first_divergent < n) {
        float x = f.plot_min.x + (column_of(options.first_divergent) + 0.5f) * col_px;
        dl->AddLine(ImVec2(x, f.plot_min.y), ImVec2(x, f.plot_max.y), palette::kMarker, 2.0f);
        std::string label = "first divergence: #" + std::to_string(options.first_divergent);
        float w = ImGui::CalcTextSize(label.c_str()).x;
        float lx = x + 4 + w < f.plot_max.x ? x + 4 : x - 4 - w;
        dl->AddText(ImVec2(lx, f.plot_min.y + 2), palette::kMarker, label.c_str());
    }
    draw_legend(dl, f, {{"ok", palette::kOk}, {"warn", palette::kWarn}, {"diverged", palette::kBad}});

    int hovered = -1;
    if (r.hovered) {
        ImVec2 m = ImGui::GetIO().MousePos;
        int c = static_cast<int>((m.x - f.plot_min.x) / col_px);
        if (c >= 0 && c < columns && m.y >= f.plot_min.y && m.y <= f.plot_max.y) hovered = shown[c];
    }
    if (hovered >= 0) {
        ImGui::BeginTooltip();
        ImGui::Text("event #%d", hovered);
        if (options.event_label) ImGui::TextUnformatted(options.event_label(hovered).c_str());
        ImGui::Text("%s = %.4g", options.y_title, values[hovered]);
        EventStatus s = status_of(hovered);
        ImGui::TextColored(ImColor(color_of(s)), "%s",
                           s == EventStatus::Diverged ? "diverged" : s == EventStatus::Warn ? "warn" : "ok");
        ImGui::EndTooltip();
    }
    return r.clicked ? hovered : -1;
}

}  // namespace ls::views::widgets
