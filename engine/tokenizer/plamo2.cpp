// PLaMo-2's table and search (see plamo2.h).
#include "engine/tokenizer/plamo2.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_text.h"

namespace ls {

namespace {

constexpr int32_t kInvalidScore = -20000000;  // a suffix that is no token
constexpr int32_t kUnknownScore = -10000000;  // one character no piece covers

std::string utf8_of(const std::vector<uint32_t>& cps, size_t from, size_t to) {
    std::string s;
    for (size_t i = from; i < to; ++i) unicode::append_utf8(s, cps[i]);
    return s;
}

}  // namespace

Result<Plamo2Table> Plamo2Table::build(const std::vector<TokenInfo>& tokens, const std::vector<bool>& is_byte) {
    Plamo2Table t;
    t.bytes_.assign(256, 0);
    std::unordered_map<std::string, float> suffix_score;  // tokens, and every suffix of one (NaN)
    std::unordered_map<std::string, int32_t> token_id;
    for (size_t id = 0; id < tokens.size(); ++id) {
        const std::string& text = tokens[id].text;
        token_id[text] = static_cast<int32_t>(id);
        if (is_byte[id]) {
            auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
            if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text.back() == '>' && hex(text[3]) && hex(text[4])) {
                t.bytes_[std::stoi(text.substr(3, 2), nullptr, 16)] = static_cast<int32_t>(id);
            }
            continue;
        }
        suffix_score[text] = tokens[id].score;
        const std::vector<uint32_t> cps = unicode::decode_utf8(text);
        for (size_t i = 1; i < cps.size(); ++i) suffix_score.try_emplace(utf8_of(cps, i, cps.size()), std::numeric_limits<float>::quiet_NaN());
    }
    for (int b = 0; b < 256; ++b) {
        if (t.bytes_[b] == 0) {
            return make_error(ErrorCode::kBadInput, "tokenizer.ggml.tokens: PLaMo-2 needs a byte token for every byte; <0x" +
                                                        std::string(1, "0123456789ABCDEF"[b >> 4]) +
                                                        std::string(1, "0123456789ABCDEF"[b & 15]) + "> is missing");
        }
    }

    // Suffixes in the order of their reversed bytes, so each one's rest comes before it.
    std::vector<std::string> suffixes;
    suffixes.reserve(suffix_score.size() + 1);
    for (const auto& [s, score] : suffix_score) suffixes.push_back(s);
    suffixes.push_back("");
    std::sort(suffixes.begin(), suffixes.end(), [](const std::string& a, const std::string& b) {
        return std::lexicographical_compare(a.rbegin(), a.rend(), b.rbegin(), b.rend(), [](char x, char y) {
            return static_cast<unsigned char>(x) < static_cast<unsigned char>(y);
        });
    });

    // Each suffix gets a block of rows: its prefixes that are keys, longest first, then a
    // sentinel for "one unknown character".
    std::unordered_map<std::string, int32_t> suffix_row;
    int32_t rows = 0;
    for (const std::string& s : suffixes) {
        suffix_row[s] = rows;
        if (s.empty()) {
            ++rows;
            continue;
        }
        const std::vector<uint32_t> cps = unicode::decode_utf8(s);
        const int64_t code = (static_cast<int64_t>(cps[0]) << 32) | suffix_row[utf8_of(cps, 1, cps.size())];
        t.to_suffix_id_[code] = rows;
        int32_t n = 1;
        for (size_t len = cps.size(); len > 0; --len) n += suffix_score.count(utf8_of(cps, 0, len)) ? 1 : 0;
        rows += n;
    }
    t.table_.reserve(static_cast<size_t>(rows));
    for (const std::string& s : suffixes) {
        const std::vector<uint32_t> cps = unicode::decode_utf8(s);
        for (size_t len = cps.size(); len > 0; --len) {
            const std::string piece = utf8_of(cps, 0, len);
            auto score = suffix_score.find(piece);
            if (score == suffix_score.end()) continue;
            Row r;
            r.length = static_cast<int32_t>(len);
            auto id = token_id.find(piece);
            r.token = id == token_id.end() ? -1 : id->second;
            // Scores past what an int32 holds (never seen in real files) are clamped rather than overflowed.
            r.score = std::isfinite(score->second)
                          ? static_cast<int32_t>(std::clamp(std::round(score->second * 1e4), -2e9, 2e9))
                          : kInvalidScore;
            r.piece = suffix_row[piece];
            t.table_.push_back(r);
        }
        t.table_.push_back({1, -1, kUnknownScore, 0});
    }
    return t;
}

void Plamo2Table::encode(std::string_view text, std::vector<int32_t>& out) const {
    std::vector<uint32_t> cps = unicode::decode_utf8(text);
    if (!cps.empty() && cps[0] == 0xFEFF) cps.erase(cps.begin());  // a byte-order mark
    const size_t n = cps.size();
    if (n == 0) return;
    struct Step {
        int64_t score = int64_t{1} << 60;
        int32_t length = 0, token = 0;
    };
    std::vector<Step> best(n + 1);
    best[n].score = 0;
    size_t suffix = 0;  // the row block of the longest known suffix starting at i
    for (size_t i = n; i-- > 0;) {
        const uint32_t c = cps[i];
        for (size_t p = suffix; p < table_.size(); ++p) {
            auto it = to_suffix_id_.find((static_cast<int64_t>(c) << 32) | table_[p].piece);
            suffix = it == to_suffix_id_.end() ? 0 : static_cast<size_t>(it->second);
            if (suffix > 0 || table_[p].score == kUnknownScore) break;
        }
        for (size_t p = suffix; p < table_.size(); ++p) {
            const Row& r = table_[p];
            if (r.score > kInvalidScore && i + static_cast<size_t>(r.length) <= n) {
                const int64_t s = best[i + static_cast<size_t>(r.length)].score - r.score;
                if (s < best[i].score) best[i] = {s, r.length, r.token};
            }
            if (r.score == kUnknownScore) break;
        }
    }
    for (size_t pos = 0; pos < n;) {
        const Step& s = best[pos];
        if (s.token >= 0) {
            out.push_back(s.token);
        } else {  // the character's UTF-8 bytes as byte tokens
            std::string utf8;
            unicode::append_utf8(utf8, cps[pos]);
            for (unsigned char b : utf8) out.push_back(bytes_[b]);
        }
        pos += static_cast<size_t>(std::max(s.length, 1));
    }
}

}  // namespace ls
