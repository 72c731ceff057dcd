// Another engine's token ids against ours: parsing the list people paste ("[1, 2, 3]", "1 2 3",
// "1,2,3") and finding the first token where the two lists part. Shared by `tokenize --against`
// and the prompt panel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/util/result.h"

namespace ls {

// kUsage errors name `where` and the byte that is not part of an id.
Result<std::vector<TokenId>> parse_token_ids(const std::string& text, const std::string& where);

struct TokenDiff {
    bool same = true;
    size_t first = 0;  // the first index where they differ (or where one list ends)
};
TokenDiff first_token_difference(const std::vector<TokenId>& ours, const std::vector<TokenId>& theirs);

// A token's text, or a note when the id is not in the vocabulary.
std::string token_text(const Tokenizer& tok, TokenId id);
// The text of ids[from, to).
std::string token_span_text(const Tokenizer& tok, const std::vector<TokenId>& ids, size_t from, size_t to);

}  // namespace ls
