// UTF-8 decoding and the Unicode character classes the pre-tokenizers need. Categories and the
// White_Space property come from ICU, so no Unicode tables live in this repository.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ls::unicode {

// General category, collapsed to the classes the pre-tokenizer patterns test (\p{L}, \p{N}, ...).
enum class Category : uint8_t {
    kUndefined,    // unassigned code points (Cn) and values past U+10FFFF
    kLetter,       // L*
    kNumber,       // N*
    kPunctuation,  // P*
    kSymbol,       // S*
    kMark,         // M*
    kSeparator,    // Z* that are not White_Space
    kControl,      // Cc, Cf, Cs, Co
};

struct CharClass {
    Category category = Category::kUndefined;
    bool whitespace = false;  // the White_Space property (what the patterns call \s)

    bool is_letter() const { return category == Category::kLetter; }
    bool is_number() const { return category == Category::kNumber; }
};

CharClass classify(uint32_t cp);

// Byte length of the UTF-8 sequence that starts with `lead`, judged from its high bits only
// (a stray continuation byte counts as 1): how llama.cpp cuts text into symbols.
size_t utf8_length_from_lead(uint8_t lead);

// Decodes UTF-8; each undecodable byte becomes U+FFFD, the way llama.cpp reads text, so the
// byte-level BPE sees the same code points as llama.cpp does for broken input.
std::vector<uint32_t> decode_utf8(std::string_view text);
void append_utf8(std::string& out, uint32_t cp);

uint32_t to_lower(uint32_t cp);  // simple case mapping

// GPT-2's byte-level alphabet: every byte gets a printable code point (bytes that are printable
// Latin-1 keep theirs, the others are moved to U+0100..U+0143).
const std::string& byte_to_symbol(uint8_t byte);  // UTF-8 of the symbol
int symbol_to_byte(uint32_t cp);                  // -1 when cp is not in the alphabet

}  // namespace ls::unicode
