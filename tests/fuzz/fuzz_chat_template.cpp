// Fuzz target: the chat-template engines. The input is NUL-separated: flags (one byte: bit 0 adds
// the generation prompt, the rest picks a family when the template matches none), the template
// text (detected as llama.cpp does, or a family name; and run as Jinja with small limits), then
// role, content, role, content, ...
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/jinja.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    const uint8_t flags = data[0];
    const auto parts = ls::fuzz::split(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), '\0', 65);
    const std::string_view template_text = parts[0];
    std::vector<ls::ChatMessage> messages;
    for (size_t i = 1; i + 1 < parts.size(); i += 2)
        messages.push_back({std::string(parts[i]), std::string(parts[i + 1])});

    (void)ls::chat_template_family_from_name(template_text);
    ls::ChatTemplateFamily family = ls::detect_chat_template(template_text);
    if (family == ls::ChatTemplateFamily::kNone) {
        const std::vector<std::string> names = ls::chat_template_family_names();
        family = ls::detect_chat_template(names[(flags >> 1) % names.size()]);
    }
    (void)ls::chat_template_family_name(family);
    (void)ls::apply_chat_template(family, messages, flags & 1);

    // The same text as a Jinja template, on the same messages: errors are fine, crashes, hangs
    // and runaway output are not.
    auto tmpl = ls::jinja::Template::parse(template_text);
    if (tmpl.ok()) {
        ls::jinja::Value list = ls::jinja::Value::list();
        for (const ls::ChatMessage& m : messages) {
            ls::jinja::Value v = ls::jinja::Value::dict();
            v.object->set("role", ls::jinja::Value::string(m.role));
            v.object->set("content", ls::jinja::Value::string(m.content));
            list.array->push_back(v);
        }
        ls::jinja::Value globals = ls::jinja::Value::dict();
        globals.object->set("messages", list);
        globals.object->set("add_generation_prompt", ls::jinja::Value::boolean(flags & 1));
        ls::jinja::Limits limits;
        limits.max_output_bytes = 1 << 16;
        limits.max_steps = 200000;
        auto out = tmpl->render(globals, limits);
        if (out.ok() && out.value().size() > limits.max_output_bytes) __builtin_trap();
        ls::JinjaChat chat;
        chat.template_source = std::string(template_text);
        chat.messages = list;
        chat.limits = limits;
        (void)ls::render_jinja_chat(chat);
    }
    return 0;
}
