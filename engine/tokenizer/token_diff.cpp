// Token-id lists from other engines, and where they part from ours (see token_diff.h).
#include "engine/tokenizer/token_diff.h"

#include <cctype>
#include <cstdlib>

#include "engine/util/quote.h"

namespace ls {

Result<std::vector<TokenId>> parse_token_ids(const std::string& text, const std::string& where) {
    std::vector<TokenId> ids;
    size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == '[' || c == ']' || c == ',' || std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
        if (j == i || j - i > 10) {
            return make_error(ErrorCode::kUsage, where + ": not a list of token ids: " + quote_text(text.substr(i, 24)) +
                                                     " at byte " + std::to_string(i));
        }
        const long long v = std::strtoll(text.substr(i, j - i).c_str(), nullptr, 10);
        if (v > 0x7FFFFFFF) return make_error(ErrorCode::kUsage, where + ": token id " + text.substr(i, j - i) + " is too large");
        ids.push_back(static_cast<TokenId>(v));
        i = j;
    }
    return ids;
}

TokenDiff first_token_difference(const std::vector<TokenId>& ours, const std::vector<TokenId>& theirs) {
    TokenDiff d;
    while (d.first < ours.size() && d.first < theirs.size() && ours[d.first] == theirs[d.first]) ++d.first;
    d.same = d.first == ours.size() && d.first == theirs.size();
    return d;
}

std::string token_text(const Tokenizer& tok, TokenId id) {
    return tok.valid(id) ? tok.token_to_piece(id, true) : "(id " + std::to_string(id) + " is not in this vocabulary)";
}

std::string token_span_text(const Tokenizer& tok, const std::vector<TokenId>& ids, size_t from, size_t to) {
    std::string s;
    for (size_t i = from; i < to && i < ids.size(); ++i) s += token_text(tok, ids[i]);
    return s;
}

}  // namespace ls
