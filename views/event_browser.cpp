// Event browser (see event_browser.h): groups are built once per plan, shades once per snapshot,
// and only the visible rows are drawn (ImGuiListClipper), so long runs stay cheap per frame.
#include "views/debug_context.h"
#include "views/event_browser.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "views/divergence_panel.h"

namespace ls::views {

namespace {

// Rank for a group's color: its most alarming event wins; "no reference" ranks below ok so a layer
// with a few unpaired tensors still reads as agreeing.
int severity(EventShade s) {
    switch (s) {
        case EventShade::kDiverged: return 5;
        case EventShade::kWarn: return 4;
        case EventShade::kOk: return 3;
        case EventShade::kNoReference: return 2;
        case EventShade::kUncompared: return 1;
        case EventShade::kNotRun: return 0;
    }
    return 0;
}

std::string shape_text(const EventInfo& e) {
    std::string s = std::to_string(e.ne[0]);
    int dims = 4;
    while (dims > 1 && e.ne[dims - 1] == 1) --dims;
    for (int d = 1; d < dims; ++d) s += " x " + std::to_string(e.ne[d]);
    return s;
}

}  // namespace

EventShade event_shade(const DebugContext& ctx, int64_t index) {
    const EventRecord* r = ctx.record(index);
    if (!r) return EventShade::kNotRun;
    if (!r->compared) return EventShade::kUncompared;
    switch (r->comparison.status) {
        case CompareStatus::kOk: return EventShade::kOk;
        case CompareStatus::kWarn: return EventShade::kWarn;
        case CompareStatus::kDiverged: return EventShade::kDiverged;
        case CompareStatus::kNoReference: return EventShade::kNoReference;
        case CompareStatus::kUnusable: return EventShade::kWarn;  // the reference tensor holds no values
    }
    return EventShade::kNoReference;
}

ImVec4 event_shade_color(EventShade shade) {
    switch (shade) {
        case EventShade::kOk: return {0.40f, 0.85f, 0.45f, 1.0f};
        case EventShade::kWarn: return {1.00f, 0.65f, 0.20f, 1.0f};
        case EventShade::kDiverged: return {1.00f, 0.35f, 0.35f, 1.0f};
        case EventShade::kNoReference: return {0.60f, 0.60f, 0.62f, 1.0f};
        case EventShade::kUncompared: return ImGui::GetStyleColorVec4(ImGuiCol_Text);
        case EventShade::kNotRun: return ImGui::GetStyleColorVec4(ImGuiCol_TextDisabled);
    }
    return ImGui::GetStyleColorVec4(ImGuiCol_Text);
}

const char* event_shade_name(EventShade shade) {
    switch (shade) {
        case EventShade::kOk: return "ok";
        case EventShade::kWarn: return "warn";
        case EventShade::kDiverged: return "diverged";
        case EventShade::kNoReference: return "no reference";
        case EventShade::kUncompared: return "run";
        case EventShade::kNotRun: return "not run yet";
    }
    return "";
}

std::string decode_label(const DebugContext& ctx, int decode) {
    const SessionSnapshot* s = ctx.snap.get();
    if (!s) return fmt::format("token {}", decode);
    if (decode == 0) {
        // The prompt is one decode call: show its text, clipped so the tree stays narrow.
        std::string text;
        for (const std::string& p : s->pieces) text += p;
        if (text.size() > 32) text = text.substr(0, 29) + "...";
        return fmt::format("token 0 (prompt, {} tokens: '{}')", s->tokens.size(), text);
    }
    if (decode >= static_cast<int>(s->decode_inputs.size())) return fmt::format("token {} (not generated yet)", decode);
    int32_t id = s->decode_inputs[static_cast<size_t>(decode)];
    const Tokenizer* tok = ctx.model ? ctx.model->tokenizer() : nullptr;
    if (tok && tok->valid(id)) return fmt::format("token {} ('{}')", decode, tok->token_to_piece(id));
    return fmt::format("token {} (id {})", decode, id);
}

void EventBrowser::rebuild_groups(const DebugContext& ctx) {
    events_ = ctx.snap ? ctx.snap->events : nullptr;
    groups_.clear();
    group_of_event_.clear();
    first_group_of_decode_.clear();
    decode_ubatches_.clear();
    shades_snap_ = nullptr;
    if (!events_) return;
    const std::vector<EventInfo>& ev = *events_;
    group_of_event_.resize(ev.size());
    bool seen_layer = false;  // within the decode call: layer -1 events before the layers are "embd"
    for (size_t i = 0; i < ev.size(); ++i) {
        const EventInfo& e = ev[i];
        bool new_decode = groups_.empty() || groups_.back().decode != e.decode;
        if (new_decode) seen_layer = false;
        if (new_decode || groups_.back().ubatch != e.ubatch || groups_.back().layer != e.layer) {
            if (groups_.empty() || groups_.back().ubatch != e.ubatch) seen_layer = false;
            Group g;
            g.decode = e.decode, g.ubatch = e.ubatch, g.layer = e.layer;
            g.first = g.last = static_cast<int64_t>(i);
            g.label = e.layer >= 0 ? fmt::format("layer {}", e.layer) : seen_layer ? "output" : "embd";
            groups_.push_back(std::move(g));
            while (static_cast<int>(first_group_of_decode_.size()) <= e.decode)
                first_group_of_decode_.push_back(static_cast<int>(groups_.size()) - 1);
            while (static_cast<int>(decode_ubatches_.size()) <= e.decode) decode_ubatches_.push_back(0);
            decode_ubatches_[e.decode] = std::max(decode_ubatches_[e.decode], e.ubatch + 1);
        }
        if (e.layer >= 0) seen_layer = true;
        groups_.back().last = static_cast<int64_t>(i);
        group_of_event_[i] = static_cast<int>(groups_.size()) - 1;
    }
    for (Group& g : groups_)
        if (decode_ubatches_[g.decode] > 1) g.label = fmt::format("ubatch {} {}", g.ubatch, g.label);
}

void EventBrowser::refresh_shades(const DebugContext& ctx) {
    if (shades_snap_ == ctx.snap.get() && shades_version_ == ctx.snap->version) return;
    shades_snap_ = ctx.snap.get();
    shades_version_ = ctx.snap->version;
    group_shade_.assign(groups_.size(), EventShade::kNotRun);
    decode_shade_.assign(first_group_of_decode_.size(), EventShade::kNotRun);
    // Records exist for events 0..cursor only, so the scan stops at the last recorded event.
    const int64_t n_recorded = std::min<int64_t>(static_cast<int64_t>(ctx.snap->records.size()),
                                                 static_cast<int64_t>(group_of_event_.size()));
    for (int64_t i = 0; i < n_recorded; ++i) {
        EventShade s = event_shade(ctx, i);
        EventShade& g = group_shade_[group_of_event_[i]];
        if (severity(s) > severity(g)) g = s;
        EventShade& d = decode_shade_[groups_[group_of_event_[i]].decode];
        if (severity(s) > severity(d)) d = s;
    }
}

void EventBrowser::reveal(int64_t event) {
    if (event < 0 || event >= static_cast<int64_t>(group_of_event_.size())) return;
    int g = group_of_event_[event];
    open_decodes_.insert(groups_[g].decode);
    open_groups_.insert(g);
}

bool EventBrowser::passes(const DebugContext& ctx, const EventInfo& e) const {
    if (!applied_filter_.empty() && e.name.find(applied_filter_) == std::string::npos) return false;
    if (layer_to_ >= 0 && (e.layer < layer_from_ || e.layer > layer_to_)) return false;
    const std::string& b = e.base_name;
    auto starts = [&](const char* p) { return b.rfind(p, 0) == 0; };
    switch (static_cast<OpClass>(op_class_)) {
        case OpClass::kAll: break;
        case OpClass::kProducts:
            if (e.op != Op::kMulMat && e.op != Op::kMulMatId) return false;
            break;
        case OpClass::kNorms:
            if (e.op != Op::kRmsNorm && !(e.op == Op::kMul && b.find("norm") != std::string::npos)) return false;
            break;
        case OpClass::kAttention:
            if (!(starts("Qcur") || starts("Kcur") || starts("Vcur") || starts("kq") || starts("q_") || starts("k_pe") ||
                  starts("kv") || starts("fattn") || e.op == Op::kRope || e.op == Op::kSoftMax || e.op == Op::kFlashAttnExt))
                return false;
            break;
        case OpClass::kExperts:
            if (!starts("ffn_moe") && !starts("ffn_shexp")) return false;
            break;
        case OpClass::kElementwise:
            if (e.op != Op::kAdd && e.op != Op::kMul && e.op != Op::kSwiglu && e.op != Op::kGeglu && e.op != Op::kScale &&
                e.op != Op::kSwigluOai && e.op != Op::kAddId && e.op != Op::kTanh && e.op != Op::kSigmoid && e.op != Op::kClamp &&
                e.op != Op::kDiv)
                return false;
            break;
    }
    if (flagged_only_) {
        const EventShade s = event_shade(ctx, e.index);
        if (s != EventShade::kWarn && s != EventShade::kDiverged) return false;
    }
    return true;
}

void EventBrowser::set_filter(const std::string& name, int layer_from, int layer_to, OpClass op_class, bool flagged_only) {
    std::snprintf(filter_, sizeof filter_, "%s", name.c_str());
    layer_from_ = layer_from, layer_to_ = layer_to;
    op_class_ = static_cast<int>(op_class);
    flagged_only_ = flagged_only;
}

void EventBrowser::rebuild_rows(const DebugContext& ctx) {
    rows_.clear();
    const std::vector<EventInfo>& ev = *events_;
    listed_ = -1;
    if (filtered()) {
        // Filtered: a flat list of the matching events, each row saying where it sits.
        for (const EventInfo& e : ev)
            if (passes(ctx, e)) rows_.push_back({RowKind::kEvent, e.index});
        listed_ = static_cast<int64_t>(rows_.size());
        return;
    }
    for (int d = 0; d < static_cast<int>(first_group_of_decode_.size()); ++d) {
        rows_.push_back({RowKind::kDecode, d});
        if (!open_decodes_.count(d)) continue;
        int end = d + 1 < static_cast<int>(first_group_of_decode_.size()) ? first_group_of_decode_[d + 1]
                                                                           : static_cast<int>(groups_.size());
        for (int g = first_group_of_decode_[d]; g < end; ++g) {
            rows_.push_back({RowKind::kGroup, g});
            if (!open_groups_.count(g)) continue;
            for (int64_t i = groups_[g].first; i <= groups_[g].last; ++i) rows_.push_back({RowKind::kEvent, i});
        }
    }
    (void)ctx;
}

int64_t EventBrowser::shown_row_of(int64_t event) const {
    for (size_t r = 0; r < rows_.size(); ++r)
        if (rows_[r].kind == RowKind::kEvent && rows_[r].id == event) return static_cast<int64_t>(r);
    return -1;
}

void EventBrowser::run_to(DebugContext& ctx, int64_t event) {
    if (!ctx.session || !ctx.snap) return;
    // run_to_event goes forward and stops at breakpoints; behind the session's position a
    // deterministic re-run (go_to) is what "run to here" means.
    if (event > ctx.snap->cursor) {
        ctx.session->run_to_event(event);
        ctx.log(fmt::format("run to event {}", event));
    } else {
        ctx.session->go_to(event);
        ctx.log(fmt::format("go to event {}", event));
    }
    ctx.select(event);
}

void EventBrowser::draw_row(DebugContext& ctx, const Row& row, int64_t row_index) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    const int64_t fd = ctx.snap->first_divergent;
    if (row.kind == RowKind::kDecode || row.kind == RowKind::kGroup) {
        const bool is_decode = row.kind == RowKind::kDecode;
        const int id = static_cast<int>(row.id);
        std::set<int>& open_set = is_decode ? open_decodes_ : open_groups_;
        bool was_open = open_set.count(id) > 0;
        // Stable IDs by decode call and group, never by row: rows move as nodes fold.
        ImGui::PushID(is_decode ? "decode" : "group");
        ImGui::PushID(id);
        if (!is_decode) ImGui::Indent();
        EventShade shade = is_decode ? decode_shade_[id] : group_shade_[id];
        ImGui::PushStyleColor(ImGuiCol_Text, event_shade_color(shade));
        ImGui::SetNextItemOpen(was_open, ImGuiCond_Always);
        std::string label = is_decode ? decode_label(ctx, id) : groups_[id].label;
        bool holds_fd = fd >= 0 && fd < static_cast<int64_t>(group_of_event_.size()) &&
                        (is_decode ? groups_[group_of_event_[fd]].decode == id : group_of_event_[fd] == id);
        if (holds_fd) label += "  << first divergence";
        bool now_open = ImGui::TreeNodeEx("##node", ImGuiTreeNodeFlags_NoTreePushOnOpen | ImGuiTreeNodeFlags_SpanFullWidth,
                                          "%s", label.c_str());
        ImGui::PopStyleColor();
        if (!is_decode) ImGui::Unindent();
        if (now_open != was_open) {
            if (now_open) open_set.insert(id);
            else open_set.erase(id);
        }
        ImGui::TableNextColumn();
        if (!is_decode) {
            const Group& g = groups_[id];
            ImGui::TextDisabled("%lld ops", static_cast<long long>(g.last - g.first + 1));
        }
        ImGui::TableNextColumn();
        ImGui::TableNextColumn();
        ImGui::TextColored(event_shade_color(shade), "%s", event_shade_name(shade));
        ImGui::PopID();
        ImGui::PopID();
        return;
    }

    const EventInfo& e = (*events_)[static_cast<size_t>(row.id)];
    EventShade shade = event_shade(ctx, row.id);
    ImGui::PushID("event");
    ImGui::PushID(static_cast<int>(row.id));
    if (applied_filter_.empty()) ImGui::Indent(2 * ImGui::GetStyle().IndentSpacing);
    ImVec4 color = event_shade_color(shade);
    if (shade == EventShade::kNotRun && !dim_unrun_) color = ImGui::GetStyleColorVec4(ImGuiCol_Text);
    ImGui::PushStyleColor(ImGuiCol_Text, color);
    std::string label = applied_filter_.empty() ? e.name
                                                : fmt::format("{}   [{} / {}]", e.name, decode_label(ctx, e.decode),
                                                              groups_[group_of_event_[row.id]].label);
    if (row.id == fd) {
        label += "  << first divergence";
        first_divergent_row_ = row_index;
        first_divergent_label_ = label;
    }
    bool selected = row.id == ctx.cursor;
    if (ImGui::Selectable(label.c_str(), selected, ImGuiSelectableFlags_SpanAllColumns | ImGuiSelectableFlags_AllowDoubleClick)) {
        ctx.select(row.id);
        if (ImGui::IsMouseDoubleClicked(ImGuiMouseButton_Left)) run_to(ctx, row.id);
    }
    ImGui::PopStyleColor();
    if (applied_filter_.empty()) ImGui::Unindent(2 * ImGui::GetStyle().IndentSpacing);
    if (row.id == ctx.snap->cursor && ctx.snap->cursor >= 0) {
        ImGui::SameLine();
        ImGui::TextDisabled("<- session");
    }
    // A reference in the user's engine's own names: that name beside llama.cpp's.
    if (const EventRecord* rec = ctx.record(row.id); rec && !rec->comparison.ref_source_name.empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("= %s", rec->comparison.ref_source_name.c_str());
    }
    if (ImGui::IsItemHovered() && ctx.session) ImGui::SetTooltip("double-click: run the session to this event");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(op_name(e.op));
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(shape_text(e).c_str());
    ImGui::TableNextColumn();
    const EventRecord* r = ctx.record(row.id);
    if (r && r->compared && r->comparison.status != CompareStatus::kNoReference) {
        ImGui::TextColored(color, "%.2g", r->comparison.metrics.nmse);
        if (const EventComparison* local = ctx.local_error(row.id)) {
            ImGui::SameLine();
            draw_local_error(local);
        }
    } else
        ImGui::TextColored(color, "%s", event_shade_name(shade));
    ImGui::PopID();
    ImGui::PopID();
}

void EventBrowser::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Event browser", &open)) {
        ImGui::End();
        return;
    }
    if (!ctx.snap || !ctx.snap->events || ctx.snap->events->empty()) {
        ImGui::TextDisabled("No events planned yet.");
        ImGui::TextDisabled("Open a model and set a prompt: the event tree appears before anything runs.");
        ImGui::End();
        return;
    }
    if (events_ != ctx.snap->events) {
        rebuild_groups(ctx);
        open_groups_.clear();
        last_cursor_ = -2;
    }
    refresh_shades(ctx);

    ImGui::SetNextItemWidth(-150);
    ImGui::InputTextWithHint("##filter", "filter by name (Qcur, -3, ffn_out...)", filter_, sizeof filter_);
    applied_filter_ = filter_;
    ImGui::SameLine();
    ImGui::Checkbox("dim not run", &dim_unrun_);
    // A layer range and an op class: on a real model the tree is thousands of events long.
    bool range = layer_to_ >= 0;
    if (ImGui::Checkbox("layers", &range)) {
        layer_to_ = range ? std::max(layer_from_, 0) : -1;
        if (range && ctx.model) layer_to_ = std::max(layer_from_, static_cast<int>(ctx.model->config().n_layer) - 1);
    }
    const float field = ImGui::GetFontSize() * 3.5f;
    if (range) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(field);
        ImGui::InputInt("to##from", &layer_from_, 0);
        ImGui::SameLine();
        ImGui::SetNextItemWidth(field);
        ImGui::InputInt("##to", &layer_to_, 0);
        layer_from_ = std::max(0, layer_from_);
        layer_to_ = std::max(layer_from_, layer_to_);
    }
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 7);
    ImGui::Combo("##class", &op_class_, "all ops\0products\0norms\0attention\0experts\0elementwise\0");
    ImGui::SameLine();
    ImGui::Checkbox("warn/diverged", &flagged_only_);
    const std::string filter_line =
        filtered() ? fmt::format("events filter '{}' layers {} class {} {}", applied_filter_,
                                 layer_to_ >= 0 ? fmt::format("{}-{}", layer_from_, layer_to_) : std::string("all"), op_class_,
                                 flagged_only_ ? "flagged" : "any")
                   : std::string("events filter off");

    const SessionSnapshot& s = *ctx.snap;
    if (s.first_divergent >= 0) {
        const EventInfo* e = ctx.event(s.first_divergent);
        ImGui::TextColored(event_shade_color(EventShade::kDiverged), "first divergence: #%lld %s",
                           static_cast<long long>(s.first_divergent), e ? e->name.c_str() : "?");
        ImGui::SameLine();
        if (ImGui::SmallButton("show")) ctx.select(s.first_divergent);
    } else if (s.has_reference) {
        ImGui::TextDisabled("no divergence so far (%zu of %zu events run)", s.records.size(), s.events->size());
    } else {
        ImGui::TextDisabled("%zu of %zu events run; no reference loaded", s.records.size(), s.events->size());
    }

    // The cursor moved (here or in another panel): unfold its group and scroll to it once.
    bool cursor_moved = ctx.cursor != last_cursor_;
    if (cursor_moved) {
        last_cursor_ = ctx.cursor;
        reveal(ctx.cursor);
    }
    rebuild_rows(ctx);
    if (filter_line != logged_filter_) {
        ctx.log(listed_ >= 0 ? fmt::format("{}: {} events", filter_line, listed_) : filter_line);
        logged_filter_ = filter_line;
    }
    int64_t cursor_row = cursor_moved && ctx.cursor >= 0 ? shown_row_of(ctx.cursor) : -1;
    first_divergent_row_ = -1;

    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingStretchProp;
    if (ImGui::BeginTable("events", 4, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("event", ImGuiTableColumnFlags_WidthStretch, 3.0f);
        ImGui::TableSetupColumn("op", ImGuiTableColumnFlags_WidthStretch, 1.2f);
        ImGui::TableSetupColumn("ne", ImGuiTableColumnFlags_WidthStretch, 1.2f);
        ImGui::TableSetupColumn("nmse", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        ImGui::TableHeadersRow();
        ImGuiListClipper clipper;
        clipper.Begin(static_cast<int>(rows_.size()));
        if (cursor_row >= 0) clipper.ForceDisplayRangeByIndices(static_cast<int>(cursor_row), static_cast<int>(cursor_row) + 1);
        while (clipper.Step()) {
            for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
                draw_row(ctx, rows_[static_cast<size_t>(r)], r);
                if (r == cursor_row) ImGui::SetScrollHereY(0.4f);
            }
        }
        ImGui::EndTable();
    }
    // The first divergence may be folded away or off screen: still report whether it is listed.
    if (first_divergent_row_ < 0 && s.first_divergent >= 0) {
        int64_t row = shown_row_of(s.first_divergent);
        if (row >= 0) {
            first_divergent_row_ = row;
            first_divergent_label_ = (*events_)[static_cast<size_t>(s.first_divergent)].name + "  << first divergence";
        }
    }
    ImGui::End();
}

}  // namespace ls::views
