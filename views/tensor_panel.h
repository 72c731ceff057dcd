// Tensor inspector: the selected weight tensor's statistics and first values, dequantized once
// when the selection changes (not per frame), and the quant block inspector: one block of it as
// stored (scales, each element's code, level and value; engine/model/quant_block.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/quant_block.h"
#include "views/model_document.h"

namespace ls::views {

struct TensorPanel {
    bool open = true;

    // Decodes `name` from `doc` (small models only are instant; large tensors take a moment).
    void select(const std::shared_ptr<const ModelDocument>& doc, const std::string& name);
    void clear();
    // `doc`: the model document shown now; a selection made in another one (or in one since
    // closed, wherever a new one lies) is dropped.
    void draw(const std::shared_ptr<const ModelDocument>& doc);
    // Shows block `block` of the selected tensor (clamped to its blocks); false without one.
    bool select_block(int64_t block);

    // What the last frame drew (for tests).
    struct Shown {
        int64_t block = -1;        // the block shown, -1 for none
        std::string fields;        // its fields, "name value" lines
        int64_t elements = 0;      // rows of its element table
    } shown;

private:
    void draw_block();

    std::weak_ptr<const ModelDocument> doc_;  // the selection's document; never kept alive by the panel
    std::string name_;
    std::string description_;  // type and ne
    std::string error_;
    std::vector<float> values_;
    ValueStats stats_;
    int64_t n_blocks_ = 0, block_elements_ = 0;
    QuantBlock block_;
    std::string block_error_;
};

}  // namespace ls::views
