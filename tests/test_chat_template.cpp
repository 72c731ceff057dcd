// Chat templates: llama.cpp's expected outputs for its six-message conversation, detection rules,
// the families of the fixture models' real templates, and the chat prompts of the reference dumps.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "tests/test_support.h"
#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace ls {
namespace {

using F = ChatTemplateFamily;

// The conversation llama.cpp's chat-template test formats with every family (note the padded
// assistant reply: it shows which families trim).
std::vector<ChatMessage> conversation() {
    return {
        {"system", "You are a helpful assistant"},
        {"user", "Hello"},
        {"assistant", "Hi there"},
        {"user", "Who are you"},
        {"assistant", "   I am an assistant   "},
        {"user", "Another question"},
    };
}

std::string format(F family, const std::vector<ChatMessage>& msgs, bool add_gen = true) {
    auto r = apply_chat_template(family, msgs, add_gen);
    EXPECT_TRUE(r.ok()) << chat_template_family_name(family);
    return r.ok() ? r.value() : std::string();
}

struct Expected {
    F family;
    const char* output;
};

// llama.cpp's expected outputs (non-Jinja path) for the conversation above, with
// add_generation_prompt = true.
const Expected kLlamaCppExpected[] = {
    {F::kChatml,
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
     "<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n"
     "<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question"
     "<|im_end|>\n<|im_start|>assistant\n"},
    {F::kLlama2,
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am "
     "an assistant   </s>[INST] Another question [/INST]"},
    {F::kLlama2SysBos,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who "
     "are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {F::kLlama2SysStrip,
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are "
     "you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {F::kMonarch,
     "system\nYou are a helpful assistant</s>\n<s>user\nHello</s>\n<s>assistant\nHi there</s>\n<s>user\n"
     "Who are you</s>\n<s>assistant\n   I am an assistant   </s>\n<s>user\nAnother question</s>\n"
     "<s>assistant\n"},
    {F::kGemma,
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
     "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
     "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {F::kOrion,
     "Human: You are a helpful assistant\n\nHello\n\nAssistant: </s>Hi there</s>Human: Who are you\n\n"
     "Assistant: </s>   I am an assistant   </s>Human: Another question\n\nAssistant: </s>"},
    {F::kOpenchat,
     "You are a helpful assistant<|end_of_turn|>GPT4 Correct User: Hello<|end_of_turn|>GPT4 Correct "
     "Assistant: Hi there<|end_of_turn|>GPT4 Correct User: Who are you<|end_of_turn|>GPT4 Correct "
     "Assistant:    I am an assistant   <|end_of_turn|>GPT4 Correct User: Another question"
     "<|end_of_turn|>GPT4 Correct Assistant:"},
    {F::kDeepseek,
     "You are a helpful assistant### Instruction:\nHello\n### Response:\nHi there\n<|EOT|>\n### "
     "Instruction:\nWho are you\n### Response:\n   I am an assistant   \n<|EOT|>\n### Instruction:\n"
     "Another question\n### Response:\n"},
    {F::kVicuna,
     "You are a helpful assistant\n\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\n"
     "ASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {F::kVicunaOrca,
     "SYSTEM: You are a helpful assistant\nUSER: Hello\nASSISTANT: Hi there</s>\nUSER: Who are you\n"
     "ASSISTANT:    I am an assistant   </s>\nUSER: Another question\nASSISTANT:"},
    {F::kCommandR,
     "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are a helpful assistant<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|>"
     "<|CHATBOT_TOKEN|>Hi there<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Who are you"
     "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>I am an assistant"
     "<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Another question<|END_OF_TURN_TOKEN|>"
     "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"},
    {F::kLlama3,
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant"
     "<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you"
     "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|>"
     "<|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>"
     "assistant<|end_header_id|>\n\n"},
    {F::kPhi3,
     "<|system|>\nYou are a helpful assistant<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there"
     "<|end|>\n<|user|>\nWho are you<|end|>\n<|assistant|>\n   I am an assistant   <|end|>\n<|user|>\n"
     "Another question<|end|>\n<|assistant|>\n"},
    {F::kChatglm3,
     "[gMASK]sop<|system|>\n You are a helpful assistant<|user|>\n Hello<|assistant|>\n Hi there"
     "<|user|>\n Who are you<|assistant|>\n    I am an assistant   <|user|>\n Another question"
     "<|assistant|>"},
    {F::kChatglm4,
     "[gMASK]<sop><|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there"
     "<|user|>\nWho are you<|assistant|>\n   I am an assistant   <|user|>\nAnother question"
     "<|assistant|>\n"},
    {F::kGlmEdge,
     "<|system|>\nYou are a helpful assistant<|user|>\nHello<|assistant|>\nHi there<|user|>\nWho are "
     "you<|assistant|>\n   I am an assistant   <|user|>\nAnother question<|assistant|>"},
    {F::kMinicpm,
     "You are a helpful assistant<用户>Hello<AI>Hi there<用户>Who are you<AI>I am an assistant<用户>"
     "Another question<AI>"},
    {F::kDeepseek2,
     "You are a helpful assistant\n\nUser: Hello\n\nAssistant: Hi there<｜end▁of▁sentence｜>User: Who "
     "are you\n\nAssistant:    I am an assistant   <｜end▁of▁sentence｜>User: Another question\n\n"
     "Assistant:"},
    {F::kGranite,
     "<|start_of_role|>system<|end_of_role|>You are a helpful assistant<|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Hello<|end_of_text|>\n<|start_of_role|>assistant"
     "<|end_of_role|>Hi there<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Who are you"
     "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>   I am an assistant   <|end_of_text|>\n"
     "<|start_of_role|>user<|end_of_role|>Another question<|end_of_text|>\n<|start_of_role|>assistant"
     "<|end_of_role|>"},
    {F::kMistralV1,
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    "
     "I am an assistant   </s> [INST] Another question [/INST]"},
    {F::kMistralV3,
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am "
     "an assistant</s>[INST] Another question[/INST]"},
    {F::kMistralV3Tekken,
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am "
     "an assistant   </s>[INST]Another question[/INST]"},
    {F::kMistralV7,
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>"
     "[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
    {F::kGigachat,
     "<s>You are a helpful assistant<|message_sep|>user<|role_sep|>Hello<|message_sep|>available "
     "functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>Hi there<|message_sep|>user"
     "<|role_sep|>Who are you<|message_sep|>available functions<|role_sep|>[]<|message_sep|>assistant"
     "<|role_sep|>   I am an assistant   <|message_sep|>user<|role_sep|>Another question<|message_sep|>"
     "available functions<|role_sep|>[]<|message_sep|>assistant<|role_sep|>"},
    {F::kMegrez,
     "<|role_start|>system<|role_end|>You are a helpful assistant<|turn_end|><|role_start|>user"
     "<|role_end|>Hello<|turn_end|><|role_start|>assistant<|role_end|>Hi there<|turn_end|>"
     "<|role_start|>user<|role_end|>Who are you<|turn_end|><|role_start|>assistant<|role_end|>   I am "
     "an assistant   <|turn_end|><|role_start|>user<|role_end|>Another question<|turn_end|>"
     "<|role_start|>assistant<|role_end|>"},
    {F::kPhi4,
     "<|im_start|>system<|im_sep|>You are a helpful assistant<|im_end|><|im_start|>user<|im_sep|>Hello"
     "<|im_end|><|im_start|>assistant<|im_sep|>Hi there<|im_end|><|im_start|>user<|im_sep|>Who are "
     "you<|im_end|><|im_start|>assistant<|im_sep|>   I am an assistant   <|im_end|><|im_start|>user"
     "<|im_sep|>Another question<|im_end|><|im_start|>assistant<|im_sep|>"},
    {F::kYandex,
     " Пользователь: Hello\n\n Ассистент: Hi there\n\n Пользователь: Who are you\n\n Ассистент:    I "
     "am an assistant   \n\n Пользователь: Another question\n\n Ассистент:[SEP]"},
    {F::kBailing,
     "<role>SYSTEM</role>You are a helpful assistant<role>HUMAN</role>Hello<role>ASSISTANT</role>Hi "
     "there<role>HUMAN</role>Who are you<role>ASSISTANT</role>   I am an assistant   <role>HUMAN</role>"
     "Another question<role>ASSISTANT</role>"},
    {F::kSeedOss,
     "<seed:bos>system\nYou are a helpful assistant<seed:eos><seed:bos>user\nHello<seed:eos><seed:bos>"
     "assistant\nHi there<seed:eos><seed:bos>user\nWho are you<seed:eos><seed:bos>assistant\nI am an "
     "assistant<seed:eos><seed:bos>user\nAnother question<seed:eos><seed:bos>assistant\n"},
};

TEST(ChatTemplate, LlamaCppExpectedOutputs) {
    for (const Expected& e : kLlamaCppExpected) {
        EXPECT_EQ(format(e.family, conversation()), e.output) << chat_template_family_name(e.family);
    }
}

TEST(ChatTemplate, GraniteToolCallRole) {
    // llama.cpp's granite tool-call case: three more messages after the conversation.
    auto msgs = conversation();
    msgs.push_back({"user", "What is the weather?"});
    msgs.push_back({"assistant_tool_call",
                    "[{\"name\": \"get_weather\", \"arguments\": {\"location\": \"NYC\"}}]"});
    msgs.push_back({"tool_response", "{\"temperature\": 72}"});
    const std::string expected =
        std::string(kLlamaCppExpected[19].output)
            .substr(0, std::string(kLlamaCppExpected[19].output).size() -
                           std::string("<|start_of_role|>assistant<|end_of_role|>").size()) +
        "<|start_of_role|>user<|end_of_role|>What is the weather?<|end_of_text|>\n"
        "<|start_of_role|>assistant_tool_call<|end_of_role|><|tool_call|>[{\"name\": \"get_weather\", "
        "\"arguments\": {\"location\": \"NYC\"}}]<|end_of_text|>\n"
        "<|start_of_role|>tool_response<|end_of_role|>{\"temperature\": 72}<|end_of_text|>\n"
        "<|start_of_role|>assistant<|end_of_role|>";
    ASSERT_EQ(kLlamaCppExpected[19].family, F::kGranite);
    EXPECT_EQ(format(F::kGranite, msgs), expected);
}

TEST(ChatTemplate, ZephyrAndLlama2Sys) {
    // Not in llama.cpp's expected-output list; these follow its formatter's rules.
    EXPECT_EQ(format(F::kZephyr, {{"system", "S"}, {"user", "Hi"}}),
              "<|system|>\nS<|endoftext|>\n<|user|>\nHi<|endoftext|>\n<|assistant|>\n");
    EXPECT_EQ(format(F::kLlama2Sys,
                     {{"system", "S"}, {"user", "Hi"}, {"assistant", " A "}, {"user", "B"}}),
              "[INST] <<SYS>>\nS\n<</SYS>>\n\nHi [/INST] A </s>[INST] B [/INST]");
}

TEST(ChatTemplate, GenerationPrompt) {
    const std::vector<ChatMessage> hi = {{"user", "Hi!"}};
    EXPECT_EQ(format(F::kChatml, hi, false), "<|im_start|>user\nHi!<|im_end|>\n");
    EXPECT_EQ(format(F::kDeepseek2, hi, false), "User: Hi!\n\n");
    EXPECT_EQ(format(F::kLlama3, hi, true),
              "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
    // llama2 writes its first "[INST] " even for an empty chat, and never a generation prompt.
    EXPECT_EQ(format(F::kLlama2, {}, true), "[INST] ");
    // rwkv-world follows a final user turn with "Assistant:" whatever the flag says.
    EXPECT_EQ(format(F::kRwkvWorld, hi, false), "User: Hi!\n\nAssistant:");
}

TEST(ChatTemplate, Names) {
    for (const std::string& name : chat_template_family_names()) {
        auto f = chat_template_family_from_name(name);
        ASSERT_TRUE(f.ok()) << name;
        EXPECT_EQ(chat_template_family_name(f.value()), name);
        EXPECT_EQ(detect_chat_template(name), f.value()) << name;  // a name is a valid template
    }
    EXPECT_EQ(chat_template_family_from_name("chatml").value(), F::kChatml);
    EXPECT_EQ(chat_template_family_from_name("deepseek2").value(), F::kDeepseek2);
    auto bad = chat_template_family_from_name("chatml2");
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, ErrorCode::kUsage);
    EXPECT_NE(bad.error().message.find("llama2-sys-bos"), std::string::npos);
    EXPECT_STREQ(chat_template_family_name(F::kNone), "none");
    EXPECT_FALSE(apply_chat_template(F::kNone, conversation(), true).ok());
}

TEST(ChatTemplate, DetectionRules) {
    EXPECT_EQ(detect_chat_template("INVALID TEMPLATE"), F::kNone);
    EXPECT_EQ(detect_chat_template(""), F::kNone);
    EXPECT_EQ(detect_chat_template("{{ '<|im_start|>' + role }}"), F::kChatml);
    EXPECT_EQ(detect_chat_template("<|im_start|><|im_sep|>"), F::kPhi4);
    EXPECT_EQ(detect_chat_template("<|im_start|>User:<end_of_utterance>"), F::kSmolvlm);
    // Llama-2 variants: strip wins over bos, bos over <<SYS>>.
    EXPECT_EQ(detect_chat_template("'[INST] ' + content"), F::kLlama2);
    EXPECT_EQ(detect_chat_template("[INST] <<SYS>>"), F::kLlama2Sys);
    EXPECT_EQ(detect_chat_template("<<SYS>> bos_token + '[INST] '"), F::kLlama2SysBos);
    EXPECT_EQ(detect_chat_template("[INST] bos_token + '[INST] ' content.strip()"), F::kLlama2SysStrip);
    EXPECT_EQ(detect_chat_template("mistral-custom"), F::kLlama2);  // prefix "mistral" counts
    EXPECT_EQ(detect_chat_template("[INST] [SYSTEM_PROMPT]"), F::kMistralV7);
    EXPECT_EQ(detect_chat_template("{{ ' [INST] ' + system_message }}"), F::kMistralV1);
    EXPECT_EQ(detect_chat_template("[AVAILABLE_TOOLS] \"[INST]\""), F::kMistralV3Tekken);
    EXPECT_EQ(detect_chat_template("[AVAILABLE_TOOLS] \"[INST] \""), F::kMistralV3);
    // <|assistant|> rules come before zephyr: a TinyLlama-style template without <|endoftext|> text
    // but with <|assistant|> is glmedge for llama.cpp.
    EXPECT_EQ(detect_chat_template("<|user|><|assistant|><|end|>"), F::kPhi3);
    EXPECT_EQ(detect_chat_template("<|user|><|assistant|></s>"), F::kFalcon3);
    EXPECT_EQ(detect_chat_template("<|user|><|assistant|>"), F::kGlmEdge);
    EXPECT_EQ(detect_chat_template("'<|user|>\\n' + content + '<|endoftext|>'"), F::kZephyr);
    EXPECT_EQ(detect_chat_template("<|start_header_id|>x<|end_header_id|>"), F::kLlama3);
    EXPECT_EQ(detect_chat_template("{{ 'Assistant: ' + message['content'] + eos_token }}"), F::kDeepseek2);
    EXPECT_EQ(detect_chat_template("<｜User｜><｜Assistant｜><｜end▁of▁sentence｜>"), F::kDeepseek3);
    EXPECT_EQ(detect_chat_template("### Instruction: <|EOT|>"), F::kDeepseek);
    EXPECT_EQ(detect_chat_template("<start_of_turn>"), F::kGemma);
    EXPECT_EQ(detect_chat_template("<|endofuserprompt|>"), F::kDots1);
    EXPECT_EQ(chat_template_family_from_name("dots1").ok(), false);  // no such name in llama.cpp
}

// GGUF with just the metadata given, parsed from memory.
std::unique_ptr<GgufFile> gguf_with(std::vector<GgufKV> kvs) {
    std::string path = test::make_temp_dir() + "/t.gguf";
    EXPECT_TRUE(gguf_write(path, kvs, {}).ok());
    auto f = GgufFile::open(path);
    EXPECT_TRUE(f.ok());
    return f.ok() ? std::move(f.value()) : nullptr;
}

TEST(ChatTemplate, FromGgufErrors) {
    auto unknown = gguf_with({{"tokenizer.chat_template",
                               GgufValue::make_string("{% for m in messages %}{{ m.content }}{% endfor %}")}});
    ASSERT_TRUE(unknown);
    auto r = chat_template_from_gguf(*unknown);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find("not a family Layerscope recognises (it begins \"{% for m"),
              std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("--chat-template NAME"), std::string::npos);

    auto absent = gguf_with({{"general.name", GgufValue::make_string("x")}});
    ASSERT_TRUE(absent);
    auto a = chat_template_from_gguf(*absent);
    ASSERT_FALSE(a.ok());
    EXPECT_NE(a.error().message.find("no tokenizer.chat_template"), std::string::npos);
}

Result<ChatTemplateFamily> fixture_family(const std::string& rel) {
    auto f = GgufFile::open(test::fixture_path(rel));
    if (!f.ok()) return f.error();
    return chat_template_from_gguf(*f.value());
}

TEST(ChatTemplate, FixtureModelsDetected) {
    LS_REQUIRE_FIXTURES();
    const std::pair<const char*, F> cases[] = {
        {"models/qwen2-mini-F16.gguf", F::kChatml},
        {"models/qwen2-mini-Q8_0.gguf", F::kChatml},
        {"models/deepseek2-mini-F16.gguf", F::kDeepseek2},
        {"models/deepseek2-mini-Q4_K_M.gguf", F::kDeepseek2},
        {"models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf", F::kDeepseek2},
        {"tokenizer/ggml-vocab-phi-3.gguf", F::kPhi3},
        {"tokenizer/ggml-vocab-qwen2.gguf", F::kChatml},
    };
    for (const auto& [rel, family] : cases) {
        auto r = fixture_family(rel);
        ASSERT_TRUE(r.ok()) << rel << ": " << r.error().message;
        EXPECT_EQ(r.value(), family) << rel << " detected as " << chat_template_family_name(r.value());
    }
    // Models without a template say so.
    auto none = fixture_family("models/stories260K.gguf");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("--chat-template"), std::string::npos);
}

// Formats {"user": "Hi!"} with the model's own template, and checks it against the prompt and the
// prompt tokens llama.cpp recorded in the dump.
void check_dump_prompt(const std::string& dump_rel, const std::string& model_rel, const std::string& expected) {
    auto dump = GgufFile::open(test::fixture_path(dump_rel));
    ASSERT_TRUE(dump.ok()) << dump.error().message;
    const GgufFile& d = *dump.value();
    auto model = GgufFile::open(test::fixture_path(model_rel));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto family = chat_template_from_gguf(*model.value());
    ASSERT_TRUE(family.ok()) << family.error().message;
    auto prompt = apply_chat_template(family.value(), {{"user", "Hi!"}}, true);
    ASSERT_TRUE(prompt.ok());
    EXPECT_EQ(prompt.value(), expected);
    EXPECT_EQ(prompt.value(), d.get_string("dump.prompt"));

    auto tok = Tokenizer::from_gguf(*model.value());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const GgufValue* ids = d.find("dump.prompt_tokens");
    ASSERT_TRUE(ids && ids->is_array());
    std::vector<TokenId> expected_ids;
    for (size_t i = 0; i < ids->array_size(); ++i) {
        int64_t id = 0;
        ASSERT_TRUE(ids->item_int(i, &id));
        expected_ids.push_back(static_cast<TokenId>(id));
    }
    EXPECT_EQ(tok.value().encode(prompt.value(), d.get_bool("dump.add_special", true), true), expected_ids);
}

TEST(ChatTemplate, Qwen2DumpPrompt) {
    LS_REQUIRE_FIXTURES();
    check_dump_prompt("dumps/qwen2-mini-F16_chat_n4_fa-off_nocache.gguf", "models/qwen2-mini-F16.gguf",
                      "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, Deepseek2DumpPrompt) {
    LS_REQUIRE_FIXTURES();
    // No BOS text: llama.cpp's deepseek2 formatter leaves BOS to the tokenizer (add_bos).
    check_dump_prompt("dumps/deepseek2-mini-F16_hi_n4_fa-off_nocache.gguf", "models/deepseek2-mini-F16.gguf",
                      "User: Hi!\n\nAssistant:");
}


// The fixture models' own templates through Jinja, as llama.cpp's Jinja path renders them for
// one user message "Hi!" (its outputs, recorded with its common_chat_templates_apply).
TEST(ChatJinja, FixtureModelTemplates) {
    LS_REQUIRE_FIXTURES();
    const std::pair<const char*, const char*> cases[] = {
        {"models/qwen2-mini-F16.gguf",
         "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
         "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n"},
        // The template writes BOS; the tokenizer adds it, so the text leaves it out.
        {"models/deepseek2-mini-F16.gguf", "User: Hi!\n\nAssistant:"},
    };
    for (const auto& [rel, expected] : cases) {
        auto f = GgufFile::open(test::fixture_path(rel));
        ASSERT_TRUE(f.ok()) << f.error().message;
        auto tok = Tokenizer::from_gguf(*f.value());
        ASSERT_TRUE(tok.ok());
        auto prompt = chat_prompt(*f.value(), tok.value(), "Hi!");
        ASSERT_TRUE(prompt.ok()) << rel << ": " << prompt.error().message;
        EXPECT_EQ(prompt.value(), expected) << rel;
        auto family = chat_prompt(*f.value(), tok.value(), "Hi!", "chatml");  // a named family instead
        ASSERT_TRUE(family.ok());
        EXPECT_EQ(family.value(), "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
    }
    auto stories = GgufFile::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(stories.ok());
    auto tok = Tokenizer::from_gguf(*stories.value());
    ASSERT_TRUE(tok.ok());
    auto none = chat_prompt(*stories.value(), tok.value(), "Hi!");
    ASSERT_FALSE(none.ok());
    EXPECT_NE(none.error().message.find("--chat-template NAME"), std::string::npos);
}

std::string render_chat(const std::string& tmpl, const std::string& json) {
    auto chat = jinja_chat_from_json(json);
    EXPECT_TRUE(chat.ok());
    if (!chat.ok()) return "";
    chat.value().template_source = tmpl;
    auto r = render_jinja_chat(chat.value());
    return r.ok() ? r.value() : "ERROR " + r.error().message;
}

// The message fixes llama.cpp makes before rendering.
TEST(ChatJinja, MessageFixes) {
    const std::string conv = R"([{"role": "developer", "content": "S"}, {"role": "user", "content": "U"}])";
    // developer reads as system; a template that shows the system role gets it as is...
    EXPECT_EQ(render_chat("{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}", conv), "[system]S[user]U");
    // ...one that refuses it gets the system text folded into the next message.
    EXPECT_EQ(render_chat("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}"
                          "[{{ m.role }}]{{ m.content }}{% endfor %}",
                          conv),
              "[user]S\nU");

    const std::string calls = R"({"messages": [{"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "c1",
            "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "content": "{\"temp\": 18}", "tool_call_id": "c1"},
        {"role": "assistant", "content": "18 degrees."}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]})";
    // A template that reads arguments as an object gets them parsed from the JSON text...
    EXPECT_EQ(render_chat("{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.name }}"
                          "{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}",
                          calls),
              "get_weather{\"city\": \"Paris\"}");
    // ...one that prints them as text keeps the text.
    EXPECT_EQ(render_chat("{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.name }}:"
                          "{{ c.function.arguments }}{% endfor %}{% endfor %}",
                          calls),
              "get_weather:{\"city\": \"Paris\"}");
    // Gemma 4's older templates (marked by '<|tool_call>call:') read tool results from the
    // assistant turn: the tool message and the answer after it join the call's message.
    EXPECT_EQ(render_chat("{#- '<|tool_call>call:' -#}{% for m in messages %}<{{ m.role }}>"
                          "{% for r in m.tool_responses %}{{ r.name }}={{ r.response.temp }};{% endfor %}"
                          "{{ m.content }}{% endfor %}",
                          calls),
              "<user>Weather?<assistant>get_weather=18;18 degrees.");
}

}  // namespace
}  // namespace ls
