// Faults panel: the fault catalogue to pick a bug to inject, the request to re-run with it, and
// the model's lints (bugs the file itself carries).
#pragma once

#include <optional>
#include <vector>

#include "views/debug_context.h"
#include "engine/forward/faults.h"
#include "engine/model/lint.h"

namespace ls::views {

struct FaultsPanel {
    bool open = true;
    Fault selected = Fault::kNone;  // the radio button's choice
    // The fault the current session runs with; the main view sets it when it creates a session,
    // so the panel can say what is active and offer a re-run only for a different choice.
    Fault active = Fault::kNone;
    // Set by "Re-run with this fault". The main view takes it (reset()) and recreates the session
    // with SessionOptions.forward.fault = *requested_fault, the same prompt and reference.
    std::optional<Fault> requested_fault;

    // Usage: `FaultsPanel faults; ... faults.draw(ctx); if (faults.requested_fault) { ...;
    // faults.active = *faults.requested_fault; faults.requested_fault.reset(); }`
    void draw(DebugContext& ctx);

private:
    void draw_lints(const DebugContext& ctx);

    const Model* linted_ = nullptr;  // lint_model runs once per model
    std::vector<Lint> lints_;
};

}  // namespace ls::views
