// The regular expressions of tokenizer.json pre-tokenizers, run the way llama.cpp runs them:
// ECMAScript semantics (the first alternative that leads to a match wins, greedy quantifiers
// backtrack) as std::regex has them, over one of llama.cpp's two views of the text:
//
// - collapsed (the pattern names a Unicode category such as \p{L}): ASCII stays itself, every
//   other code point becomes one stand-in per category (white space becomes a vertical tab), and
//   \p{Lu}, \p{Ll}, ... all mean "any letter", which is what llama.cpp's rewrite makes of them;
// - wide (no category in the pattern): code points as they are, non-ASCII white space a
//   vertical tab, \s \d \w ASCII only.
//
// Matching is a backtracking machine with its own stack (no recursion per character), so a
// megabyte-long word cannot overflow the call stack; a run of one character class is matched
// as one step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/result.h"

namespace ls {

class SplitRegex {
public:
    // Patterns come from our own table, but errors still name the position: "what at offset".
    static Result<SplitRegex> compile(std::string_view pattern);

    const std::string& pattern() const { return pattern_; }
    bool collapsed() const { return collapsed_; }

    // The text as this pattern sees it (collapsed or wide units, one per code point).
    std::vector<uint32_t> units(const std::vector<uint32_t>& cps) const;

    // Match starting exactly at `pos` within [begin, end) of `units`; the end of the match, or
    // npos. not_null rejects an empty match (std::regex's match_not_null).
    size_t match_at(const std::vector<uint32_t>& units, size_t begin, size_t end, size_t pos, bool not_null) const;

    // Cuts [begin, end) into matches and the gaps between them, as llama.cpp's
    // std::regex_iterator loop does (an empty match is followed by a non-empty try at the same
    // place, then a search one further). Appends [begin, end) pairs, empty pieces left out.
    void split(const std::vector<uint32_t>& units, size_t begin, size_t end,
               std::vector<std::pair<size_t, size_t>>& out) const;

    static constexpr size_t npos = static_cast<size_t>(-1);

    struct Class {  // a bracket expression or single character, over units
        uint64_t low[4] = {0, 0, 0, 0};                   // units below 256
        std::vector<std::pair<uint32_t, uint32_t>> high;  // ranges at or above 256
        bool high_all = false;                            // every unit >= 256 (a negated builtin)
        bool negated = false;
        bool matches(uint32_t u) const;
    };
    enum class Op : uint8_t { kClass, kRepClass, kSplit, kJmp, kLook, kAssert, kMatch };
    struct Inst {
        Op op = Op::kMatch;
        bool negative = false;  // kLook: (?!...)
        char assertion = 0;     // kAssert: '^', '$', 'b', 'B'
        uint32_t a = 0, b = 0;  // kSplit: first, second choice; kJmp: a; kLook: a = after the body
        uint32_t min = 0, max = 0;  // kRepClass
        uint32_t cls = 0;           // kClass, kRepClass
    };

private:
    bool run(const std::vector<uint32_t>& units, size_t begin, size_t end, uint32_t pc, size_t pos,
             bool not_null, size_t* match_end, unsigned depth) const;

    std::string pattern_;
    bool collapsed_ = false;
    std::vector<Class> classes_;
    std::vector<Inst> code_;
    friend class RegexCompiler;
};

}  // namespace ls
