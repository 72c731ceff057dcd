// Status bar: one line at the bottom of the main window (model, size, lint counts, last message).
#pragma once

#include <string>

#include "model_document.h"

namespace ls::views {

struct StatusBar {
    std::string message;  // last action or error ("opened ...", "cannot read ...")
    bool message_is_error = false;

    void draw(const ModelDocument* doc);
};

}  // namespace ls::views
