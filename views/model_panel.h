// Model panel: overview (architecture, what its parameters imply, tokenizer, bytes by type), the
// metadata table and the tensor table, each filterable; selecting a tensor hands it to the tensor
// inspector.
#pragma once

#include <imgui.h>

#include <memory>
#include <string>

#include "views/model_document.h"

namespace ls::views {

struct ModelPanel {
    bool open = true;
    ImGuiTextFilter metadata_filter;
    ImGuiTextFilter tensor_filter;
    std::string selected_tensor;  // name, "" for none (names are stable, row indices are not)

    // Draws into its own window; returns true when the user selected another tensor.
    bool draw(const ModelDocument* doc);

private:
    void draw_overview(const ModelDocument& doc);
    void draw_metadata(const ModelDocument& doc);
    bool draw_tensors(const ModelDocument& doc);
};

}  // namespace ls::views
