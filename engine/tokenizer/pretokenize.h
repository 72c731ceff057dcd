// Pre-tokenizers of BPE vocabularies: every tokenizer.ggml.pre value llama.cpp accepts for
// decoder models at the fixtures' commit, each a list of steps that cut the text into ever
// smaller words (a tokenizer.json regex run as llama.cpp runs it, or one of the hand-written
// splitters llama.cpp uses in place of some regexes), plus the flags llama.cpp attaches to the
// name. The words then go to the merges, in GPT-2's byte-level alphabet or as raw UTF-8.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/result.h"

namespace ls {

class SplitRegex;

// The splitters llama.cpp has in place of a regex. Each is exact for the regex it stands for,
// except where noted: llama.cpp's own code is the reference then.
enum class Splitter {
    kRegex,        // the step's pattern, through SplitRegex
    kGpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
    kLlama3,       // Llama 3's pattern: digits in runs of up to 3
    kQwen2,        // Llama 3's pattern with one digit per word
    kQwen35,       // Qwen2's with marks (\p{M}) joining letters
    kKimiK2,       // Kimi-K2: Han runs, then letter words (llama.cpp's code, not its regex)
    kDigitGroups,  // digits in threes from the right (llama.cpp's code: the text before a
                   // digit run is joined to its first group)
    kNewlines,     // [^\n]+|[\n]+
    kDeepseekLlm,  // DeepSeek LLM's cascade of six patterns
};

struct PreTokenizerStep {
    Splitter splitter = Splitter::kRegex;
    const char* pattern = "";               // the regex (what a hand-written splitter stands for)
    std::shared_ptr<const SplitRegex> regex;  // compiled; for hand-written splitters too, so
                                              // tests can run both and compare
};

class PreTokenizer {
public:
    // tokenizer.ggml.pre (empty means llama.cpp's "default"); kUnsupported names the value
    // and lists the supported ones.
    static Result<PreTokenizer> for_name(std::string_view pre);
    static std::vector<std::string> supported_names();

    const std::string& name() const { return name_; }  // as asked for ("" reads "default")
    bool clean_spaces() const { return clean_spaces_; }
    bool ignore_merges() const { return ignore_merges_; }
    bool add_bos() const { return add_bos_; }
    bool no_default_bos() const { return no_default_bos_; }  // chatglm: no BOS unless the file names one
    bool byte_encode() const { return byte_encode_; }        // GPT-2's byte alphabet, else raw UTF-8
    bool escape_whitespace() const { return escape_whitespace_; }  // spaces become U+2581 first
    bool merges_optional() const { return merges_optional_; }      // Kimi-K2 ships none
    const std::vector<PreTokenizerStep>& steps() const { return *steps_; }

    // Words of `text` in order, in the alphabet the merges use.
    std::vector<std::string> words(std::string_view text) const;

private:
    friend struct PreTokenizerTable;
    std::string name_;
    std::shared_ptr<const std::vector<PreTokenizerStep>> steps_;
    bool clean_spaces_ = true, ignore_merges_ = false, add_bos_ = false, no_default_bos_ = false;
    bool byte_encode_ = true, escape_whitespace_ = false, merges_optional_ = false;
};

}  // namespace ls
