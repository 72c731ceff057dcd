// Rendering a chat with its Jinja template the way llama.cpp's Jinja path does (see chat_jinja.h).
#include "engine/tokenizer/chat_jinja.h"

#include <ctime>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace ls {

namespace {

using jinja::Value;

Value copy_message(const Value& m) {
    if (!m.is_object()) return m;
    Value out = Value::dict();
    out.object->items = m.object->items;
    return out;
}

std::string field(const Value& m, const char* key) {
    const Value* v = m.is_object() ? m.object->find(key) : nullptr;
    return v && v->is_string() ? v->s : std::string();
}

std::string today(const char* format) {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[64];
    return std::string(buf, std::strftime(buf, sizeof buf, format, &tm));
}

Value globals_for(const JinjaChat& chat, const Value& messages) {
    Value g = Value::dict();
    auto& o = *g.object;
    o.set("messages", messages);
    o.set("bos_token", Value::string(chat.bos_token));
    o.set("eos_token", Value::string(chat.eos_token));
    o.set("enable_thinking", Value::boolean(chat.enable_thinking));
    if (chat.tools.is_array()) o.set("tools", chat.tools);
    o.set("datetime", Value::string(today("%b %d %Y")));
    o.set("date_string", Value::string(today("%d %b %Y")));
    if (chat.kwargs.is_object()) {
        for (const auto& [k, v] : chat.kwargs.object->items) o.set(k, v);
    }
    if (chat.add_generation_prompt) o.set("add_generation_prompt", Value::boolean(true));
    return g;
}

Value message(const char* role, Value content) {
    Value m = Value::dict();
    m.object->set("role", Value::string(role));
    m.object->set("content", std::move(content));
    return m;
}

// What the template does with messages, found by rendering marked probes (llama.cpp watches
// which input values the template reads; a marker that reaches the output says the same for
// the templates that print what they read).
struct Caps {
    bool system_role = true;
    bool tool_calls = true;
    bool object_arguments = false;
};

Caps probe_caps(const jinja::Template& t, const JinjaChat& chat) {
    Caps caps;
    JinjaChat quiet = chat;
    quiet.kwargs = Value();
    auto render = [&](const Value& messages, bool with_tools) {
        JinjaChat c = quiet;
        if (!with_tools) c.tools = Value();
        return t.render(globals_for(c, messages), chat.limits);
    };

    const char* kSystem = "<system-role-probe>";
    auto out = render(Value::list({message("system", Value::string(kSystem)), message("user", Value::string("Hello"))}), false);
    caps.system_role = out.ok() && out.value().find(kSystem) != std::string::npos;

    // A call with object arguments, as llama.cpp's probe has it.
    const char* kCall = "tool-call-probe", *kArg = "argument-probe";
    Value args = Value::dict();
    args.object->set("arg", Value::string(kArg));
    Value function = Value::dict();
    function.object->set("name", Value::string(kCall));
    function.object->set("arguments", args);
    Value call = Value::dict();
    call.object->set("id", Value::string("call00001"));
    call.object->set("type", Value::string("function"));
    call.object->set("function", function);
    Value assistant = message("assistant", Value::string(""));
    assistant.object->set("tool_calls", Value::list({call}));
    Value tool = message("tool", Value::string("Tool response"));
    tool.object->set("tool_call_id", Value::string("call00001"));
    out = render(Value::list({message("user", Value::string("User message")), assistant, tool,
                              message("assistant", Value::string("The tool response was 'tool response'")),
                              message("user", Value::string("User message"))}),
                 true);
    if (out.ok()) {
        const std::string& text = out.value();
        caps.tool_calls = text.find(kCall) != std::string::npos;
        // Read as an object (tojson, items, .arg) rather than printed whole as a string would be.
        caps.object_arguments = caps.tool_calls && text.find(kArg) != std::string::npos &&
                                text.find(std::string("{'arg': '") + kArg + "'}") == std::string::npos;
    }
    return caps;
}

bool has(const std::string& src, const char* what) { return src.find(what) != std::string::npos; }

bool has_tool_calls(const Value& m) {
    const Value* c = m.is_object() ? m.object->find("tool_calls") : nullptr;
    return c && c->is_array() && !c->array->empty();
}

// Gemma 4's older templates read tool results from the assistant turn: an assistant message
// with tool calls takes the tool messages after it as "tool_responses" (named after the calls
// in order, the text parsed as JSON where it is JSON) and a following plain answer as content.
void gemma4_tool_responses(Value& messages) {
    std::vector<Value>& in = *messages.array;
    std::vector<Value> out;
    for (size_t i = 0; i < in.size();) {
        const Value& m = in[i];
        if (field(m, "role") != "assistant" || !has_tool_calls(m)) {
            out.push_back(m);
            ++i;
            continue;
        }
        const Value calls = *m.object->find("tool_calls");
        Value turn = Value::dict();
        turn.object->set("role", Value::string("assistant"));
        turn.object->set("tool_calls", calls);
        const Value* reasoning = m.object->find("reasoning_content");
        Value responses = Value::list();
        for (++i; i < in.size() && field(in[i], "role") == "tool"; ++i) {
            Value response;
            if (const Value* c = in[i].object->find("content")) {
                response = *c;
                if (c->is_string()) {
                    auto parsed = jinja::from_json(c->s);
                    if (parsed.ok()) response = parsed.value();
                }
            }
            std::string name;
            const size_t k = responses.array->size();
            if (k < calls.array->size()) {
                const Value* fn = (*calls.array)[k].is_object() ? (*calls.array)[k].object->find("function") : nullptr;
                if (fn) name = field(*fn, "name");
            }
            if (name.empty()) name = field(in[i], "tool_call_id");
            Value r = Value::dict();
            r.object->set("name", Value::string(name));
            r.object->set("response", response);
            responses.array->push_back(r);
        }
        if (!responses.array->empty()) turn.object->set("tool_responses", responses);
        if (i < in.size() && field(in[i], "role") == "assistant" && !has_tool_calls(in[i])) {
            const Value* c = in[i].object->find("content");
            if (c && ((c->is_string() && !c->s.empty()) || (c->is_array() && !c->array->empty()))) {
                turn.object->set("content", *c);
                ++i;
            }
        }
        if (reasoning && reasoning->is_string()) turn.object->set("reasoning_content", *reasoning);
        out.push_back(turn);
    }
    *messages.array = std::move(out);
}

// The message changes llama.cpp makes for the templates it has dedicated code for, found by
// the same markers in the template source and in the same order (the first match decides).
enum class Special { kNone, kMinistral3, kGptOss, kLfm2, kGemma4 };

Special special_of(const std::string& src) {
    if (has(src, "[SYSTEM_PROMPT]") && has(src, "[TOOL_CALLS]") && has(src, "[ARGS]") && !has(src, "[CALL_ID]")) {
        return Special::kMinistral3;
    }
    if (has(src, "<|channel|>")) return Special::kGptOss;
    if ((has(src, "<atem:function_calls>") && has(src, "<|eom|>")) || (has(src, ">>>all") && has(src, ">>>${recipient}")) ||
        (has(src, "<|tool_calls_section_begin|>") && has(src, "<|tool_call_begin|>")) ||
        (has(src, "<|open|>") && has(src, "<|close|>") && has(src, "<|end_of_msg|>")) ||
        (has(src, "<role>ASSISTANT</role>") && has(src, "<arg_key>")) ||
        (has(src, "<|START_TEXT|>") && has(src, "<|START_ACTION|>"))) {
        return Special::kNone;  // dedicated code, but the messages go in unchanged
    }
    if ((has(src, "<|tool_list_start|>") && has(src, "<|tool_list_end|>")) ||
        (has(src, "List of tools: [") && !has(src, "<|tool_list_start|>"))) {
        return Special::kLfm2;
    }
    if ((has(src, "<|role_sep|>") && has(src, "<|message_sep|>") && !has(src, "<|function_call|>")) ||
        (has(src, "]<]minimax[>[") && has(src, "<tool_call>") && has(src, "<invoke name=")) ||
        (has(src, "dsml_token") && has(src, "DSML") && (has(src, "function_calls") || has(src, "tool_calls")))) {
        return Special::kNone;
    }
    if (has(src, "'<|tool_call>call:'")) return Special::kGemma4;
    return Special::kNone;
}

void apply_special(Special special, const std::string& src, Value& messages) {
    for (Value& m : *messages.array) {
        if (!m.is_object()) continue;
        const Value* reasoning = m.object->find("reasoning_content");
        const bool has_reasoning = reasoning && reasoning->is_string();
        if ((special == Special::kGptOss || special == Special::kLfm2) && has_reasoning) {
            m.object->set("thinking", *reasoning);  // the field these templates read
            if (special == Special::kGptOss && has_tool_calls(m)) {
                auto& items = m.object->items;
                for (size_t k = 0; k < items.size(); ++k) {
                    if (items[k].first.is_string() && items[k].first.s == "content") items.erase(items.begin() + static_cast<long>(k));
                }
            }
        }
        if (special == Special::kMinistral3) {  // system and assistant content as typed blocks
            const std::string role = field(m, "role");
            if (role != "system" && role != "assistant") continue;
            Value blocks = Value::list();
            if (has_reasoning) {
                Value b = Value::dict();
                b.object->set("type", Value::string("thinking"));
                b.object->set("thinking", *reasoning);
                blocks.array->push_back(b);
            }
            if (const Value* c = m.object->find("content")) {
                if (c->is_string()) {
                    Value b = Value::dict();
                    b.object->set("type", Value::string("text"));
                    b.object->set("text", *c);
                    blocks.array->push_back(b);
                } else if (c->is_array()) {
                    blocks.array->insert(blocks.array->end(), c->array->begin(), c->array->end());
                }
            }
            m.object->set("content", blocks);
            auto& items = m.object->items;
            for (size_t k = 0; k < items.size(); ++k) {
                if (items[k].first.is_string() && items[k].first.s == "reasoning_content") items.erase(items.begin() + static_cast<long>(k));
            }
        }
    }
    if (special == Special::kGemma4 && !has(src, "{#- OpenAI Chat Completions:")) gemma4_tool_responses(messages);
}

}  // namespace

Result<std::string> render_jinja_chat(const JinjaChat& chat) {
    auto parsed = jinja::Template::parse(chat.template_source);
    if (!parsed.ok()) return make_error(ErrorCode::kBadInput, "chat template " + parsed.error().message);
    const jinja::Template& t = parsed.value();

    if (!chat.messages.is_array()) return make_error(ErrorCode::kBadInput, "messages: not a list");
    Value messages = Value::list();
    const bool harmony = chat.template_source.find("<|channel|>") != std::string::npos;
    for (const Value& m : *chat.messages.array) {
        Value c = copy_message(m);
        if (!harmony && field(c, "role") == "developer") c.object->set("role", Value::string("system"));
        messages.array->push_back(c);
    }
    auto& list = *messages.array;
    const Caps caps = probe_caps(t, chat);
    for (Value& m : list) {
        Value* calls = m.is_object() ? const_cast<Value*>(m.object->find("tool_calls")) : nullptr;
        if (!calls || !calls->is_array()) continue;
        // Templates that render tool calls may need a content field beside them.
        if (caps.tool_calls && !m.object->find("content")) m.object->set("content", Value::string(""));
        if (!caps.object_arguments) continue;
        // Arguments given as JSON text become the object such templates read.
        Value copied = Value::list();
        for (const Value& c : *calls->array) {
            Value cc = copy_message(c);
            const Value* fn = cc.is_object() ? cc.object->find("function") : nullptr;
            if (fn && fn->is_object()) {
                Value f = copy_message(*fn);
                const Value* a = f.object->find("arguments");
                if (a && a->is_string()) {
                    auto parsed = jinja::from_json(a->s);
                    if (!parsed.ok()) {
                        return make_error(ErrorCode::kBadInput, "a tool call's arguments are not JSON: " + a->s.substr(0, 80));
                    }
                    f.object->set("arguments", parsed.value());
                }
                cc.object->set("function", f);
            }
            copied.array->push_back(cc);
        }
        m.object->set("tool_calls", copied);
    }
    if (!list.empty() && field(list[0], "role") == "system" && !caps.system_role) {
        if (list.size() > 1) {
            list[1].object->set("content", Value::string(field(list[0], "content") + "\n" + field(list[1], "content")));
        }
        list.erase(list.begin());
    }

    const Special special = special_of(chat.template_source);
    apply_special(special, chat.template_source, messages);

    auto out = t.render(globals_for(chat, messages), chat.limits);
    if (!out.ok()) return make_error(ErrorCode::kBadInput, "chat template " + out.error().message);
    std::string text = std::move(out.value());
    // Gemma 4: a prompt that ends a turn without opening the model's next one gets it.
    const std::string kTurnEnd = "<turn|>\n";
    if (special == Special::kGemma4 && chat.add_generation_prompt && text.size() >= kTurnEnd.size() &&
        text.compare(text.size() - kTurnEnd.size(), kTurnEnd.size(), kTurnEnd) == 0) {
        text += "<|turn>model\n";
    }
    if (chat.strip_bos && !chat.bos_token.empty() && text.compare(0, chat.bos_token.size(), chat.bos_token) == 0) {
        text.erase(0, chat.bos_token.size());
    }
    return text;
}

Result<JinjaChat> jinja_chat_from_json(const std::string& json_text) {
    auto v = jinja::from_json(json_text);
    if (!v.ok()) return v.error();
    JinjaChat chat;
    if (v->is_array()) {
        chat.messages = v.value();
    } else if (v->is_object()) {
        const Value* m = v->object->find("messages");
        if (!m || !m->is_array()) return make_error(ErrorCode::kBadInput, "no \"messages\" list");
        chat.messages = *m;
        if (const Value* tools = v->object->find("tools"); tools && tools->is_array()) chat.tools = *tools;
    } else {
        return make_error(ErrorCode::kBadInput, "expected a list of messages or an object with \"messages\"");
    }
    for (const Value& m : *chat.messages.array) {
        if (!m.is_object() || !m.object->find("role")) {
            return make_error(ErrorCode::kBadInput, "every message needs a \"role\"");
        }
    }
    return chat;
}

Result<std::string> chat_prompt(const GgufFile& file, const Tokenizer& tok, const std::string& user_text,
                                const ChatPromptInput& input) {
    if (!input.family_name.empty()) {
        if (!input.template_source.empty() || !input.messages.is_undefined() || !input.tools.is_undefined() ||
            !input.kwargs.is_undefined())
            return make_error(ErrorCode::kUsage, "a built-in template (--chat-template NAME) takes no template source, "
                                                 "messages, tools or template kwargs");
        auto family = chat_template_family_from_name(input.family_name);
        if (!family.ok()) return family.error();
        return apply_chat_template(family.value(), {{"user", user_text}}, true);
    }
    JinjaChat chat;
    chat.tools = input.tools;
    chat.template_source = input.template_source;
    // With tools, the file's tool-use template where it has one (as llama.cpp picks it).
    if (chat.template_source.empty() && chat.tools.is_array())
        chat.template_source = file.get_string("tokenizer.chat_template.tool_use");
    if (chat.template_source.empty()) chat.template_source = file.get_string("tokenizer.chat_template");
    if (chat.template_source.empty()) {
        return make_error(ErrorCode::kBadInput, "the file has no tokenizer.chat_template\nHINT: name a built-in template "
                                                "with --chat-template NAME (chatml, llama3, ...)");
    }
    if (input.messages.is_undefined()) {
        Value m = Value::dict();
        m.object->set("role", Value::string("user"));
        m.object->set("content", Value::string(user_text));
        chat.messages = Value::list({m});
    } else {
        chat.messages = input.messages;
    }
    if (input.kwargs.is_object()) {
        chat.kwargs = input.kwargs;
        if (const Value* t = chat.kwargs.object->find("enable_thinking"); t && t->type == Value::Type::kBool)
            chat.enable_thinking = t->b;
    }
    if (tok.valid(tok.bos())) chat.bos_token = tok.token(tok.bos()).text;
    if (tok.valid(tok.eos())) chat.eos_token = tok.token(tok.eos()).text;
    chat.strip_bos = input.tokenizer_adds_bos && tok.add_bos();
    return render_jinja_chat(chat);
}

}  // namespace ls
