// Tensor inspector (see tensor_inspector.h). The reference's values and stats are fetched once per
// cursor move; a frame draws only the visible grid rows.
#include "views/debug_context.h"
#include "views/tensor_inspector.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>

#include "engine/compare/metrics.h"
#include "views/event_browser.h"
#include "views/widgets/plots.h"

namespace ls::views {

namespace {

constexpr int64_t kMaxSortedValues = int64_t{1} << 22;  // sorting more would stall a frame

// An em dash where the font has one (the app loads U+2000..U+206F); a hyphen otherwise.
const char* missing_mark() { return ImGui::GetFont()->FindGlyphNoFallback(0x2014) ? "\xe2\x80\x94" : "-"; }

std::string ne_text(const int64_t ne[4]) {
    return fmt::format("[{}, {}, {}, {}]", ne[0], ne[1], ne[2], ne[3]);
}

}  // namespace


void TensorInspector::refresh(const DebugContext& ctx) {
    const EventRecord* r = ctx.record(ctx.cursor);
    std::shared_ptr<const CapturedTensor> capture = ctx.capture(ctx.cursor);
    if (ctx.cursor == event_ && r == record_ && capture.get() == capture_key_ && ctx.reference == reference_) return;
    event_ = ctx.cursor, record_ = r, capture_key_ = capture.get(), reference_ = ctx.reference;
    capture_ = std::move(capture);
    ref_mode_ = RefMode::kNone;
    ref_name_.clear(), ref_note_.clear();
    ref_values_.clear(), aligned_ours_.clear(), aligned_ref_.clear(), ref_samples_.clear();
    has_ref_stats_ = false;
    order_.clear();
    order_sorted_ = false;

    const EventInfo* e = ctx.event(ctx.cursor);
    if (!e || !ctx.reference) return;
    // The comparison knows which reference tensor it paired (llama.cpp's unnamed nodes have other
    // names); before the event ran, try the same dump name.
    ref_name_ = r && !r->comparison.ref_name.empty() ? r->comparison.ref_name : e->name;
    const RefTensor* rt = ctx.reference->find(ref_name_);
    if (!rt) {
        ref_note_ = fmt::format("the reference has no tensor {}", ref_name_);
        return;
    }
    const int64_t ours_n = e->ne[0] * e->ne[1] * e->ne[2] * e->ne[3];
    if (!rt->complete()) {
        ref_note_ = fmt::format("partial reference: {} printed values of {}", rt->samples.size(), rt->n_elements());
        if (rt->n_elements() == ours_n) {
            ref_mode_ = RefMode::kPartial;
            ref_samples_ = rt->samples;
            std::sort(ref_samples_.begin(), ref_samples_.end());
        } else {
            ref_note_ += fmt::format(" (shape {} against ours {}: not shown per value)", ne_text(rt->ne()), ne_text(e->ne));
        }
        return;
    }
    std::vector<float> values = ctx.reference->values(*rt);
    if (static_cast<int64_t>(values.size()) == ours_n && std::equal(rt->ne(), rt->ne() + 4, e->ne)) {
        ref_mode_ = RefMode::kFull;
        ref_values_ = std::move(values);
        ref_stats_ = tensor_stats(ref_values_.data(), static_cast<int64_t>(ref_values_.size()));
        has_ref_stats_ = true;
        return;
    }
    // Shapes differ (only output rows kept, padded KV cells): pair the values the way the
    // comparison does, which needs our values.
    ref_stats_ = tensor_stats(values.data(), static_cast<int64_t>(values.size()));
    has_ref_stats_ = true;
    if (!capture_ || !capture_->values) {
        ref_note_ = fmt::format("reference shape {} differs from ours {}", ne_text(rt->ne()), ne_text(e->ne));
        return;
    }
    AlignedValues aligned;
    std::string why;
    if (align_with_reference(capture_->values->data(), e->ne, *ctx.reference, *rt, &aligned, &why)) {
        ref_mode_ = RefMode::kAligned;
        aligned_ours_ = std::move(aligned.ours);
        aligned_ref_ = std::move(aligned.ref);
        ref_note_ = fmt::format("paired as {}: rows below are the paired values, not our flat indices",
                                aligned.note.empty() ? "aligned" : aligned.note);
    } else {
        ref_note_ = "cannot pair with the reference: " + why;
    }
}

void TensorInspector::draw_header(const DebugContext& ctx, const EventInfo& e, const EventRecord* r) {
    ImVec4 color = event_shade_color(event_shade(ctx, e.index));
    ImGui::TextColored(color, "#%lld  %s", static_cast<long long>(e.index), e.name.c_str());
    ImGui::SameLine();
    ImGui::TextDisabled("%s  ne %s  %s  layer %d", op_name(e.op), ne_text(e.ne).c_str(), decode_label(ctx, e.decode).c_str(),
                        e.layer);
    if (!r) return;
    const TensorStats& s = r->stats;
    ImGui::Text("min %.5g  max %.5g  mean %.5g  rms %.5g", s.min, s.max, s.mean, s.rms);
    ImGui::SameLine();
    const ImVec4 bad = event_shade_color(EventShade::kDiverged);
    if (s.nan_count || s.inf_count)
        ImGui::TextColored(bad, "NaN %lld  Inf %lld", static_cast<long long>(s.nan_count), static_cast<long long>(s.inf_count));
    else
        ImGui::TextDisabled("NaN 0  Inf 0");
    if (has_ref_stats_) {
        ImGui::TextDisabled("reference: min %.5g  max %.5g  mean %.5g  rms %.5g  NaN %lld  Inf %lld", ref_stats_.min,
                            ref_stats_.max, ref_stats_.mean, ref_stats_.rms, static_cast<long long>(ref_stats_.nan_count),
                            static_cast<long long>(ref_stats_.inf_count));
    }
}

void TensorInspector::draw_metrics(const EventRecord& r) {
    if (!r.compared) return;
    const EventComparison& c = r.comparison;
    const Metrics& m = c.metrics;
    ImVec4 color = event_shade_color(c.status == CompareStatus::kOk         ? EventShade::kOk
                                     : c.status == CompareStatus::kWarn     ? EventShade::kWarn
                                     : c.status == CompareStatus::kDiverged ? EventShade::kDiverged
                                                                            : EventShade::kNoReference);
    ImGui::TextColored(color, "%s", compare_status_name(c.status));
    ImGui::SameLine();
    if (c.status == CompareStatus::kNoReference || c.status == CompareStatus::kUnusable) {
        ImGui::TextDisabled("%s", c.note.empty() ? "not paired with a reference tensor" : c.note.c_str());
        return;
    }
    ImGui::Text("NMSE %.3g  max |diff| %.3g  mean |diff| %.3g  rel L2 %.3g  cosine %.6f  pearson %.6f", m.nmse, m.max_abs,
                m.mean_abs, m.rel_l2, m.cosine, m.pearson);
    std::string more = fmt::format("{} values against {}", m.n, c.ref_name);
    // A reference in the user's engine's own names: that name beside llama.cpp's.
    if (!c.ref_source_name.empty()) more += fmt::format(" (your engine's {})", c.ref_source_name);
    if (m.n_nonfinite) more += fmt::format(", {} NaN/Inf mismatches", m.n_nonfinite);
    if (c.partial) more += fmt::format(", partial (sum rel. error {:.3g})", c.sum_rel_error);
    if (c.top_k_overlap >= 0) more += fmt::format(", top-k overlap {}", c.top_k_overlap);
    if (c.ref_top1_rank >= 0) more += fmt::format(", reference top-1 is our #{}", c.ref_top1_rank + 1);
    if (!c.note.empty()) more += " - " + c.note;
    ImGui::TextDisabled("%s", more.c_str());
}

std::string TensorInspector::reference_text(int64_t row, float* ref_out) const {
    switch (ref_mode_) {
        case RefMode::kFull: *ref_out = ref_values_[static_cast<size_t>(row)]; break;
        case RefMode::kAligned: *ref_out = aligned_ref_[static_cast<size_t>(row)]; break;
        case RefMode::kPartial: {
            auto it = std::lower_bound(ref_samples_.begin(), ref_samples_.end(), std::make_pair(row, -INFINITY));
            if (it == ref_samples_.end() || it->first != row) return missing_mark();  // not printed by the source
            *ref_out = it->second;
            break;
        }
        case RefMode::kNone: return missing_mark();
    }
    return fmt::format("{:.7g}", *ref_out);
}

void TensorInspector::draw_values(DebugContext& ctx) {
    const bool aligned = ref_mode_ == RefMode::kAligned;
    const std::vector<float>& ours = aligned ? aligned_ours_ : *capture_->values;
    const int64_t n = static_cast<int64_t>(ours.size());
    const bool have_ref = ref_mode_ != RefMode::kNone;

    ImGui::BeginDisabled(!have_ref || n > kMaxSortedValues);
    ImGui::Checkbox("largest |difference| first", &sort_by_difference);
    ImGui::EndDisabled();
    if (!ref_note_.empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("%s", ref_note_.c_str());
    }
    const bool sorted = sort_by_difference && have_ref && n <= kMaxSortedValues;
    if (sorted && !order_sorted_) {
        order_.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
        auto diff = [&](int64_t i) {
            float ref = NAN;
            reference_text(i, &ref);
            float d = std::fabs(ours[static_cast<size_t>(i)] - ref);
            return std::isnan(d) ? -1.0f : d;  // unprinted reference values sort last
        };
        std::vector<float> key(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) key[static_cast<size_t>(i)] = diff(i);
        std::stable_sort(order_.begin(), order_.end(), [&](int64_t a, int64_t b) { return key[a] > key[b]; });
        order_sorted_ = true;
    }

    const EventInfo& e = *ctx.event(ctx.cursor);
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_Resizable;
    if (!ImGui::BeginTable("values", 5, flags)) return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("index");
    ImGui::TableSetupColumn(aligned ? "pair" : "i0, i1, i2, i3");
    ImGui::TableSetupColumn("ours");
    ImGui::TableSetupColumn("reference");
    ImGui::TableSetupColumn("difference");
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(std::min<int64_t>(n, INT32_MAX)));
    while (clipper.Step()) {
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
            const int64_t i = sorted ? order_[static_cast<size_t>(row)] : row;
            const float v = ours[static_cast<size_t>(i)];
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%lld", static_cast<long long>(i));
            // Right click: follow this element through the run (tensor history).
            if (!aligned && ctx.snap) {
                ImGui::PushID(static_cast<int>(i));
                if (ImGui::BeginPopupContextItem("follow")) {
                    const std::optional<HistoryCoord> at = history_coord_of(*ctx.snap, e, i);
                    ImGui::BeginDisabled(!at);
                    if (ImGui::MenuItem("Follow through the run (tensor history)") && at) ctx.requested_history = at;
                    ImGui::EndDisabled();
                    ImGui::EndPopup();
                }
                ImGui::PopID();
            }
            ImGui::TableNextColumn();
            if (aligned) {
                ImGui::TextDisabled("paired %lld", static_cast<long long>(i));
            } else {
                int64_t i0 = i % e.ne[0], i1 = i / e.ne[0] % e.ne[1], i2 = i / (e.ne[0] * e.ne[1]) % e.ne[2],
                        i3 = i / (e.ne[0] * e.ne[1] * e.ne[2]);
                ImGui::TextDisabled("%lld, %lld, %lld, %lld", static_cast<long long>(i0), static_cast<long long>(i1),
                                    static_cast<long long>(i2), static_cast<long long>(i3));
            }
            ImGui::TableNextColumn();
            ImGui::Text("%.7g", v);
            ImGui::TableNextColumn();
            float ref = NAN;
            std::string ref_text = reference_text(i, &ref);
            ImGui::TextUnformatted(ref_text.c_str());
            ImGui::TableNextColumn();
            if (std::isnan(ref)) {
                ImGui::TextDisabled("%s", missing_mark());
            } else {
                float d = v - ref;
                // Relative to the tensor's rms: what counts as a large difference depends on its scale.
                double scale = has_ref_stats_ && ref_stats_.rms > 0 ? ref_stats_.rms : 1.0;
                ImVec4 c = std::fabs(d) > 1e-2 * scale   ? event_shade_color(EventShade::kDiverged)
                           : std::fabs(d) > 1e-4 * scale ? event_shade_color(EventShade::kWarn)
                                                         : ImGui::GetStyleColorVec4(ImGuiCol_Text);
                ImGui::TextColored(c, "%+.3g", d);
            }
        }
    }
    ImGui::EndTable();
}

void TensorInspector::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Tensor inspector", &open)) {
        ImGui::End();
        return;
    }
    const EventInfo* e = ctx.event(ctx.cursor);
    if (!e) {
        ImGui::TextDisabled("No event selected: pick one in the Event browser, or step (F10) and the cursor follows.");
        ImGui::End();
        return;
    }
    refresh(ctx);
    const EventRecord* r = ctx.record(ctx.cursor);
    draw_header(ctx, *e, r);
    if (!r) {
        ImGui::Spacing();
        ImGui::TextDisabled("not run yet: step to it (F10), or double-click it in the Event browser to run there.");
        ImGui::End();
        return;
    }
    draw_metrics(*r);
    widgets::HistogramOptions hist;
    hist.title = "values (asinh axis)";
    hist.size = ImVec2(0, 170);
    widgets::draw_bar_histogram("histogram", r->stats, has_ref_stats_ ? &ref_stats_ : nullptr, hist);
    if (!capture_ || !capture_->values) {
        // Stats and metrics above are kept for every event; full values only as the policy allows.
        const SessionSnapshot& s = *ctx.snap;
        ImGui::TextDisabled("not captured: the capture policy kept %zu tensors (%.1f MiB) and evicted %lld;",
                            s.captures ? s.captures->size() : size_t{0}, s.capture_bytes / (1024.0 * 1024.0),
                            static_cast<long long>(s.captures_evicted));
        if (s.capture_budget > 0)
            ImGui::TextDisabled("this event's values were not kept within the budget of %.0f MiB. Raise it "
                                "(--capture-budget) to see them.", s.capture_budget / (1024.0 * 1024.0));
        else
            ImGui::TextDisabled("this event's values were not kept. Widen the capture policy to see them.");
        ImGui::End();
        return;
    }
    draw_values(ctx);
    ImGui::End();
}

}  // namespace ls::views
