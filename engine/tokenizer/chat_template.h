// Chat templates as llama.cpp's built-in (non-Jinja) path applies them: family detection from the
// GGUF's tokenizer.chat_template text, then the family's fixed formatting of a message list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/util/result.h"

namespace ls {

class GgufFile;

// One value per family llama.cpp formats itself. kNone: not a family we (or llama.cpp) know.
enum class ChatTemplateFamily {
    kNone,
    kChatml,
    kLlama2,          // no system support: the system text is prepended to the first turn
    kLlama2Sys,       // <<SYS>> block
    kLlama2SysBos,    // <<SYS>> block, and "<s>" before every later [INST]
    kLlama2SysStrip,  // <<SYS>> block, every message trimmed
    kMistralV1,
    kMistralV3,
    kMistralV3Tekken,
    kMistralV7,
    kMistralV7Tekken,
    kPhi3,
    kPhi4,
    kFalcon3,
    kZephyr,
    kMonarch,
    kGemma,
    kOrion,
    kOpenchat,
    kVicuna,
    kVicunaOrca,
    kDeepseek,
    kDeepseek2,
    kDeepseek3,
    kCommandR,
    kLlama3,
    kChatglm3,
    kChatglm4,
    kGlmEdge,
    kMinicpm,
    kExaone3,
    kExaone4,
    kRwkvWorld,
    kGranite,
    kGigachat,
    kMegrez,
    kYandex,
    kBailing,
    kBailingThink,
    kBailing2,
    kLlama4,
    kSmolvlm,
    kDots1,
    kHunyuanMoe,
    kGptOss,
    kHunyuanDense,
    kKimiK2,
    kSeedOss,
    kGrok2,
    kPanguEmbed,
};

struct ChatMessage {
    std::string role;  // "system", "user", "assistant", ... (passed through as llama.cpp does)
    std::string content;
};

// The family's name as llama.cpp spells it for --chat-template ("chatml", "llama2-sys", ...);
// "none" for kNone.
const char* chat_template_family_name(ChatTemplateFamily family);

// The names accepted by --chat-template, in table order.
std::vector<std::string> chat_template_family_names();

// Exact family name only (as --chat-template NAME); error kUsage listing the names otherwise.
Result<ChatTemplateFamily> chat_template_family_from_name(std::string_view name);

// llama.cpp's detection: an exact family name first, then substring rules tried in llama.cpp's
// order on the template text. kNone when nothing matches.
ChatTemplateFamily detect_chat_template(std::string_view template_text);

// The prompt text llama.cpp's built-in formatter produces (no BOS: the tokenizer adds it).
// Error kUnsupported for kNone.
Result<std::string> apply_chat_template(ChatTemplateFamily family,
                                        const std::vector<ChatMessage>& messages,
                                        bool add_generation_prompt);

// Family of the model's tokenizer.chat_template; errors say how to pass --chat-template instead.
Result<ChatTemplateFamily> chat_template_from_gguf(const GgufFile& file);

}  // namespace ls
