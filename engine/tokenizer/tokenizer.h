// Text <-> token ids for the vocabularies a GGUF file carries (SentencePiece `llama`, BPE `gpt2`
// with every pre-tokenizer llama.cpp knows, Gemma 4's SentencePiece-style BPE `gemma4`, HybriDNA's
// BPE with DNA 6-mers `hybriddna`, RWKV's greedy byte-string matcher `rwkv` and PLaMo-2's scored
// search `plamo2`), with
// llama.cpp's exact rules, so the ids we feed the model are the ids llama.cpp would feed it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/plamo2.h"
#include "engine/tokenizer/pretokenize.h"
#include "engine/util/result.h"

namespace ls {

class GgufFile;

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

enum class TokenizerKind { kSpm, kBpe, kRwkv, kPlamo2 };

// Token attributes as llama.cpp derives them from tokenizer.ggml.token_type (bit flags).
enum TokenAttr : uint32_t {
    kTokenUndefined = 0,
    kTokenUnknown = 1u << 0,
    kTokenUnused = 1u << 1,
    kTokenNormal = 1u << 2,
    kTokenControl = 1u << 3,
    kTokenUserDefined = 1u << 4,
    kTokenByte = 1u << 5,
    kTokenLstrip = 1u << 7,  // white space before the token is swallowed when it is parsed
    kTokenRstrip = 1u << 8,  // white space after it is swallowed
};

struct TokenInfo {
    std::string text;  // as stored in the vocabulary (SPM: U+2581 for space; BPE: byte symbols)
    float score = 0.0f;
    uint32_t attr = kTokenNormal;
};

// Hash that accepts string_view, so lookups of substrings need no temporary std::string.
struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

class Tokenizer {
public:
    // Reads tokenizer.ggml.* metadata. Errors (kBadInput / kUnsupported) name the key at fault.
    static Result<Tokenizer> from_gguf(const GgufFile& file);

    // add_special: BOS/EOS as the vocabulary asks (tokenizer.ggml.add_bos_token, ...).
    // parse_special: CONTROL tokens written in the text become single tokens; USER_DEFINED
    // tokens are always matched, as in llama.cpp.
    std::vector<TokenId> encode(std::string_view text, bool add_special, bool parse_special) const;

    // One token as text. render_special=false gives "" for CONTROL and UNKNOWN tokens.
    std::string token_to_piece(TokenId id, bool render_special = true) const;
    // Token ids back to text (llama.cpp's llama_detokenize: leading-space removal for SPM,
    // clean-up of spaces before punctuation where the vocabulary asks for it).
    std::string decode(const std::vector<TokenId>& ids, bool remove_special = false,
                       bool render_special = true) const;

    TokenizerKind kind() const { return kind_; }
    const std::string& model_name() const { return model_name_; }  // tokenizer.ggml.model
    const std::string& pre_name() const { return pre_name_; }      // tokenizer.ggml.pre
    const PreTokenizer& pre_tokenizer() const { return pre_; }
    size_t n_tokens() const { return tokens_.size(); }
    size_t n_merges() const { return n_merges_; }
    bool valid(TokenId id) const { return id >= 0 && static_cast<size_t>(id) < tokens_.size(); }
    const TokenInfo& token(TokenId id) const { return tokens_.at(static_cast<size_t>(id)); }
    TokenId find(std::string_view text) const;  // exact vocabulary entry, or kNoToken

    TokenId bos() const { return bos_; }
    TokenId eos() const { return eos_; }
    TokenId eot() const { return eot_; }
    TokenId eom() const { return eom_; }
    TokenId unk() const { return unk_; }
    TokenId sep() const { return sep_; }
    TokenId pad() const { return pad_; }
    TokenId newline() const { return newline_; }
    bool add_bos() const { return add_bos_; }
    bool add_eos() const { return add_eos_; }
    bool add_space_prefix() const { return add_space_prefix_; }
    bool is_eog(TokenId id) const;  // end of generation: EOS, EOT, EOM and their known look-alikes
    bool is_control(TokenId id) const { return valid(id) && (token(id).attr & kTokenControl); }
    const std::vector<TokenId>& eog_ids() const { return eog_ids_; }

private:
    struct Fragment {
        TokenId token = kNoToken;  // a special token, or kNoToken for raw text
        size_t offset = 0, length = 0;
    };

    Status load(const GgufFile& file);
    bool index_token(TokenId id);  // adds tokens_[id] to the lookup table; false if its text is there
    void finish_special_tokens(const GgufFile& file);
    std::vector<Fragment> partition_special(std::string_view text, bool parse_special) const;
    void encode_spm(std::string_view text, std::vector<TokenId>& out) const;
    void encode_bpe(std::string_view text, std::vector<TokenId>& out) const;
    void encode_bpe_words(std::string_view text, std::vector<TokenId>& out) const;
    void encode_dna(std::string_view text, std::vector<TokenId>& out) const;
    void encode_rwkv(std::string_view text, std::vector<TokenId>& out) const;
    void build_rwkv_trie();
    static std::string rwkv_piece(const std::string& escaped);  // a token's bytes
    TokenId byte_token(uint8_t byte) const;      // <0xXX>, else the byte as text
    TokenId byte_token_spm(uint8_t byte) const;  // <0xXX> only
    int merge_rank(std::string_view left, std::string_view right) const;

    TokenizerKind kind_ = TokenizerKind::kSpm;
    std::string model_name_, pre_name_;
    PreTokenizer pre_;  // BPE only
    std::vector<TokenInfo> tokens_;
    // Token ids by text: an open-addressing hash table (linear probing, at most half full) of
    // ids, compared through tokens_[id].text, so it holds no second copy of the vocabulary and is
    // built with one allocation. Its size is a power of two; empty slots hold kNoToken.
    std::vector<TokenId> id_slots_;
    std::unordered_map<std::string, int, StringHash, std::equal_to<>> merge_ranks_;  // "left right"
    // RWKV: a byte trie of the unescaped token texts; node 0 is the root. Children are keyed by
    // (node << 8 | byte); each node holds the id ending there, or kNoToken.
    std::unordered_map<uint64_t, int32_t> rwkv_children_;
    std::vector<TokenId> rwkv_value_;
    std::shared_ptr<const Plamo2Table> plamo2_;
    size_t n_merges_ = 0;
    std::vector<TokenId> special_tokens_;  // CONTROL/USER_DEFINED/UNKNOWN, longest text first
    std::vector<TokenId> eog_ids_;

    TokenId bos_ = kNoToken, eos_ = kNoToken, eot_ = kNoToken, eom_ = kNoToken, unk_ = kNoToken;
    TokenId sep_ = kNoToken, pad_ = kNoToken, newline_ = kNoToken;
    bool add_bos_ = false, add_eos_ = false;
    bool add_space_prefix_ = false;
    bool clean_spaces_ = false;   // decode: drop the space in " ?", " 's", ...
    bool ignore_merges_ = false;  // BPE: a word that is a whole token skips the merges (Llama 3)
    bool escape_whitespace_ = false;  // BPE on U+2581-for-space text (Gemma 4), raw UTF-8 words
    bool whole_newline_runs_ = false; // Gemma 4: a run of newlines that is a token is taken whole
    bool dna_kmers_ = false;          // HybriDNA: <dna>...</dna> as 6-mers, the rest BPE
};

}  // namespace ls
