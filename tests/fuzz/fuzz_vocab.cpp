// Fuzz target: loading a tokenizer from GGUF metadata (tokens, scores, types, merges, special
// ids, pre-tokenizer names) and the chat template a model names, then using both once.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto parsed = ls::GgufFile::parse(std::vector<uint8_t>(data, data + size), "fuzz-vocab.gguf");
    if (!parsed) return 0;
    const ls::GgufFile& file = *parsed.value();
    auto family = ls::chat_template_from_gguf(file);
    std::string prompt = "Hello world! 123 <s> <|im_start|>user\n  \xc3\xa9\xe4\xbd\xa0\xf0\x9f\x98\x80 ";
    if (family && family.value() != ls::ChatTemplateFamily::kNone) {
        auto text = ls::apply_chat_template(family.value(), {{"system", "Be brief."}, {"user", "Hi!"}}, true);
        if (text) prompt = text.value();
    }
    auto tok = ls::Tokenizer::from_gguf(file);
    if (!tok) return 0;
    for (bool parse_special : {false, true}) {
        const std::vector<ls::TokenId> ids = tok->encode(prompt, true, parse_special);
        (void)tok->decode(ids, false, true);
    }
    std::vector<ls::TokenId> all;
    for (size_t id = 0; id < tok->n_tokens() && id < 4096; ++id) all.push_back(static_cast<ls::TokenId>(id));
    (void)tok->decode(all, true, false);
    return 0;
}
