// Stepping toolbar (see stepping_toolbar.h). Commands are queued on the session and never wait:
// the next snapshot shows their effect.
#include "views/debug_context.h"
#include "views/stepping_toolbar.h"

#include <fmt/format.h>
#include <imgui.h>

#include <cmath>

#include "views/event_browser.h"

namespace ls::views {

namespace {

bool ready(const DebugContext& ctx) { return ctx.session && ctx.snap && ctx.snap->events && !ctx.snap->events->empty(); }

ImVec4 state_color(SessionState s) {
    switch (s) {
        case SessionState::kRunning: return {0.45f, 0.75f, 1.00f, 1.0f};
        case SessionState::kPaused: return {1.00f, 0.80f, 0.30f, 1.0f};
        case SessionState::kFinished: return {0.40f, 0.85f, 0.45f, 1.0f};
        case SessionState::kError: return {1.00f, 0.35f, 0.35f, 1.0f};
        default: return ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled);
    }
}

std::string condition_text(const BreakpointSpec& spec) {
    switch (spec.kind) {
        case BreakpointKind::kNamePattern: return "name matches " + spec.pattern;
        case BreakpointKind::kNanInf: return "a NaN or Inf appears";
        case BreakpointKind::kAbsAbove: return fmt::format("max |x| > {:g}", spec.threshold);
        case BreakpointKind::kDivergenceAbove: return fmt::format("NMSE > {:g}", spec.threshold);
    }
    return "";
}

}  // namespace

bool SteppingToolbar::step_op(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->step_op();
    ctx.log("step op");
    return true;
}

bool SteppingToolbar::step_layer(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->step_layer();
    ctx.log("step layer");
    return true;
}

bool SteppingToolbar::step_token(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->step_token();
    ctx.log("step token");
    return true;
}

bool SteppingToolbar::continue_run(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->continue_run();
    ctx.log("continue");
    return true;
}

bool SteppingToolbar::pause(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->pause();
    ctx.log("pause");
    return true;
}

bool SteppingToolbar::restart(DebugContext& ctx) {
    if (!ready(ctx)) return false;
    ctx.session->restart();
    ctx.log("restart");
    return true;
}

bool SteppingToolbar::run_to_cursor(DebugContext& ctx) {
    if (!ready(ctx) || ctx.cursor < 0) return false;
    // Forward, breakpoints on the way may stop it (a debugger's "run to cursor"); backward there is
    // nothing to run through, so the session re-runs deterministically to the event.
    if (ctx.cursor > ctx.snap->cursor) ctx.session->run_to_event(ctx.cursor);
    else ctx.session->go_to(ctx.cursor);
    ctx.log(fmt::format("run to cursor (event {})", ctx.cursor));
    return true;
}

bool SteppingToolbar::generate(DebugContext& ctx, int n) {
    if (!ready(ctx) || n < 0) return false;
    ctx.session->generate(n);
    ctx.log(fmt::format("generate {}", n));
    return true;
}

namespace {

// The next item on this line when its `width` fits the panel's, else on the next line: a narrow
// pane wraps the toolbar instead of cutting it.
void flow_width(float width) {
    const float right = ImGui::GetItemRectMax().x + ImGui::GetStyle().ItemSpacing.x + width;
    if (right <= ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x) ImGui::SameLine();
}
void flow(const char* next_button) {
    flow_width(ImGui::CalcTextSize(next_button, nullptr, true).x + 2 * ImGui::GetStyle().FramePadding.x);
}

}  // namespace

void SteppingToolbar::draw_controls(DebugContext& ctx) {
    const bool running = ctx.snap && ctx.snap->state == SessionState::kRunning;
    ImGui::BeginDisabled(!ready(ctx));
    if (ImGui::Button("Step op (F10)")) step_op(ctx);
    flow("Step layer (F11)");
    if (ImGui::Button("Step layer (F11)")) step_layer(ctx);
    flow("Step token (Shift+F11)");
    if (ImGui::Button("Step token (Shift+F11)")) step_token(ctx);
    flow("Continue (F5)");
    if (ImGui::Button("Continue (F5)")) continue_run(ctx);
    flow("Pause");
    ImGui::BeginDisabled(!running);
    if (ImGui::Button("Pause")) pause(ctx);
    ImGui::EndDisabled();
    flow("Restart");
    if (ImGui::Button("Restart")) restart(ctx);

    ImGui::BeginDisabled(ctx.cursor < 0);
    if (ImGui::Button("Run to cursor")) run_to_cursor(ctx);
    ImGui::EndDisabled();
    flow("Generate");
    if (ImGui::Button("Generate")) generate(ctx, generate_count);
    // The count with its - and + buttons and its label.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float count_w = ImGui::GetFontSize() * 4;
    flow_width(count_w + 2 * (ImGui::GetFrameHeight() + style.ItemInnerSpacing.x) + ImGui::CalcTextSize("tokens").x);
    ImGui::SetNextItemWidth(count_w);
    ImGui::InputInt("tokens##generate", &generate_count);
    if (generate_count < 0) generate_count = 0;
    ImGui::EndDisabled();
    if (!ctx.session) ImGui::TextDisabled("A capture without its model: nothing to run, only to inspect.");
}

void SteppingToolbar::draw_position(DebugContext& ctx) {
    const SessionSnapshot& s = *ctx.snap;
    ImGui::TextColored(state_color(s.state), "%s", session_state_name(s.state));
    ImGui::SameLine();
    const size_t n_events = s.events ? s.events->size() : 0;
    ImGui::Text("event %lld / %zu   decode %d / %d   KV position %lld", static_cast<long long>(s.cursor), n_events,
                s.decode_calls_done, s.planned_decode_calls, static_cast<long long>(s.position));
    if (const EventInfo* e = ctx.event(s.cursor)) {
        ImGui::SameLine();
        ImGui::TextColored(event_shade_color(event_shade(ctx, s.cursor)), "at %s (%s)", e->name.c_str(), op_name(e->op));
        // Sliding-window models: which cells the cursor's layer attends to, from the newest position.
        shown_layer_view = ctx.model && s.position > 0 ? layer_view_text(ctx.model->config(), e->layer, s.position - 1) : "";
        if (!shown_layer_view.empty()) ImGui::TextDisabled("layer %d: %s", e->layer, shown_layer_view.c_str());
    }
    if (s.error) ImGui::TextColored(state_color(SessionState::kError), "%s", s.error->message.c_str());
    else if (!s.message.empty()) ImGui::TextDisabled("%s", s.message.c_str());
}

void SteppingToolbar::draw_breakpoints(DebugContext& ctx) {
    const SessionSnapshot& s = *ctx.snap;
    if (s.hit) {
        // Why the session stopped, in words, with a way to put the cursor there.
        ImGui::TextColored(event_shade_color(EventShade::kWarn), "Stopped by breakpoint #%d at %s (event %lld): %s",
                           s.hit->breakpoint_id, s.hit->event_name.c_str(), static_cast<long long>(s.hit->event_index),
                           s.hit->reason.c_str());
        ImGui::SameLine();
        if (ImGui::SmallButton("show##hit")) ctx.select(s.hit->event_index);
    } else {
        ImGui::TextDisabled("No breakpoint hit at the current position.");
    }

    ImGui::BeginDisabled(!ctx.session);
    static const char* kKinds[] = {"name pattern", "NaN / Inf", "|x| above", "divergence above"};
    ImGui::SetNextItemWidth(150);
    ImGui::Combo("##kind", &new_kind_, kKinds, IM_ARRAYSIZE(kKinds));
    ImGui::SameLine();
    ImGui::SetNextItemWidth(160);
    BreakpointSpec spec;
    switch (new_kind_) {
        case 0:
            ImGui::InputTextWithHint("##pattern", "glob: Qcur-*, *-3", new_pattern_, sizeof new_pattern_);
            spec = BreakpointSpec::name(new_pattern_);
            break;
        case 1: spec = BreakpointSpec::nan_inf(); break;
        case 2:
            ImGui::InputFloat("max |x|##abs", &new_abs_threshold_, 0, 0, "%g");
            spec = BreakpointSpec::abs_above(new_abs_threshold_);
            break;
        default:
            ImGui::SliderFloat("log10 NMSE##nmse", &new_log10_nmse_, -12.0f, 0.0f, "1e%.1f");
            spec = BreakpointSpec::divergence_above(std::pow(10.0, static_cast<double>(new_log10_nmse_)));
            break;
    }
    ImGui::SameLine();
    bool valid = new_kind_ != 0 || new_pattern_[0] != '\0';
    ImGui::BeginDisabled(!valid);
    if (ImGui::Button("Add breakpoint")) {
        const int id = ctx.session->add_breakpoint(spec);
        ctx.log(id > 0 ? fmt::format("breakpoint #{}: {}", id, condition_text(spec))
                       : fmt::format("breakpoint asked of the server: {}", condition_text(spec)));
    }
    ImGui::EndDisabled();
    ImGui::EndDisabled();
    if (new_kind_ == 3 && !s.has_reference) ImGui::TextDisabled("Divergence breakpoints need a reference (Ctrl+R).");

    if (s.breakpoints.empty()) {
        ImGui::TextDisabled("No breakpoints: add one above, then Continue (F5) runs until it hits.");
        return;
    }
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_SizingFixedFit;
    float height = std::min(8.0f, static_cast<float>(s.breakpoints.size()) + 1.5f) * ImGui::GetFrameHeightWithSpacing();
    if (ImGui::BeginTable("breakpoints", 5, flags, ImVec2(0, height))) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("on");
        ImGui::TableSetupColumn("#");
        ImGui::TableSetupColumn("condition", ImGuiTableColumnFlags_WidthStretch);
        ImGui::TableSetupColumn("hits");
        ImGui::TableSetupColumn("");
        ImGui::TableHeadersRow();
        for (const Breakpoint& bp : s.breakpoints) {
            ImGui::PushID(bp.id);
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            bool enabled = bp.enabled;
            ImGui::BeginDisabled(!ctx.session);
            if (ImGui::Checkbox("##enabled", &enabled)) ctx.session->enable_breakpoint(bp.id, enabled);
            ImGui::EndDisabled();
            ImGui::TableNextColumn();
            ImGui::Text("%d", bp.id);
            ImGui::TableNextColumn();
            bool last_hit = s.hit && s.hit->breakpoint_id == bp.id;
            if (last_hit) ImGui::TextColored(event_shade_color(EventShade::kWarn), "%s", condition_text(bp.spec).c_str());
            else ImGui::TextUnformatted(condition_text(bp.spec).c_str());
            ImGui::TableNextColumn();
            ImGui::Text("%d", bp.hit_count);
            ImGui::TableNextColumn();
            ImGui::BeginDisabled(!ctx.session);
            if (ImGui::SmallButton("remove")) {
                ctx.session->remove_breakpoint(bp.id);
                ctx.log(fmt::format("breakpoint #{} removed", bp.id));
            }
            ImGui::EndDisabled();
            ImGui::PopID();
        }
        ImGui::EndTable();
    }
}

void SteppingToolbar::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Stepping", &open)) {
        ImGui::End();
        return;
    }
    if (!ctx.snap) {
        ImGui::TextDisabled("Open a model (Ctrl+O) to run it op by op.");
        ImGui::End();
        return;
    }
    draw_controls(ctx);
    if (!ctx.snap->events || ctx.snap->events->empty()) {
        ImGui::TextDisabled("Set a prompt to plan the run; the steps are then known before anything runs.");
        ImGui::End();
        return;
    }
    draw_position(ctx);
    ImGui::Separator();
    if (ImGui::CollapsingHeader("Breakpoints", ImGuiTreeNodeFlags_DefaultOpen)) draw_breakpoints(ctx);
    ImGui::End();
}

}  // namespace ls::views
