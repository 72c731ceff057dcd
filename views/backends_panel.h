// Backends panel: the backend the session runs on, and backend A/B: the same model and tokens run
// on a second backend, that run loaded as the reference, so the event browser is coloured by
// agreement between the two and a kernel wrong only at some size shows as the first divergence.
#pragma once

#include <optional>
#include <string>

#include "views/debug_context.h"

namespace ls::views {

struct BackendsPanel {
    bool open = false;
    int choice = 0;  // index into kAgainstBackends
    // Set by "Run alongside"; the main view takes it (reset()) and loads that backend's run as the
    // reference.
    std::optional<std::string> requested_against;
    // The backend whose run is the reference now ("" when the reference is a file or none); the
    // main view sets it.
    std::string against;

    void draw(DebugContext& ctx);
};

}  // namespace ls::views
