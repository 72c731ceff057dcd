// Lints panel: where the model's metadata and tensors disagree, errors first, colour-coded.
#pragma once

#include "views/model_document.h"

namespace ls::views {

struct LintPanel {
    bool open = true;
    bool show_info = true;

    void draw(const ModelDocument* doc);
};

}  // namespace ls::views
