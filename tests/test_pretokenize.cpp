// Pre-tokenizers: every pattern of the table against std::regex run the way llama.cpp runs it
// (the oracle: the collapsed text and rewritten pattern for category patterns, std::wregex on
// code points otherwise), the hand-written splitters against their patterns, the splitters that
// follow llama.cpp's code rather than a regex on inputs worked out by hand, and the names.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>

#include "engine/tokenizer/pretokenize.h"
#include "engine/tokenizer/split_regex.h"
#include "engine/tokenizer/unicode_text.h"

namespace ls {
namespace {

using Pieces = std::vector<std::pair<size_t, size_t>>;

// --- the oracle --------------------------------------------------------------------------------

// The stand-in byte of a non-ASCII code point in the collapsed text, and the ASCII members of
// each category (what llama.cpp substitutes for \p{X}).
char collapsed_byte(uint32_t cp) {
    if (cp < 0x80) return static_cast<char>(cp);
    const unicode::CharClass c = unicode::classify(cp);
    if (c.whitespace) return 0x0B;
    switch (c.category) {
        case unicode::Category::kNumber: return static_cast<char>(0xD1);
        case unicode::Category::kLetter: return static_cast<char>(0xD2);
        case unicode::Category::kPunctuation: return static_cast<char>(0xD3);
        case unicode::Category::kMark: return static_cast<char>(0xD4);
        case unicode::Category::kSymbol: return static_cast<char>(0xD5);
        default: return static_cast<char>(0xD0);
    }
}

std::string category_members(const std::string& name) {
    if (name == "N") return "\xD1" "0-9";
    if (name == "L" || name == "Lu" || name == "Ll" || name == "Lt" || name == "Lm" || name == "Lo") return "\xD2" "A-Za-z";
    if (name == "P") return "\xD3" "!-#%-*,-/:-;?-@\\[-\\]_\\{\\}";
    if (name == "M") return "\xD4";
    if (name == "S") return "\xD5" "\\$\\+<->\\^`\\|~";
    ADD_FAILURE() << "category " << name;
    return "";
}

std::string collapse_pattern(const std::string& p) {
    std::string out;
    bool inside = false;
    for (size_t i = 0; i < p.size(); ++i) {
        if (p[i] == '\\' && i + 1 < p.size() && p[i + 1] != 'p') {
            out += p.substr(i, 2);
            ++i;
            continue;
        }
        if (p[i] == '[') inside = true;
        if (p[i] == ']') inside = false;
        if (p.compare(i, 3, "\\p{") == 0) {
            const size_t close = p.find('}', i);
            const std::string members = category_members(p.substr(i + 3, close - i - 3));
            out += inside ? members : "[" + members + "]";
            i = close;
            continue;
        }
        out.push_back(p[i]);
    }
    return out;
}

// std::regex_iterator over one piece, gaps kept, empty matches dropped (they make no tokens).
template <class Str, class Re>
Pieces iterate(const Str& text, const Re& re) {
    Pieces out;
    size_t gap = 0;
    for (auto it = std::regex_iterator<typename Str::const_iterator>(text.begin(), text.end(), re);
         it != std::regex_iterator<typename Str::const_iterator>(); ++it) {
        const size_t b = static_cast<size_t>(it->position()), e = b + static_cast<size_t>(it->length());
        if (b > gap) out.push_back({gap, b});
        if (e > b) out.push_back({b, e});
        gap = e;
    }
    if (gap < text.size()) out.push_back({gap, text.size()});
    return out;
}

Pieces oracle_split(const std::string& pattern, const std::vector<uint32_t>& cps) {
    const auto flags = std::regex_constants::optimize | std::regex_constants::nosubs;
    if (pattern.find("\\p{") != std::string::npos) {
        std::string text;
        for (uint32_t c : cps) text.push_back(collapsed_byte(c));
        return iterate(text, std::regex(collapse_pattern(pattern), flags));
    }
    std::wstring text, wpattern;
    for (uint32_t c : cps) text.push_back(static_cast<wchar_t>(c > 0x7F && unicode::classify(c).whitespace ? 0x0B : c));
    for (uint32_t c : unicode::decode_utf8(pattern)) wpattern.push_back(static_cast<wchar_t>(c));
    return iterate(text, std::wregex(wpattern, flags));
}

// Random short texts over the characters the patterns tell apart.
std::string random_text(std::mt19937& rng) {
    static const std::vector<std::string> atoms = {
        "a", "Z", "x", "Hello", "WORLD", "iPhone", "'s", "'T", "'re", "'LL", "'", "0", "7", "123", "45678", " ", "  ",
        "\t", "\n", "\r\n", "\n\n", ",", ".", "!", "?", "$", "+", "<", "=", "`", "|", "~", "/", "(", ")", "-", "_",
        "\xC3\xA9",          // é
        "\xC3\x89",          // É
        "\xD0\x96",          // Ж
        "\xC3\x9F",          // ß
        "\xCC\x81",          // combining acute
        "\xE4\xBD\xA0\xE5\xA5\xBD",  // 你好
        "\xEA\xB0\x80",      // 가
        "\xE3\x81\x82",      // あ
        "\xE3\x82\xA2",      // ア
        "\xD9\xA3",          // Arabic-Indic three
        "\xE2\x85\xAB",      // Roman numeral twelve (Nl)
        "\xE3\x80\x80",      // ideographic space
        "\xC2\xA0",          // no-break space
        "\xE2\x82\xAC",      // €
        "\xE2\x80\xA6",      // …
        "\xE3\x80\x82",      // 。
        "\xEF\xBC\x8C",      // ，
        "\xCD\xB8",          // unassigned
        "\xF0\x9F\x98\x80",  // emoji
        "\xE2\x80\x8B",      // zero-width space (Cf)
        "<sentinel:12>", "IMGIMGABZ",
    };
    std::string s;
    const int n = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < n; ++i) s += atoms[rng() % atoms.size()];
    return s;
}

std::string show(const std::vector<uint32_t>& cps, const Pieces& pieces) {
    std::string s;
    for (const auto& [b, e] : pieces) {
        std::string w;
        for (size_t i = b; i < e; ++i) unicode::append_utf8(w, cps[i]);
        s += "[" + w + "]";
    }
    return s;
}

// Every regex of every pre-tokenizer, on one piece of random text, against std::regex.
TEST(PreTokenizerRegex, EveryPatternMatchesStdRegex) {
    std::set<std::string> patterns;
    for (const std::string& name : PreTokenizer::supported_names()) {
        auto p = PreTokenizer::for_name(name);
        ASSERT_TRUE(p.ok()) << name << ": " << p.error().message;
        for (const PreTokenizerStep& step : p->steps()) {
            if (step.regex) patterns.insert(step.pattern);
        }
    }
    EXPECT_GE(patterns.size(), 25u);
    std::mt19937 rng(7);
    for (const std::string& pattern : patterns) {
        auto re = SplitRegex::compile(pattern);
        ASSERT_TRUE(re.ok()) << re.error().message;
        for (int round = 0; round < 300; ++round) {
            const std::string text = random_text(rng);
            const std::vector<uint32_t> cps = unicode::decode_utf8(text);
            Pieces ours;
            re->split(re->units(cps), 0, cps.size(), ours);
            const Pieces want = oracle_split(pattern, cps);
            ASSERT_EQ(show(cps, ours), show(cps, want)) << "pattern " << pattern;
        }
    }
}

// The hand-written splitters give what their patterns give.
TEST(PreTokenizerRegex, HandWrittenSplittersMatchTheirPatterns) {
    std::mt19937 rng(11);
    for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "qwen35", "sarvam-moe"}) {
        auto p = PreTokenizer::for_name(name);
        ASSERT_TRUE(p.ok());
        ASSERT_EQ(p->steps().size(), 1u);
        const PreTokenizerStep& step = p->steps()[0];
        ASSERT_NE(step.splitter, Splitter::kRegex) << name;
        for (int round = 0; round < 500; ++round) {
            const std::string text = random_text(rng);
            const std::vector<uint32_t> cps = unicode::decode_utf8(text);
            std::string ours;
            for (const std::string& w : p->words(text)) {
                std::string bytes = w;
                if (p->byte_encode()) {
                    bytes.clear();
                    for (uint32_t cp : unicode::decode_utf8(w)) bytes.push_back(static_cast<char>(unicode::symbol_to_byte(cp)));
                }
                ours += "[" + bytes + "]";
            }
            ASSERT_EQ(ours, show(cps, oracle_split(step.pattern, cps))) << name << " on " << text;
        }
    }
}

std::vector<std::string> words(const char* pre, const std::string& text) {
    auto p = PreTokenizer::for_name(pre);
    EXPECT_TRUE(p.ok()) << pre;
    if (!p.ok()) return {};
    std::vector<std::string> out;
    for (const std::string& w : p->words(text)) {
        std::string bytes;
        for (uint32_t cp : unicode::decode_utf8(w)) bytes.push_back(static_cast<char>(unicode::symbol_to_byte(cp)));
        out.push_back(p->byte_encode() ? bytes : w);
    }
    return out;
}
using W = std::vector<std::string>;

// Splitters that follow llama.cpp's code, not a regex: worked out from that code by hand.
TEST(PreTokenizerRegex, CodeDefinedSplitters) {
    // Digits in threes from the right; the text before a run joins the first group, then the
    // letter pattern separates it again.
    EXPECT_EQ(words("tiny_aya", "ab1234567 x12"), (W{"ab", "1", "234", "567", " x", "12"}));
    EXPECT_EQ(words("afmoe", "x123456"), (W{"x", "123", "456"}));
    // Kimi-K2: Han runs, words of other letters with a contraction, digits in threes (left).
    EXPECT_EQ(words("kimi-k2", "\xE4\xBD\xA0\xE5\xA5\xBD" "abc's 12345 !?\n"),
              (W{"\xE4\xBD\xA0\xE5\xA5\xBD", "abc's", " ", "123", "45", " !?\n"}));
    // SuperBPE: numbers, then cut before every group of three counted from the right.
    EXPECT_EQ(words("superbpe", "1234567 x"), (W{"1", "234", "567", " x"}));
    // Gemma 4: runs of newlines and of the rest; raw UTF-8, no byte alphabet.
    EXPECT_EQ(words("gemma4", "a b\n\nc"), (W{"a b", "\n\n", "c"}));
}

TEST(PreTokenizerNames, EveryDecoderNameLlamaCppAcceptsIsSupported) {
    // tokenizer.ggml.pre values llama.cpp accepts at the fixtures' commit for BPE vocabularies.
    const char* names[] = {
        "default", "minicpm5", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
        "lfm2", "jina-v5-nano", "deepseek-llm", "deepseek-coder", "deepseek-v3", "spark2_5", "youtu", "falcon",
        "mpt", "starcoder", "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
        "a.x-4.0", "mellum", "jais-2", "gemma4", "sarvam-moe", "refact", "command-r", "qwen2", "deepseek-r1-qwen",
        "kormo", "f2llmv2", "qwen35", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "glm4", "chatglm-bpe",
        "viking", "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone", "exaone4",
        "exaone-moe", "chameleon", "minerva-7b", "megrez", "gpt-4o", "llama4", "kanana2", "talkie", "tiny_aya",
        "cohere2moe", "superbpe", "trillion", "granite-docling", "bailingmoe", "bailingmoe2", "llada-moe",
        "seed-coder", "hunyuan", "hunyuan-dense", "hy_v4", "joyai-llm", "kimi-k2", "ufakzeka", "grok-2", "afmoe",
        "laguna", "minimax-m2", "solar-open", "mellum2",
    };
    for (const char* name : names) {
        auto p = PreTokenizer::for_name(name);
        EXPECT_TRUE(p.ok()) << name << ": " << (p.ok() ? "" : p.error().message);
    }
    EXPECT_TRUE(PreTokenizer::for_name("").ok());  // no key: llama.cpp's default
    auto unknown = PreTokenizer::for_name("no-such-pre");
    ASSERT_FALSE(unknown.ok());
    EXPECT_NE(unknown.error().message.find("\"no-such-pre\""), std::string::npos);
    EXPECT_NE(unknown.error().message.find("qwen35"), std::string::npos);  // the list of supported ones
    auto encoder = PreTokenizer::for_name("roberta-bpe");
    ASSERT_FALSE(encoder.ok());
    EXPECT_NE(encoder.error().message.find("encoder"), std::string::npos);
}

TEST(PreTokenizerRegex, BadPatternsAreErrorsNotCrashes) {
    for (const char* bad : {"(", "[a-", "a{2,1}", "\\p{Xx}", "(?<x>a)", "a**", "\\p{L}\xC3\xA9", "(a*)*", "\\"}) {
        auto re = SplitRegex::compile(bad);
        EXPECT_FALSE(re.ok()) << bad;
    }
}

TEST(PreTokenizerRegex, LongWordsNeedNoDeepStack) {
    // One 2-million-letter word through a pattern with a group loop: matched with the
    // machine's own stack, not recursion.
    auto re = SplitRegex::compile("(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+");
    ASSERT_TRUE(re.ok());
    std::vector<uint32_t> cps;
    for (int i = 0; i < 1000000; ++i) cps.push_back('a'), cps.push_back(i % 2 ? ' ' : 0x301);
    cps.push_back('b');
    Pieces out;
    re->split(re->units(cps), 0, cps.size(), out);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].second, cps.size());
}

}  // namespace
}  // namespace ls
