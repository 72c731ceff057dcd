// Pre-tokenizers of byte-level BPE vocabularies: split text into words the way each model's
// tokenizer.json regex does (hand-written matchers, no regex engine), then map bytes to GPT-2's
// byte-level alphabet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ls {

enum class PreTokenizer {
    kDefault,      // no or "default" tokenizer.ggml.pre: llama.cpp's generic fallback
    kGpt2,         // gpt-2, phi-2, ...
    kLlama3,       // llama-bpe (Llama 3): digits in groups of up to 3, newline-aware whitespace
    kQwen2,        // qwen2: like Llama 3 but one digit per word
    kDeepseekLlm,  // deepseek-llm (DeepSeek LLM / V2): a cascade of six patterns
};

const char* pre_tokenizer_name(PreTokenizer pre);

// Words of `text` in order, each already in the byte-level alphabet (what the merges work on).
std::vector<std::string> pretokenize_bytelevel(PreTokenizer pre, std::string_view text);

}  // namespace ls
