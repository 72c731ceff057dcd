// Prompt panel: the prompt text, chat template and special-token choices, "Run", and the table of
// token ids and pieces that actually enter the model, then the generated ones.
#pragma once

#include <string>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {

struct PromptPanel {
    bool open = true;
    std::string prompt = "Once upon a time";
    bool use_chat_template = false;
    int template_choice = 0;     // 0: the model's tokenizer.chat_template; k: family_names[k - 1]
    bool add_special = true;     // BOS/EOS as the vocabulary asks
    bool parse_special = true;   // "<|im_start|>" written in the prompt is one token
    int n_generate = 8;          // greedy decode calls after the prompt
    std::string their_ids;       // another engine's prompt ids ("[1, 2, 3]"), compared with ours

    // What the last frame showed, for tests.
    struct Shown {
        bool compared = false;      // their_ids parsed and compared with the prompt tokens
        bool same = false;
        int64_t first_difference = -1;
        std::string compare_error;  // their_ids does not parse
    } shown;

    // Usage (main view): `PromptPanel prompt; ... prompt.draw(ctx);` every frame. "Run" sends
    // set_prompt and generate(n_generate) to ctx.session; without a session it only shows tokens.
    void draw(DebugContext& ctx);
    // What "Run" does: the prompt after the chat template (or an error saying why not).
    Result<std::string> final_prompt(const DebugContext& ctx) const;
    bool run(DebugContext& ctx);

private:
    void draw_tokens(const DebugContext& ctx);
    void draw_comparison(const DebugContext& ctx, const std::vector<int32_t>& ours, std::vector<int32_t>* theirs);
    // The templated text as the panel shows it (or why there is none), rendered again only when the
    // prompt, the template choice or the model changes: not a Jinja run per frame.
    const std::string& templated_text(const DebugContext& ctx);

    std::vector<std::string> family_names_;  // filled once
    std::string status_;                     // the last "Run" error, shown under the button
    struct Templated {
        bool valid = false;
        std::string prompt;
        int choice = 0;
        const Model* model = nullptr;
        std::string model_path;  // a model opened where a closed one was is another model
        std::string shown;
    } templated_;
};

}  // namespace ls::views
