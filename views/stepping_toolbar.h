// Stepping toolbar: the debugger's run controls (step op / layer / token, continue, pause, restart,
// run to cursor, generate), where the session stands, and its breakpoints with the last hit.
#pragma once

#include "views/debug_context.h"

namespace ls::views {

struct SteppingToolbar {
    // The cursor's layer's view of the KV cells on sliding-window models ("" otherwise), as shown.
    std::string shown_layer_view;

    bool open = true;
    int generate_count = 8;  // "generate N": greedy decode calls after the prompt

    // Usage (main view): `SteppingToolbar toolbar; ... toolbar.draw(ctx);` every frame. The main
    // view owns the keyboard and calls the same commands the buttons do:
    //   F10 step_op, F11 step_layer, Shift+F11 step_token, F5 continue_run.
    // Each returns false (and does nothing) without a session, e.g. a capture opened alone.
    bool step_op(DebugContext& ctx);
    bool step_layer(DebugContext& ctx);
    bool step_token(DebugContext& ctx);
    bool continue_run(DebugContext& ctx);
    bool pause(DebugContext& ctx);
    bool restart(DebugContext& ctx);
    bool run_to_cursor(DebugContext& ctx);  // to ctx.cursor: forward with breakpoints, backward by re-run
    bool generate(DebugContext& ctx, int n);

    void draw(DebugContext& ctx);

private:
    void draw_controls(DebugContext& ctx);
    void draw_position(DebugContext& ctx);
    void draw_breakpoints(DebugContext& ctx);

    // The "add breakpoint" form.
    int new_kind_ = 0;  // index into BreakpointKind
    char new_pattern_[128] = "Qcur-*";
    float new_abs_threshold_ = 100.0f;
    float new_log10_nmse_ = -4.0f;  // entered as an exponent: NMSE thresholds span decades
};

}  // namespace ls::views
