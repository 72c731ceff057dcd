// Text read from a file, quoted for a message. A file can hold anything: what it says must not
// drive the terminal (ESC, BEL), cut the message short (NUL) or run on for kilobytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ls {

// Bytes of a file's text a message shows before it says how many more there are.
inline constexpr size_t kQuoteMaxBytes = 100;

// Length of the well-formed UTF-8 sequence starting at s[i] (2 to 4 bytes), or 0 when none starts
// there (a stray continuation byte, an overlong form, a surrogate, a code point past U+10FFFF,
// a sequence cut off).
inline size_t utf8_sequence_length(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
    auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xbf) { return byte(k) >= lo && byte(k) <= hi; };
    const unsigned c = byte(0);
    if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
    if (c == 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
    if (c == 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
    if (c >= 0xe1 && c <= 0xef) return cont(1) && cont(2) ? 3 : 0;
    if (c == 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
    if (c == 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
    return 0;
}

// `text` in double quotes with \" \\ \n \r \t escaped, other control bytes (C0, DEL and the C1
// controls U+0080..U+009F) and bytes that are not UTF-8 as \xNN; printable UTF-8 stays as it is.
// At most `max_bytes` bytes of `text` are shown (whole characters); the rest is counted:
//   "abc\x1b[31m..."... (8100 more bytes)
inline std::string quote_text(std::string_view text, size_t max_bytes = kQuoteMaxBytes) {
    static const char kHex[] = "0123456789abcdef";
    auto hex = [](std::string& out, unsigned char c) {
        out += "\\x";
        out += kHex[c >> 4];
        out += kHex[c & 15];
    };
    std::string out = "\"";
    size_t i = 0;
    while (i < text.size()) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const size_t len = c < 0x80 ? 1 : utf8_sequence_length(text, i);
        if (i + (len ? len : 1) > max_bytes) break;
        if (len == 0) {
            hex(out, c);
            ++i;
            continue;
        }
        if (len == 1) {
            switch (c) {
                case '"': out += "\\\""; break;
                case '\\': out += "\\\\"; break;
                case '\n': out += "\\n"; break;
                case '\r': out += "\\r"; break;
                case '\t': out += "\\t"; break;
                default:
                    if (c < 0x20 || c == 0x7f) hex(out, c);
                    else out += static_cast<char>(c);
            }
        } else if (c == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0) {
            hex(out, c);  // a C1 control: terminals may act on it as on ESC
            hex(out, static_cast<unsigned char>(text[i + 1]));
        } else {
            out.append(text.substr(i, len));
        }
        i += len;
    }
    out += '"';
    if (i < text.size()) out += "... (" + std::to_string(text.size() - i) + " more bytes)";
    return out;
}

}  // namespace ls
