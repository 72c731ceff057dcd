// Status bar: one line at the bottom of the main window: the backend, what is open, the position,
// memory, progress of a running evaluation, the first divergence with the doctor's verdict, and
// the last message.
#pragma once

#include <string>

#include "views/debug_context.h"
#include "views/model_document.h"

namespace ls::views {

struct StatusBar {
    std::string message;  // last action or error ("opened ...", "cannot read ...")
    bool message_is_error = false;
    std::string backend;  // "CPU (8 threads)", with why CUDA is not used
    std::string title;    // what is open
    std::string doctor;   // the doctor's verdict on the first divergence
    std::string loading;  // what is loading in the background, "" when nothing

    void draw(const ModelDocument* doc, const DebugContext& ctx);
};

}  // namespace ls::views
