// Attention heatmaps (see attention_panel.h): thumbnails per (layer, head) from the records'
// AttentionProbs, rebuilt only when the probabilities or the view change.
#include "views/attention_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "views/logits_panel.h"
#include "engine/tokenizer/tokenizer.h"
#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

namespace {

bool same_shape(const AttentionProbs* a, const AttentionProbs* b) {
    return a && b && a->n_head == b->n_head && a->n_query == b->n_query && a->n_key == b->n_key;
}

// The piece of the token at KV position `pos`: prompt positions from the snapshot, later ones
// from the token fed to that decode call.
std::string piece_at(const SessionSnapshot& snap, const Tokenizer* tokenizer, int64_t pos) {
    const int64_t n_prompt = static_cast<int64_t>(snap.tokens.size());
    int32_t token = -1;
    if (pos >= 0 && pos < n_prompt) {
        if (pos < static_cast<int64_t>(snap.pieces.size()) && !snap.pieces[pos].empty())
            return fmt::format("{} '{}'", pos, escape_piece(snap.pieces[pos]));
        token = snap.tokens[pos];
    } else {
        const int64_t call = pos - n_prompt + 1;  // decode call d >= 1 feeds position n_prompt + d - 1
        if (call >= 1 && call < static_cast<int64_t>(snap.decode_inputs.size())) token = snap.decode_inputs[call];
    }
    if (token >= 0 && tokenizer && tokenizer->valid(token))
        return fmt::format("{} '{}'", pos, escape_piece(tokenizer->token_to_piece(token)));
    return token >= 0 ? fmt::format("{} (id {})", pos, token) : fmt::format("{}", pos);
}

const char* view_name(AttentionPanel::View v) {
    switch (v) {
        case AttentionPanel::View::Ours: return "ours";
        case AttentionPanel::View::Reference: return "reference";
        default: return "ours - reference";
    }
}

}  // namespace

bool AttentionPanel::fill(widgets::Heatmap& heatmap, const EventRecord& rec, int head, View v, float diff_range,
                          const void** source, const void** ref_source, View* built_view, float* built_range) {
    const AttentionProbs* ours = rec.attention.get();
    const AttentionProbs* ref = rec.ref_attention.get();
    const AttentionProbs* shown_probs = v == View::Reference ? ref : ours;
    if (!shown_probs || head >= shown_probs->n_head) return false;
    if (v == View::Difference && !same_shape(ours, ref)) return false;
    if (*source == ours && *ref_source == ref && *built_view == v && *built_range == diff_range && !heatmap.empty())
        return true;

    const int64_t rows = shown_probs->n_query, cols = shown_probs->n_key;
    std::vector<float> m(static_cast<size_t>(rows * cols));  // (query, key) row-major
    for (int64_t q = 0; q < rows; ++q)
        for (int64_t k = 0; k < cols; ++k) {
            float value = shown_probs->at(head, q, k);
            if (v == View::Difference) value = ours->at(head, q, k) - ref->at(head, q, k);
            m[static_cast<size_t>(q * cols + k)] = value;
        }
    // One fixed scale for every cell so heads compare: [0, 1] for probabilities, the grid's
    // largest |difference| for differences (zero stays white).
    if (v == View::Difference) {
        heatmap.map = widgets::Colormap::Diverging;
        heatmap.range = widgets::HeatmapRange::Fixed;
        float r = diff_range > 0 ? diff_range : 1e-30f;
        heatmap.fixed_lo = -r, heatmap.fixed_hi = r;
        heatmap.value_name = "ours - ref";
    } else {
        heatmap.map = widgets::Colormap::Sequential;
        heatmap.range = widgets::HeatmapRange::Fixed;
        heatmap.fixed_lo = 0, heatmap.fixed_hi = 1;
        heatmap.value_name = "p";
    }
    heatmap.row_name = "query", heatmap.col_name = "key";
    heatmap.set(m.data(), static_cast<int>(rows), static_cast<int>(cols), ++version_);
    *source = ours, *ref_source = ref, *built_view = v, *built_range = diff_range;
    return true;
}

void AttentionPanel::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    const EventInfo* at = begin_event_panel(ctx, "Attention", &open,
                                            "No run yet: attention maps (softmax of q k^T per layer and head) appear here.");
    if (!at) return;
    const SessionSnapshot* snap = ctx.snap.get();

    // kq_soft_max-L of the cursor's decode call and micro-batch, by layer.
    std::vector<const EventInfo*> layers;
    for (const EventInfo& e : *snap->events)
        if (e.decode == at->decode && e.ubatch == at->ubatch && e.layer >= 0 &&
            e.base_name == "kq_soft_max-" + std::to_string(e.layer))
            layers.push_back(&e);
    std::sort(layers.begin(), layers.end(), [](const EventInfo* a, const EventInfo* b) { return a->layer < b->layer; });
    shown.decode = at->decode, shown.ubatch = at->ubatch;
    if (layers.empty()) {
        ImGui::TextDisabled("This decode call has no kq_soft_max events: flash attention keeps no probabilities.");
        ImGui::End();
        return;
    }
    int n_head = 0;
    for (const EventInfo* e : layers) n_head = std::max<int>(n_head, static_cast<int>(e->ne[2]));
    shown.layers = static_cast<int>(layers.size()), shown.heads = n_head;
    // Columns: a page of heads, by number or ranked per layer.
    heads_per_page = std::clamp(heads_per_page, 1, 64);
    const int columns = std::min(n_head, heads_per_page);
    const int pages = (n_head + columns - 1) / std::max(1, columns);
    page = std::clamp(page, 0, std::max(0, pages - 1));
    shown.columns = columns, shown.pages = pages;

    // Largest |ours - reference| over the whole grid: one diverging scale for every thumbnail.
    float diff_range = 0;
    std::string note;
    int reconstructed = 0, missing = 0;
    for (const EventInfo* e : layers) {
        const EventRecord* rec = ctx.record(e->index);
        if (!rec || !rec->attention) continue;
        if (rec->ref_attention && rec->ref_attention->reconstructed) ++reconstructed;
        if (!rec->ref_attention) {
            ++missing;
            if (note.empty()) note = rec->ref_attention_note;
        }
        if (view == View::Difference && same_shape(rec->attention.get(), rec->ref_attention.get())) {
            const auto& a = *rec->attention->probs;
            const auto& b = *rec->ref_attention->probs;
            for (size_t i = 0; i < a.size(); ++i) diff_range = std::max(diff_range, std::abs(a[i] - b[i]));
        }
    }
    shown.difference_range = diff_range;

    ImGui::Text("decode call %d", at->decode);
    ImGui::SameLine();
    int v = static_cast<int>(view);
    ImGui::RadioButton("ours", &v, 0);
    ImGui::SameLine();
    ImGui::RadioButton("reference", &v, 1);
    ImGui::SameLine();
    ImGui::RadioButton("difference", &v, 2);
    view = static_cast<View>(v);
    ImGui::SameLine();
    ImGui::SetNextItemWidth(100);
    ImGui::SliderFloat("size", &thumbnail_px, 24.0f, 160.0f, "%.0f px");
    // Many heads (22 x 32, 64 x 64): a page at a time, the interesting ones first if asked.
    int o = static_cast<int>(order);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 11);
    const Order was = order;
    if (ImGui::Combo("heads", &o, "by number\0most divergent first\0most peaked first\0")) order = static_cast<Order>(o);
    if (order != was) {
        page = 0;
        ctx.log(fmt::format("attention heads {}", order == Order::kIndex ? "by number" : order == Order::kDivergence ? "most divergent first" : "most peaked first"));
    }
    if (n_head > 1) {  // shown whatever the page count, so that a large page can be made small again
        ImGui::SameLine();
        ImGui::SetNextItemWidth(ImGui::GetFontSize() * 3);
        ImGui::InputInt("per page", &heads_per_page, 0);
    }
    if (pages > 1) {
        ImGui::SameLine();
        if (ImGui::ArrowButton("prev", ImGuiDir_Left) && page > 0) --page;
        ImGui::SameLine();
        ImGui::Text("page %d / %d", page + 1, pages);
        ImGui::SameLine();
        if (ImGui::ArrowButton("next", ImGuiDir_Right) && page + 1 < pages) ++page;
    }

    if (!ctx.reference) {
        shown.reference_note = "no reference loaded";
    } else if (reconstructed > 0) {
        shown.reference_note = fmt::format(
            "reference maps rebuilt from its roped Q and K ({} layers): it ran flash attention, so it kept no softmax",
            reconstructed);
    }
    if (ctx.reference && missing > 0)
        shown.reference_note += fmt::format("{}reference missing for {} layers: {}", shown.reference_note.empty() ? "" : "; ",
                                            missing, note.empty() ? "no reason given" : note);
    if (!shown.reference_note.empty()) {
        if (missing > 0) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn), "%s", shown.reference_note.c_str());
        else ImGui::TextDisabled("%s", shown.reference_note.c_str());
    }
    if (view == View::Difference)
        ImGui::TextDisabled("blue: ours lower, red: ours higher; scale +-%.3g (the grid's largest |difference|)", diff_range);

    // Each layer's heads in column order: ranked by the chosen score (recomputed when its records
    // change), then the page of them.
    shown.head_order.clear();
    for (const EventInfo* e : layers) {
        const EventRecord* rec = ctx.record(e->index);
        std::vector<int> heads(static_cast<size_t>(n_head));
        for (int h = 0; h < n_head; ++h) heads[static_cast<size_t>(h)] = h;
        if (order != Order::kIndex && rec && rec->attention) {
            HeadScore& s = scores_[e->layer];
            const AttentionProbs* ours = rec->attention.get();
            const AttentionProbs* ref = rec->ref_attention.get();
            if (s.source != ours || s.ref_source != ref) {
                s.source = ours, s.ref_source = ref;
                s.nmse.assign(static_cast<size_t>(n_head), -1.0);
                s.entropy.assign(static_cast<size_t>(n_head), 1.0);
                for (int h = 0; h < n_head && h < ours->n_head; ++h) {
                    double ent = 0;
                    int rows = 0;
                    double d = 0, r2 = 0;
                    for (int64_t q = 0; q < ours->n_query; ++q) {
                        double hq = 0;
                        int valid = 0;
                        for (int64_t k = 0; k < ours->n_key; ++k) {
                            const double p = ours->at(h, q, k);
                            if (p > 0) hq -= p * std::log(p), ++valid;
                            if (same_shape(ours, ref)) {
                                const double b = ref->at(h, q, k);
                                d += (p - b) * (p - b), r2 += b * b;
                            }
                        }
                        if (valid > 1) ent += hq / std::log(static_cast<double>(valid)), ++rows;
                    }
                    s.entropy[static_cast<size_t>(h)] = rows > 0 ? ent / rows : 1.0;
                    if (same_shape(ours, ref)) s.nmse[static_cast<size_t>(h)] = r2 > 0 ? d / r2 : d;
                }
            }
            const std::vector<double>& key = order == Order::kDivergence ? s.nmse : s.entropy;
            std::stable_sort(heads.begin(), heads.end(), [&](int a, int b) {
                return order == Order::kDivergence ? key[a] > key[b] : key[a] < key[b];
            });
        }
        const size_t begin = std::min(heads.size(), static_cast<size_t>(page * columns));
        shown.head_order.emplace_back(heads.begin() + static_cast<std::ptrdiff_t>(begin),
                                      heads.begin() + static_cast<std::ptrdiff_t>(std::min(heads.size(), begin + columns)));
    }

    const bool enlarge = selected_layer >= 0 && selected_head >= 0;
    const float grid_h = enlarge ? std::max(120.0f, ImGui::GetContentRegionAvail().y * 0.42f) : 0.0f;
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollX | ImGuiTableFlags_ScrollY | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_SizingFixedFit;
    if (ImGui::BeginTable("grid", columns + 1, flags, ImVec2(0, grid_h))) {
        ImGui::TableSetupScrollFreeze(1, 1);
        ImGui::TableSetupColumn("layer");
        for (int c = 0; c < columns; ++c)
            ImGui::TableSetupColumn(order == Order::kIndex ? fmt::format("h{}", page * columns + c).c_str()
                                                           : fmt::format("#{}", page * columns + c + 1).c_str(),
                                    ImGuiTableColumnFlags_WidthFixed, thumbnail_px);
        ImGui::TableHeadersRow();
        for (size_t row = 0; row < layers.size(); ++row) {
            const EventInfo* e = layers[row];
            const EventRecord* rec = ctx.record(e->index);
            ImGui::PushID(e->layer);
            ImGui::TableNextRow();
            ImGui::TableSetColumnIndex(0);
            // Sliding-window models: local layers are marked, their window in the tooltip.
            const bool local = ctx.model && ctx.model->config().layer_is_swa(e->layer);
            shown.local_layers += local ? 1 : 0;
            const std::string label = fmt::format("L{}{}", e->layer, local ? " sw" : "");
            if (e->layer == at->layer) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kMarker), "%s", label.c_str());
            else ImGui::Text("%s", label.c_str());
            if (local && ImGui::IsItemHovered())
                ImGui::SetTooltip("local layer: each query sees the last %lld positions (sliding window); its cache holds "
                                  "the window, not the context",
                                  static_cast<long long>(ctx.model->config().n_swa));
            if (ImGui::IsItemClicked()) ctx.select(e->index);
            const std::vector<int>& row_heads = shown.head_order[row];
            for (size_t c = 0; c < row_heads.size(); ++c) {
                const int h = row_heads[c];
                ImGui::TableSetColumnIndex(static_cast<int>(c) + 1);
                Cell& cell = cells_[{e->layer, h}];
                if (!rec || !fill(*cell.map, *rec, h, view, diff_range, &cell.source, &cell.ref_source, &cell.view,
                                  &cell.range)) {
                    ImGui::Dummy(ImVec2(thumbnail_px, thumbnail_px));
                    continue;
                }
                ++shown.thumbnails;
                shown.n_query = cell.map->rows(), shown.n_key = cell.map->cols();
                ImGui::PushID(h);
                const bool selected = e->layer == selected_layer && h == selected_head;
                if (cell.map->draw_thumbnail("thumb", ImVec2(thumbnail_px, thumbnail_px), selected))
                    select_cell(e->layer, h);
                if (order != Order::kIndex) {  // ranked: each cell names its head
                    const ImVec2 at_min = ImGui::GetItemRectMin();
                    const std::string label = fmt::format("h{}", h);
                    ImDrawList* dl = ImGui::GetWindowDrawList();
                    const ImVec2 size = ImGui::CalcTextSize(label.c_str());
                    dl->AddRectFilled(at_min, ImVec2(at_min.x + size.x + 4, at_min.y + size.y), IM_COL32(0, 0, 0, 170));
                    dl->AddText(ImVec2(at_min.x + 2, at_min.y), IM_COL32(255, 255, 255, 255), label.c_str());
                }
                if (ImGui::IsItemHovered() && order != Order::kIndex) {
                    const HeadScore& s = scores_[e->layer];
                    const double nmse = h < static_cast<int>(s.nmse.size()) ? s.nmse[h] : -1;
                    const double ent = h < static_cast<int>(s.entropy.size()) ? s.entropy[h] : 1;
                    ImGui::SetTooltip("layer %d head %d: %s entropy / uniform %.2f", e->layer, h,
                                      nmse >= 0 ? fmt::format("nmse against the reference {:.3g},", nmse).c_str() : "",
                                      ent);
                }
                ImGui::PopID();
            }
            ImGui::PopID();
        }
        ImGui::EndTable();
    }
    if (shown.thumbnails == 0) ImGui::TextDisabled("No %s maps in this decode call yet.", view_name(view));

    if (!enlarge) {
        if (shown.thumbnails > 0) ImGui::TextDisabled("Click a thumbnail to enlarge it with token labels.");
        ImGui::End();
        return;
    }
    const EventRecord* rec = nullptr;
    for (const EventInfo* e : layers)
        if (e->layer == selected_layer) rec = ctx.record(e->index);
    ImGui::Text("layer %d, head %d: %s", selected_layer, selected_head, view_name(view));
    ImGui::SameLine();
    if (ImGui::SmallButton("close")) selected_layer = selected_head = -1;
    if (!rec || !fill(*enlarged_.map, *rec, selected_head, view, diff_range, &enlarged_.source, &enlarged_.ref_source,
                      &enlarged_.view, &enlarged_.range)) {
        ImGui::TextDisabled("No %s map for this layer and head in decode call %d.", view_name(view), at->decode);
        ImGui::End();
        return;
    }
    shown.enlarged = true;
    // How peaked the rows are: a normalized entropy near 1 is uniform attention (a KV position
    // stuck at 0), a row max near 1 everywhere is a saturated softmax (scores far too large).
    const AttentionProbs* probs = view == View::Reference ? rec->ref_attention.get() : rec->attention.get();
    if (probs && view != View::Difference) {
        double entropy_sum = 0, max_sum = 0;
        int rows = 0;
        for (int64_t q = 0; q < probs->n_query; ++q) {
            double h = 0, mx = 0;
            int valid = 0;
            for (int64_t k = 0; k < probs->n_key; ++k) {
                double p = probs->at(selected_head, q, k);
                if (p > 0) h -= p * std::log(p), ++valid;
                mx = std::max(mx, p);
            }
            if (valid > 1) entropy_sum += h / std::log(static_cast<double>(valid)), max_sum += mx, ++rows;
        }
        if (rows > 0)
            ImGui::TextDisabled("entropy / uniform %.2f (1 = uniform), mean row max %.2f (1 = saturated)",
                                entropy_sum / rows, max_sum / rows);
        // gpt-oss's sink takes its share of each row without a key: what the keys' probabilities
        // leave of 1.
        if (ctx.model && ctx.model->config().arch == Arch::kGptOss && probs->n_query > 0) {
            double share_sum = 0, share_max = 0;
            for (int64_t q = 0; q < probs->n_query; ++q) {
                double keys = 0;
                for (int64_t k = 0; k < probs->n_key; ++k) keys += probs->at(selected_head, q, k);
                const double share = std::clamp(1.0 - keys, 0.0, 1.0);
                share_sum += share, share_max = std::max(share_max, share);
            }
            shown.sink_share = static_cast<float>(share_sum / static_cast<double>(probs->n_query));
            shown.sink_share_max = static_cast<float>(share_max);
            ImGui::TextDisabled("attention sink: %.1f%% of each row on average (up to %.1f%%), the rest on the keys",
                                100.0 * shown.sink_share, 100.0 * shown.sink_share_max);
        }
    }
    const int64_t first_query = probs ? probs->first_query_pos : 0;
    // Key column 0 is the cell of the oldest position the layer's cache holds: 0, or on a local
    // layer whose window has slid, the first position still seen (the last column is the newest query).
    const int64_t first_key = probs ? std::max<int64_t>(0, first_query + probs->n_query - probs->n_key) : 0;
    if (ctx.model && probs) {
        shown.window_note = layer_view_text(ctx.model->config(), selected_layer, first_query + probs->n_query - 1);
        if (!shown.window_note.empty()) ImGui::TextDisabled("%s", shown.window_note.c_str());
    }
    const Tokenizer* tokenizer = ctx.model ? ctx.model->tokenizer() : nullptr;
    std::shared_ptr<const SessionSnapshot> keep = ctx.snap;  // the labels outlive this frame's locals
    enlarged_.map->row_label = [keep, tokenizer, first_query](int row) { return piece_at(*keep, tokenizer, first_query + row); };
    enlarged_.map->col_label = [keep, tokenizer, first_key](int col) { return piece_at(*keep, tokenizer, first_key + col); };
    enlarged_.map->draw("enlarged", ImVec2(0, std::max(160.0f, ImGui::GetContentRegionAvail().y)));
    ImGui::End();
}

}  // namespace ls::views
