// Attention heatmaps: a layer x head grid of query x key thumbnails for the cursor's decode call,
// one enlarged with token labels; ours, the reference's, or their difference.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "views/debug_context.h"
#include "views/widgets/heatmap.h"

namespace ls::views {

struct AttentionPanel {
    enum class View { Ours, Reference, Difference };

    // Which heads each layer's row shows first: by number, the most divergent from the reference
    // (NMSE of the head's probabilities), or the most peaked (lowest normalized row entropy).
    enum class Order { kIndex, kDivergence, kEntropy };

    bool open = true;
    View view = View::Ours;
    Order order = Order::kIndex;
    int heads_per_page = 8;  // columns; models with more heads page through them
    int page = 0;
    float thumbnail_px = 56.0f;
    int selected_layer = -1, selected_head = -1;  // the enlarged map; -1: none

    void select_cell(int layer, int head) { selected_layer = layer, selected_head = head; }

    struct Shown {
        int decode = -1, ubatch = -1;
        int layers = 0, heads = 0;   // grid size (heads: the model's, all pages)
        int columns = 0, pages = 0;  // heads shown per row, pages of them
        // Per layer row, the heads shown in column order (after ranking and paging).
        std::vector<std::vector<int>> head_order;
        int thumbnails = 0;          // cells with a map in the current view
        int64_t n_query = 0, n_key = 0;
        bool enlarged = false;
        float difference_range = 0;  // max |ours - reference| over the grid
        std::string reference_note;  // reconstructed / missing, as shown
        int local_layers = 0;        // rows marked local (sliding window) on gemma models
        std::string window_note;     // the enlarged layer's cells, "local layer (window 8): position 72 sees ..."
        float sink_share = -1;       // gpt-oss: the enlarged head's mean share of attention its sink takes; -1 none
        float sink_share_max = -1;   // ... and the largest over its rows
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    struct Cell {
        std::unique_ptr<widgets::Heatmap> map = std::make_unique<widgets::Heatmap>();
        const void* source = nullptr;  // the AttentionProbs (ours) it was built from
        const void* ref_source = nullptr;
        View view = View::Ours;
        float range = 0;
    };
    // Fills `heatmap` with one head's map in `view`; false when the view has no data.
    bool fill(widgets::Heatmap& heatmap, const EventRecord& rec, int head, View view, float diff_range,
              const void** source, const void** ref_source, View* built_view, float* built_range);

    std::map<std::pair<int, int>, Cell> cells_;  // by (layer, head)
    // Per (layer, head): the NMSE of its probabilities against the reference's (-1 without) and
    // its mean normalized row entropy, for the ranking; recomputed with the records.
    struct HeadScore {
        const void* source = nullptr;
        const void* ref_source = nullptr;
        std::vector<double> nmse, entropy;
    };
    std::map<int, HeadScore> scores_;  // by layer
    Cell enlarged_;
    uint64_t version_ = 0;
};

}  // namespace ls::views
