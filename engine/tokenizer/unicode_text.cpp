// UTF-8 helpers, ICU-backed character classes and GPT-2's byte-level alphabet.
#include "engine/tokenizer/unicode_text.h"

#include <unicode/uchar.h>

#include <array>

namespace ls::unicode {

CharClass classify(uint32_t cp) {
    CharClass c;
    if (cp > 0x10FFFF) return c;
    const UChar32 ch = static_cast<UChar32>(cp);
    c.whitespace = u_hasBinaryProperty(ch, UCHAR_WHITE_SPACE);
    switch (u_charType(ch)) {
        case U_UPPERCASE_LETTER:
        case U_LOWERCASE_LETTER:
        case U_TITLECASE_LETTER:
        case U_MODIFIER_LETTER:
        case U_OTHER_LETTER: c.category = Category::kLetter; break;
        case U_DECIMAL_DIGIT_NUMBER:
        case U_LETTER_NUMBER:
        case U_OTHER_NUMBER: c.category = Category::kNumber; break;
        case U_NON_SPACING_MARK:
        case U_ENCLOSING_MARK:
        case U_COMBINING_SPACING_MARK: c.category = Category::kMark; break;
        case U_DASH_PUNCTUATION:
        case U_START_PUNCTUATION:
        case U_END_PUNCTUATION:
        case U_CONNECTOR_PUNCTUATION:
        case U_OTHER_PUNCTUATION:
        case U_INITIAL_PUNCTUATION:
        case U_FINAL_PUNCTUATION: c.category = Category::kPunctuation; break;
        case U_MATH_SYMBOL:
        case U_CURRENCY_SYMBOL:
        case U_MODIFIER_SYMBOL:
        case U_OTHER_SYMBOL: c.category = Category::kSymbol; break;
        case U_SPACE_SEPARATOR:
        case U_LINE_SEPARATOR:
        case U_PARAGRAPH_SEPARATOR: c.category = Category::kSeparator; break;
        case U_CONTROL_CHAR:
        case U_FORMAT_CHAR:
        case U_PRIVATE_USE_CHAR:
        case U_SURROGATE: c.category = Category::kControl; break;
        default: c.category = Category::kUndefined; break;
    }
    return c;
}

size_t utf8_length_from_lead(uint8_t lead) {
    static constexpr uint8_t kLengthByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLengthByHighNibble[lead >> 4];
}

std::vector<uint32_t> decode_utf8(std::string_view s) {
    std::vector<uint32_t> out;
    out.reserve(s.size());
    const size_t n = s.size();
    auto cont = [&](size_t i) { return i < n && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80; };
    size_t i = 0;
    while (i < n) {
        const uint8_t b0 = static_cast<uint8_t>(s[i]);
        auto byte = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k]) & 0x3F); };
        if (b0 < 0x80) {
            out.push_back(b0);
            i += 1;
        } else if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) {
            out.push_back(((b0 & 0x1Fu) << 6) | byte(1));
            i += 2;
        } else if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
            out.push_back(((b0 & 0x0Fu) << 12) | (byte(1) << 6) | byte(2));
            i += 3;
        } else if ((b0 & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
            out.push_back(((b0 & 0x07u) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3));
            i += 4;
        } else {
            out.push_back(0xFFFD);  // skip one byte only: the next one may start a valid sequence
            i += 1;
        }
    }
    return out;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp <= 0x7F) {
        out.push_back(static_cast<char>(cp));
    } else if (cp <= 0x7FF) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp <= 0xFFFF) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

uint32_t to_lower(uint32_t cp) {
    if (cp > 0x10FFFF) return cp;
    return static_cast<uint32_t>(u_tolower(static_cast<UChar32>(cp)));
}

namespace {

struct ByteAlphabet {
    std::array<std::string, 256> symbol;  // byte -> UTF-8 of its symbol
    std::array<int16_t, 0x144> byte_of;   // code point -> byte, -1 when none

    ByteAlphabet() {
        byte_of.fill(-1);
        auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE); };
        uint32_t next_moved = 0x100;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next_moved++;
            append_utf8(symbol[b], cp);
            byte_of[cp] = static_cast<int16_t>(b);
        }
    }
};

const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet alphabet;
    return alphabet;
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return byte_alphabet().symbol[byte]; }

int symbol_to_byte(uint32_t cp) {
    if (cp >= byte_alphabet().byte_of.size()) return -1;
    return byte_alphabet().byte_of[cp];
}

}  // namespace ls::unicode
