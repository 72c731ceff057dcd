// Q/K magnitudes (see qk_panel.h): line plots of the records' HeadNorms for one layer, a per-layer
// summary of the cursor's decode call, and the points above the warning threshold.
#include "views/qk_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <span>

#include "views/widgets/axis.h"
#include "views/widgets/plots.h"

namespace ls::views {

namespace pal = widgets::palette;

namespace {

float median(std::vector<float> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](float x) { return !std::isfinite(x); }), v.end());
    if (v.empty()) return NAN;
    auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

// The roped Q and K events of one layer in a decode call and micro-batch; in MLA also the roped
// rope parts alone (q_pe, k_pe).
struct LayerEvents {
    int layer = -1;
    const EventInfo* q = nullptr;
    const EventInfo* k = nullptr;
    const EventInfo* q_pe = nullptr;
    const EventInfo* k_pe = nullptr;
};

// One plot of a HeadNorms: a line per head over positions, or a line per position over heads.
void plot_norms(const char* id, const HeadNorms& n, float threshold, bool per_head_x, float height) {
    std::vector<widgets::LineSeries> series;
    std::vector<std::vector<float>> storage;
    std::vector<float> heads_x;
    const char* what = n.rope_part ? (n.is_key ? "|k_pe|" : "|q_pe|") : (n.is_key ? "|K|" : "|Q|");
    std::string title = fmt::format("{} layer {}", what, n.layer);
    widgets::LinePlotOptions options;
    options.size = ImVec2(0, height);
    options.warn_above = threshold;
    options.y_title = title.c_str();
    options.integer_x = true;  // heads and positions: 2 KV heads have no head 0.5
    if (!per_head_x) {
        options.x_title = "position in this call";
        for (int64_t h = 0; h < n.n_head; ++h)
            series.push_back({fmt::format("h{}", h), std::span<const float>(n.norms.data() + h * n.n_pos, n.n_pos), {}, 0});
    } else {
        options.x_title = "head";
        storage.resize(static_cast<size_t>(n.n_pos));
        for (int64_t t = 0; t < n.n_pos; ++t) {
            for (int64_t h = 0; h < n.n_head; ++h) storage[t].push_back(n.at(h, t));
            series.push_back({fmt::format("t{}", t), storage[t], {}, 0});
        }
    }
    widgets::draw_line_plot(id, series, options);
}

}  // namespace

void QKPanel::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    const EventInfo* at = begin_event_panel(ctx, "Q/K magnitudes", &open,
                                            "No run yet: per-head |Q| and |K| after RoPE appear here, layer by layer.");
    if (!at) return;
    const SessionSnapshot* snap = ctx.snap.get();

    // Roped Q and K of every layer in the cursor's decode call.
    std::vector<LayerEvents> layers;
    for (const EventInfo& e : *snap->events) {
        if (e.decode != at->decode || e.ubatch != at->ubatch || e.layer < 0) continue;
        const bool q = is_roped_q(e), k = is_roped_k(e), q_pe = is_roped_q_pe(e), k_pe = is_roped_k_pe(e);
        if (!q && !k && !q_pe && !k_pe) continue;
        if (layers.size() <= static_cast<size_t>(e.layer)) layers.resize(static_cast<size_t>(e.layer) + 1);
        LayerEvents& le = layers[e.layer];
        le.layer = e.layer;
        (q ? le.q : k ? le.k : q_pe ? le.q_pe : le.k_pe) = &e;
    }
    shown.decode = at->decode;
    if (layers.empty()) {
        ImGui::TextDisabled("This decode call has no roped Q/K events.");
        ImGui::End();
        return;
    }
    // Outside any layer (embeddings, output) the last layer looked at stays.
    if (at->layer >= 0) last_layer_ = at->layer;
    const int layer = std::clamp(last_layer_, 0, static_cast<int>(layers.size()) - 1);
    shown.layer = layer;

    auto record_of = [&](const EventInfo* e) { return e ? ctx.record(e->index) : nullptr; };
    const EventRecord* q_rec = record_of(layers[layer].q);
    const EventRecord* k_rec = record_of(layers[layer].k);
    const HeadNorms* q = q_rec ? q_rec->head_norms.get() : nullptr;
    const HeadNorms* k = k_rec ? k_rec->head_norms.get() : nullptr;
    const HeadNorms* q_ref = q_rec ? q_rec->ref_head_norms.get() : nullptr;
    const HeadNorms* k_ref = k_rec ? k_rec->ref_head_norms.get() : nullptr;
    const EventRecord* q_pe_rec = record_of(layers[layer].q_pe);
    const EventRecord* k_pe_rec = record_of(layers[layer].k_pe);
    shown.reference = show_reference && (q_ref || k_ref);

    ImGui::Text("decode call %d, layer %d", at->decode, layer);
    // Sliding-window models: how far back this layer's attention reaches from the newest position.
    shown.window_note = ctx.model && ctx.snap->position > 0
                            ? layer_view_text(ctx.model->config(), layer, ctx.snap->position - 1)
                            : "";
    if (!shown.window_note.empty()) {
        ImGui::SameLine();
        ImGui::TextDisabled("(%s)", shown.window_note.c_str());
    }
    ImGui::SameLine();
    ImGui::Checkbox("auto threshold", &auto_threshold);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(120);
    if (auto_threshold) ImGui::SliderFloat("x median", &threshold_factor, 1.5f, 20.0f, "%.1f");
    else ImGui::DragFloat("threshold", &fixed_threshold, 0.1f, 0.0f, 1e6f, "%.3g");
    ImGui::Checkbox("reference beside", &show_reference);
    ImGui::SameLine();
    const int64_t n_pos = q ? q->n_pos : (k ? k->n_pos : 0);
    const bool force_heads = n_pos == 1;  // one position: a line per head would be one dot each
    bool heads_x = per_head_x || force_heads;
    ImGui::BeginDisabled(force_heads);
    ImGui::Checkbox("x axis = head", &heads_x);
    ImGui::EndDisabled();
    if (!force_heads) per_head_x = heads_x;

    auto threshold_of = [&](const HeadNorms* n) {
        if (!n) return NAN;
        return auto_threshold ? threshold_factor * median(n->norms) : fixed_threshold;
    };
    shown.q_threshold = threshold_of(q), shown.k_threshold = threshold_of(k);
    shown.q_heads = q ? static_cast<int>(q->n_head) : 0;
    shown.k_heads = k ? static_cast<int>(k->n_head) : 0;
    shown.positions = n_pos;

    if (!q && !k) {
        ImGui::TextDisabled("Layer %d's roped Q and K are not evaluated yet in this decode call.", layer);
    } else {
        const bool beside = shown.reference;
        const float plot_h = 170.0f;
        if (ImGui::BeginTable("norms", beside ? 2 : 1, ImGuiTableFlags_SizingStretchSame)) {
            ImGui::TableSetupColumn("ours");
            if (beside) ImGui::TableSetupColumn("reference");
            ImGui::TableHeadersRow();
            // MLA: the roped parts alone below the concatenated Q and K, each on its own threshold.
            auto norms_of = [](const EventRecord* r, bool ref) {
                return r ? (ref ? r->ref_head_norms.get() : r->head_norms.get()) : nullptr;
            };
            const HeadNorms* ours[4] = {q, k, norms_of(q_pe_rec, false), norms_of(k_pe_rec, false)};
            const HeadNorms* refs[4] = {q_ref, k_ref, norms_of(q_pe_rec, true), norms_of(k_pe_rec, true)};
            static const char* const names[4] = {"Qcur", "Kcur", "q_pe", "k_pe"};
            const int n_rows = layers[layer].q_pe || layers[layer].k_pe ? 4 : 2;
            for (int row = 0; row < n_rows; ++row) {
                ImGui::TableNextRow();
                ImGui::TableSetColumnIndex(0);
                ImGui::PushID(row);
                // The reference shares our threshold, so its points light up only where ours would.
                const float threshold = row == 0 ? shown.q_threshold : row == 1 ? shown.k_threshold : threshold_of(ours[row]);
                if (ours[row]) plot_norms("ours", *ours[row], threshold, heads_x, plot_h);
                else ImGui::TextDisabled("not evaluated yet");
                if (row >= 2 && ours[row]) ++shown.rope_part_plots;
                if (beside) {
                    ImGui::TableSetColumnIndex(1);
                    if (refs[row]) plot_norms("ref", *refs[row], threshold, heads_x, plot_h);
                    else ImGui::TextDisabled("the reference has no complete %s for this layer", names[row]);
                }
                ImGui::PopID();
            }
            ImGui::EndTable();
        }
    }

    // Summary: max and mean norm per layer; a layer that stands out is where to look first.
    std::vector<float> series_data[6];  // max Q, mean Q, max K, mean K, ref max Q, ref max K
    std::vector<float> all_means;
    std::vector<int> summary_layers;
    for (const LayerEvents& le : layers) {
        const EventRecord* qr = record_of(le.q);
        const EventRecord* kr = record_of(le.k);
        if (!qr || !qr->head_norms) continue;
        auto max_mean = [](const HeadNorms* n, float* mx, float* mean) {
            *mx = NAN, *mean = NAN;
            if (!n || n->norms.empty()) return;
            double sum = 0;
            float m = 0;
            for (float v : n->norms) sum += v, m = std::max(m, v);
            *mx = m, *mean = static_cast<float>(sum / n->norms.size());
        };
        float v[8];
        max_mean(qr->head_norms.get(), &v[0], &v[1]);
        max_mean(kr ? kr->head_norms.get() : nullptr, &v[2], &v[3]);
        max_mean(qr->ref_head_norms.get(), &v[4], &v[6]);
        max_mean(kr ? kr->ref_head_norms.get() : nullptr, &v[5], &v[7]);
        for (int s = 0; s < 6; ++s) series_data[s].push_back(v[s]);
        all_means.push_back(v[1]);
        if (std::isfinite(v[3])) all_means.push_back(v[3]);
        summary_layers.push_back(le.layer);
    }
    shown.summary_layers = static_cast<int>(summary_layers.size());
    if (!summary_layers.empty()) {
        std::vector<float> x(summary_layers.begin(), summary_layers.end());
        static const char* names[6] = {"max |Q|", "mean |Q|", "max |K|", "mean |K|", "ref max |Q|", "ref max |K|"};
        const ImU32 colors[6] = {pal::series(0), IM_COL32(120, 160, 230, 255), pal::series(2),
                                 IM_COL32(130, 200, 140, 255), pal::series(1), pal::series(3)};
        std::vector<widgets::LineSeries> series;
        std::vector<int> series_ids;
        for (int s = 0; s < 6; ++s) {
            if (s >= 4 && !show_reference) continue;
            if (std::none_of(series_data[s].begin(), series_data[s].end(), [](float f) { return std::isfinite(f); }))
                continue;
            series.push_back({names[s], series_data[s], x, colors[s]});
            series_ids.push_back(s);
        }
        widgets::LinePlotOptions options;
        options.x_title = "layer";
        options.y_title = "L2 norm per head";
        options.size = ImVec2(0, 160);
        options.warn_above = auto_threshold ? threshold_factor * median(all_means) : fixed_threshold;
        ImGui::TextDisabled("Per layer, decode call %d (click a point to move the cursor to that layer's Q)", at->decode);
        int point = -1;
        int hovered = widgets::draw_line_plot("summary", series, options, &point);
        if (hovered >= 0 && point >= 0 && point < static_cast<int>(summary_layers.size()) &&
            ImGui::IsMouseClicked(ImGuiMouseButton_Left)) {
            const EventInfo* target = layers[summary_layers[point]].q;
            if (target) ctx.select(target->index);
        }
    }

    // The largest points above the threshold, ours: "head 3 at position 2 is 7.5x the median".
    for (const HeadNorms* n : {q, k}) {
        if (!n) continue;
        const float threshold = n->is_key ? shown.k_threshold : shown.q_threshold;
        const float med = median(n->norms);
        for (int64_t h = 0; h < n->n_head; ++h)
            for (int64_t t = 0; t < n->n_pos; ++t)
                if (n->at(h, t) > threshold)
                    shown.outliers.push_back({n->is_key, static_cast<int>(h), t, n->at(h, t), n->at(h, t) / med});
    }
    std::sort(shown.outliers.begin(), shown.outliers.end(),
              [](const Outlier& a, const Outlier& b) { return a.norm > b.norm; });
    if (shown.outliers.empty()) {
        ImGui::TextDisabled("No head above the threshold in layer %d.", layer);
    } else {
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn), "%zu points above the threshold in layer %d:",
                           shown.outliers.size(), layer);
        if (ImGui::BeginTable("outliers", 5, ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV,
                              ImVec2(0, std::min(160.0f, ImGui::GetContentRegionAvail().y)))) {
            ImGui::TableSetupScrollFreeze(0, 1);
            for (const char* c : {"", "head", "position", "norm", "x median"}) ImGui::TableSetupColumn(c);
            ImGui::TableHeadersRow();
            ImGuiListClipper clipper;
            clipper.Begin(static_cast<int>(shown.outliers.size()));
            while (clipper.Step())
                for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
                    const Outlier& o = shown.outliers[static_cast<size_t>(i)];
                    ImGui::TableNextRow();
                    ImGui::TableSetColumnIndex(0);
                    ImGui::TextUnformatted(o.is_key ? "K" : "Q");
                    ImGui::TableSetColumnIndex(1);
                    ImGui::Text("%d", o.head);
                    ImGui::TableSetColumnIndex(2);
                    ImGui::Text("%lld", static_cast<long long>(o.position));
                    ImGui::TableSetColumnIndex(3);
                    ImGui::Text("%.4g", o.norm);
                    ImGui::TableSetColumnIndex(4);
                    ImGui::Text("%.1f", o.ratio_to_median);
                }
            ImGui::EndTable();
        }
    }
    ImGui::End();
}

}  // namespace ls::views
