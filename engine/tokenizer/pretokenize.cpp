// Hand-written equivalents of the pre-tokenizer regexes. Each pattern is a matcher that, given a
// start position, returns the length the regex (leftmost alternative first, as ECMAScript and
// the Rust/Python engines behind tokenizer.json do) would match there; a driver cuts every
// current piece into matches and the gaps between them, pattern after pattern.
#include "engine/tokenizer/pretokenize.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/tokenizer/unicode_text.h"

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

// Llama 3 / Qwen2:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+     with D = 3 (Llama 3) or 1 (Qwen2)
size_t match_llama3_family(const View& v, size_t pos, size_t max_digits) {
    if (size_t n = match_contraction(v, pos, true)) return n;
    const uint32_t c = v.cp(pos);
    const bool newline = c == '\r' || c == '\n';
    if (!newline && !v.number(pos) && (v.letter(pos) || v.letter(pos + 1))) {
        return 1 + run_length(v, pos + 1, [&](size_t i) { return v.letter(i); });
    }
    if (v.number(pos)) return std::min(max_digits, run_length(v, pos, [&](size_t i) { return v.number(i); }));
    const size_t lead = c == ' ' ? 1 : 0;
    if (v.other(pos + lead)) {
        size_t p = pos + lead;
        p += run_length(v, p, [&](size_t i) { return v.other(i); });
        p += run_length(v, p, [&](size_t i) { return v.cp(i) == '\r' || v.cp(i) == '\n'; });
        return p - pos;
    }
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

// llama.cpp's fallback for BPE vocabularies without a known pre-tokenizer:
// [\p{P}\$\+<=>\^~\|]+ , then GPT-2's pattern, then \p{N}+ , then [0-9][0-9][0-9]
std::vector<Piece> split_default(const Text& t, std::vector<Piece> pieces) {
    pieces = split(t, pieces, [](const View& v, size_t pos) {
        return run_length(v, pos, [&](size_t i) {
            const uint32_t c = v.cp(i);
            return v.t.cls[i].category == unicode::Category::kPunctuation || c == '$' || c == '+' || c == '<' ||
                   c == '=' || c == '>' || c == '^' || c == '~' || c == '|';
        });
    });
    pieces = split(t, pieces, match_gpt2);
    pieces = split(t, pieces, [](const View& v, size_t pos) {
        return run_length(v, pos, [&](size_t i) { return v.number(i); });
    });
    pieces = split(t, pieces, [](const View& v, size_t pos) -> size_t {
        auto digit = [&](size_t i) { return v.cp(i) >= '0' && v.cp(i) <= '9'; };
        return (digit(pos) && digit(pos + 1) && digit(pos + 2)) ? 3 : 0;
    });
    return pieces;
}

}  // namespace

const char* pre_tokenizer_name(PreTokenizer pre) {
    switch (pre) {
        case PreTokenizer::kDefault: return "default";
        case PreTokenizer::kGpt2: return "gpt-2";
        case PreTokenizer::kLlama3: return "llama-bpe";
        case PreTokenizer::kQwen2: return "qwen2";
        case PreTokenizer::kDeepseekLlm: return "deepseek-llm";
    }
    return "?";
}

std::vector<std::string> pretokenize_bytelevel(PreTokenizer pre, std::string_view text) {
    Text t;
    t.cps = unicode::decode_utf8(text);
    t.cls.reserve(t.cps.size());
    for (uint32_t c : t.cps) t.cls.push_back(unicode::classify(c));

    std::vector<Piece> pieces;
    if (!t.cps.empty()) pieces.push_back({0, t.cps.size()});
    switch (pre) {
        case PreTokenizer::kGpt2: pieces = split(t, pieces, match_gpt2); break;
        case PreTokenizer::kLlama3:
            pieces = split(t, pieces, [](const View& v, size_t pos) { return match_llama3_family(v, pos, 3); });
            break;
        case PreTokenizer::kQwen2:
            pieces = split(t, pieces, [](const View& v, size_t pos) { return match_llama3_family(v, pos, 1); });
            break;
        case PreTokenizer::kDeepseekLlm: pieces = split_deepseek_llm(t, std::move(pieces)); break;
        case PreTokenizer::kDefault: pieces = split_default(t, std::move(pieces)); break;
    }

    // Byte-level alphabet: the UTF-8 bytes of every word, each replaced by its printable symbol.
    std::vector<std::string> words;
    words.reserve(pieces.size());
    std::string utf8;
    for (const Piece& p : pieces) {
        utf8.clear();
        for (size_t i = p.begin; i < p.end; ++i) unicode::append_utf8(utf8, t.cps[i]);
        std::string word;
        word.reserve(utf8.size() * 2);
        for (char b : utf8) word += unicode::byte_to_symbol(static_cast<uint8_t>(b));
        words.push_back(std::move(word));
    }
    return words;
}

}  // namespace ls
