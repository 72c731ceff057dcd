// llama.cpp's built-in chat formatting, family by family, so a chat prompt we build is byte for
// byte the prompt llama.cpp (without --jinja) would build from the same messages.
#include "engine/tokenizer/chat_template.h"

#include <algorithm>

#include "engine/gguf/gguf.h"
#include "engine/util/quote.h"

namespace ls {
namespace {

struct FamilyEntry {
    ChatTemplateFamily family;
    const char* name;
    bool accepted_as_name;  // llama.cpp has no --chat-template name for dots1
};

// Order only matters for chat_template_family_names(); the names are llama.cpp's.
constexpr FamilyEntry kFamilies[] = {
    {ChatTemplateFamily::kChatml, "chatml", true},
    {ChatTemplateFamily::kLlama2, "llama2", true},
    {ChatTemplateFamily::kLlama2Sys, "llama2-sys", true},
    {ChatTemplateFamily::kLlama2SysBos, "llama2-sys-bos", true},
    {ChatTemplateFamily::kLlama2SysStrip, "llama2-sys-strip", true},
    {ChatTemplateFamily::kMistralV1, "mistral-v1", true},
    {ChatTemplateFamily::kMistralV3, "mistral-v3", true},
    {ChatTemplateFamily::kMistralV3Tekken, "mistral-v3-tekken", true},
    {ChatTemplateFamily::kMistralV7, "mistral-v7", true},
    {ChatTemplateFamily::kMistralV7Tekken, "mistral-v7-tekken", true},
    {ChatTemplateFamily::kPhi3, "phi3", true},
    {ChatTemplateFamily::kPhi4, "phi4", true},
    {ChatTemplateFamily::kFalcon3, "falcon3", true},
    {ChatTemplateFamily::kZephyr, "zephyr", true},
    {ChatTemplateFamily::kMonarch, "monarch", true},
    {ChatTemplateFamily::kGemma, "gemma", true},
    {ChatTemplateFamily::kOrion, "orion", true},
    {ChatTemplateFamily::kOpenchat, "openchat", true},
    {ChatTemplateFamily::kVicuna, "vicuna", true},
    {ChatTemplateFamily::kVicunaOrca, "vicuna-orca", true},
    {ChatTemplateFamily::kDeepseek, "deepseek", true},
    {ChatTemplateFamily::kDeepseek2, "deepseek2", true},
    {ChatTemplateFamily::kDeepseek3, "deepseek3", true},
    {ChatTemplateFamily::kCommandR, "command-r", true},
    {ChatTemplateFamily::kLlama3, "llama3", true},
    {ChatTemplateFamily::kChatglm3, "chatglm3", true},
    {ChatTemplateFamily::kChatglm4, "chatglm4", true},
    {ChatTemplateFamily::kGlmEdge, "glmedge", true},
    {ChatTemplateFamily::kMinicpm, "minicpm", true},
    {ChatTemplateFamily::kExaone3, "exaone3", true},
    {ChatTemplateFamily::kExaone4, "exaone4", true},
    {ChatTemplateFamily::kRwkvWorld, "rwkv-world", true},
    {ChatTemplateFamily::kGranite, "granite", true},
    {ChatTemplateFamily::kGigachat, "gigachat", true},
    {ChatTemplateFamily::kMegrez, "megrez", true},
    {ChatTemplateFamily::kYandex, "yandex", true},
    {ChatTemplateFamily::kBailing, "bailing", true},
    {ChatTemplateFamily::kBailingThink, "bailing-think", true},
    {ChatTemplateFamily::kBailing2, "bailing2", true},
    {ChatTemplateFamily::kLlama4, "llama4", true},
    {ChatTemplateFamily::kSmolvlm, "smolvlm", true},
    {ChatTemplateFamily::kDots1, "dots1", false},
    {ChatTemplateFamily::kHunyuanMoe, "hunyuan-moe", true},
    {ChatTemplateFamily::kGptOss, "gpt-oss", true},
    {ChatTemplateFamily::kHunyuanDense, "hunyuan-dense", true},
    {ChatTemplateFamily::kKimiK2, "kimi-k2", true},
    {ChatTemplateFamily::kSeedOss, "seed_oss", true},
    {ChatTemplateFamily::kGrok2, "grok-2", true},
    {ChatTemplateFamily::kPanguEmbed, "pangu-embedded", true},
};

// C-locale isspace, as llama.cpp's trim sees it.
bool is_c_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::string trim(const std::string& s) {
    size_t begin = 0, end = s.size();
    while (begin < end && is_c_space(s[begin])) ++begin;
    while (end > begin && is_c_space(s[end - 1])) --end;
    return s.substr(begin, end - begin);
}

// C-locale toupper: only ASCII letters change, so UTF-8 roles pass through untouched.
char ascii_upper(char c) { return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c; }

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), ascii_upper);
    return s;
}

ChatTemplateFamily family_by_name(std::string_view name) {
    for (const FamilyEntry& e : kFamilies)
        if (e.accepted_as_name && name == e.name) return e.family;
    return ChatTemplateFamily::kNone;
}

using Msgs = std::vector<ChatMessage>;
using F = ChatTemplateFamily;

void format_mistral(F f, const Msgs& msgs, std::string& out) {
    if (f == F::kMistralV7 || f == F::kMistralV7Tekken) {
        const char* sp = f == F::kMistralV7 ? " " : "";
        for (const auto& m : msgs) {
            if (m.role == "system") out += "[SYSTEM_PROMPT]" + (sp + m.content) + "[/SYSTEM_PROMPT]";
            else if (m.role == "user") out += "[INST]" + (sp + m.content) + "[/INST]";
            else out += sp + m.content + "</s>";
        }
        return;
    }
    const std::string lead = f == F::kMistralV1 ? " " : "";
    const std::string trail = f == F::kMistralV3Tekken ? "" : " ";
    const bool trim_assistant = f == F::kMistralV3;
    bool in_turn = false;
    for (const auto& m : msgs) {
        if (!in_turn) {
            out += lead + "[INST]" + trail;
            in_turn = true;
        }
        if (m.role == "system") {
            out += m.content + "\n\n";
        } else if (m.role == "user") {
            out += m.content + lead + "[/INST]";
        } else {
            out += trail + (trim_assistant ? trim(m.content) : m.content) + "</s>";
            in_turn = false;
        }
    }
}

void format_llama2(F f, const Msgs& msgs, std::string& out) {
    const bool system_block = f != F::kLlama2;
    const bool bos_in_history = f == F::kLlama2SysBos;
    const bool strip = f == F::kLlama2SysStrip;
    // The first [INST] is written up front (even for an empty chat); BOS comes from the tokenizer.
    bool in_turn = true;
    out += "[INST] ";
    for (const auto& m : msgs) {
        const std::string content = strip ? trim(m.content) : m.content;
        if (!in_turn) {
            in_turn = true;
            out += bos_in_history ? "<s>[INST] " : "[INST] ";
        }
        if (m.role == "system") {
            out += system_block ? "<<SYS>>\n" + content + "\n<</SYS>>\n\n" : content + "\n";
        } else if (m.role == "user") {
            out += content + " [/INST]";
        } else {
            out += content + "</s>";
            in_turn = false;
        }
    }
}

}  // namespace

const char* chat_template_family_name(ChatTemplateFamily family) {
    for (const FamilyEntry& e : kFamilies)
        if (e.family == family) return e.name;
    return "none";
}

std::vector<std::string> chat_template_family_names() {
    std::vector<std::string> names;
    for (const FamilyEntry& e : kFamilies)
        if (e.accepted_as_name) names.emplace_back(e.name);
    return names;
}

Result<ChatTemplateFamily> chat_template_family_from_name(std::string_view name) {
    const ChatTemplateFamily f = family_by_name(name);
    if (f != ChatTemplateFamily::kNone) return f;
    std::string list;
    for (const std::string& n : chat_template_family_names()) list += (list.empty() ? "" : ", ") + n;
    return make_error(ErrorCode::kUsage,
                      "unknown chat template family " + quote_text(name) + "; known: " + list);
}

ChatTemplateFamily detect_chat_template(std::string_view t) {
    if (const F by_name = family_by_name(t); by_name != F::kNone) return by_name;
    auto has = [t](std::string_view s) { return t.find(s) != std::string_view::npos; };

    // Same rules in the same order as llama.cpp: several templates match more than one rule.
    if (has("<|im_start|>")) {
        if (has("<|im_sep|>")) return F::kPhi4;
        if (has("<end_of_utterance>")) return F::kSmolvlm;  // <|im_start|> is its BOS, not ChatML
        return F::kChatml;
    }
    if (t.substr(0, 7) == "mistral" || has("[INST]")) {
        if (has("[SYSTEM_PROMPT]")) return F::kMistralV7;
        if (has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]")) {
            if (has(" [INST]")) return F::kMistralV1;
            if (has("\"[INST]\"")) return F::kMistralV3Tekken;
            return F::kMistralV3;
        }
        if (has("content.strip()")) return F::kLlama2SysStrip;
        if (has("bos_token + '[INST]")) return F::kLlama2SysBos;
        if (has("<<SYS>>")) return F::kLlama2Sys;
        return F::kLlama2;
    }
    if (has("<|assistant|>") && has("<|end|>")) return F::kPhi3;
    if (has("[gMASK]<sop>")) return F::kChatglm4;
    if (has("<|assistant|>") && has("<|user|>")) return has("</s>") ? F::kFalcon3 : F::kGlmEdge;
    if (has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>")) return F::kGlmEdge;
    if (has("<|user|>") && has("<|endoftext|>")) return F::kZephyr;
    if (has("bos_token + message['role']")) return F::kMonarch;
    if (has("<start_of_turn>")) return F::kGemma;
    if (has("'\\n\\nAssistant: ' + eos_token")) return F::kOrion;
    if (has("GPT4 Correct ")) return F::kOpenchat;
    if (has("USER: ") && has("ASSISTANT: ")) return has("SYSTEM: ") ? F::kVicunaOrca : F::kVicuna;
    if (has("### Instruction:") && has("<|EOT|>")) return F::kDeepseek;
    if (has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>")) return F::kCommandR;
    if (has("<|start_header_id|>") && has("<|end_header_id|>")) return F::kLlama3;
    if (has("[gMASK]sop")) return F::kChatglm3;
    if (has("<用户>")) return F::kMinicpm;
    if (has("'Assistant: ' + message['content'] + eos_token")) return F::kDeepseek2;
    if (has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>")) return F::kDeepseek3;
    if (has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"))
        return has("[|tool|]") ? F::kExaone4 : F::kExaone3;
    if (has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"))
        return F::kRwkvWorld;
    if (has("<|start_of_role|>")) return F::kGranite;
    if (has("message['role'] + additional_special_tokens[0] + message['content'] + "
            "additional_special_tokens[1]"))
        return F::kGigachat;
    if (has("<|role_start|>")) return F::kMegrez;
    if (has(" Ассистент:")) return F::kYandex;
    if (has("<role>ASSISTANT</role>") && has("'HUMAN'")) return F::kBailing;
    if (has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>")) return F::kBailingThink;
    if (has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>"))
        return F::kBailing2;
    if (has("<|header_start|>") && has("<|header_end|>")) return F::kLlama4;
    if (has("<|endofuserprompt|>")) return F::kDots1;
    if (has("<|extra_0|>") && has("<|extra_4|>")) return F::kHunyuanMoe;
    if (has("<|start|>") && has("<|channel|>")) return F::kGptOss;
    if (has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>")) return F::kHunyuanDense;
    if (has("<|im_assistant|>assistant<|im_middle|>")) return F::kKimiK2;
    if (has("<seed:bos>")) return F::kSeedOss;
    if (has("'Assistant: '  + message['content'] + '<|separator|>")) return F::kGrok2;
    if (has("[unused9]系统：[unused10]")) return F::kPanguEmbed;
    return F::kNone;
}

Result<std::string> apply_chat_template(ChatTemplateFamily f, const std::vector<ChatMessage>& msgs,
                                        bool add_gen) {
    std::string out;
    const size_t n = msgs.size();
    switch (f) {
    case F::kNone:
        return make_error(ErrorCode::kUnsupported, "no chat template family to apply");
    case F::kChatml:
        for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
        if (add_gen) out += "<|im_start|>assistant\n";
        break;
    case F::kMistralV1:
    case F::kMistralV3:
    case F::kMistralV3Tekken:
    case F::kMistralV7:
    case F::kMistralV7Tekken:
        format_mistral(f, msgs, out);  // llama.cpp adds no generation prompt for these
        break;
    case F::kLlama2:
    case F::kLlama2Sys:
    case F::kLlama2SysBos:
    case F::kLlama2SysStrip:
        format_llama2(f, msgs, out);
        break;
    case F::kPhi3:
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
        if (add_gen) out += "<|assistant|>\n";
        break;
    case F::kPhi4:
        for (const auto& m : msgs) out += "<|im_start|>" + m.role + "<|im_sep|>" + m.content + "<|im_end|>";
        if (add_gen) out += "<|im_start|>assistant<|im_sep|>";
        break;
    case F::kFalcon3:
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "\n";
        if (add_gen) out += "<|assistant|>\n";
        break;
    case F::kZephyr:
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + "<|endoftext|>\n";
        if (add_gen) out += "<|assistant|>\n";
        break;
    case F::kMonarch:
        for (size_t i = 0; i < n; ++i)
            out += (i == 0 ? "" : "<s>") + msgs[i].role + "\n" + msgs[i].content + "</s>\n";
        if (add_gen) out += "<s>assistant\n";
        break;
    case F::kGemma: {
        std::string system;  // Gemma has no system turn: it is folded into the next user turn
        for (const auto& m : msgs) {
            if (m.role == "system") {
                system += trim(m.content);
                continue;
            }
            const std::string role = m.role == "assistant" ? "model" : m.role;
            out += "<start_of_turn>" + role + "\n";
            if (!system.empty() && role != "model") {
                out += system + "\n\n";
                system.clear();
            }
            out += trim(m.content) + "<end_of_turn>\n";
        }
        if (add_gen) out += "<start_of_turn>model\n";
        break;
    }
    case F::kOrion: {
        std::string system;
        for (const auto& m : msgs) {
            if (m.role == "system") {
                system += m.content;
            } else if (m.role == "user") {
                out += "Human: ";
                if (!system.empty()) {
                    out += system + "\n\n";
                    system.clear();
                }
                out += m.content + "\n\nAssistant: </s>";
            } else {
                out += m.content + "</s>";
            }
        }
        break;
    }
    case F::kOpenchat:
        for (const auto& m : msgs) {
            if (m.role == "system") {
                out += m.content + "<|end_of_turn|>";
            } else {
                std::string role = m.role;
                if (!role.empty()) role[0] = ascii_upper(role[0]);
                out += "GPT4 Correct " + role + ": " + m.content + "<|end_of_turn|>";
            }
        }
        if (add_gen) out += "GPT4 Correct Assistant:";
        break;
    case F::kVicuna:
    case F::kVicunaOrca:
        for (const auto& m : msgs) {
            if (m.role == "system")
                out += f == F::kVicunaOrca ? "SYSTEM: " + m.content + "\n" : m.content + "\n\n";
            else if (m.role == "user") out += "USER: " + m.content + "\n";
            else if (m.role == "assistant") out += "ASSISTANT: " + m.content + "</s>\n";
        }
        if (add_gen) out += "ASSISTANT:";
        break;
    case F::kDeepseek:
        for (const auto& m : msgs) {
            if (m.role == "system") out += m.content;
            else if (m.role == "user") out += "### Instruction:\n" + m.content + "\n";
            else if (m.role == "assistant") out += "### Response:\n" + m.content + "\n<|EOT|>\n";
        }
        if (add_gen) out += "### Response:\n";
        break;
    case F::kCommandR:
        for (const auto& m : msgs) {
            const char* tag = m.role == "system" ? "<|SYSTEM_TOKEN|>"
                              : m.role == "user" ? "<|USER_TOKEN|>"
                              : m.role == "assistant" ? "<|CHATBOT_TOKEN|>" : nullptr;
            if (tag) out += std::string("<|START_OF_TURN_TOKEN|>") + tag + trim(m.content) + "<|END_OF_TURN_TOKEN|>";
        }
        if (add_gen) out += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
        break;
    case F::kLlama3:
        for (const auto& m : msgs)
            out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
        if (add_gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
        break;
    case F::kChatglm3:
        out += "[gMASK]sop";
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n " + m.content;
        if (add_gen) out += "<|assistant|>";
        break;
    case F::kChatglm4:
        out += "[gMASK]<sop>";
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content;
        if (add_gen) out += "<|assistant|>\n";
        break;
    case F::kGlmEdge:
        for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content;
        if (add_gen) out += "<|assistant|>";
        break;
    case F::kMinicpm:
        for (const auto& m : msgs)
            out += m.role == "user" ? "<用户>" + trim(m.content) + "<AI>" : trim(m.content);
        break;
    case F::kDeepseek2:
        for (const auto& m : msgs) {
            if (m.role == "system") out += m.content + "\n\n";
            else if (m.role == "user") out += "User: " + m.content + "\n\n";
            else if (m.role == "assistant") out += "Assistant: " + m.content + "<｜end▁of▁sentence｜>";
        }
        if (add_gen) out += "Assistant:";
        break;
    case F::kDeepseek3:
        for (const auto& m : msgs) {
            if (m.role == "system") out += m.content + "\n\n";
            else if (m.role == "user") out += "<｜User｜>" + m.content;
            else if (m.role == "assistant") out += "<｜Assistant｜>" + m.content + "<｜end▁of▁sentence｜>";
        }
        if (add_gen) out += "<｜Assistant｜>";
        break;
    case F::kExaone3:
    case F::kExaone4:
        for (const auto& m : msgs) {
            if (m.role == "system") out += "[|system|]" + trim(m.content) + "[|endofturn|]\n";
            else if (m.role == "user") out += "[|user|]" + trim(m.content) + "\n";
            else if (m.role == "assistant") out += "[|assistant|]" + trim(m.content) + "[|endofturn|]\n";
            else if (m.role == "tool" && f == F::kExaone4) out += "[|tool|]" + trim(m.content) + "[|endofturn|]\n";
        }
        if (add_gen) out += "[|assistant|]";
        break;
    case F::kRwkvWorld:
        // The generation prompt follows a final user message whatever add_generation_prompt says.
        for (size_t i = 0; i < n; ++i) {
            const auto& m = msgs[i];
            if (m.role == "system") {
                out += "System: " + trim(m.content) + "\n\n";
            } else if (m.role == "user") {
                out += "User: " + trim(m.content) + "\n\n";
                if (i == n - 1) out += "Assistant:";
            } else if (m.role == "assistant") {
                out += "Assistant: " + trim(m.content) + "\n\n";
            }
        }
        break;
    case F::kGranite:
        for (const auto& m : msgs) {
            out += "<|start_of_role|>" + m.role + "<|end_of_role|>";
            if (m.role == "assistant_tool_call") out += "<|tool_call|>";
            out += m.content + "<|end_of_text|>\n";
        }
        if (add_gen) out += "<|start_of_role|>assistant<|end_of_role|>";
        break;
    case F::kGigachat: {
        const bool has_system = n > 0 && msgs[0].role == "system";
        out += has_system ? "<s>" + msgs[0].content + "<|message_sep|>" : "<s>";
        for (size_t i = has_system ? 1 : 0; i < n; ++i) {
            if (msgs[i].role == "user")
                out += "user<|role_sep|>" + msgs[i].content +
                       "<|message_sep|>available functions<|role_sep|>[]<|message_sep|>";
            else if (msgs[i].role == "assistant")
                out += "assistant<|role_sep|>" + msgs[i].content + "<|message_sep|>";
        }
        if (add_gen) out += "assistant<|role_sep|>";
        break;
    }
    case F::kMegrez:
        for (const auto& m : msgs) out += "<|role_start|>" + m.role + "<|role_end|>" + m.content + "<|turn_end|>";
        if (add_gen) out += "<|role_start|>assistant<|role_end|>";
        break;
    case F::kYandex:
        for (const auto& m : msgs) {
            if (m.role == "user") out += " Пользователь: " + m.content + "\n\n";
            else if (m.role == "assistant") out += " Ассистент: " + m.content + "\n\n";
        }
        if (add_gen) out += " Ассистент:[SEP]";
        break;
    case F::kBailing:
    case F::kBailingThink:
        for (const auto& m : msgs)
            out += "<role>" + (m.role == "user" ? std::string("HUMAN") : upper(m.role)) + "</role>" + m.content;
        if (add_gen) out += f == F::kBailingThink ? "<role>ASSISTANT</role><think>" : "<role>ASSISTANT</role>";
        break;
    case F::kBailing2:
        if (!(n > 0 && msgs[0].role == "system")) out += "<role>SYSTEM</role>detailed thinking off<|role_end|>";
        for (const auto& m : msgs)
            out += "<role>" + (m.role == "user" ? std::string("HUMAN") : upper(m.role)) + "</role>" +
                   m.content + "<|role_end|>";
        if (add_gen) out += "<role>ASSISTANT</role>";
        break;
    case F::kLlama4:
        for (const auto& m : msgs)
            out += "<|header_start|>" + m.role + "<|header_end|>\n\n" + trim(m.content) + "<|eot|>";
        if (add_gen) out += "<|header_start|>assistant<|header_end|>\n\n";
        break;
    case F::kSmolvlm:
        out += "<|im_start|>";
        for (const auto& m : msgs) {
            if (m.role == "system") out += m.content + "\n\n";
            else if (m.role == "user") out += "User: " + m.content + "<end_of_utterance>\n";
            else out += "Assistant: " + m.content + "<end_of_utterance>\n";
        }
        if (add_gen) out += "Assistant:";
        break;
    case F::kDots1:
        for (const auto& m : msgs) {
            if (m.role == "system") out += "<|system|>" + m.content + "<|endofsystem|>";
            else if (m.role == "user") out += "<|userprompt|>" + m.content + "<|endofuserprompt|>";
            else out += "<|response|>" + m.content + "<|endofresponse|>";
        }
        if (add_gen) out += "<|response|>";
        break;
    case F::kHunyuanMoe:
        for (const auto& m : msgs) {
            if (m.role == "system") out += "<|startoftext|>" + m.content + "<|extra_4|>";
            else if (m.role == "assistant") out += m.content + "<|eos|>";
            else out += "<|startoftext|>" + m.content + "<|extra_0|>";
        }
        break;
    case F::kGptOss:
        for (const auto& m : msgs)
            out += "<|start|>" + m.role + "<|message|>" + m.content +
                   (m.role == "assistant" ? "<|return|>" : "<|end|>");
        if (add_gen) out += "<|start|>assistant";
        break;
    case F::kHunyuanDense:
        for (size_t i = 0; i < n; ++i) {
            const auto& m = msgs[i];
            if (i == 0 && m.role == "system") out += m.content + "<｜hy_place▁holder▁no▁3｜>";
            if (m.role == "assistant") out += "<｜hy_Assistant｜>" + m.content + "<｜hy_place▁holder▁no▁2｜>";
            else if (m.role == "user") out += "<｜hy_User｜>" + m.content + "<｜hy_Assistant｜>";
        }
        break;
    case F::kKimiK2:
        for (const auto& m : msgs) {
            if (m.role == "system") out += "<|im_system|>system<|im_middle|>";
            else if (m.role == "user") out += "<|im_user|>user<|im_middle|>";
            else if (m.role == "assistant") out += "<|im_assistant|>assistant<|im_middle|>";
            else if (m.role == "tool") out += "<|im_system|>tool<|im_middle|>";
            out += m.content + "<|im_end|>";
        }
        if (add_gen) out += "<|im_assistant|>assistant<|im_middle|>";
        break;
    case F::kSeedOss:
        for (const auto& m : msgs)
            out += "<seed:bos>" + m.role + "\n" + (m.role == "assistant" ? trim(m.content) : m.content) +
                   "<seed:eos>";
        if (add_gen) out += "<seed:bos>assistant\n";
        break;
    case F::kGrok2:
        for (const auto& m : msgs) {
            if (m.role == "system") out += "System: " + trim(m.content) + "<|separator|>\n\n";
            else if (m.role == "user") out += "Human: " + trim(m.content) + "<|separator|>\n\n";
            else if (m.role == "assistant") out += "Assistant: " + m.content + "<|separator|>\n\n";
        }
        if (add_gen) out += "Assistant:";
        break;
    case F::kPanguEmbed:
        for (size_t i = 0; i < n; ++i) {
            const auto& m = msgs[i];
            if (i == 0 && m.role != "system") out += "[unused9]系统：[unused10]";
            if (m.role == "system") out += "[unused9]系统：" + m.content + "[unused10]";
            else if (m.role == "user") out += "[unused9]用户：" + m.content + "[unused10]";
            else if (m.role == "assistant") out += "[unused9]助手：" + m.content + "[unused10]";
            else if (m.role == "tool") out += "[unused9]工具：" + m.content + "[unused10]";
            else if (m.role == "function") out += "[unused9]方法：" + m.content + "[unused10]";
        }
        if (add_gen) out += "[unused9]助手：";
        break;
    }
    return out;
}

Result<ChatTemplateFamily> chat_template_from_gguf(const GgufFile& file) {
    const std::string text = file.get_string("tokenizer.chat_template");
    if (text.empty())
        return make_error(ErrorCode::kUnsupported,
                          file.path() + " has no tokenizer.chat_template; pass --chat-template NAME");
    const ChatTemplateFamily f = detect_chat_template(text);
    if (f != ChatTemplateFamily::kNone) return f;
    return make_error(ErrorCode::kUnsupported,
                      "tokenizer.chat_template is not a family Layerscope recognises (it begins " + quote_text(text, 80) +
                          "); pass --chat-template NAME");
}

}  // namespace ls
