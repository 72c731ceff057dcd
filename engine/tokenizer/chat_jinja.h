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

// `user_text` as one user message, with the generation prompt: the built-in family named
// (llama.cpp's --chat-template NAME) or, with no name, the file's own tokenizer.chat_template
// rendered by Jinja, BOS and EOS text from the vocabulary and the template's leading BOS left
// to the tokenizer when it adds one. Errors name what is missing or where the template failed.
Result<std::string> chat_prompt(const GgufFile& file, const Tokenizer& tok, const std::string& user_text,
                                const std::string& family_name = "");

}  // namespace ls
