// A float matrix (attention query x key, |ours - reference|, ...) drawn as a colormapped OpenGL
// texture with a legend and an exact-value tooltip; a thumbnail form for layer x head grids.
#pragma once

#include <imgui.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "views/widgets/colormap.h"

namespace ls::views::widgets {

enum class HeatmapRange {
    ZeroToMax,   // [0, max]: probabilities, magnitudes
    Symmetric,   // [-m, m] with m = max |v|: signed differences, zero stays at the map's middle
    Fixed,       // [fixed_lo, fixed_hi], e.g. [0, 1] so layers compare at one scale
};

class Heatmap {
public:
    Heatmap() = default;
    ~Heatmap();
    Heatmap(const Heatmap&) = delete;
    Heatmap& operator=(const Heatmap&) = delete;

    // Copies a row-major (rows, cols) matrix. `version` is the caller's change counter: the same
    // version again is a no-op, so panels may call this every frame with their snapshot's version.
    void set(const float* values, int rows, int cols, uint64_t version);
    void clear();
    bool empty() const { return rows_ == 0 || cols_ == 0; }
    int rows() const { return rows_; }
    int cols() const { return cols_; }
    float value(int row, int col) const { return values_[static_cast<size_t>(row) * cols_ + col]; }
    // The value range the colors currently span (from `range`, the data, or fixed_lo/fixed_hi).
    float range_lo() const;
    float range_hi() const;

    // Appearance; changing these re-colors the texture on the next draw.
    Colormap map = Colormap::Sequential;
    HeatmapRange range = HeatmapRange::ZeroToMax;
    float fixed_lo = 0, fixed_hi = 1;
    std::string value_name = "value";  // legend title and tooltip ("p", "|diff|")
    std::string row_name = "row";      // axis titles in the tooltip and caption ("query", "key")
    std::string col_name = "col";
    // Optional labels for the tooltip (token pieces, head names); empty functions show indices only.
    std::function<std::string(int row)> row_label;
    std::function<std::string(int col)> col_label;

    // The image scaled to `size` (nearest neighbour, so each cell stays a crisp block), a legend to
    // its right and a caption below. `size` covers image and legend; 0 in a component means "all
    // the available room". Returns true when a cell was clicked; hovered_cell()/clicked cell give it.
    bool draw(const char* id, ImVec2 size = ImVec2(0, 0));
    // A small image without legend or caption, framed, for grids of layer x head thumbnails; the
    // tooltip still works. Returns true when clicked. `selected` draws a highlight frame.
    bool draw_thumbnail(const char* id, ImVec2 size, bool selected = false);

    // The cell under the mouse during the last draw (-1 when none) and the image's screen rect.
    int hovered_row() const { return hovered_row_; }
    int hovered_col() const { return hovered_col_; }
    ImVec2 image_min() const { return image_min_; }
    ImVec2 image_max() const { return image_max_; }
    unsigned texture() const { return texture_; }

private:
    void upload_if_stale();
    bool draw_image(const char* id, ImVec2 size, bool with_tooltip);
    void tooltip(int row, int col) const;

    std::vector<float> values_;  // (rows, cols) row-major, the exact values for the tooltip
    int rows_ = 0, cols_ = 0;
    uint64_t version_ = 0;
    bool has_data_ = false;
    float data_max_ = 0, data_max_abs_ = 0, data_min_ = 0;

    // What the texture was built from; any difference means a re-upload.
    unsigned texture_ = 0;
    uint64_t uploaded_version_ = 0;
    bool uploaded_ = false;
    Colormap uploaded_map_ = Colormap::Sequential;
    float uploaded_lo_ = 0, uploaded_hi_ = 0;
    int texture_rows_ = 0, texture_cols_ = 0;

    int hovered_row_ = -1, hovered_col_ = -1;
    ImVec2 image_min_{0, 0}, image_max_{0, 0};
};

}  // namespace ls::views::widgets
