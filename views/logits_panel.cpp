// Top-k logits (see logits_panel.h): the session's TopLogits table, a lookup computed from the
// captured result_output row, and the reference's row from its dump.
#include "views/logits_panel.h"

#include <fmt/format.h>
#include <imgui.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "engine/tokenizer/tokenizer.h"
#include "views/widgets/axis.h"

namespace ls::views {

namespace pal = widgets::palette;

std::string escape_piece(const std::string& piece) {
    std::string out;
    for (unsigned char c : piece) {
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\\': out += "\\\\"; break;
            default:
                if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
                else out += static_cast<char>(c);
        }
    }
    return out;
}

namespace {

LogitsPanel::Standing standing(const float* row, int64_t n, int64_t token) {
    LogitsPanel::Standing s;
    if (!row || token < 0 || token >= n) return s;
    // Probability by a stable softmax over the finite logits; rank = how many logits beat it.
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
        if (std::isfinite(row[i])) max = std::max(max, row[i]);
    double sum = 0;
    int64_t above = 0;
    const float v = row[token];
    for (int64_t i = 0; i < n; ++i) {
        if (!std::isfinite(row[i])) continue;
        sum += std::exp(static_cast<double>(row[i]) - max);
        if (row[i] > v) ++above;
    }
    s.valid = true;
    s.rank = above;
    s.logit = v;
    s.prob = std::isfinite(v) && sum > 0 ? static_cast<float>(std::exp(static_cast<double>(v) - max) / sum) : 0.0f;
    return s;
}

// The result_output event of the cursor's decode call: the cursor's micro-batch's if it has one,
// else the call's last. The last of a micro-batch: with qwen2's output.bias the logits are the
// sum after the product.
const EventInfo* logits_event(const DebugContext& ctx, const EventInfo& at) {
    const EventInfo* found = nullptr;
    const EventInfo* same_ubatch = nullptr;
    for (const EventInfo& e : *ctx.snap->events) {
        if (e.decode != at.decode || e.base_name != "result_output") continue;
        if (e.ubatch == at.ubatch) same_ubatch = &e;
        found = &e;
    }
    return same_ubatch ? same_ubatch : found;
}

void standing_cells(const LogitsPanel::Standing& s) {
    if (!s.valid) {
        ImGui::TextDisabled("-");
        return;
    }
    ImGui::Text("rank %lld  logit %.4g  p %.4g", static_cast<long long>(s.rank), s.logit, s.prob);
}

}  // namespace

void LogitsPanel::look_up(const std::string& text) {
    lookup_ = {};
    lookup_.query = text;
    lookup_pending_ = true;
    std::snprintf(input_, sizeof input_, "%s", text.c_str());
}

void LogitsPanel::resolve(const DebugContext& ctx, const EventInfo& event) {
    const Tokenizer* tokenizer = ctx.model ? ctx.model->tokenizer() : nullptr;
    Lookup& l = lookup_;
    l.token = -1, l.message.clear(), l.piece.clear(), l.ours = {}, l.reference = {};
    std::string q = l.query;
    if (q.empty()) return;
    const bool is_id = std::all_of(q.begin(), q.end(), [](unsigned char c) { return std::isdigit(c); });
    if (is_id) {
        l.token = static_cast<int32_t>(std::min<long long>(std::stoll(q.substr(0, 10)), INT32_MAX));
    } else if (!tokenizer) {
        l.message = "no tokenizer in this model: type a token id";
        return;
    } else if (TokenId exact = tokenizer->find(q); exact != kNoToken) {
        // An exact vocabulary entry first: encoding "," would add SentencePiece's space prefix.
        l.token = exact;
    } else {
        std::vector<TokenId> ids = tokenizer->encode(q, false, false);
        if (ids.empty()) {
            l.message = "encodes to no tokens";
            return;
        }
        l.token = ids[0];
        if (ids.size() > 1) {
            std::string all;
            for (TokenId id : ids) all += fmt::format("{} ", id);
            l.message = fmt::format("encodes to {} tokens ({}): ranking the first", ids.size(), all);
        }
    }
    if (tokenizer && tokenizer->valid(l.token)) l.piece = escape_piece(tokenizer->token_to_piece(l.token));
    else if (tokenizer) l.message = fmt::format("id {} is outside the tokenizer's {} tokens", l.token, tokenizer->n_tokens());

    auto capture = ctx.capture(event.index);
    if (capture && capture->values) {
        const int64_t n_vocab = event.ne[0];
        const int64_t rows = static_cast<int64_t>(capture->values->size()) / std::max<int64_t>(n_vocab, 1);
        if (rows > 0) l.ours = standing(capture->values->data() + (rows - 1) * n_vocab, n_vocab, l.token);
    } else {
        l.message += l.message.empty() ? "" : "; ";
        l.message += "our logits were not captured";
    }
    if (!reference_row_.empty())
        l.reference = standing(reference_row_.data(), static_cast<int64_t>(reference_row_.size()), l.token);
}

void LogitsPanel::draw(DebugContext& ctx) {
    shown = {};
    if (!open) return;
    const EventInfo* at = begin_event_panel(ctx, "Logits", &open,
                                            "No run yet: the top-k logits appear once a decode call reaches result_output.");
    if (!at) return;
    const SessionSnapshot* snap = ctx.snap.get();
    const EventInfo* event = logits_event(ctx, *at);
    const EventRecord* rec = event ? ctx.record(event->index) : nullptr;
    shown.decode = at->decode;
    if (!event) {
        ImGui::TextDisabled("Decode call %d has no result_output event.", at->decode);
        ImGui::End();
        return;
    }
    if (!rec || !rec->top_logits) {
        ImGui::TextDisabled("Decode call %d has not reached result_output yet: step on (F10 / Shift+F11).",
                            at->decode);
        ImGui::End();
        return;
    }
    const Tokenizer* tokenizer = ctx.model ? ctx.model->tokenizer() : nullptr;
    const TopLogits& top = *rec->top_logits;

    // The reference's row is read once per event and reference.
    if (ctx.reference && (reference_row_event_ != event->name || reference_row_source_ != ctx.reference)) {
        reference_row_ = reference_last_logits(*ctx.reference, *event);
        reference_row_event_ = event->name;
        reference_row_source_ = ctx.reference;
        reference_top1_ = reference_row_.empty() ? -1
            : static_cast<int32_t>(std::max_element(reference_row_.begin(), reference_row_.end()) - reference_row_.begin());
    } else if (!ctx.reference) {
        reference_row_.clear(), reference_row_event_.clear(), reference_row_source_ = nullptr, reference_top1_ = -1;
    }

    shown.entries = static_cast<int>(top.entries.size());
    shown.first_token = top.entries.empty() ? -1 : top.entries[0].token;
    shown.logit_rows = event->ne[0];
    shown.vocab = tokenizer ? static_cast<int64_t>(tokenizer->n_tokens()) : 0;

    ImGui::Text("decode call %d: %s", event->decode, event->name.c_str());
    if (snap->has_reference || ctx.reference) {
        ImGui::SameLine();
        if (reference_top1_ < 0) ImGui::TextDisabled("(the reference has no logits for this call)");
        else if (!top.entries.empty() && reference_top1_ == top.entries[0].token)
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kOk), "same top-1 as the reference");
        else
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "reference's top-1 is %d '%s'", reference_top1_,
                               tokenizer && tokenizer->valid(reference_top1_)
                                   ? escape_piece(tokenizer->token_to_piece(reference_top1_)).c_str() : "?");
    }
    // Padded vocabulary: lm_head rows past the tokenizer are never real tokens, yet an argmax
    // over all of them can pick one and repeat it forever.
    if (shown.vocab > 0 && shown.logit_rows > shown.vocab) {
        shown.padded_vocab_hint = true;
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn),
                           "Padded vocabulary: %lld logit rows but %lld tokens. Ids >= %lld are padding; "
                           "mask them before the argmax.",
                           static_cast<long long>(shown.logit_rows), static_cast<long long>(shown.vocab),
                           static_cast<long long>(shown.vocab));
    }

    // Lookup box: an id or text; refreshed whenever the logits it ranks change.
    ImGui::SetNextItemWidth(220);
    if (ImGui::InputTextWithHint("##lookup", "expected token: text or id", input_, sizeof input_,
                                 ImGuiInputTextFlags_EnterReturnsTrue))
        look_up(input_);
    ImGui::SameLine();
    if (ImGui::Button("Look up")) look_up(input_);
    if (lookup_pending_ || lookup_source_ != rec->top_logits || lookup_reference_ != ctx.reference) {
        if (!lookup_.query.empty()) resolve(ctx, *event);
        lookup_pending_ = false;
        lookup_source_ = rec->top_logits;
        lookup_reference_ = ctx.reference;
    }
    if (!lookup_.query.empty()) {
        if (lookup_.token >= 0) {
            ImGui::Text("token %d '%s'", lookup_.token, lookup_.piece.c_str());
            ImGui::SameLine();
            ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::series(0)), "ours:");
            ImGui::SameLine();
            standing_cells(lookup_.ours);
            if (ctx.reference) {
                ImGui::SameLine();
                ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::series(1)), "reference:");
                ImGui::SameLine();
                standing_cells(lookup_.reference);
            }
        }
        if (!lookup_.message.empty()) ImGui::TextDisabled("%s", lookup_.message.c_str());
    }

    const bool with_ref = top.has_reference;
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_SizingStretchProp;
    if (ImGui::BeginTable("top_logits", with_ref ? 7 : 5, flags)) {
        ImGui::TableSetupScrollFreeze(0, 1);
        ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed, 24);
        ImGui::TableSetupColumn("id", ImGuiTableColumnFlags_WidthFixed, 60);
        ImGui::TableSetupColumn("piece", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        ImGui::TableSetupColumn("logit", ImGuiTableColumnFlags_WidthFixed, 70);
        ImGui::TableSetupColumn("p", ImGuiTableColumnFlags_WidthStretch, 1.2f);
        if (with_ref) {
            ImGui::TableSetupColumn("ref rank", ImGuiTableColumnFlags_WidthFixed, 64);
            ImGui::TableSetupColumn("ref p", ImGuiTableColumnFlags_WidthStretch, 1.0f);
        }
        ImGui::TableHeadersRow();
        for (size_t i = 0; i < top.entries.size(); ++i) {
            const TopLogit& t = top.entries[i];
            ImGui::PushID(t.token);
            ImGui::TableNextRow();
            if (i == 0) ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, IM_COL32(90, 180, 110, 60));  // greedy
            const bool padding = shown.vocab > 0 && t.token >= shown.vocab;
            ImGui::TableSetColumnIndex(0);
            ImGui::Text("%zu", i);
            ImGui::TableSetColumnIndex(1);
            if (padding) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "%d", t.token);
            else ImGui::Text("%d", t.token);
            ImGui::TableSetColumnIndex(2);
            if (padding) ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kBad), "(padding row)");
            else ImGui::Text("'%s'%s", escape_piece(t.piece).c_str(), i == 0 ? "  greedy" : "");
            ImGui::TableSetColumnIndex(3);
            ImGui::Text("%.4g", t.logit);
            ImGui::TableSetColumnIndex(4);
            ImGui::PushStyleColor(ImGuiCol_PlotHistogram, ImGui::ColorConvertU32ToFloat4(pal::series(0)));
            ImGui::ProgressBar(t.prob, ImVec2(-1, 0), fmt::format("{:.4f}", t.prob).c_str());
            ImGui::PopStyleColor();
            if (with_ref) {
                ImGui::TableSetColumnIndex(5);
                if (t.ref_rank < 0) ImGui::TextDisabled("-");
                else if (t.ref_rank == static_cast<int>(i)) ImGui::Text("%d", t.ref_rank);
                else ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal::kWarn), "%d", t.ref_rank);
                ImGui::TableSetColumnIndex(6);
                ImGui::PushStyleColor(ImGuiCol_PlotHistogram, ImGui::ColorConvertU32ToFloat4(pal::series(1)));
                ImGui::ProgressBar(t.ref_prob, ImVec2(-1, 0), fmt::format("{:.4f}", t.ref_prob).c_str());
                ImGui::PopStyleColor();
            }
            ImGui::PopID();
        }
        ImGui::EndTable();
    }
    ImGui::End();
}

}  // namespace ls::views
