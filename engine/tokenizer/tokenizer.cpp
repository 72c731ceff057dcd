// Encoding (special-token partition, then SPM or BPE per text fragment, plus BOS/EOS) and
// decoding, following llama_tokenize / llama_token_to_piece / llama_detokenize.
#include "engine/tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>

#include "engine/tokenizer/unicode_text.h"

namespace ls {

namespace {

const std::string kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    out.reserve(s.size());
    size_t pos = 0;
    for (size_t hit; (hit = s.find(from, pos)) != std::string_view::npos; pos = hit + from.size()) {
        out.append(s.substr(pos, hit - pos));
        out.append(to);
    }
    out.append(s.substr(pos));
    return out;
}

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

}  // namespace

TokenId Tokenizer::find(std::string_view text) const {
    if (id_slots_.empty()) return kNoToken;
    const size_t mask = id_slots_.size() - 1;
    for (size_t slot = StringHash{}(text) & mask;; slot = (slot + 1) & mask) {
        const TokenId id = id_slots_[slot];
        if (id == kNoToken || tokens_[static_cast<size_t>(id)].text == text) return id;
    }
}

bool Tokenizer::index_token(TokenId id) {
    const std::string& text = tokens_[static_cast<size_t>(id)].text;
    const size_t mask = id_slots_.size() - 1;
    for (size_t slot = StringHash{}(text) & mask;; slot = (slot + 1) & mask) {
        TokenId& entry = id_slots_[slot];
        if (entry == kNoToken) {
            entry = id;
            return true;
        }
        if (tokens_[static_cast<size_t>(entry)].text == text) return false;
    }
}

bool Tokenizer::is_eog(TokenId id) const {
    return id != kNoToken && std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

// Cuts the text at every occurrence of a special token, longest tokens first. Without
// parse_special, CONTROL and UNKNOWN tokens stay text but USER_DEFINED ones are still cut out
// (what Hugging Face tokenizers do with added tokens).
std::vector<Tokenizer::Fragment> Tokenizer::partition_special(std::string_view text, bool parse_special) const {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({kNoToken, 0, text.size()});
    std::vector<Fragment> next;
    for (TokenId special : special_tokens_) {
        const TokenInfo& info = tokens_[special];
        if (!parse_special && (info.attr & (kTokenControl | kTokenUnknown))) continue;
        const std::string& needle = info.text;
        next.clear();
        bool changed = false;
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                next.push_back(f);
                continue;
            }
            size_t offset = f.offset, length = f.length;
            while (length > 0) {
                const size_t hit = text.substr(0, offset + length).find(needle, offset);
                if (hit == std::string_view::npos) break;
                changed = true;
                size_t left_len = hit - offset;
                if (info.attr & kTokenLstrip) {
                    while (left_len > 0 && is_space(text[offset + left_len - 1])) --left_len;
                }
                if (left_len > 0) next.push_back({kNoToken, offset, left_len});
                next.push_back({special, 0, 0});
                size_t right = hit + needle.size();
                size_t right_len = offset + length - right;
                if (info.attr & kTokenRstrip) {
                    while (right_len > 0 && is_space(text[right])) ++right, --right_len;
                }
                offset = right;
                length = right_len;
            }
            if (length > 0) next.push_back({kNoToken, offset, length});
        }
        if (changed) fragments.swap(next);
    }
    return fragments;
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
    std::vector<TokenId> out;
    const std::vector<Fragment> fragments = partition_special(text, parse_special);
    if (kind_ == TokenizerKind::kRwkv || kind_ == TokenizerKind::kPlamo2) {  // llama.cpp adds no BOS or EOS here
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) out.push_back(f.token);
            else if (kind_ == TokenizerKind::kRwkv) encode_rwkv(text.substr(f.offset, f.length), out);
            else plamo2_->encode(text.substr(f.offset, f.length), out);
        }
        return out;
    }
    if (add_special && add_bos_) out.push_back(bos_);

    if (kind_ == TokenizerKind::kSpm) {
        // SentencePiece adds a space in front of the text; llama.cpp also adds one after every
        // special token, since each raw fragment is encoded as if it began the text.
        bool prev_special = true;
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                out.push_back(f.token);
                prev_special = true;
                continue;
            }
            std::string piece;
            if (add_space_prefix_ && prev_special) piece = " ";
            piece.append(text.substr(f.offset, f.length));
            encode_spm(replace_all(piece, " ", kSpaceMark), out);
            prev_special = false;
        }
    } else {
        for (const Fragment& f : fragments) {
            if (f.token != kNoToken) {
                out.push_back(f.token);
            } else {
                const std::string_view raw = text.substr(f.offset, f.length);
                if (escape_whitespace_) encode_bpe(replace_all(raw, " ", kSpaceMark), out);
                else encode_bpe(raw, out);
            }
        }
    }

    if (add_special && add_eos_) out.push_back(eos_);
    return out;
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
    if (!valid(id)) return "";
    const TokenInfo& tok = tokens_[id];
    if (!render_special && (tok.attr & (kTokenUnknown | kTokenControl))) return "";
    if (tok.attr & (kTokenUnknown | kTokenControl | kTokenUserDefined)) return tok.text;
    if (tok.attr & kTokenNormal) {
        if (kind_ == TokenizerKind::kSpm || escape_whitespace_) return replace_all(tok.text, kSpaceMark, " ");
        if (kind_ == TokenizerKind::kRwkv) return rwkv_piece(tok.text);
        if (kind_ == TokenizerKind::kPlamo2) return tok.text;
        if (dna_kmers_ && tok.text.size() > 3 && tok.text.compare(tok.text.size() - 3, 3, "\xEE\x80\x80") == 0) {
            return tok.text.substr(0, tok.text.size() - 3);  // a k-mer shows without its marker
        }
        // Byte-level symbols back to bytes; a code point outside the alphabet is shown, not lost.
        std::string bytes;
        for (uint32_t cp : unicode::decode_utf8(tok.text)) {
            const int b = unicode::symbol_to_byte(cp);
            if (b >= 0) {
                bytes.push_back(static_cast<char>(b));
                continue;
            }
            std::string utf8;
            unicode::append_utf8(utf8, cp);
            bytes += "[UNK_BYTE_0x";
            static const char* hex = "0123456789abcdef";
            for (unsigned char c : utf8) {
                bytes.push_back(hex[c >> 4]);
                bytes.push_back(hex[c & 15]);
            }
            bytes += tok.text + "]";
        }
        return bytes;
    }
    if (tok.attr & kTokenByte) {  // "<0xXX>"; a malformed name from a damaged file renders as nothing
        auto nibble = [](char c) {
            return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        };
        if (tok.text.size() < 5) return "";
        const int hi = nibble(tok.text[3]), lo = nibble(tok.text[4]);
        if (hi < 0 || lo < 0) return "";
        return std::string(1, static_cast<char>(hi * 16 + lo));
    }
    return "";  // UNUSED and UNDEFINED tokens render as nothing
}

std::string Tokenizer::decode(const std::vector<TokenId>& ids, bool remove_special, bool render_special) const {
    size_t first = 0, last = ids.size();
    bool strip_leading_space = add_space_prefix_;  // the space SPM encoding put in front
    if (remove_special && add_bos_ && last > first && ids[first] == bos_) {
        strip_leading_space = false;
        ++first;
    }
    if (remove_special && add_eos_ && last > first && ids[last - 1] == eos_) --last;

    std::string text;
    for (size_t i = first; i < last; ++i) {
        std::string piece = token_to_piece(ids[i], render_special);
        if (strip_leading_space && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
        strip_leading_space = false;
        text += piece;
    }
    if (!clean_spaces_ || text.empty()) return text;

    // Undo the spaces a word-level tokenizer put before punctuation and contractions, in
    // llama.cpp's three passes (the passes' order matters for inputs like " ' ").
    std::string a;
    a.push_back(text[0]);
    for (size_t i = 1; i < text.size(); ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) a.pop_back();
        a.push_back(x);
    }
    std::string b;
    b.push_back(a[0]);
    for (size_t i = 1; i < a.size(); ++i) {
        const char x = a[i];
        if (x == '\'' && i + 1 < a.size() && a[i - 1] == ' ' && a[i + 1] == ' ') {  // " ' " -> "'"
            b.pop_back();
            a[++i] = '\0';
            b.push_back(x);
            continue;
        }
        b.push_back(x);
    }
    std::string c;
    c.push_back(b[0]);
    for (size_t i = 1; i < b.size(); ++i) {
        const char x = b[i];
        if (b[i - 1] == ' ' && x == '\'' && i + 1 < b.size()) {
            const char x1 = b[i + 1];
            const bool next2 = i + 2 < b.size();
            if (x1 == 's' || x1 == 'm' || (next2 && ((x1 == 'r' && b[i + 2] == 'e') || (x1 == 'v' && b[i + 2] == 'e')))) {
                c.pop_back();
            }
        }
        c.push_back(x);
    }
    return c;
}

}  // namespace ls
