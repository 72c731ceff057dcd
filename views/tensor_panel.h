// Tensor inspector: the selected weight tensor's statistics and first values, dequantized once
// when the selection changes (not per frame).
#pragma once

#include <string>
#include <vector>

#include "views/model_document.h"

namespace ls::views {

struct TensorPanel {
    bool open = true;

    // Decodes `name` from `doc` (small models only are instant; large tensors take a moment).
    void select(const ModelDocument* doc, const std::string& name);
    void clear();
    void draw();

private:
    std::string name_;
    std::string description_;  // type and ne
    std::string error_;
    std::vector<float> values_;
    ValueStats stats_;
};

}  // namespace ls::views
