// Heatmap (see heatmap.h): host copy for exact tooltips, a GL_RGBA8 texture colored on the CPU
// and re-uploaded only when data, range or colormap change.
#include "views/widgets/heatmap.h"

#include <GL/gl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "views/widgets/axis.h"

namespace ls::views::widgets {

namespace {

// Beyond this many cells per side the texture holds block maxima (by |v|) instead of every cell:
// every GL 3.3 driver allows 4096, and a spike inside a block must stay visible.
constexpr int kMaxTextureSide = 4096;

ImTextureID as_texture_id(unsigned texture) {
    return reinterpret_cast<ImTextureID>(static_cast<intptr_t>(texture));
}

}  // namespace

Heatmap::~Heatmap() {
    if (texture_) {
        GLuint t = texture_;
        glDeleteTextures(1, &t);
    }
}

void Heatmap::set(const float* values, int rows, int cols, uint64_t version) {
    if (has_data_ && version == version_ && rows == rows_ && cols == cols_) return;
    rows_ = std::max(rows, 0);
    cols_ = std::max(cols, 0);
    version_ = version;
    has_data_ = true;
    values_.assign(values, values + static_cast<size_t>(rows_) * cols_);
    data_min_ = 0, data_max_ = 0, data_max_abs_ = 0;
    bool first = true;
    for (float v : values_) {
        if (!std::isfinite(v)) continue;
        data_min_ = first ? v : std::min(data_min_, v);
        data_max_ = first ? v : std::max(data_max_, v);
        data_max_abs_ = std::max(data_max_abs_, std::abs(v));
        first = false;
    }
    uploaded_ = false;
}

void Heatmap::clear() {
    values_.clear();
    rows_ = cols_ = 0;
    has_data_ = false;
    uploaded_ = false;
}

float Heatmap::range_lo() const {
    switch (range) {
        case HeatmapRange::ZeroToMax: return std::min(0.0f, data_min_);
        case HeatmapRange::Symmetric: return -range_hi();
        case HeatmapRange::Fixed: return fixed_lo;
    }
    return 0;
}

float Heatmap::range_hi() const {
    float hi = 0;
    switch (range) {
        case HeatmapRange::ZeroToMax: hi = data_max_; break;
        case HeatmapRange::Symmetric: hi = data_max_abs_; break;
        case HeatmapRange::Fixed: return fixed_hi;
    }
    // An all-zero matrix still needs a non-empty range for the legend.
    return hi > 0 ? hi : 1.0f;
}

void Heatmap::upload_if_stale() {
    if (empty()) return;
    float lo = range_lo(), hi = range_hi();
    if (uploaded_ && uploaded_version_ == version_ && uploaded_map_ == map && uploaded_lo_ == lo && uploaded_hi_ == hi)
        return;
    int stride_r = (rows_ + kMaxTextureSide - 1) / kMaxTextureSide;
    int stride_c = (cols_ + kMaxTextureSide - 1) / kMaxTextureSide;
    int tex_rows = (rows_ + stride_r - 1) / stride_r;
    int tex_cols = (cols_ + stride_c - 1) / stride_c;
    std::vector<ImU32> pixels(static_cast<size_t>(tex_rows) * tex_cols);  // (tex_rows, tex_cols) RGBA8
    for (int tr = 0; tr < tex_rows; ++tr) {
        for (int tc = 0; tc < tex_cols; ++tc) {
            float pick = value(tr * stride_r, tc * stride_c);
            for (int r = tr * stride_r; r < std::min(rows_, (tr + 1) * stride_r); ++r)
                for (int c = tc * stride_c; c < std::min(cols_, (tc + 1) * stride_c); ++c)
                    if (std::isnan(value(r, c)) || std::abs(value(r, c)) > std::abs(pick)) pick = value(r, c);
            pixels[static_cast<size_t>(tr) * tex_cols + tc] = colormap_color(map, pick, lo, hi);
        }
    }
    GLint previous = 0;
    glGetIntegerv(GL_TEXTURE_BINDING_2D, &previous);
    if (!texture_) {
        GLuint t = 0;
        glGenTextures(1, &t);
        texture_ = t;
    }
    glBindTexture(GL_TEXTURE_2D, texture_);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MIN_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_MAG_FILTER, GL_NEAREST);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_S, GL_CLAMP_TO_EDGE);
    glTexParameteri(GL_TEXTURE_2D, GL_TEXTURE_WRAP_T, GL_CLAMP_TO_EDGE);
    glPixelStorei(GL_UNPACK_ALIGNMENT, 4);
    glPixelStorei(GL_UNPACK_ROW_LENGTH, 0);
    // ImU32 from IM_COL32 is R,G,B,A in memory order on little-endian, which is GL_RGBA bytes.
    glTexImage2D(GL_TEXTURE_2D, 0, GL_RGBA8, tex_cols, tex_rows, 0, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
    glBindTexture(GL_TEXTURE_2D, static_cast<GLuint>(previous));
    texture_rows_ = tex_rows, texture_cols_ = tex_cols;
    uploaded_ = true;
    uploaded_version_ = version_;
    uploaded_map_ = map;
    uploaded_lo_ = lo, uploaded_hi_ = hi;
}

void Heatmap::tooltip(int row, int col) const {
    ImGui::BeginTooltip();
    float v = value(row, col);
    ImGui::Text("%s = %.6g", value_name.c_str(), v);
    std::string rl = row_label ? row_label(row) : std::string();
    std::string cl = col_label ? col_label(col) : std::string();
    ImGui::Text("%s %d%s%s%s", row_name.c_str(), row, rl.empty() ? "" : "  '", rl.c_str(), rl.empty() ? "" : "'");
    ImGui::Text("%s %d%s%s%s", col_name.c_str(), col, cl.empty() ? "" : "  '", cl.c_str(), cl.empty() ? "" : "'");
    ImGui::EndTooltip();
}

bool Heatmap::draw_image(const char* id, ImVec2 size, bool with_tooltip) {
    hovered_row_ = hovered_col_ = -1;
    ImGui::PushID(id);
    ImVec2 origin = ImGui::GetCursorScreenPos();
    bool clicked = ImGui::InvisibleButton("##image", ImVec2(std::max(size.x, 1.0f), std::max(size.y, 1.0f)));
    image_min_ = origin;
    image_max_ = ImVec2(origin.x + size.x, origin.y + size.y);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    if (!empty()) {
        upload_if_stale();
        dl->AddImage(as_texture_id(texture_), image_min_, image_max_);
        if (ImGui::IsItemHovered()) {
            ImVec2 m = ImGui::GetIO().MousePos;
            int col = static_cast<int>((m.x - origin.x) / size.x * cols_);
            int row = static_cast<int>((m.y - origin.y) / size.y * rows_);
            if (row >= 0 && row < rows_ && col >= 0 && col < cols_) {
                hovered_row_ = row, hovered_col_ = col;
                if (with_tooltip) tooltip(row, col);
            }
        }
    } else {
        dl->AddRectFilled(image_min_, image_max_, palette::kPlotBg);
        const char* msg = "no data";
        ImVec2 ts = ImGui::CalcTextSize(msg);
        if (ts.x < size.x) dl->AddText(ImVec2(origin.x + (size.x - ts.x) / 2, origin.y + (size.y - ts.y) / 2),
                                       palette::kAxis, msg);
    }
    ImGui::PopID();
    return clicked && hovered_row_ >= 0;
}

bool Heatmap::draw(const char* id, ImVec2 size) {
    ImVec2 avail = ImGui::GetContentRegionAvail();
    if (size.x <= 0) size.x = avail.x;
    if (size.y <= 0) size.y = avail.y;
    float lo = range_lo(), hi = range_hi();
    float line = ImGui::GetTextLineHeight();
    float legend_w = colorbar_auto_width(value_name.c_str(), lo, hi);
    float caption_h = line + ImGui::GetStyle().ItemSpacing.y;
    ImVec2 image_size(std::max(8.0f, size.x - legend_w - ImGui::GetStyle().ItemSpacing.x),
                      std::max(8.0f, size.y - caption_h));
    ImGui::BeginGroup();
    bool clicked = draw_image(id, image_size, true);
    ImGui::SameLine();
    draw_colorbar(value_name.c_str(), lo, hi, map, ImVec2(legend_w, image_size.y));
    if (empty())
        ImGui::TextDisabled("%s x %s", row_name.c_str(), col_name.c_str());
    else
        ImGui::TextDisabled("%s (%d) down x %s (%d) across", row_name.c_str(), rows_, col_name.c_str(), cols_);
    ImGui::EndGroup();
    return clicked;
}

bool Heatmap::draw_thumbnail(const char* id, ImVec2 size, bool selected) {
    bool clicked = draw_image(id, size, true);
    ImDrawList* dl = ImGui::GetWindowDrawList();
    bool hovered = hovered_row_ >= 0;
    ImU32 frame = selected ? palette::kMarker : hovered ? palette::kText : palette::kAxis;
    dl->AddRect(ImVec2(image_min_.x - 1, image_min_.y - 1), ImVec2(image_max_.x + 1, image_max_.y + 1), frame, 0,
                0, selected ? 2.0f : 1.0f);
    return clicked;
}

}  // namespace ls::views::widgets
