// The pre-tokenizer table and its splitters. A hand-written splitter is a matcher that, given a
// start position, returns the length the regex (leftmost alternative first, as ECMAScript and
// the Rust/Python engines behind tokenizer.json do) would match there; a driver cuts every
// current piece into matches and the gaps between them, step after step.
#include "engine/tokenizer/pretokenize.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "engine/tokenizer/split_regex.h"
#include "engine/tokenizer/unicode_text.h"
#include "engine/util/quote.h"

namespace ls {

using unicode::CharClass;

namespace {

// The text as code points plus their classes; positions past `end` of the piece being matched
// read as "nothing" so that lookaheads stop at piece boundaries like they do in llama.cpp.
struct Text {
    std::vector<uint32_t> cps;
    std::vector<CharClass> cls;
};

constexpr uint32_t kNone = 0xFFFFFFFF;

struct Piece {  // [begin, end) in code points
    size_t begin, end;
};

struct View {
    const Text& t;
    size_t end;
    uint32_t cp(size_t i) const { return i < end ? t.cps[i] : kNone; }
    bool in(size_t i) const { return i < end; }
    bool ws(size_t i) const { return i < end && t.cls[i].whitespace; }
    bool letter(size_t i) const { return i < end && t.cls[i].is_letter(); }
    bool number(size_t i) const { return i < end && t.cls[i].is_number(); }
    bool mark(size_t i) const { return i < end && t.cls[i].category == unicode::Category::kMark; }
    // [^\s\p{L}\p{N}]: any code point that is neither, including unassigned ones.
    bool other(size_t i) const { return i < end && !ws(i) && !letter(i) && !number(i); }
};

// Cuts every piece into the matcher's matches and the unmatched gaps between them.
template <class Matcher>
std::vector<Piece> split(const Text& t, const std::vector<Piece>& pieces, Matcher match) {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    for (const Piece& p : pieces) {
        const View v{t, p.end};
        size_t gap_begin = p.begin;
        size_t pos = p.begin;
        while (pos < p.end) {
            const size_t len = match(v, pos);
            if (len == 0) {
                ++pos;
                continue;
            }
            if (pos > gap_begin) out.push_back({gap_begin, pos});
            out.push_back({pos, pos + len});
            pos += len;
            gap_begin = pos;
        }
        if (gap_begin < p.end) out.push_back({gap_begin, p.end});
    }
    return out;
}

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive; 0 when there is none at pos.
size_t match_contraction(const View& v, size_t pos, bool any_case) {
    if (v.cp(pos) != '\'' || !v.in(pos + 1)) return 0;
    auto low = [&](size_t i) { return any_case ? unicode::to_lower(v.cp(i)) : v.cp(i); };
    const uint32_t a = low(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (!v.in(pos + 2)) return 0;
    const uint32_t b = low(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

template <class Pred>
size_t run_length(const View& v, size_t pos, Pred pred) {
    size_t p = pos;
    while (p < v.end && pred(p)) ++p;
    return p - pos;
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t match_gpt2(const View& v, size_t pos) {
    if (size_t n = match_contraction(v, pos, false)) return n;
    const size_t lead = v.cp(pos) == ' ' ? 1 : 0;  // the optional leading space
    const size_t body = pos + lead;
    if (v.letter(body)) return lead + run_length(v, body, [&](size_t i) { return v.letter(i); });
    if (v.number(body)) return lead + run_length(v, body, [&](size_t i) { return v.number(i); });
    if (v.other(body)) return lead + run_length(v, body, [&](size_t i) { return v.other(i); });
    const size_t n_ws = run_length(v, pos, [&](size_t i) { return v.ws(i); });
    if (n_ws > 1 && v.in(pos + n_ws)) return n_ws - 1;  // \s+(?!\S): leave one space to the word
    if (n_ws > 0) return n_ws;
    return 1;
}

size_t match_trailing_space(const View& v, size_t pos);

// Llama 3 / Qwen2 / Qwen3.5:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+     with D = 3 (Llama 3) or 1 (Qwen2); Qwen3.5 reads [\p{L}\p{M}] for
// \p{L} in the word and adds \p{M} to the excluded set of the punctuation run.
size_t match_llama3_family(const View& v, size_t pos, size_t max_digits, bool marks) {
    if (size_t n = match_contraction(v, pos, true)) return n;
    auto wordy = [&](size_t i) { return v.letter(i) || (marks && v.mark(i)); };
    const uint32_t c = v.cp(pos);
    const bool newline = c == '\r' || c == '\n';
    if (!newline && !v.number(pos) && (wordy(pos) || wordy(pos + 1))) {
        return 1 + run_length(v, pos + 1, wordy);
    }
    if (v.number(pos)) return std::min(max_digits, run_length(v, pos, [&](size_t i) { return v.number(i); }));
    auto other = [&](size_t i) { return v.other(i) && !(marks && v.mark(i)); };
    const size_t lead = c == ' ' ? 1 : 0;
    if (other(pos + lead)) {
        size_t p = pos + lead;
        p += run_length(v, p, other);
        p += run_length(v, p, [&](size_t i) { return v.cp(i) == '\r' || v.cp(i) == '\n'; });
        return p - pos;
    }
    return match_trailing_space(v, pos);
}

// \s*[\r\n]+|\s+(?!\S)|\s+ , and one character when nothing matches.
size_t match_trailing_space(const View& v, size_t pos) {
    size_t n_ws = 0;
    size_t after_last_newline = 0;
    while (v.ws(pos + n_ws)) {
        const uint32_t w = v.cp(pos + n_ws);
        ++n_ws;
        if (w == '\r' || w == '\n') after_last_newline = n_ws;
    }
    if (after_last_newline > 0) return after_last_newline;  // \s*[\r\n]+
    if (n_ws > 1 && v.in(pos + n_ws)) return n_ws - 1;
    if (n_ws > 0) return n_ws;
    return 1;
}

// Code points llama.cpp counts as Han (the CJK ideograph blocks).
bool is_han(uint32_t c) {
    constexpr std::pair<uint32_t, uint32_t> kHan[] = {
        {0x4E00, 0x9FFF},   {0x3400, 0x4DBF},   {0x20000, 0x2A6DF}, {0x2A700, 0x2B73F}, {0x2B740, 0x2B81F},
        {0x2B820, 0x2CEAF}, {0x2CEB0, 0x2EBEF}, {0xF900, 0xFAFF},   {0x2F800, 0x2FA1F},
    };
    for (const auto& r : kHan) {
        if (c >= r.first && c <= r.second) return true;
    }
    return false;
}

// Kimi-K2, as llama.cpp's code splits it (its tokenizer's regex has set intersections that
// std::regex lacks): a run of Han; else a word of non-Han letters, with one leading character
// that is neither a letter, a digit nor a line break, and an optional contraction after it;
// else digits in threes; then Llama 3's punctuation and white-space rules.
size_t match_kimi_k2(const View& v, size_t pos) {
    const uint32_t c = v.cp(pos);
    if (is_han(c)) return run_length(v, pos, [&](size_t i) { return is_han(v.cp(i)); });
    auto word_letter = [&](size_t i) { return v.letter(i) && !is_han(v.cp(i)); };
    const bool lead = !(c == '\r' || c == '\n' || v.letter(pos) || v.number(pos));
    if (word_letter(pos) || (lead && word_letter(pos + 1))) {
        size_t p = pos + (lead ? 1 : 0);
        p += run_length(v, p, word_letter);
        if (v.cp(p) == '\'' && v.in(p + 1)) p += match_contraction(v, p, true);
        return p - pos;
    }
    if (v.number(pos)) return std::min<size_t>(3, run_length(v, pos, [&](size_t i) { return v.number(i); }));
    const size_t lead_space = c == ' ' ? 1 : 0;
    if (v.other(pos + lead_space)) {
        size_t p = pos + lead_space;
        p += run_length(v, p, [&](size_t i) { return v.other(i); });
        p += run_length(v, p, [&](size_t i) { return v.cp(i) == '\r' || v.cp(i) == '\n'; });
        return p - pos;
    }
    return match_trailing_space(v, pos);
}

// DeepSeek LLM's letter class: the cased-letter ranges its tokenizer.json spells out (not the
// same as \p{L}: no CJK, no caseless scripts; those are handled by the CJK pattern or left over).
constexpr std::pair<uint32_t, uint32_t> kDeepseekLetters[] = {
    {0x41, 0x5A}, {0x61, 0x7A}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
    {0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
    {0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
    {0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
    {0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
    {0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
    {0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
    {0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
    {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
    {0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
    {0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
    {0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// DeepSeek LLM's punctuation class: ASCII punctuation and symbols, their full-width forms,
// curly quotes and the first CJK punctuation marks.
constexpr std::pair<uint32_t, uint32_t> kDeepseekPunct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E}, {0x2018, 0x201F}, {0x3000, 0x3002},
};

constexpr std::pair<uint32_t, uint32_t> kDeepseekCjk[] = {{0x4E00, 0x9FA5}, {0x0800, 0x4E00}, {0xAC00, 0xD7FF}};

template <size_t N>
bool in_ranges(const std::pair<uint32_t, uint32_t> (&ranges)[N], uint32_t cp) {
    for (const auto& r : ranges) {
        if (cp >= r.first && cp <= r.second) return true;
    }
    return false;
}

// llama.cpp runs DeepSeek's character-class patterns with non-ASCII white space replaced by a
// vertical tab; the replacement matters: U+3000 is in the punctuation class, but never matches
// it as typed, only as \s.
uint32_t as_matched(const View& v, size_t i) {
    const uint32_t c = v.cp(i);
    return (c != kNone && c > 0x7F && v.ws(i)) ? 0x0B : c;
}

// \s?[class]+
template <class InClass>
size_t match_space_then_run(const View& v, size_t pos, InClass in_class) {
    auto member = [&](size_t i) { return v.in(i) && in_class(as_matched(v, i)); };
    const size_t body = (v.ws(pos) && member(pos + 1)) ? pos + 1 : pos;
    if (!member(body)) return 0;
    return (body - pos) + run_length(v, body, member);
}

// \s+$ : the white space at the very end of the piece, as one word.
std::vector<Piece> split_trailing_space(const Text& t, const std::vector<Piece>& pieces) {
    std::vector<Piece> out;
    out.reserve(pieces.size() + 1);
    for (const Piece& p : pieces) {
        size_t tail = p.end;
        while (tail > p.begin && t.cls[tail - 1].whitespace) --tail;
        if (tail > p.begin) out.push_back({p.begin, tail});
        if (tail < p.end) out.push_back({tail, p.end});
    }
    return out;
}

std::vector<Piece> split_deepseek_llm(const Text& t, std::vector<Piece> pieces) {
    pieces = split(t, pieces, [](const View& v, size_t pos) -> size_t {  // [\r\n]
        return (v.cp(pos) == '\r' || v.cp(pos) == '\n') ? 1 : 0;
    });
    pieces = split(t, pieces, [](const View& v, size_t pos) {
        return match_space_then_run(v, pos, [](uint32_t c) { return in_ranges(kDeepseekLetters, c); });
    });
    pieces = split(t, pieces, [](const View& v, size_t pos) {
        return match_space_then_run(v, pos, [](uint32_t c) { return in_ranges(kDeepseekPunct, c); });
    });
    pieces = split_trailing_space(t, pieces);
    pieces = split(t, pieces, [](const View& v, size_t pos) {  // [一-龥ࠀ-一가-퟿]+
        return run_length(v, pos, [&](size_t i) { return in_ranges(kDeepseekCjk, v.cp(i)); });
    });
    pieces = split(t, pieces, [](const View& v, size_t pos) {  // \p{N}+
        return run_length(v, pos, [&](size_t i) { return v.number(i); });
    });
    return pieces;
}


// Digits in threes from the right, as llama.cpp's code does it: a run of n digits gives n % 3
// leading digits, then groups of three; text before a run is not cut off but joined to the
// run's first group (later steps separate it).
std::vector<Piece> split_digit_groups(const Text& t, const std::vector<Piece>& pieces) {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    for (const Piece& p : pieces) {
        size_t prev = p.begin;
        auto cut = [&](size_t at) {
            if (at > prev) out.push_back({prev, at});
            prev = at;
        };
        for (size_t pos = p.begin; pos < p.end;) {
            if (!t.cls[pos].is_number()) {
                ++pos;
                continue;
            }
            const size_t first = pos;
            while (pos < p.end && t.cls[pos].is_number()) ++pos;
            size_t at = first + (pos - first) % 3;
            if (at > first) cut(at);
            for (; at < pos; at += 3) cut(at + 3);
        }
        cut(p.end);
    }
    return out;
}

// [^\n]+|[\n]+
std::vector<Piece> split_newlines(const Text& t, const std::vector<Piece>& pieces) {
    std::vector<Piece> out;
    out.reserve(pieces.size() * 2);
    for (const Piece& p : pieces) {
        for (size_t pos = p.begin; pos < p.end;) {
            const bool newline = t.cps[pos] == '\n';
            const size_t begin = pos;
            while (pos < p.end && (t.cps[pos] == '\n') == newline) ++pos;
            out.push_back({begin, pos});
        }
    }
    return out;
}

// --- the table -----------------------------------------------------------------------------

#define LS_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
constexpr const char* kGpt2Pattern = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Pattern = LS_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern = LS_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen35Pattern = LS_CONTRACTIONS
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Upper-then-lower letter words (GPT-4o's family); std::regex has no \p{Lu}, so llama.cpp spells
// "upper" as a letter that is not a-z and "lower" as one that is not A-Z.
#define LS_UPPER "((?=[\\p{L}])([^a-z]))"
#define LS_LOWER "((?=[\\p{L}])([^A-Z]))"
#define LS_CASED_WORDS(upper, lower, tail)                                                             \
    "[^\\r\\n\\p{L}\\p{N}]?" upper "*" lower "+" tail "|[^\\r\\n\\p{L}\\p{N}]?" upper "+" lower "*" tail
constexpr const char* kGpt4oPattern = LS_CASED_WORDS(LS_UPPER, LS_LOWER, LS_CONTRACTIONS "?")
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekkenPattern = LS_CASED_WORDS(LS_UPPER, LS_LOWER, "")
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
#define LS_CASED_WORDS_BY_CATEGORY \
    LS_CASED_WORDS("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]", LS_CONTRACTIONS "?")
// Han, kana: DeepSeek-V3 and the models that copied its pre-tokenizer.
constexpr const char* kCjkKanaPattern = "[\\u4E00-\\u9FA5\\u3040-\\u309F\\u30A0-\\u30FF]+";
constexpr const char* kBloomPattern = " ?[^(\\s|.,!?\\u2026\\u3002\\uFF0C\\u3001\\u0964\\u06D4\\u060C)]+";

struct Flags {
    bool clean_spaces = true, ignore_merges = false, add_bos = false, no_default_bos = false;
    bool byte_encode = true, escape_whitespace = false, merges_optional = false;
};
Flags no_clean() { Flags f; f.clean_spaces = false; return f; }

struct Entry {
    std::vector<const char*> names;
    std::vector<std::pair<Splitter, const char*>> steps;
    Flags flags;
};

std::vector<Entry> table_entries() {
    using S = Splitter;
    const std::pair<S, const char*> gpt2{S::kGpt2, kGpt2Pattern}, llama3{S::kLlama3, kLlama3Pattern},
        qwen2{S::kQwen2, kQwen2Pattern}, newlines{S::kNewlines, "[^\\n]+|[\\n]+"};
    Flags llama3_flags;
    llama3_flags.ignore_merges = llama3_flags.add_bos = true;
    Flags ignore_no_clean = no_clean();
    ignore_no_clean.ignore_merges = true;
    Flags tekken = ignore_no_clean;
    tekken.add_bos = true;
    Flags chameleon = no_clean();
    chameleon.add_bos = true;
    Flags chatglm;
    chatglm.no_default_bos = true;
    Flags spm_style = no_clean();
    spm_style.byte_encode = false, spm_style.escape_whitespace = true;
    Flags gemma4 = spm_style;
    gemma4.clean_spaces = true;
    Flags kimi = no_clean();
    kimi.merges_optional = true;
    Flags minicpm5;
    minicpm5.ignore_merges = true;

    return {
        {{"", "default"},
         {{S::kRegex, "[\\p{P}\\$\\+<=>\\^~\\|]+"}, gpt2, {S::kRegex, "\\p{N}+"}, {S::kRegex, "[0-9][0-9][0-9]"}},
         {}},
        {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano"}, {llama3}, llama3_flags},
        // jais-2 reaches Llama 3's pattern through a missing break in llama.cpp's switch.
        {{"dbrx", "smaug-bpe", "jais-2"}, {llama3}, {}},
        {{"glm4", "chatglm-bpe"}, {llama3}, chatglm},
        {{"deepseek-llm"}, {{S::kDeepseekLlm, "(six patterns)"}}, no_clean()},
        {{"deepseek-coder"},
         {{S::kRegex, "[\r\n]"}, {S::kRegex, "\\s?\\p{L}+"}, {S::kRegex, "\\s?\\p{P}+"},
          {S::kRegex, "[\\u4E00-\\u9FA5\\u0800-\\u4E00\\uAC00-\\uD7FF]+"}, {S::kRegex, "\\p{N}"}},
         no_clean()},
        {{"deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"},
         {{S::kRegex, "\\p{N}{1,3}"}, {S::kRegex, kCjkKanaPattern},
          {S::kRegex, "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"spark2_5"},
         {{S::kRegex, "\\p{N}{1,3}"}, {S::kRegex, kCjkKanaPattern},
          {S::kRegex, "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+"},
          {S::kRegex, "\\p{N}"}},
         no_clean()},
        {{"youtu"},
         {{S::kRegex, "[\\uAC00-\\uD7A3\\u3131-\\u318E]+|[\\uFF01\\u2026\\u201C\\u201D\\u2018\\u2019\\u2014\\uFF1A\\uFF1B"
                      "\\uFF0C\\u3001-\\u303F\\uFE30-\\uFE4F]+|[\\u3105-\\u312F]+|[\\u4E00-\\u9FA5\\u3040-\\u309F\\u30A0-\\u30FF]+"},
          {S::kRegex, LS_CASED_WORDS_BY_CATEGORY
                      "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
         ignore_no_clean},
        {{"falcon"}, {{S::kRegex, "[\\p{P}\\$\\+<=>\\^~\\|`]+"}, gpt2, {S::kRegex, "[0-9][0-9][0-9]"}}, {}},
        {{"starcoder", "refact", "codeshell", "exaone", "minerva-7b", "mellum2"}, {{S::kRegex, "\\p{N}"}, gpt2}, {}},
        {{"command-r", "smollm"}, {{S::kRegex, "\\p{N}"}, gpt2}, no_clean()},
        {{"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum",
          "exaone4", "mpt", "olmo", "jais"},
         {gpt2},
         {}},
        {{"trillion", "granite-docling"}, {gpt2}, no_clean()},
        {{"qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "hunyuan", "solar-open", "grok-2"}, {qwen2}, no_clean()},
        {{"stablelm2", "megrez"}, {qwen2}, {}},
        {{"qwen35"}, {{S::kQwen35, kQwen35Pattern}}, no_clean()},
        {{"laguna"}, {newlines, qwen2}, no_clean()},
        {{"bloom", "gpt3-finnish"}, {{S::kRegex, kBloomPattern}}, {}},
        {{"poro-chat"}, {{S::kRegex, kBloomPattern}}, no_clean()},
        {{"viking"}, {{S::kRegex, kBloomPattern}, {S::kRegex, "\\p{N}"}}, no_clean()},
        {{"tekken"}, {{S::kRegex, kTekkenPattern}}, tekken},
        {{"chameleon"},
         {{S::kRegex, "<sentinel:[0-9]+>"}, {S::kRegex, "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"},
          {S::kRegex, "([\\t\\n]|    |  )"}, {S::kRegex, "\\p{N}"}, {S::kRegex, "[\\p{P}!-/:-@\\[-`{-~]"}, gpt2},
         chameleon},
        {{"gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"}, {{S::kRegex, kGpt4oPattern}}, no_clean()},
        {{"tiny_aya", "cohere2moe"},
         {{S::kDigitGroups, "\\d{1,3}(?=(?:\\d{3})*\\b)"},
          {S::kRegex, LS_CASED_WORDS_BY_CATEGORY
                      "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"kimi-k2"}, {{S::kKimiK2, "(Han runs, then Llama 3-like words)"}}, kimi},
        {{"superbpe"}, {{S::kRegex, "\\p{N}+"}, {S::kRegex, "(?=(\\d{3})+(?!\\d))"}}, no_clean()},
        {{"bailingmoe", "bailingmoe2", "llada-moe"},
         {{S::kRegex, "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
                      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"seed-coder"},
         {{S::kRegex, LS_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|"
                                      "\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"ufakzeka"},
         {{S::kRegex, "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"afmoe"},
         {{S::kDigitGroups, "\\p{AFMoE_digits}"},
          {S::kRegex, "[\\u4E00-\\u9FFF\\u3400-\\u4DBF\\u8C48-\\uFAFF\\u3040-\\u309F\\u30A0-\\u30FF\\uFF65-\\uFF9F"
                      "\\u2F00-\\u2FDF\\u0E40-\\u0E7F\\u0E80-\\u0EFF\\u1780-\\u17FF\\u1000-\\u109F\\uAA60-\\uAA7F"
                      "\\uA9E0-\\uA9FF\\uAC00-\\uD7AF\\u1100-\\u11FF]+"},
          {S::kRegex, "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
         no_clean()},
        {{"exaone-moe"},
         {{S::kRegex, LS_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}|"
                                      " ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
         {}},
        {{"minicpm5"},
         {{S::kRegex, "\\p{N}{1,3}"},
          {S::kRegex, LS_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                                      "\\s+(?!\\S)|\\s+"}},
         minicpm5},
        {{"gemma4"}, {newlines}, gemma4},
        {{"sarvam-moe"}, {newlines}, spm_style},
    };
}

// Names llama.cpp accepts only for encoder (embedding) models, which Layerscope does not run.
constexpr const char* kEncoderOnly[] = {"jina-v1-en", "jina-v2-code", "roberta-bpe", "modern-bert",
                                        "granite-embed-multi-311m", "granite-embed-multi-97m",
                                        "whitespace"};

}  // namespace

struct PreTokenizerTable {
    std::map<std::string, PreTokenizer, std::less<>> by_name;
    Error error;  // a pattern of ours that does not compile: a bug, reported when asked for

    PreTokenizerTable() {
        std::map<std::string, std::shared_ptr<const SplitRegex>> compiled;
        for (const Entry& e : table_entries()) {
            auto steps = std::make_shared<std::vector<PreTokenizerStep>>();
            for (const auto& [splitter, pattern] : e.steps) {
                PreTokenizerStep step;
                step.splitter = splitter;
                step.pattern = pattern;
                const bool has_regex = splitter != Splitter::kKimiK2 && splitter != Splitter::kDeepseekLlm &&
                                       splitter != Splitter::kDigitGroups;
                if (has_regex) {
                    auto& slot = compiled[pattern];
                    if (!slot) {
                        auto re = SplitRegex::compile(pattern);
                        if (!re.ok()) {
                            error = re.error();
                            continue;
                        }
                        slot = std::make_shared<const SplitRegex>(std::move(re.value()));
                    }
                    step.regex = slot;
                }
                steps->push_back(std::move(step));
            }
            for (const char* name : e.names) {
                PreTokenizer p;
                p.name_ = name;
                p.steps_ = steps;
                p.clean_spaces_ = e.flags.clean_spaces;
                p.ignore_merges_ = e.flags.ignore_merges;
                p.add_bos_ = e.flags.add_bos;
                p.no_default_bos_ = e.flags.no_default_bos;
                p.byte_encode_ = e.flags.byte_encode;
                p.escape_whitespace_ = e.flags.escape_whitespace;
                p.merges_optional_ = e.flags.merges_optional;
                by_name.emplace(name, std::move(p));
            }
        }
    }
};

namespace {
const PreTokenizerTable& table() {
    static const PreTokenizerTable t;
    return t;
}
}  // namespace

Result<PreTokenizer> PreTokenizer::for_name(std::string_view pre) {
    const PreTokenizerTable& t = table();
    if (!t.error.message.empty()) return t.error;
    auto it = t.by_name.find(pre);
    if (it != t.by_name.end()) return it->second;
    for (const char* name : kEncoderOnly) {
        if (pre == name) {
            return make_error(ErrorCode::kUnsupported, "tokenizer.ggml.pre: " + quote_text(std::string(pre)) +
                                                           " is an encoder (embedding) model's pre-tokenizer; "
                                                           "Layerscope tokenizes decoder models");
        }
    }
    std::string list;
    for (const std::string& name : supported_names()) list += (list.empty() ? "" : ", ") + name;
    return make_error(ErrorCode::kUnsupported, "tokenizer.ggml.pre: pre-tokenizer " + quote_text(std::string(pre)) +
                                                   " is not supported\nHINT: supported: " + list);
}

std::vector<std::string> PreTokenizer::supported_names() {
    std::vector<std::string> names;
    for (const auto& [name, p] : table().by_name) {
        if (!name.empty()) names.push_back(name);
    }
    return names;
}

std::vector<std::string> PreTokenizer::words(std::string_view text) const {
    Text t;
    t.cps = unicode::decode_utf8(text);
    t.cls.reserve(t.cps.size());
    for (uint32_t c : t.cps) t.cls.push_back(unicode::classify(c));

    std::vector<Piece> pieces;
    if (!t.cps.empty()) pieces.push_back({0, t.cps.size()});
    std::vector<uint32_t> units[2];  // wide, collapsed: made when a step first needs them
    bool have_units[2] = {false, false};
    std::vector<std::pair<size_t, size_t>> cut;
    for (const PreTokenizerStep& step : *steps_) {
        switch (step.splitter) {
            case Splitter::kGpt2: pieces = split(t, pieces, match_gpt2); break;
            case Splitter::kLlama3:
                pieces = split(t, pieces, [](const View& v, size_t pos) { return match_llama3_family(v, pos, 3, false); });
                break;
            case Splitter::kQwen2:
                pieces = split(t, pieces, [](const View& v, size_t pos) { return match_llama3_family(v, pos, 1, false); });
                break;
            case Splitter::kQwen35:
                pieces = split(t, pieces, [](const View& v, size_t pos) { return match_llama3_family(v, pos, 1, true); });
                break;
            case Splitter::kKimiK2: pieces = split(t, pieces, match_kimi_k2); break;
            case Splitter::kDigitGroups: pieces = split_digit_groups(t, pieces); break;
            case Splitter::kNewlines: pieces = split_newlines(t, pieces); break;
            case Splitter::kDeepseekLlm: pieces = split_deepseek_llm(t, std::move(pieces)); break;
            case Splitter::kRegex: {
                const SplitRegex& re = *step.regex;
                const int mode = re.collapsed() ? 1 : 0;
                if (!have_units[mode]) units[mode] = re.units(t.cps), have_units[mode] = true;
                cut.clear();
                for (const Piece& p : pieces) re.split(units[mode], p.begin, p.end, cut);
                pieces.clear();
                for (const auto& [b, e] : cut) pieces.push_back({b, e});
                break;
            }
        }
    }

    // The merges' alphabet: the UTF-8 bytes of every word, each replaced by its printable
    // symbol (byte-level BPE), or the UTF-8 itself.
    std::vector<std::string> words;
    words.reserve(pieces.size());
    std::string utf8;
    for (const Piece& p : pieces) {
        utf8.clear();
        for (size_t i = p.begin; i < p.end; ++i) unicode::append_utf8(utf8, t.cps[i]);
        if (!byte_encode_) {
            words.push_back(utf8);
            continue;
        }
        std::string word;
        word.reserve(utf8.size() * 2);
        for (char b : utf8) word += unicode::byte_to_symbol(static_cast<uint8_t>(b));
        words.push_back(std::move(word));
    }
    return words;
}

}  // namespace ls
