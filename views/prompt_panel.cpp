// Prompt panel (see prompt_panel.h).
#include "views/debug_context.h"
#include "views/prompt_panel.h"

#include <fmt/format.h>
#include <imgui.h>
#include <imgui_stdlib.h>

#include "engine/forward/model.h"
#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/token_diff.h"

namespace ls::views {

namespace {

// Pieces shown so that whitespace and control bytes are visible: a piece of "\n" and one of " "
// must not look alike.
std::string escaped(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (c == '\\') out += "\\\\";
        else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out;
}

std::string piece_of(const DebugContext& ctx, int32_t id) {
    const Tokenizer* tok = ctx.model ? ctx.model->tokenizer() : nullptr;
    return tok && tok->valid(id) ? tok->token_to_piece(id, true) : std::string();
}

}  // namespace

Result<std::string> PromptPanel::final_prompt(const DebugContext& ctx) const {
    if (!use_chat_template) return prompt;
    std::string family;  // "" = the model's own template, rendered by Jinja
    if (template_choice != 0) {
        const std::vector<std::string> names = chat_template_family_names();
        if (template_choice - 1 >= static_cast<int>(names.size())) return make_error(ErrorCode::kUsage, "no such template");
        family = names[template_choice - 1];
    }
    if (!ctx.model) {
        if (family.empty()) return make_error(ErrorCode::kUsage, "no model open: its chat template is unknown");
        auto f = chat_template_family_from_name(family);
        if (!f) return f.error();
        return apply_chat_template(f.value(), {{"user", prompt}}, true);
    }
    const Tokenizer* tok = ctx.model->tokenizer();
    if (!tok) return make_error(ErrorCode::kBadInput, "the model has no tokenizer");
    return chat_prompt(ctx.model->file(), *tok, prompt, family);
}

const std::string& PromptPanel::templated_text(const DebugContext& ctx) {
    Templated& c = templated_;
    const std::string path = ctx.model ? ctx.model->path() : std::string();
    if (!c.valid || c.prompt != prompt || c.choice != template_choice || c.model != ctx.model || c.model_path != path) {
        auto text = final_prompt(ctx);
        c = {true, prompt, template_choice, ctx.model, path, text ? escaped(text.value()) : text.error().message};
    }
    return c.shown;
}

bool PromptPanel::run(DebugContext& ctx) {
    if (!ctx.session) return false;
    auto text = final_prompt(ctx);
    if (!text) {
        status_ = text.error().message;
        return false;
    }
    status_.clear();
    ctx.session->set_prompt(text.value(), add_special, parse_special);
    ctx.session->generate(n_generate);
    ctx.log(fmt::format("prompt run: {} bytes, generate {}", text.value().size(), n_generate));
    return true;
}

void PromptPanel::draw(DebugContext& ctx) {
    if (!open) return;
    if (!begin_panel("Prompt", &open)) {
        ImGui::End();
        return;
    }
    if (family_names_.empty()) family_names_ = chat_template_family_names();

    ImGui::InputTextMultiline("##prompt", &prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 5));
    ImGui::Checkbox("chat template", &use_chat_template);
    ImGui::SameLine();
    ImGui::BeginDisabled(!use_chat_template);
    const std::string current = template_choice == 0 ? std::string("model's own")
                                                     : family_names_[static_cast<size_t>(template_choice - 1)];
    ImGui::SetNextItemWidth(160);
    if (ImGui::BeginCombo("##family", current.c_str())) {
        if (ImGui::Selectable("model's own", template_choice == 0)) template_choice = 0;
        for (size_t i = 0; i < family_names_.size(); ++i) {
            ImGui::PushID(static_cast<int>(i));
            if (ImGui::Selectable(family_names_[i].c_str(), template_choice == static_cast<int>(i) + 1))
                template_choice = static_cast<int>(i) + 1;
            ImGui::PopID();
        }
        ImGui::EndCombo();
    }
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::Checkbox("add special", &add_special);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("BOS/EOS as the vocabulary asks (tokenizer.ggml.add_bos_token)");
    ImGui::SameLine();
    ImGui::Checkbox("parse special", &parse_special);

    ImGui::SetNextItemWidth(100);
    ImGui::InputInt("tokens to generate", &n_generate);
    if (n_generate < 0) n_generate = 0;
    ImGui::SameLine();
    ImGui::BeginDisabled(!ctx.session);
    if (ImGui::Button("Run")) run(ctx);
    ImGui::EndDisabled();
    if (!ctx.session) {
        ImGui::SameLine();
        ImGui::TextDisabled("(no live session: a capture opened alone)");
    }
    if (!status_.empty()) ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", status_.c_str());
    if (use_chat_template && ImGui::TreeNode("templated text")) {
        ImGui::TextWrapped("%s", templated_text(ctx).c_str());
        ImGui::TreePop();
    }
    ImGui::SetNextItemWidth(-120);
    ImGui::InputTextWithHint("their ids", "another engine's prompt ids: [128000, 9906, ...]", &their_ids);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("Paste the token ids your engine made for this prompt: the first one "
                                                  "that differs is marked in the table");
    ImGui::Separator();
    draw_tokens(ctx);
    ImGui::End();
}

// Their ids against our prompt tokens: one line saying where the lists part (or that they do
// not), the ids themselves go into the table's "theirs" column.
void PromptPanel::draw_comparison(const DebugContext& ctx, const std::vector<int32_t>& ours, std::vector<int32_t>* theirs) {
    shown.compared = false;
    shown.compare_error.clear();
    shown.first_difference = -1;
    theirs->clear();
    if (their_ids.find_first_not_of(" \t\n") == std::string::npos) return;
    auto parsed = parse_token_ids(their_ids, "their ids");
    if (!parsed) {
        shown.compare_error = parsed.error().message;
        ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%s", shown.compare_error.c_str());
        return;
    }
    *theirs = parsed.value();
    const TokenDiff d = first_token_difference(ours, *theirs);
    shown.compared = true;
    shown.same = d.same;
    if (d.same) {
        ImGui::TextColored({0.55f, 0.85f, 0.55f, 1.0f}, "same %zu tokens as theirs", ours.size());
        return;
    }
    shown.first_difference = static_cast<int64_t>(d.first);
    const Tokenizer* tok = ctx.model ? ctx.model->tokenizer() : nullptr;
    auto side = [&](const std::vector<int32_t>& list) {
        if (d.first >= list.size()) return std::string("(ends)");
        return fmt::format("{} '{}'", list[d.first], tok ? escaped(token_text(*tok, list[d.first])) : std::string());
    };
    ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "first difference at token %zu: ours %s, theirs %s (%zu here, %zu there)",
                       d.first, side(ours).c_str(), side(*theirs).c_str(), ours.size(), theirs->size());
}

void PromptPanel::draw_tokens(const DebugContext& ctx) {
    shown = {};
    const SessionSnapshot* s = ctx.snap.get();
    if (!s || s->tokens.empty()) {
        ImGui::TextDisabled("No tokens yet: write a prompt and press Run.");
        return;
    }
    const size_t n_prompt = s->tokens.size();
    // Decode call d >= 1 consumes decode_inputs[d]; the last generated token is not evaluated yet.
    const size_t n_generated = s->generated.size();
    ImGui::Text("%zu prompt tokens, %zu generated", n_prompt, n_generated);
    std::vector<int32_t> theirs;
    draw_comparison(ctx, s->tokens, &theirs);
    const bool with_theirs = shown.compared;
    if (!ImGui::BeginTable("tokens", with_theirs ? 5 : 4, ImGuiTableFlags_RowBg | ImGuiTableFlags_Borders |
                                                             ImGuiTableFlags_ScrollY | ImGuiTableFlags_Resizable))
        return;
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("id", ImGuiTableColumnFlags_WidthFixed);
    if (with_theirs) ImGui::TableSetupColumn("theirs", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableSetupColumn("piece", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("from", ImGuiTableColumnFlags_WidthFixed);
    ImGui::TableHeadersRow();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(n_prompt + n_generated));
    while (clipper.Step()) {
        for (int row = clipper.DisplayStart; row < clipper.DisplayEnd; ++row) {
            const bool is_prompt = static_cast<size_t>(row) < n_prompt;
            const size_t g = static_cast<size_t>(row) - n_prompt;
            const int32_t id = is_prompt ? s->tokens[row] : s->generated[g];
            const std::string piece = is_prompt && static_cast<size_t>(row) < s->pieces.size() && !s->pieces[row].empty()
                                          ? s->pieces[row]
                                          : piece_of(ctx, id);
            ImGui::TableNextRow();
            ImGui::TableNextColumn();
            ImGui::Text("%d", row);
            ImGui::TableNextColumn();
            ImGui::Text("%d", id);
            if (with_theirs) {
                ImGui::TableNextColumn();
                if (is_prompt && static_cast<size_t>(row) < theirs.size()) {
                    const bool differs = theirs[static_cast<size_t>(row)] != id;
                    if (differs) ImGui::TextColored({1.0f, 0.4f, 0.4f, 1.0f}, "%d", theirs[static_cast<size_t>(row)]);
                    else ImGui::TextDisabled("%d", theirs[static_cast<size_t>(row)]);
                }
            }
            ImGui::TableNextColumn();
            ImGui::TextUnformatted(fmt::format("'{}'", escaped(piece)).c_str());
            ImGui::TableNextColumn();
            if (is_prompt) ImGui::TextUnformatted("prompt");
            else ImGui::TextColored({0.55f, 0.85f, 0.55f, 1.0f}, "decode %zu", g);
        }
    }
    ImGui::EndTable();
}

}  // namespace ls::views
