// PLaMo-2's tokenizer (tokenizer.ggml.model "plamo2"): a Viterbi search over the vocabulary's
// pieces with integer scores (the score x 1e4, rounded), walked through a table of every token's
// suffixes, with <0xXX> byte tokens for characters no piece covers. Ported in behaviour from
// llama.cpp's, including its tie-breaking, so the ids are the ones llama.cpp gives.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/util/result.h"

namespace ls {

struct TokenInfo;

class Plamo2Table {
public:
    // `is_byte` marks <0xXX> tokens. Error when a byte has no token (llama.cpp refuses too).
    static Result<Plamo2Table> build(const std::vector<TokenInfo>& tokens, const std::vector<bool>& is_byte);
    void encode(std::string_view text, std::vector<int32_t>& out) const;

private:
    struct Row {
        int32_t length = 1, token = -1, score = 0, piece = 0;
    };
    std::vector<int32_t> bytes_;                          // byte -> its <0xXX> token
    std::unordered_map<int64_t, int32_t> to_suffix_id_;   // (first code point, rest's id) -> row
    std::vector<Row> table_;
};

}  // namespace ls
