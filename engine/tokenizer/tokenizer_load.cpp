// Tokenizer construction from GGUF metadata: vocabulary, merges, special ids and the defaults
// llama.cpp applies when a key is absent (they decide BOS handling and the SPM leading space).
#include <algorithm>
#include <cctype>
#include <string>

#include "engine/gguf/gguf.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/util/quote.h"

namespace ls {

namespace {

Error bad(const std::string& key, const std::string& what) {
    return make_error(ErrorCode::kBadInput, key + ": " + what +
                                                "\nHINT: the file's tokenizer metadata is incomplete or damaged; "
                                                "re-convert the model with a current convert_hf_to_gguf.py");
}

const GgufValue* find_array(const GgufFile& file, const char* key, GgufValueType elem) {
    const GgufValue* v = file.find(key);
    if (!v || !v->is_array() || v->elem_type != elem) return nullptr;
    return v;
}

uint32_t attr_from_token_type(int64_t type) {
    switch (type) {  // tokenizer.ggml.token_type values, as gguf-py writes them
        case 1: return kTokenNormal;
        case 2: return kTokenUnknown;
        case 3: return kTokenControl;
        case 4: return kTokenUserDefined;
        case 5: return kTokenUnused;
        case 6: return kTokenByte;
        default: return kTokenUndefined;
    }
}

// Texts that end a generation whatever the metadata says (llama.cpp's list).
constexpr const char* kEogTexts[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
                                     "<|endoftext|>", "<|eom_id|>", "<EOT>",   "_<EOT>",
                                     "<|end_of_text|>", "<end_of_utterance>"};
constexpr const char* kEotTexts[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                     "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
                                     "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                                     "<end_of_utterance>"};

}  // namespace

Result<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
    Tokenizer t;
    Status st = t.load(file);
    if (!st.ok()) return st.error();
    return t;
}

Status Tokenizer::load(const GgufFile& file) {
    model_name_ = file.get_string("tokenizer.ggml.model");
    pre_name_ = file.get_string("tokenizer.ggml.pre");
    if (model_name_ == "llama") {
        kind_ = TokenizerKind::kSpm;
        bos_ = 1, eos_ = 2, unk_ = 0;
        add_space_prefix_ = true;
        add_bos_ = true;
    } else if (model_name_ == "gpt2" || model_name_ == "gemma4" || model_name_ == "hybriddna") {
        kind_ = TokenizerKind::kBpe;
        dna_kmers_ = model_name_ == "hybriddna";
        if (model_name_ == "gemma4") {
            pre_name_ = "gemma4";  // llama.cpp: the model decides, whatever tokenizer.ggml.pre says
        } else {
            bos_ = 11, eos_ = 11;
        }
        auto pre = PreTokenizer::for_name(pre_name_);
        if (!pre.ok()) return pre.error();
        pre_ = std::move(pre.value());
        clean_spaces_ = pre_.clean_spaces();
        ignore_merges_ = pre_.ignore_merges();
        add_bos_ = pre_.add_bos();
        escape_whitespace_ = pre_.escape_whitespace();
        whole_newline_runs_ = pre_name_ == "gemma4";
        if (pre_.no_default_bos()) bos_ = kNoToken;
    } else if (model_name_ == "rwkv") {
        kind_ = TokenizerKind::kRwkv;  // no BOS, EOS or unknown token unless the file names them
    } else if (model_name_ == "plamo2") {
        kind_ = TokenizerKind::kPlamo2;
        bos_ = 1, eos_ = 2, unk_ = 0, pad_ = 3;
    } else if (model_name_.empty()) {
        return bad("tokenizer.ggml.model", "missing; the file has no tokenizer");
    } else {
        return make_error(ErrorCode::kUnsupported, "tokenizer.ggml.model: " + quote_text(model_name_) +
                                                       " is not supported\nHINT: supported: llama (SentencePiece), "
                                                       "gpt2 (BPE), gemma4 (SentencePiece-style BPE), hybriddna, rwkv, plamo2; "
                                                       "the others llama.cpp knows are for encoder models (bert, t5, "
                                                       "whitespace)");
    }
    add_space_prefix_ = file.get_bool("tokenizer.ggml.add_space_prefix", add_space_prefix_);

    const GgufValue* texts = find_array(file, "tokenizer.ggml.tokens", GgufValueType::STRING);
    if (!texts) return bad("tokenizer.ggml.tokens", "missing or not an array of strings");
    const size_t n = texts->strings.size();
    if (n == 0) return bad("tokenizer.ggml.tokens", "empty vocabulary");

    const GgufValue* scores = file.find("tokenizer.ggml.scores");
    if (scores && (!scores->is_array() || scores->elem_type == GgufValueType::STRING || scores->array_size() < n)) {
        return bad("tokenizer.ggml.scores", "not a numeric array with one score per token");
    }
    const GgufValue* types = file.find("tokenizer.ggml.token_type");
    if (types && (!types->is_array() || types->elem_type == GgufValueType::STRING || types->array_size() < n)) {
        return bad("tokenizer.ggml.token_type", "not an integer array with one type per token");
    }

    tokens_.resize(n);
    size_t n_slots = 16;
    while (n_slots < 2 * n) n_slots *= 2;
    id_slots_.assign(n_slots, kNoToken);
    for (size_t i = 0; i < n; ++i) {
        TokenInfo& tok = tokens_[i];
        tok.text = texts->strings[i];
        if (tok.text.empty()) tok.text = "[EMPTY_" + std::to_string(i) + "]";  // llama.cpp's stand-in
        if (scores) {
            double s = 0;
            if (!scores->item_float(i, &s)) return bad("tokenizer.ggml.scores", "non-numeric score");
            tok.score = static_cast<float>(s);
        }
        if (types) {
            int64_t ty = 0;
            if (!types->item_int(i, &ty)) return bad("tokenizer.ggml.token_type", "non-integer type");
            tok.attr = attr_from_token_type(ty);
        }
        if (!index_token(static_cast<TokenId>(i))) {
            return bad("tokenizer.ggml.tokens", "duplicate token " + quote_text(tok.text) + " at index " + std::to_string(i));
        }
    }

    if (kind_ == TokenizerKind::kBpe) {
        const GgufValue* merges = find_array(file, "tokenizer.ggml.merges", GgufValueType::STRING);
        if (!merges && !(pre_.merges_optional() && !file.find("tokenizer.ggml.merges"))) {
            return bad("tokenizer.ggml.merges", "missing or not an array of strings (BPE needs it)");
        }
        n_merges_ = merges ? merges->strings.size() : 0;
        merge_ranks_.reserve(n_merges_);
        std::string key;
        for (size_t i = 0; i < n_merges_; ++i) {
            // "left right"; the search starts at 1 so that a left part that is itself a space
            // survives. Keyed as written: lookups rebuild the same "left right" string.
            const std::string& m = merges->strings[i];
            const size_t space = m.find(' ', 1);
            key = space == std::string::npos ? std::string(" ") : m;
            merge_ranks_.emplace(key, static_cast<int>(i));
        }
    }

    if (kind_ == TokenizerKind::kRwkv) build_rwkv_trie();
    if (kind_ == TokenizerKind::kPlamo2) {
        std::vector<bool> is_byte(n);
        for (size_t i = 0; i < n; ++i) is_byte[i] = (tokens_[i].attr & kTokenByte) != 0;
        auto table = Plamo2Table::build(tokens_, is_byte);
        if (!table.ok()) return table.error();
        plamo2_ = std::make_shared<const Plamo2Table>(std::move(table.value()));
    }
    finish_special_tokens(file);
    return {};
}

// RWKV vocabularies store each token's bytes as text with \t \n \r, \xHH and \<char> escapes.
std::string Tokenizer::rwkv_piece(const std::string& escaped) {
    std::string out;
    out.reserve(escaped.size());
    for (size_t i = 0; i < escaped.size(); ++i) {
        const char c = escaped[i];
        if (c != '\\' || i + 1 >= escaped.size()) {
            if (c != '\\') out.push_back(c);
            continue;
        }
        const char e = escaped[++i];
        if (e == 't') out.push_back('\t');
        else if (e == 'n') out.push_back('\n');
        else if (e == 'r') out.push_back('\r');
        else if (e == 'x') {
            auto nibble = [](char h) { return static_cast<uint8_t>(h >= 'a' ? h - 'a' + 10 : h - '0'); };  // as llama.cpp reads it
            uint8_t v = 0;
            int k = 0;
            for (; k < 2 && i + 1 < escaped.size(); ++k) v = static_cast<uint8_t>((v << 4) + nibble(escaped[++i]));
            if (k == 2) out.push_back(static_cast<char>(v));  // a cut-off \xH gives nothing
        } else {
            out.push_back(e);
        }
    }
    return out;
}

void Tokenizer::build_rwkv_trie() {
    rwkv_value_.assign(1, kNoToken);
    for (size_t id = 0; id < tokens_.size(); ++id) {
        uint64_t node = 0;
        for (unsigned char b : rwkv_piece(tokens_[id].text)) {
            auto [it, added] = rwkv_children_.try_emplace((node << 8) | b, static_cast<int32_t>(rwkv_value_.size()));
            if (added) rwkv_value_.push_back(kNoToken);
            node = static_cast<uint64_t>(it->second);
        }
        if (node != 0) rwkv_value_[node] = static_cast<TokenId>(id);  // a later duplicate wins, as in llama.cpp's trie
    }
}

void Tokenizer::finish_special_tokens(const GgufFile& file) {
    const size_t n = tokens_.size();
    struct IdKey {
        const char* key;
        TokenId* id;
    };
    const IdKey keys[] = {
        {"tokenizer.ggml.bos_token_id", &bos_},         {"tokenizer.ggml.eos_token_id", &eos_},
        {"tokenizer.ggml.eot_token_id", &eot_},         {"tokenizer.ggml.eom_token_id", &eom_},
        {"tokenizer.ggml.unknown_token_id", &unk_},     {"tokenizer.ggml.seperator_token_id", &sep_},
        {"tokenizer.ggml.padding_token_id", &pad_},
    };
    for (const IdKey& k : keys) {
        if (*k.id >= 0 && static_cast<size_t>(*k.id) >= n) *k.id = kNoToken;  // default outside vocab
        const GgufValue* v = file.find(k.key);
        uint64_t id = 0;
        // An id past the vocabulary (stories260K writes 0xFFFFFFFF) keeps the default, like llama.cpp.
        if (v && v->get_uint(&id) && id < n) *k.id = static_cast<TokenId>(id);
    }
    add_bos_ = file.get_bool("tokenizer.ggml.add_bos_token", add_bos_);
    add_eos_ = file.get_bool("tokenizer.ggml.add_eos_token", add_eos_);
    if (whole_newline_runs_) add_bos_ = true;  // llama.cpp forces it on for Gemma 4
    if (add_bos_ && bos_ == kNoToken) add_bos_ = false;
    if (add_eos_ && eos_ == kNoToken) add_eos_ = false;

    // Tokens that look like turn ends are made CONTROL and end generation, whatever their type
    // in the file (llama.cpp does this because converters often mislabel them). Texts are unique
    // in the vocabulary, so each text is looked up rather than the vocabulary scanned; of several
    // EOT candidates the lowest id wins (llama.cpp walks a hash map, so its EOT may differ).
    if (eot_ == kNoToken) {
        for (const char* text : kEotTexts) {
            const TokenId id = find(text);
            if (id != kNoToken && (eot_ == kNoToken || id < eot_)) eot_ = id;
        }
        if (eot_ != kNoToken) tokens_[eot_].attr |= kTokenControl;
    }
    if (eom_ == kNoToken) {
        eom_ = find("<|eom_id|>");
        if (eom_ != kNoToken) tokens_[eom_].attr |= kTokenControl;
    }
    for (const char* text : kEogTexts) {
        if (TokenId id = find(text); id != kNoToken) {
            eog_ids_.push_back(id);
            tokens_[id].attr |= kTokenControl;
        }
    }
    for (TokenId id : {eos_, eot_, eom_}) {
        if (id != kNoToken && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end()) {
            eog_ids_.push_back(id);
        }
    }
    std::sort(eog_ids_.begin(), eog_ids_.end());

    // Text matched before tokenizing: CONTROL, USER_DEFINED and UNKNOWN tokens, longest first so
    // that a token containing another wins.
    for (size_t i = 0; i < n; ++i) {
        if (tokens_[i].attr & (kTokenControl | kTokenUserDefined | kTokenUnknown)) {
            special_tokens_.push_back(static_cast<TokenId>(i));
        }
    }
    std::stable_sort(special_tokens_.begin(), special_tokens_.end(), [&](TokenId a, TokenId b) {
        return tokens_[a].text.size() > tokens_[b].text.size();
    });

    // Phi-3's special tokens swallow the white space after them (its tokenizer.json says
    // rstrip); GGUF has no field for it, so llama.cpp keys on the model name, and so do we.
    std::string name = file.get_string("general.name");
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
        for (TokenId id : special_tokens_) tokens_[id].attr |= kTokenRstrip;
        if (TokenId id = find("</s>"); id != kNoToken) tokens_[id].attr |= kTokenRstrip;
        for (const char* text : {"<unk>", "<s>", "<|endoftext|>"}) {
            if (TokenId id = find(text); id != kNoToken) tokens_[id].attr &= ~kTokenRstrip;
        }
    }

    if (kind_ == TokenizerKind::kSpm) {
        newline_ = byte_token('\n');
    } else {
        std::vector<TokenId> nl = encode("\n", false, false);
        newline_ = nl.empty() ? pad_ : nl[0];
    }
}

}  // namespace ls
