// A chat rendered with the model's own Jinja template, as llama.cpp's Jinja path renders it:
// the variables it passes (messages, tools, bos_token, eos_token, add_generation_prompt,
// enable_thinking, date_string, the caller's template kwargs) and the message fixes it applies
// first (a "developer" role read as "system"; the system message folded into the next one when
// the template has no system role).
#pragma once

#include <string>

#include "engine/tokenizer/jinja.h"
#include "engine/util/result.h"

namespace ls {

struct JinjaChat {
    std::string template_source;
    jinja::Value messages;  // a list of {"role", "content", ...}
    jinja::Value tools;     // a list, or undefined for none
    std::string bos_token, eos_token;
    bool add_generation_prompt = true;
    bool enable_thinking = true;
    jinja::Value kwargs;     // a dict of extra template variables, or undefined
    bool strip_bos = false;  // drop the template's leading BOS text (the tokenizer adds BOS itself)
    jinja::Limits limits;    // for every rendering (the probes too)
};

// Errors: kBadInput "chat template line N: what".
Result<std::string> render_jinja_chat(const JinjaChat& chat);

// Messages from JSON: a list of messages, or an object with "messages" (and "tools").
Result<JinjaChat> jinja_chat_from_json(const std::string& json_text);

class GgufFile;
class Tokenizer;

// What a chat prompt is made of beyond the user's text; the defaults are what `run --chat` does.
struct ChatPromptInput {
    std::string family_name;      // a built-in family (llama.cpp's --chat-template NAME) instead of Jinja
    std::string template_source;  // instead of the file's template
    jinja::Value messages;        // a list instead of one user message of the text (undefined: the text)
    jinja::Value tools;           // a list (the file's tool-use template is preferred then), or undefined
    jinja::Value kwargs;          // a dict of extra template variables (enable_thinking among them), or undefined
    bool tokenizer_adds_bos = true;  // false (--no-bos): the template's leading BOS text stays
};

// The chat prompt, with the generation prompt: the built-in family named or, with no name, the
// file's own tokenizer.chat_template (its tool-use one when tools are given; or the template
// given) rendered by Jinja over the messages (the text as one user message when none are given),
// BOS and EOS text from the vocabulary, the template's leading BOS left to the tokenizer when it
// adds one. Errors name what is missing or where the template failed.
Result<std::string> chat_prompt(const GgufFile& file, const Tokenizer& tok, const std::string& user_text,
                                const ChatPromptInput& input);
inline Result<std::string> chat_prompt(const GgufFile& file, const Tokenizer& tok, const std::string& user_text,
                                       const std::string& family_name = "") {
    ChatPromptInput input;
    input.family_name = family_name;
    return chat_prompt(file, tok, user_text, input);
}

}  // namespace ls
