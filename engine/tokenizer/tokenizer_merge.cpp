// The two merge algorithms: SentencePiece BPE (merge the adjacent pair whose result has the best
// score) and byte-level BPE (merge the adjacent pair with the lowest merge rank), each on a
// doubly linked list of symbols with a priority queue of candidate pairs.
#include <queue>
#include <string>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_text.h"

namespace ls {

namespace {

struct Symbol {
    int prev, next;  // neighbours in the list, -1 at the ends
    size_t offset;   // bytes into the text; fixed: a symbol only grows to the right
    size_t n;        // bytes; 0 once merged into its left neighbour
};

// Splits `text` into one symbol per UTF-8 character (length judged from the lead byte).
std::vector<Symbol> utf8_symbols(std::string_view text) {
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    size_t offset = 0;
    while (offset < text.size()) {
        const size_t len = std::min(unicode::utf8_length_from_lead(static_cast<uint8_t>(text[offset])),
                                    text.size() - offset);
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({index - 1, offset + len == text.size() ? -1 : index + 1, offset, len});
        offset += len;
    }
    return symbols;
}

// A candidate merge of symbols[left] and symbols[right] as they were when it was queued; it is
// stale (skipped) once either has changed size.
struct Candidate {
    int left, right;
    size_t left_n, right_n;
    float score;  // SPM: higher first
    int rank;     // BPE: lower first
};

struct SpmOrder {  // best score first, then leftmost
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

struct BpeOrder {  // lowest rank first, then leftmost
    bool operator()(const Candidate& a, const Candidate& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

void merge_into_left(std::vector<Symbol>& symbols, const Candidate& c) {
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
}

bool is_stale(const std::vector<Symbol>& symbols, const Candidate& c) {
    return symbols[c.left].n != c.left_n || symbols[c.right].n != c.right_n;
}

}  // namespace

TokenId Tokenizer::byte_token_spm(uint8_t byte) const {
    static const char* hex = "0123456789ABCDEF";
    const char spm_name[6] = {'<', '0', 'x', hex[byte >> 4], hex[byte & 15], '>'};
    return find(std::string_view(spm_name, 6));
}

TokenId Tokenizer::byte_token(uint8_t byte) const {
    if (TokenId id = byte_token_spm(byte); id != kNoToken) return id;
    return find(std::string_view(reinterpret_cast<const char*>(&byte), 1));  // the byte as text
}

int Tokenizer::merge_rank(std::string_view left, std::string_view right) const {
    thread_local std::string key;
    key.assign(left);
    key.push_back(' ');
    key.append(right);
    auto it = merge_ranks_.find(std::string_view(key));
    return it == merge_ranks_.end() ? -1 : it->second;
}

// `text` already has spaces escaped as U+2581.
void Tokenizer::encode_spm(std::string_view text, std::vector<TokenId>& out) const {
    std::vector<Symbol> symbols = utf8_symbols(text);
    std::priority_queue<Candidate, std::vector<Candidate>, SpmOrder> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols[left];
        const Symbol& r = symbols[right];
        const TokenId id = find(text.substr(l.offset, l.n + r.n));
        if (id == kNoToken) return;
        queue.push({left, right, l.n, r.n, tokens_[id].score, 0});
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        if (is_stale(symbols, c)) continue;
        merge_into_left(symbols, c);
        consider(symbols[c.left].prev, c.left);
        consider(c.left, symbols[c.left].next);
    }

    // Every merge produced a vocabulary entry, so a symbol that is not one is a single character
    // missing from the vocabulary: it falls back to its bytes (<0xXX> tokens).
    for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        const std::string_view piece = text.substr(s.offset, s.n);
        if (TokenId id = find(piece); id != kNoToken) {
            out.push_back(id);
            continue;
        }
        for (char b : piece) {
            const TokenId id = byte_token(static_cast<uint8_t>(b));
            out.push_back(id != kNoToken ? id : unk_);
        }
    }
}

namespace {
const std::string kDnaKmerMark = "\xEE\x80\x80";  // U+E000, after each k-mer's text in HybriDNA vocabularies
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<TokenId>& out) const {
    if (dna_kmers_) {
        encode_dna(text, out);
        return;
    }
    encode_bpe_words(text, out);
}

// HybriDNA: text between <dna> and </dna> (or the end) is cut into 6-mers of upper-cased bases
// (the last one padded with 'A'), each the token "<kmer>U+E000" or <oov>; the rest is BPE. A
// vocabulary without the three markers is plain BPE, as in llama.cpp.
void Tokenizer::encode_dna(std::string_view text, std::vector<TokenId>& out) const {
    const TokenId begin = find("<dna>"), end_id = find("</dna>"), oov = find("<oov>");
    if (begin == kNoToken || end_id == kNoToken || oov == kNoToken) {
        encode_bpe_words(text, out);
        return;
    }
    constexpr size_t k = 6;
    auto kmer = [&](std::string s) {
        s.append(k - s.size(), 'A');
        const TokenId id = find(s + kDnaKmerMark);
        out.push_back(id != kNoToken ? id : oov);
    };
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t open = text.find("<dna>", pos);
        if (open == std::string_view::npos) {
            encode_bpe_words(text.substr(pos), out);
            break;
        }
        if (open > pos) encode_bpe_words(text.substr(pos, open - pos), out);
        out.push_back(begin);
        const size_t content = open + 5;
        const size_t close = text.find("</dna>", content);
        std::string seq(text.substr(content, (close == std::string_view::npos ? text.size() : close) - content));
        for (char& c : seq) {
            if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
        }
        size_t i = 0;
        for (; i + k <= seq.size(); i += k) kmer(seq.substr(i, k));
        if (i < seq.size()) kmer(seq.substr(i));
        if (close == std::string_view::npos) break;
        out.push_back(end_id);
        pos = close + 6;
    }
}

void Tokenizer::encode_bpe_words(std::string_view text, std::vector<TokenId>& out) const {
    std::priority_queue<Candidate, std::vector<Candidate>, BpeOrder> queue;
    for (const std::string& word : pre_.words(text)) {
        const std::string_view w(word);
        if (ignore_merges_ || (whole_newline_runs_ && w.find_first_not_of('\n') == std::string_view::npos)) {
            if (TokenId id = find(w); id != kNoToken) {
                out.push_back(id);
                continue;
            }
        }
        std::vector<Symbol> symbols = utf8_symbols(w);
        queue = {};
        auto consider = [&](int left, int right) {
            if (left < 0 || right < 0) return;
            const Symbol& l = symbols[left];
            const Symbol& r = symbols[right];
            const int rank = merge_rank(w.substr(l.offset, l.n), w.substr(r.offset, r.n));
            if (rank < 0) return;
            queue.push({left, right, l.n, r.n, 0.0f, rank});
        };
        for (int i = 1; i < static_cast<int>(symbols.size()); ++i) consider(i - 1, i);

        while (!queue.empty()) {
            const Candidate c = queue.top();
            queue.pop();
            if (is_stale(symbols, c)) continue;
            merge_into_left(symbols, c);
            consider(symbols[c.left].prev, c.left);
            consider(c.left, symbols[c.left].next);
        }

        for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
            const Symbol& s = symbols[i];
            const std::string_view piece = w.substr(s.offset, s.n);
            if (TokenId id = find(piece); id != kNoToken) {
                out.push_back(id);
                continue;
            }
            // A symbol missing from the vocabulary (a trimmed vocabulary, or a character BPE on
            // raw UTF-8 never saw): llama.cpp looks up each byte of its text on its own, as the
            // byte itself or, on raw UTF-8, as a <0xXX> token, and drops the bytes that are none.
            for (char b : piece) {
                const TokenId id = pre_.byte_encode() ? find(std::string_view(&b, 1)) : byte_token_spm(static_cast<uint8_t>(b));
                if (id != kNoToken) out.push_back(id);
            }
        }
    }
}

// RWKV: at each byte, the longest vocabulary entry that starts there. A byte that starts none
// is the unknown token (dropped when the vocabulary has none; llama.cpp would emit -1), and a
// byte that starts only prefixes is too (llama.cpp would loop forever there).
void Tokenizer::encode_rwkv(std::string_view text, std::vector<TokenId>& out) const {
    size_t pos = 0;
    while (pos < text.size()) {
        uint64_t node = 0;
        TokenId best = kNoToken;
        size_t best_end = pos;
        for (size_t i = pos; i < text.size(); ++i) {
            auto it = rwkv_children_.find((node << 8) | static_cast<unsigned char>(text[i]));
            if (it == rwkv_children_.end()) break;
            node = static_cast<uint64_t>(it->second);
            if (rwkv_value_[node] != kNoToken) best = rwkv_value_[node], best_end = i + 1;
        }
        if (best == kNoToken) {
            if (valid(unk_)) out.push_back(unk_);
            ++pos;
            continue;
        }
        out.push_back(best);
        pos = best_end;
    }
}

}  // namespace ls
