// Synthetic model generator: per-tensor integer PRNG streams, a generated SentencePiece vocabulary,
// weights converted with our own ggml-identical quantizers, written with gguf_write.
#include "engine/model/make_model.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <unordered_set>
#include <utility>

#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"
#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "engine/util/safe_write.h"

namespace ls {
namespace {

// splitmix64: tiny, fully specified, so the bit stream is the same with every compiler and library.
// Each draw adds a constant to the state, so the generator `n` draws ahead is one multiply away
// (skip): chunks of a tensor are made in parallel from the same stream.
struct Rng {
    static constexpr uint64_t kGamma = 0x9E3779B97F4A7C15ull;
    uint64_t state;
    Rng skip(uint64_t draws) const { return Rng{state + draws * kGamma}; }  // wraps mod 2^64, as next()
    uint64_t next() {
        uint64_t z = (state += kGamma);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in (0, 1), exact in double.
    double uniform() { return (static_cast<double>(next() >> 40) + 0.5) * 0x1p-24; }
    static constexpr uint64_t kDrawsPerNormal = 12;
    // Approximately N(0, 1) as the sum of 12 uniforms minus 6 (variance exactly 1, tails cut at 6).
    // Box-Muller would need log/cos, whose last bit differs between math libraries; this sum is
    // integer arithmetic plus exact scalings, so every platform gets the same bits.
    double normal() {
        uint64_t sum = 0;
        for (int i = 0; i < 12; ++i) sum += next() >> 40;
        return (static_cast<double>(sum) + 6.0) * 0x1p-24 - 6.0;
    }
};

// Every core, for making and quantizing the values of big tensors (shared by make_model calls;
// parallel_for is not reentrant, so calls are serialised).
ThreadPool& make_model_pool() {
    static ThreadPool pool(0);
    return pool;
}
std::mutex& make_model_mutex() {
    static std::mutex mu;
    return mu;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
    return h;
}

// One independent stream per tensor: adding or reordering tensors never changes the others.
Rng tensor_rng(uint64_t seed, const std::string& name) {
    Rng r{seed};
    Rng mixed{r.next() ^ fnv1a(name)};
    mixed.next();
    return mixed;
}

bool is_qwen2(const MakeModelSpec& s) { return s.arch == "qwen2"; }
// qwen3moe shares qwen3's attention and conventions.
bool is_qwen3(const MakeModelSpec& s) { return s.arch == "qwen3" || s.arch == "qwen3moe"; }
bool is_qwen3moe(const MakeModelSpec& s) { return s.arch == "qwen3moe"; }
bool is_llama_moe(const MakeModelSpec& s) { return s.arch == "llama" && s.llama_experts; }
bool is_phi3(const MakeModelSpec& s) { return s.arch == "phi3"; }
bool is_gemma(const MakeModelSpec& s) { return s.arch == "gemma2" || s.arch == "gemma3"; }
// qwen2 and qwen3 share Qwen's conventions here: NEOX rope base 1e6, eps 1e-6, padded token rows.
bool is_qwen(const MakeModelSpec& s) { return is_qwen2(s) || is_qwen3(s) || s.arch == "qwen35" || s.arch == "qwen35moe"; }
int head_dim_of(const MakeModelSpec& s) { return s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head; }
bool is_deepseek2(const MakeModelSpec& s) { return s.arch == "deepseek2"; }
bool is_gpt_oss(const MakeModelSpec& s) { return s.arch == "gpt-oss"; }
bool is_qwen35(const MakeModelSpec& s) { return s.arch == "qwen35" || s.arch == "qwen35moe"; }
bool is_qwen35moe(const MakeModelSpec& s) { return s.arch == "qwen35moe"; }

int64_t padded_rows(const MakeModelSpec& s) {
    if (s.vocab_rows > 0) return s.vocab_rows;
    // qwen2 GGUFs pad the token list to the embedding rows; we always add at least one pad row so
    // that the padding path is exercised.
    if (!is_qwen(s)) return s.vocab;
    return (static_cast<int64_t>(s.vocab) / 256 + 1) * 256;
}

bool weight_type_supported(GgmlType t) {
    switch (t) {
        case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16:
        case GgmlType::Q4_0: case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
        case GgmlType::Q2_K: case GgmlType::Q3_K: case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
        case GgmlType::MXFP4: case GgmlType::NVFP4:
            return true;
        default:
            return false;
    }
}

// llama_ftype of a file whose weights are all `t` (the _S variant for K-quants: no mixed types;
// MXFP4: MOSTLY_MXFP4_MOE, the only recipe llama-quantize writes it in).
uint32_t file_type_of(GgmlType t) {
    switch (t) {
        case GgmlType::F32: return 0;
        case GgmlType::F16: return 1;
        case GgmlType::Q4_0: return 2;
        case GgmlType::Q4_1: return 3;
        case GgmlType::Q8_0: return 7;
        case GgmlType::Q5_0: return 8;
        case GgmlType::Q5_1: return 9;
        case GgmlType::Q2_K: return 10;
        case GgmlType::Q3_K: return 11;
        case GgmlType::Q4_K: return 14;
        case GgmlType::Q5_K: return 16;
        case GgmlType::Q6_K: return 18;
        case GgmlType::BF16: return 32;
        case GgmlType::MXFP4: return 38;
        case GgmlType::NVFP4: return 39;
        default: return 0;
    }
}

// ---------------------------------------------------------------------------------------------
// Vocabulary

// Frequent English words, most frequent first; they become "▁word" pieces (with every prefix).
const char* const kWords[] = {
    "the", "of", "and", "to", "a", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "with",
    "as", "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "not", "word",
    "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when", "up", "use", "your",
    "how", "said", "an", "each", "she", "which", "do", "their", "time", "if", "will", "way", "about", "many",
    "then", "them", "write", "would", "like", "so", "these", "her", "long", "make", "thing", "see", "him",
    "two", "has", "look", "more", "day", "could", "go", "come", "did", "number", "sound", "no", "most",
    "people", "my", "over", "know", "water", "than", "call", "first", "who", "may", "down", "side", "been",
    "now", "find", "any", "new", "work", "part", "take", "get", "place", "made", "live", "where", "after",
    "back", "little", "only", "round", "man", "year", "came", "show", "every", "good", "me", "give", "our",
    "under", "name", "very", "through", "just", "form", "sentence", "great", "think", "say", "help", "low",
    "line", "differ", "turn", "cause", "much", "mean", "before", "move", "right", "boy", "old", "too", "same",
    "tell", "does", "set", "three", "want", "air", "well", "also", "play", "small", "end", "put", "home",
    "read", "hand", "port", "large", "spell", "add", "even", "land", "here", "must", "big", "high", "such",
    "follow", "act", "why", "ask", "men", "change", "went", "light", "kind", "off", "need", "house",
    "picture", "try", "us", "again", "animal", "point", "mother", "world", "near", "build", "self", "earth",
    "father", "head", "stand", "own", "page", "should", "country", "found", "answer", "school", "grow",
    "study", "still", "learn", "plant", "cover", "food", "sun", "four", "between", "state", "keep", "eye",
    "never", "last", "let", "thought", "city", "tree", "cross", "farm", "hard", "start", "might", "story",
    "saw", "far", "sea", "draw", "left", "late", "run", "while", "press", "close", "night", "real", "life",
    "few", "north", "open", "seem", "together", "next", "white", "children", "begin", "got", "walk",
    "example", "ease", "paper", "group", "always", "music", "those", "both", "mark", "often", "letter",
    "until", "mile", "river", "car", "feet", "care", "second", "book", "carry", "took", "science", "eat",
    "room", "friend", "began", "idea", "fish", "mountain", "stop", "once", "base", "hear", "horse", "cut",
    "sure", "watch", "color", "face", "wood", "main", "enough", "plain", "girl", "usual", "young", "ready",
    "above", "ever", "red", "list", "though", "feel", "talk", "bird", "soon", "body", "dog", "family",
    "direct", "pose", "leave", "song", "measure", "door", "product", "black", "short", "numeral", "class",
    "wind", "question", "happen", "complete", "ship", "area", "half", "rock", "order", "fire", "south",
    "problem", "piece", "told", "knew", "pass", "since", "top", "whole", "king", "space", "heard", "best",
    "hour", "better", "true", "during", "hundred", "five", "remember", "step", "early", "hold", "west",
    "ground", "interest", "reach", "fast", "verb", "sing", "listen", "six", "table", "travel", "less",
    "morning", "ten", "simple", "several", "vowel", "toward", "war", "lay", "against", "pattern", "slow",
    "center", "love", "person", "money", "serve", "appear", "road", "map", "rain", "rule", "govern", "pull",
    "cold", "notice", "voice", "unit", "power", "town", "fine", "certain", "fly", "fall", "lead", "cry",
    "dark", "machine", "note", "wait", "plan", "figure", "star", "box", "noun", "field", "rest", "correct",
    "able", "pound", "done", "beauty", "drive", "stood", "contain", "front", "teach", "week", "final", "gave",
    "green", "oh", "quick", "develop", "ocean", "warm", "free", "minute", "strong", "special", "mind",
    "behind", "clear", "tail", "produce", "fact", "street", "inch", "multiply", "nothing", "course", "stay",
    "wheel", "full", "force", "blue", "object", "decide", "surface", "deep", "moon", "island", "foot",
    "system", "busy", "test", "record", "boat", "common", "gold", "possible", "plane", "stead", "dry",
    "wonder", "laugh", "thousand", "ago", "ran", "check", "game", "shape", "equate", "hot", "miss",
    "brought", "heat", "snow", "tire", "bring", "yes", "distant", "fill", "east", "paint", "language",
    "among", "model", "layer", "token", "attention", "hello", "debug", "France", "Paris", "capital",
};

// Frequent letter pairs and endings, so that words outside the list still merge into pieces.
const char* const kFragments[] = {
    "th", "he", "in", "er", "an", "re", "on", "at", "en", "nd", "ti", "es", "or", "te", "of", "ed", "is",
    "it", "al", "ar", "st", "to", "nt", "ng", "se", "ha", "as", "ou", "io", "le", "ve", "co", "me", "de",
    "hi", "ri", "ro", "ic", "ne", "ea", "ra", "ce", "ing", "ion", "tion", "ly", "ent", "ment", "ness",
    "able", "ers", "est", "ies", "ous", "ive", "ful", "less", "ally", "ight", "ould", "ough",
};

// The first words also get a capitalized piece (sentence starts).
constexpr int kCapitalized = 48;

class VocabBuilder {
public:
    explicit VocabBuilder(int limit) : limit_(limit) {}
    bool full() const { return static_cast<int>(v_.tokens.size()) >= limit_; }

    void add(const std::string& text, int32_t type, float score) {
        if (full() || !seen_.insert(text).second) return;
        v_.tokens.push_back(text);
        v_.scores.push_back(score);
        v_.types.push_back(type);
    }
    // A NORMAL piece and every shorter prefix of it (at code point boundaries), so that the
    // SentencePiece merges can reach it one symbol at a time. Earlier pieces score higher.
    void add_piece(const std::string& text) {
        for (size_t end = 1; end <= text.size(); ++end) {
            if (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) continue;
            if (full()) return;
            std::string prefix = text.substr(0, end);
            if (seen_.count(prefix)) continue;
            add(prefix, 1, -static_cast<float>(n_pieces_++));
        }
    }
    MakeModelVocab take() { return std::move(v_); }

private:
    int limit_;
    int n_pieces_ = 0;
    MakeModelVocab v_;
    std::unordered_set<std::string> seen_;
};

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

}  // namespace

MakeModelVocab make_model_vocab(int n_real, int n_rows) {
    VocabBuilder b(n_real);
    b.add("<unk>", 2, 0.0f);
    b.add("<s>", 3, 0.0f);
    b.add("</s>", 3, 0.0f);
    for (int i = 0; i < 256; ++i) b.add(fmt::format("<0x{:02X}>", i), 6, 0.0f);
    b.add_piece(kSpace);
    for (char c = 'a'; c <= 'z'; ++c) b.add_piece(std::string(1, c));
    for (char c = 'A'; c <= 'Z'; ++c) b.add_piece(std::string(1, c));
    for (char c = '0'; c <= '9'; ++c) b.add_piece(std::string(1, c));
    for (char c = '!'; c <= '~'; ++c) b.add_piece(std::string(1, c));
    for (const char* f : kFragments) b.add_piece(f);
    int i = 0;
    for (const char* w : kWords) {
        b.add_piece(kSpace + w);
        if (i++ < kCapitalized && w[0] >= 'a' && w[0] <= 'z') {
            std::string cap = w;
            cap[0] = static_cast<char>(cap[0] - 'a' + 'A');
            b.add_piece(kSpace + cap);
        }
    }
    // Beyond the word list: made-up syllable words ("▁ba", "▁bado", ...) until the vocabulary is
    // full; 90^3 three-syllable words cover kMakeModelMaxVocab.
    static const char kCons[] = "bcdfghjklmnprstvwz";
    static const char kVow[] = "aeiou";
    constexpr int kSyl = 18 * 5;
    for (int len = 1; len <= 3 && !b.full(); ++len) {
        int64_t n = 1;
        for (int k = 0; k < len; ++k) n *= kSyl;
        for (int64_t idx = 0; idx < n && !b.full(); ++idx) {
            std::string word;
            int64_t x = idx;
            for (int k = 0; k < len; ++k) {
                int s = static_cast<int>(x % kSyl);
                x /= kSyl;
                word += kCons[s / 5];
                word += kVow[s % 5];
            }
            b.add_piece(kSpace + word);
            b.add_piece(word);
        }
    }
    MakeModelVocab v = b.take();
    for (int64_t r = static_cast<int64_t>(v.tokens.size()); r < n_rows; ++r) {
        v.tokens.push_back(fmt::format("[PAD{}]", r));
        v.scores.push_back(0.0f);
        v.types.push_back(5);
    }
    return v;
}

std::vector<float> llama3_rope_freq_factors(int head_dim, float freq_base, float factor, float low, float high,
                                            int original_ctx) {
    const double low_wavelen = original_ctx / static_cast<double>(low);
    const double high_wavelen = original_ctx / static_cast<double>(high);
    std::vector<float> out;
    for (int i = 0; i < head_dim; i += 2) {
        const double freq = 1.0 / std::pow(static_cast<double>(freq_base), static_cast<double>(i) / head_dim);
        const double wavelen = 2.0 * M_PI / freq;
        double f = 1.0;
        if (wavelen > low_wavelen) {
            f = factor;
        } else if (wavelen >= high_wavelen) {
            const double smooth = (original_ctx / wavelen - low) / (high - low);
            f = 1.0 / ((1.0 - smooth) / factor + smooth);
        }
        out.push_back(static_cast<float>(f));
    }
    return out;
}

MakeModelSpec demo_model_spec() {
    MakeModelSpec s;
    s.arch = "llama";
    s.n_embd = 128;
    s.n_layer = 4;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 384;
    s.type = GgmlType::Q8_0;
    s.seed = 20240601;
    s.vocab = 640;
    return s;
}

const std::vector<std::string>& make_model_preset_names() {
    static const std::vector<std::string> names = {"deepseek-v2-lite", "deepseek2-tiny", "tinyllama-1.1b",
                                                   "qwen2.5-0.5b",     "llama-3.2-1b",   "llama-3.1-8b",
                                                   "llama3-tiny",      "qwen3-0.6b",     "qwen3-8b",
                                                   "qwen3-tiny",       "qwen3-30b-a3b",  "qwen3moe-tiny",
                                                   "mixtral-8x7b",     "llama-moe-tiny", "phi-3.5-mini",
                                                   "phi-4-mini",       "phi3-tiny",      "gemma-2-2b",
                                                   "gemma-3-1b",       "gemma-3-4b",     "gemma2-tiny",
                                                   "gemma3-tiny",      "gpt-oss-20b",    "gpt-oss-tiny",
                                                   "qwen3.5-4b",       "qwen35-tiny",    "qwen3.5-35b-a3b",
                                                   "qwen35moe-tiny"};
    return names;
}

Result<MakeModelSpec> make_model_preset(const std::string& name) {
    MakeModelSpec s;
    if (name == "deepseek-v2-lite") {
        // deepseek-ai/DeepSeek-V2-Lite's config.json: 27 layers (llama.cpp's "lite" depth), no q
        // compression, MLA 512 / 128 + 64 / 128, 64 routed experts (top-6, softmax, not normalised)
        // plus 2 shared, the first block dense, YaRN x40 from 4096 with mscale_all_dim 0.707.
        s.arch = "deepseek2";
        s.n_embd = 2048;
        s.n_layer = 27;
        s.n_head = 16;
        s.n_head_kv = 16;
        s.n_ff = 10944;
        s.vocab = 102400;
        s.n_ctx_train = 163840;
        s.rope_freq_base = 10000.0f;
        s.rms_eps = 1e-6f;
        s.q_lora_rank = 0;
        s.kv_lora_rank = 512;
        s.qk_nope_dim = 128;
        s.qk_rope_dim = 64;
        s.v_head_dim = 128;
        s.n_expert = 64;
        s.n_expert_used = 6;
        s.n_expert_shared = 2;
        s.n_ff_expert = 1408;
        s.n_dense_lead = 1;
        s.expert_gating_func = 1;
        s.expert_weights_scale = 1.0f;
        s.expert_weights_norm = false;
        s.n_expert_groups = 1;
        s.n_expert_groups_used = 1;
        s.yarn_factor = 40.0f;
        s.yarn_orig_ctx = 4096;
        s.yarn_log_multiplier = 0.0707f;
    } else if (name == "deepseek2-tiny") {
        // The fixtures' deepseek2-mini (one dense block, then MoE; YaRN as DeepSeek-V2-Lite), at a
        // quarter of its width: about 141k weights.
        s.arch = "deepseek2";
        s.n_embd = 64;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 4;
        s.n_ff = 128;
        s.vocab = 400;
        s.kv_lora_rank = 32;
        s.qk_nope_dim = 16;
        s.qk_rope_dim = 8;
        s.v_head_dim = 16;
        s.n_expert = 4;
        s.n_expert_used = 2;
        s.n_expert_shared = 1;
        s.n_ff_expert = 32;
        s.n_dense_lead = 1;
    } else if (name == "tinyllama-1.1b") {
        // TinyLlama-1.1B: GQA 32 / 4 heads, SentencePiece vocabulary of 32000.
        s.arch = "llama";
        s.n_embd = 2048;
        s.n_layer = 22;
        s.n_head = 32;
        s.n_head_kv = 4;
        s.n_ff = 5632;
        s.vocab = 32000;
        s.n_ctx_train = 2048;
        s.rope_freq_base = 10000.0f;
        s.rms_eps = 1e-5f;
    } else if (name == "llama-3.2-1b" || name == "llama-3.1-8b") {
        // meta-llama's config.json: GQA with 8 KV heads, 128256 tokens, rope_theta 500000 with
        // "llama3" rope scaling (factor 32 for 3.2, 8 for 3.1; low 1, high 4, from 8192); 3.2 1B
        // ties its LM head to the embeddings.
        const bool small = name == "llama-3.2-1b";
        s.arch = "llama";
        s.n_embd = small ? 2048 : 4096;
        s.n_layer = small ? 16 : 32;
        s.n_head = 32;
        s.n_head_kv = 8;
        s.n_ff = small ? 8192 : 14336;
        s.vocab = 128256;
        s.n_ctx_train = 131072;
        s.rope_freq_base = 500000.0f;
        s.rms_eps = 1e-5f;
        s.rope_freqs_factor = small ? 32.0f : 8.0f;
        s.tied_output = small;
    } else if (name == "llama3-tiny") {
        // For tests: Llama 3.1's rope_freqs on a small llama (64-dim heads, rope_theta 500000). An
        // original context of 256 (Llama 3's is 8192) puts the ramp on pairs that rotate by
        // 0.02-0.09 rad a position, so a prompt of tens of tokens shows a missing factor.
        s.arch = "llama";
        s.n_embd = 256;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.n_ff = 512;
        s.vocab = 512;
        s.n_ctx_train = 131072;
        s.rope_freq_base = 500000.0f;
        s.rms_eps = 1e-5f;
        s.rope_freqs_factor = 8.0f;
        s.rope_freqs_orig_ctx = 256;
    } else if (name == "qwen3-0.6b" || name == "qwen3-8b") {
        // Qwen/Qwen3-0.6B and -8B config.json: 128-wide heads (16 / 8 and 32 / 8 of them), per-head
        // q/k norms, rope_theta 1e6, 151669 tokens in 151936 rows; 0.6B ties its LM head.
        const bool small = name == "qwen3-0.6b";
        s.arch = "qwen3";
        s.n_embd = small ? 1024 : 4096;
        s.n_layer = small ? 28 : 36;
        s.n_head = small ? 16 : 32;
        s.n_head_kv = 8;
        s.head_dim = 128;
        s.n_ff = small ? 3072 : 12288;
        s.vocab = 151669;
        s.vocab_rows = 151936;
        s.n_ctx_train = 40960;
        s.rope_freq_base = 1000000.0f;
        s.rms_eps = 1e-6f;
        s.tied_output = small;
    } else if (name == "qwen3-tiny") {
        // For tests: Qwen3's shape in small, heads wider than n_embd / n_head as in Qwen3-0.6B.
        s.arch = "qwen3";
        s.n_embd = 128;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_ff = 384;
        s.vocab = 512;
    } else if (name == "qwen3-30b-a3b") {
        // Qwen/Qwen3-30B-A3B's config.json: 48 layers 2048 wide, 32 / 4 heads of 128, 128 experts
        // of 768 (top 8, renormalised), rope_theta 1e6, 151669 tokens in 151936 rows, an LM head.
        s.arch = "qwen3moe";
        s.n_embd = 2048;
        s.n_layer = 48;
        s.n_head = 32;
        s.n_head_kv = 4;
        s.head_dim = 128;
        s.n_ff = 6144;
        s.n_expert = 128;
        s.n_expert_used = 8;
        s.n_ff_expert = 768;
        s.vocab = 151669;
        s.vocab_rows = 151936;
        s.n_ctx_train = 40960;
        s.rope_freq_base = 1000000.0f;
        s.rms_eps = 1e-6f;
    } else if (name == "qwen3moe-tiny") {
        // For tests: qwen3-tiny's attention with 8 experts of 64, 2 per token.
        s.arch = "qwen3moe";
        s.n_embd = 128;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_ff = 384;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.n_ff_expert = 64;
        s.vocab = 512;
    } else if (name == "mixtral-8x7b") {
        // mistralai/Mixtral-8x7B-v0.1's config.json: a llama file with 8 experts of 14336 in every
        // layer (top 2), 32 layers 4096 wide, 32 / 8 heads, rope_theta 1e6, 32000 tokens.
        s.arch = "llama";
        s.llama_experts = true;
        s.n_embd = 4096;
        s.n_layer = 32;
        s.n_head = 32;
        s.n_head_kv = 8;
        s.n_ff = 14336;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.vocab = 32000;
        s.n_ctx_train = 32768;
        s.rope_freq_base = 1000000.0f;
        s.rms_eps = 1e-5f;
    } else if (name == "llama-moe-tiny") {
        // For tests: Mixtral's layout in small, 4 experts of 128, 2 per token.
        s.arch = "llama";
        s.llama_experts = true;
        s.n_embd = 128;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.n_ff = 128;
        s.n_expert = 4;
        s.n_expert_used = 2;
        s.vocab = 512;
    } else if (name == "phi-3.5-mini" || name == "phi-4-mini") {
        // microsoft/Phi-3.5-mini-instruct and Phi-4-mini-instruct config.json: 3072 wide, 32 layers,
        // LongRoPE from 4096 to 131072; Phi-4-mini has 24 / 8 heads of 128 with 96 rotated dims, a
        // 200064-token vocabulary and a tied LM head.
        const bool four = name == "phi-4-mini";
        s.arch = "phi3";
        s.n_embd = 3072;
        s.n_layer = 32;
        s.n_head = four ? 24 : 32;
        s.n_head_kv = four ? 8 : 32;
        s.n_rot = four ? 96 : 0;
        s.n_ff = 8192;
        s.vocab = four ? 200064 : 32064;
        s.n_ctx_train = 131072;
        s.rope_freq_base = 10000.0f;
        s.rms_eps = 1e-5f;
        s.longrope = true;
        s.longrope_orig_ctx = 4096;
        s.tied_output = four;
    } else if (name == "phi3-tiny") {
        // For tests: phi3's fused projections and LongRoPE, the original context 128 so that the
        // default 256-cell context takes the long factors (--ctx-train sets it back above).
        s.arch = "phi3";
        s.n_embd = 256;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.n_ff = 384;
        s.vocab = 512;
        s.n_rot = 48;
        s.n_ctx_train = 4096;
        s.longrope = true;
        s.longrope_orig_ctx = 128;
    } else if (name == "gemma-2-2b") {
        // google/gemma-2-2b config.json: 2304 wide, 26 layers of 8 / 4 heads of 256, every other
        // layer local with a 4096 window, soft caps 50 (attention) and 30 (logits), 256000 tokens.
        s.arch = "gemma2";
        s.n_embd = 2304;
        s.n_layer = 26;
        s.n_head = 8;
        s.n_head_kv = 4;
        s.head_dim = 256;
        s.n_ff = 9216;
        s.vocab = 256000;
        s.n_ctx_train = 8192;
        s.n_swa = 4096;
        s.rope_freq_base = 10000.0f;
        s.rms_eps = 1e-6f;
    } else if (name == "gemma-3-1b" || name == "gemma-3-4b") {
        // google/gemma-3-1b-it and gemma-3-4b-it config.json: five local layers (window 512 / 1024,
        // RoPE base 10000) per global one (base 1e6; Gemma-3-4B scales it linearly by 8), heads of
        // 256, q/k norms, a tied LM head; 262144 / 262208 tokens.
        const bool four = name == "gemma-3-4b";
        s.arch = "gemma3";
        s.n_embd = four ? 2560 : 1152;
        s.n_layer = four ? 34 : 26;
        s.n_head = four ? 8 : 4;
        s.n_head_kv = four ? 4 : 1;
        s.head_dim = 256;
        s.n_ff = four ? 10240 : 6912;
        s.vocab = four ? 262208 : 262144;
        s.n_ctx_train = four ? 131072 : 32768;
        s.n_swa = four ? 1024 : 512;
        s.swa_pattern = 6;
        s.rope_freq_base = 1000000.0f;
        s.rope_freq_base_swa = 10000.0f;
        s.rope_linear_factor = four ? 8.0f : 0.0f;
        s.rms_eps = 1e-6f;
        s.tied_output = true;
    } else if (name == "gemma2-tiny" || name == "gemma3-tiny") {
        // For tests: gemma's layers in small, a window of 8 so that short prompts cross it, heads
        // wider than n_embd / n_head; gemma3: two local layers then a global one.
        const bool three = name == "gemma3-tiny";
        s.arch = three ? "gemma3" : "gemma2";
        s.n_embd = 128;
        s.n_layer = three ? 3 : 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_ff = 384;
        s.vocab = 512;
        s.n_ctx_train = 4096;
        s.n_swa = 8;
        s.swa_pattern = three ? 3 : 0;
        s.rope_freq_base = three ? 1000000.0f : 10000.0f;
        s.rope_freq_base_swa = three ? 10000.0f : 0.0f;
        s.tied_output = three;
        // Caps the tiny scores and logits reach, so that leaving one out shows.
        s.attn_softcap = three ? 0.0f : 2.0f;
        s.final_softcap = three ? 0.0f : 1.5f;
    } else if (name == "qwen2.5-0.5b") {
        // Qwen2.5-0.5B: 14 / 2 heads, q/k/v biases, tied LM head; 151665 tokens in 151936 rows.
        s.arch = "qwen2";
        s.n_embd = 896;
        s.n_layer = 24;
        s.n_head = 14;
        s.n_head_kv = 2;
        s.n_ff = 4864;
        s.vocab = 151665;
        s.vocab_rows = 151936;
        s.n_ctx_train = 32768;
        s.rope_freq_base = 1000000.0f;
        s.rms_eps = 1e-6f;
    } else if (name == "gpt-oss-20b") {
        // openai/gpt-oss-20b's config.json: 24 layers 2880 wide, 64 / 8 heads of 64, 32 experts of
        // 2880 (top 4), every other layer over a window of 128, YaRN x32 from 4096 on rope_theta
        // 150000, 201088 token rows (o200k_harmony's 200019 tokens, here generated pieces).
        s.arch = "gpt-oss";
        s.n_embd = 2880;
        s.n_layer = 24;
        s.n_head = 64;
        s.n_head_kv = 8;
        s.head_dim = 64;
        s.n_ff = 2880;
        s.n_expert = 32;
        s.n_expert_used = 4;
        s.n_ff_expert = 2880;
        s.n_swa = 128;
        s.yarn_factor = 32.0f;
        s.yarn_orig_ctx = 4096;
        s.vocab = 200019;
        s.vocab_rows = 201088;
        s.n_ctx_train = 131072;
        s.rope_freq_base = 150000.0f;
        s.rms_eps = 1e-5f;
    } else if (name == "gpt-oss-tiny") {
        // For tests: 2 layers 128 wide, 4 / 2 heads of 32, 8 experts of 64 (top 2), the even layer
        // over a window of 4 positions, YaRN as gpt-oss-20b.
        s.arch = "gpt-oss";
        s.n_embd = 128;
        s.n_layer = 2;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 32;
        s.n_ff = 64;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.n_ff_expert = 64;
        s.n_swa = 4;
        s.yarn_factor = 32.0f;
        s.yarn_orig_ctx = 4096;
        s.vocab = 512;
        s.n_ctx_train = 131072;
        s.rope_freq_base = 150000.0f;
        s.rms_eps = 1e-5f;
    } else if (name == "qwen3.5-4b") {
        // Qwen3.5-4B's shape as llama.cpp's loader knows it (32 layers 2560 wide: "4B"): every fourth
        // layer gated attention (16 / 4 heads of 256, 64 dims rotated in sections 11, 11, 10), the
        // others Gated DeltaNet (16 q/k heads and 32 value heads of 128, a 4-tap conv1d), a 9216-wide
        // feed-forward, rope_theta 1e7, 248044 tokens in 248320 rows, the LM head tied.
        s.arch = "qwen35";
        s.n_embd = 2560;
        s.n_layer = 32;
        s.n_head = 16;
        s.n_head_kv = 4;
        s.head_dim = 256;
        s.n_rot = 64;
        s.n_ff = 9216;
        s.ssm_state = 128;
        s.ssm_k_heads = 16;
        s.ssm_v_heads = 32;
        s.rope_sections[0] = 11;
        s.rope_sections[1] = 11;
        s.rope_sections[2] = 10;
        s.rope_sections[3] = 0;
        s.vocab = 248044;
        s.vocab_rows = 248320;
        s.n_ctx_train = 262144;
        s.rope_freq_base = 10000000.0f;
        s.rms_eps = 1e-6f;
        s.tied_output = true;
    } else if (name == "qwen3.5-35b-a3b") {
        // Qwen3.5-35B-A3B's shape as llama.cpp's loader knows it (40 layers: "35B.A3B"): 2048 wide,
        // every fourth layer gated attention (16 / 2 heads of 256, 64 dims rotated), the others Gated
        // DeltaNet (16 q/k heads and 32 value heads of 128); 256 experts of 512, 8 per token, and a
        // gated shared expert of 512; 248044 tokens in 248320 rows, an LM head.
        s.arch = "qwen35moe";
        s.n_embd = 2048;
        s.n_layer = 40;
        s.n_head = 16;
        s.n_head_kv = 2;
        s.head_dim = 256;
        s.n_rot = 64;
        s.n_ff = 512;
        s.n_expert = 256;
        s.n_expert_used = 8;
        s.n_ff_expert = 512;
        s.ssm_state = 128;
        s.ssm_k_heads = 16;
        s.ssm_v_heads = 32;
        s.rope_sections[0] = 11;
        s.rope_sections[1] = 11;
        s.rope_sections[2] = 10;
        s.rope_sections[3] = 0;
        s.vocab = 248044;
        s.vocab_rows = 248320;
        s.n_ctx_train = 262144;
        s.rope_freq_base = 10000000.0f;
        s.rms_eps = 1e-6f;
    } else if (name == "qwen35moe-tiny") {
        // For tests: qwen35-tiny's layers with 8 experts of 64, 2 per token, and a shared expert of 96.
        s.arch = "qwen35moe";
        s.n_embd = 128;
        s.n_layer = 4;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_rot = 16;
        s.n_ff = 96;
        s.n_expert = 8;
        s.n_expert_used = 2;
        s.n_ff_expert = 64;
        s.vocab = 512;
    } else if (name == "qwen35-tiny") {
        // For tests: three Gated DeltaNet layers (2 q/k heads and 4 value heads of 32) and one gated
        // attention layer (4 / 2 heads of 64, 16 dims rotated in sections 3, 3, 2).
        s.arch = "qwen35";
        s.n_embd = 128;
        s.n_layer = 4;
        s.n_head = 4;
        s.n_head_kv = 2;
        s.head_dim = 64;
        s.n_rot = 16;
        s.n_ff = 256;
        s.vocab = 512;
    } else {
        return make_error(ErrorCode::kUsage, fmt::format("unknown preset '{}'; presets: {}", name,
                                                         fmt::join(make_model_preset_names(), ", ")));
    }
    return s;
}

namespace {

struct PlannedTensor {
    std::string name;
    std::vector<int64_t> ne;
};

// The config llama.cpp reads back from the file make_model writes.
ModelConfig config_of(const MakeModelSpec& s) {
    ModelConfig c;
    c.arch = is_qwen2(s) ? Arch::kQwen2 : is_qwen3(s) ? Arch::kQwen3 : is_phi3(s) ? Arch::kPhi3 : is_deepseek2(s) ? Arch::kDeepseek2 : Arch::kLlama;
    if (is_gemma(s)) c.arch = s.arch == "gemma2" ? Arch::kGemma2 : Arch::kGemma3;
    c.arch_name = s.arch;
    c.n_embd = s.n_embd;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_head_kv = s.n_head_kv;
    c.head_dim_k = c.head_dim_v = c.n_rot = head_dim_of(s);
    if (s.n_rot > 0) c.n_rot = s.n_rot;
    c.n_ff = s.n_ff;
    c.n_vocab = padded_rows(s);
    if (is_qwen3moe(s) || is_llama_moe(s)) {
        c.arch = is_qwen3moe(s) ? Arch::kQwen3Moe : Arch::kLlama;
        c.n_expert = s.n_expert;
        c.n_expert_used = s.n_expert_used;
        c.n_ff_expert = is_qwen3moe(s) ? s.n_ff_expert : s.n_ff;
    }
    if (is_gpt_oss(s)) {
        c.arch = Arch::kGptOss;
        c.n_expert = s.n_expert;
        c.n_expert_used = s.n_expert_used;
        c.n_ff_expert = s.n_ff_expert;
    }
    if (is_qwen35(s)) {
        c.arch = is_qwen35moe(s) ? Arch::kQwen35Moe : Arch::kQwen35;
        if (is_qwen35moe(s)) {
            c.n_expert = s.n_expert;
            c.n_expert_used = s.n_expert_used;
            c.n_ff_expert = s.n_ff_expert;
            c.n_ff_shexp = s.n_ff;
        }
        c.ssm_d_conv = s.ssm_conv;
        c.ssm_d_state = s.ssm_state;
        c.ssm_n_k_heads = s.ssm_k_heads;
        c.ssm_n_v_heads = s.ssm_v_heads;
        c.ssm_d_inner = static_cast<int64_t>(s.ssm_state) * s.ssm_v_heads;
        c.recurrent_layers.assign(static_cast<size_t>(s.n_layer), 0);
        for (int il = 0; il < s.n_layer; ++il)
            c.recurrent_layers[static_cast<size_t>(il)] = s.full_attn_interval > 0 && (il + 1) % s.full_attn_interval != 0;
        for (int i = 0; i < 4; ++i) c.rope_sections[i] = s.rope_sections[i];
    }
    if (is_deepseek2(s)) {
        c.n_rot = s.qk_rope_dim;
        c.q_lora_rank = s.q_lora_rank;
        c.kv_lora_rank = s.kv_lora_rank;
        c.head_dim_k_mla = s.qk_nope_dim + s.qk_rope_dim;
        c.head_dim_v_mla = s.v_head_dim;
        c.mla_split = !s.legacy_kv_b;
        // The MLA layout's attention is MQA over the latent; the legacy one is plain MHA.
        c.n_head_kv = c.mla_split ? 1 : s.n_head;
        c.head_dim_k = c.mla_split ? s.kv_lora_rank + s.qk_rope_dim : c.head_dim_k_mla;
        c.head_dim_v = c.mla_split ? s.kv_lora_rank : c.head_dim_v_mla;
        c.n_expert = s.n_expert;
        c.n_expert_used = s.n_expert_used;
        c.n_expert_shared = s.n_expert_shared;
        c.n_ff_expert = s.n_ff_expert;
        c.n_layer_dense_lead = s.n_dense_lead;
    }
    return c;
}

// The tensors a generated model holds: the layout's required ones, plus qwen2's q/k/v biases; qwen2
// ties the LM head (no output.weight), llama and deepseek2 have one.
bool generated(const MakeModelSpec& s, const TensorSpec& t) {
    auto ends = [&](const char* suffix) {
        const size_t n = std::strlen(suffix);
        return t.name.size() >= n && t.name.compare(t.name.size() - n, n, suffix) == 0;
    };
    if (t.required) return true;
    if (!t.unsupported.empty()) return false;
    if (t.name == "output.weight") return !is_qwen2(s) && !s.tied_output;
    if (t.name == "cls.output.weight") return false;
    if (t.name == "rope_freqs.weight") return s.rope_freqs_factor > 0;
    if (t.name == "rope_factors_long.weight" || t.name == "rope_factors_short.weight") return s.longrope;
    if (is_phi3(s) && ends("attn_qkv.weight")) return true;  // phi3 files fuse q, k and v
    if (is_phi3(s) && (ends("attn_q.weight") || ends("attn_k.weight") || ends("attn_v.weight"))) return false;
    if (ends("exp_probs_b.bias")) return s.expert_bias;
    if (ends("ffn_gate_up_exps.weight")) return s.fused_gate_up;
    if (ends("ffn_gate_exps.weight") || ends("ffn_up_exps.weight")) return !s.fused_gate_up;
    if (t.name == "output.bias" || ends("attn_output.bias") || ends("ffn_gate.bias") || ends("ffn_up.bias") ||
        ends("ffn_down.bias"))
        return s.out_biases;
    // The LM head's scales exist only for an untied NVFP4 head.
    if (t.name == "output.scale" || t.name == "output.input_scale")
        return s.weight_scales && s.type == GgmlType::NVFP4 && !is_qwen2(s) && !s.tied_output;
    if (ends(".scale") || ends(".input_scale")) return s.weight_scales;
    // gpt-oss files have q, k and v separate, each with its bias.
    if (is_gpt_oss(s) && (ends("attn_qkv.weight") || ends("attn_qkv.bias"))) return false;
    if (is_gpt_oss(s) && (ends("attn_q.weight") || ends("attn_k.weight") || ends("attn_v.weight"))) return true;
    return (is_qwen2(s) || is_gpt_oss(s)) && (ends("attn_q.bias") || ends("attn_k.bias") || ends("attn_v.bias"));
}

// Where a tensor goes in the file. Files made before the shared layout existed wrote the layer
// tensors in this order (not llama.cpp's load order); keeping it keeps every generated file
// byte-identical to those.
std::pair<int64_t, int> file_position(const std::string& name) {
    static const char* const kLayerOrder[] = {
        "attn_norm.weight", "attn_q.weight",      "attn_k.weight",   "attn_v.weight",
        "attn_q.bias",      "attn_k.bias",        "attn_v.bias",     "attn_output.weight",
        "ffn_norm.weight",  "ffn_gate.weight",    "ffn_up.weight",   "ffn_down.weight",
    };
    int64_t layer = -1;
    size_t what = 0;
    if (name.compare(0, 4, "blk.") == 0) {
        const size_t dot = name.find('.', 4);
        layer = std::stoll(name.substr(4, dot - 4));
        what = dot + 1;
    }
    if (layer < 0) return {-1, 0};  // model-wide tensors first, in layout order
    const std::string suffix = name.substr(what);
    int rank = 0;
    for (const char* known : kLayerOrder) {
        if (suffix == known) break;
        ++rank;
    }
    return {layer, rank};
}

std::vector<PlannedTensor> plan_tensors(const MakeModelSpec& s) {
    std::vector<PlannedTensor> out;
    for (const TensorSpec& t : tensor_layout(config_of(s), padded_rows(s)))
        if (generated(s, t)) out.push_back({t.name, t.ne});
    // deepseek2, gpt-oss and qwen35 files keep the layout's order (llama.cpp's load order).
    if (is_deepseek2(s) || is_gpt_oss(s) || is_qwen35(s)) return out;
    std::stable_sort(out.begin(), out.end(), [](const PlannedTensor& a, const PlannedTensor& b) {
        return file_position(a.name) < file_position(b.name);
    });
    return out;
}

int64_t n_elements(const PlannedTensor& t) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    return n;
}

Status validate_qwen35(const MakeModelSpec& s) {
    auto bad = [](std::string msg) { return Status(make_error(ErrorCode::kUsage, std::move(msg))); };
    struct { const char* name; int value; int min; int max; } dims[] = {
        {"ssm_state", s.ssm_state, 1, 4096}, {"ssm_k_heads", s.ssm_k_heads, 1, 1024}, {"ssm_v_heads", s.ssm_v_heads, 1, 1024},
        {"ssm_conv", s.ssm_conv, 1, 64},      {"full_attn_interval", s.full_attn_interval, 1, 1024},
    };
    for (const auto& d : dims)
        if (d.value < d.min || d.value > d.max)
            return bad(fmt::format("{} is {}; it must be in {}..{}", d.name, d.value, d.min, d.max));
    if (s.n_layer < s.full_attn_interval)
        return bad(fmt::format("{} layers with full_attn_interval {}: no attention layer, and llama.cpp's qwen35 then "
                               "aborts (its hybrid cache has no KV layer); use at least {} layers",
                               s.n_layer, s.full_attn_interval, s.full_attn_interval));
    if (s.ssm_v_heads % s.ssm_k_heads != 0)
        return bad(fmt::format("ssm_k_heads {} does not divide ssm_v_heads {}", s.ssm_k_heads, s.ssm_v_heads));
    const int rot = s.n_rot > 0 ? s.n_rot : head_dim_of(s);
    int sum = 0;
    for (int v : s.rope_sections) {
        if (v < 0) return bad("rope sections must be >= 0");
        sum += v;
    }
    if (s.rope_sections[0] + s.rope_sections[1] + s.rope_sections[2] == 0 || sum > head_dim_of(s) || rot / 2 < 1)
        return bad(fmt::format("rope sections sum to {}; the first three cannot all be 0 and the sum must be at most the "
                               "head width {}", sum, head_dim_of(s)));
    if (s.out_biases || s.weight_scales)
        return bad("biases and per-tensor scales are llama, qwen2 and qwen3 options");
    return {};
}

Status validate_deepseek2(const MakeModelSpec& s) {
    auto bad = [](std::string msg) { return Status(make_error(ErrorCode::kUsage, std::move(msg))); };
    struct { const char* name; int value; int min; int max; } dims[] = {
        {"q_lora_rank", s.q_lora_rank, 0, 65536},       {"kv_lora_rank", s.kv_lora_rank, 1, 65536},
        {"qk_nope_dim", s.qk_nope_dim, 1, 65536},       {"qk_rope_dim", s.qk_rope_dim, 2, 65536},
        {"v_head_dim", s.v_head_dim, 1, 65536},         {"n_expert", s.n_expert, 1, 1024},
        {"n_expert_used", s.n_expert_used, 1, s.n_expert}, {"n_expert_shared", s.n_expert_shared, 1, 1024},
        {"n_ff_expert", s.n_ff_expert, 1, 1 << 20},     {"n_dense_lead", s.n_dense_lead, 0, s.n_layer},
        {"expert_gating_func", s.expert_gating_func, 1, 2}, {"yarn_orig_ctx", s.yarn_orig_ctx, 1, 1 << 24},
    };
    for (const auto& d : dims)
        if (d.value < d.min || d.value > d.max)
            return bad(fmt::format("{} is {}; it must be in {}..{}", d.name, d.value, d.min, d.max));
    if (s.qk_rope_dim % 2 != 0)
        return bad(fmt::format("qk_rope_dim {} is odd; RoPE rotates pairs, so it must be even", s.qk_rope_dim));
    // llama.cpp's loader asserts these.
    if (s.n_expert_groups < 1 || s.n_expert_groups >= s.n_expert)
        return bad(fmt::format("n_expert_groups {} must be in 1..{} (fewer groups than the {} experts)",
                               s.n_expert_groups, s.n_expert - 1, s.n_expert));
    if (s.n_expert_groups == 1 ? s.n_expert_groups_used != 1
                               : (s.n_expert % s.n_expert_groups != 0 || s.n_expert_groups_used < 1 ||
                                  s.n_expert_groups_used >= s.n_expert_groups))
        return bad(fmt::format("{} expert groups of {} experts with {} used: the groups must divide the experts "
                               "and fewer than all groups be used (1 used of 1 group)", s.n_expert_groups,
                               s.n_expert, s.n_expert_groups_used));
    // llama.cpp takes these depths for "lite" models and then ignores q_lora_rank.
    const bool lite_depth = s.n_layer == 26 || s.n_layer == 27 || (s.n_layer == 48 && padded_rows(s) == 128256);
    if (lite_depth && s.q_lora_rank > 0)
        return bad(fmt::format("q_lora_rank {} with {} blocks: llama.cpp reads deepseek2 models of this depth as "
                               "Lite models without q compression; use q_lora_rank 0 or another depth",
                               s.q_lora_rank, s.n_layer));
    for (auto [name, value] : {std::pair{"expert_weights_scale", s.expert_weights_scale},
                               {"yarn_factor", s.yarn_factor}, {"yarn_log_multiplier", s.yarn_log_multiplier}})
        if (!(value >= 0.0f) || !std::isfinite(value))
            return bad(fmt::format("{} must be a finite number >= 0", name));
    return {};
}

}  // namespace

Status validate_make_model_spec(const MakeModelSpec& s) {
    auto bad = [](std::string msg) { return Status(make_error(ErrorCode::kUsage, std::move(msg))); };
    if (s.arch != "llama" && s.arch != "qwen2" && !is_qwen3(s) && s.arch != "phi3" && !is_gemma(s) &&
        s.arch != "deepseek2" && !is_gpt_oss(s) && !is_qwen35(s))
        return bad(fmt::format("arch '{}' is not supported; use llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, "
                               "deepseek2, gpt-oss, qwen35 or qwen35moe", s.arch));
    if (is_qwen35(s)) {
        if (Status st = validate_qwen35(s); !st) return st;
    }
    if (s.llama_experts && s.arch != "llama")
        return bad(fmt::format("llama_experts is a llama option; {} decides its experts itself", s.arch));
    if (s.fused_gate_up && !is_deepseek2(s) && !is_qwen35moe(s))
        return bad(fmt::format("fused gate_up experts are a deepseek2 option; llama.cpp's {} loader takes only separate "
                               "ones", s.arch));
    if (is_qwen3moe(s) || is_llama_moe(s) || is_gpt_oss(s) || is_qwen35moe(s)) {
        if (s.n_expert < 1 || s.n_expert > 1024 || s.n_expert_used < 1 || s.n_expert_used > s.n_expert)
            return bad(fmt::format("{} experts with {} used: need 1..1024 experts and 1..n_expert used", s.n_expert,
                                   s.n_expert_used));
        if ((is_qwen3moe(s) || is_gpt_oss(s) || is_qwen35moe(s)) && (s.n_ff_expert < 1 || s.n_ff_expert > (1 << 20)))
            return bad(fmt::format("n_ff_expert is {}; it must be in 1..{}", s.n_ff_expert, 1 << 20));
        if (s.out_biases)
            return bad(fmt::format("output biases are not an option of a {} model with experts", s.arch));
    }
    struct { const char* name; int value; int max; } dims[] = {
        {"n_embd", s.n_embd, 65536}, {"n_layer", s.n_layer, 1024}, {"n_head", s.n_head, 1024},
        {"n_head_kv", s.n_head_kv, 1024}, {"n_ff", s.n_ff, 1 << 20},
    };
    for (const auto& d : dims)
        if (d.value < 1 || d.value > d.max) return bad(fmt::format("{} is {}; it must be in 1..{}", d.name, d.value, d.max));
    if (is_deepseek2(s)) {
        // Head widths are their own keys; n_embd / n_head and n_head_kv do not matter.
        if (Status st = validate_deepseek2(s); !st) return st;
    } else {
        if (s.head_dim < 0 || s.head_dim > 65536) return bad(fmt::format("head_dim {} is out of range 0..65536", s.head_dim));
        if (s.head_dim > 0 && !is_qwen3(s) && !is_gemma(s) && !is_gpt_oss(s) && !is_qwen35(s))
            return bad(fmt::format("head_dim is a qwen3, gemma and gpt-oss option; {} heads are n_embd / n_head wide", s.arch));
        if (s.head_dim == 0 && s.n_embd % s.n_head != 0)
            return bad(fmt::format("n_embd {} is not divisible by n_head {}; pick a head count that divides it",
                                   s.n_embd, s.n_head));
        if (s.n_head % s.n_head_kv != 0)
            return bad(fmt::format("n_head_kv {} does not divide n_head {}; grouped-query attention needs a whole "
                                   "number of query heads per KV head", s.n_head_kv, s.n_head));
        if (head_dim_of(s) % 2 != 0)
            return bad(fmt::format("head dimension {} is odd; RoPE rotates pairs, so it must be even", head_dim_of(s)));
    }
    if (s.vocab < kMakeModelMinVocab || s.vocab > kMakeModelMaxVocab)
        return bad(fmt::format("vocab {} is out of range {}..{} (3 special tokens, 256 byte tokens, the space piece "
                               "and printable ASCII come first)", s.vocab, kMakeModelMinVocab, kMakeModelMaxVocab));
    if (s.vocab_rows != 0 && (s.vocab_rows < s.vocab || s.vocab_rows > kMakeModelMaxVocab))
        return bad(fmt::format("vocab_rows {} must be between vocab {} and {}", s.vocab_rows, s.vocab,
                               kMakeModelMaxVocab));
    if (s.n_ctx_train < 0) return bad(fmt::format("n_ctx_train {} is negative", s.n_ctx_train));
    if (s.arch != "llama" && s.rope_freqs_factor != 0.0f)
        return bad(fmt::format("rope_freqs is a llama option; llama.cpp's {} graph has no frequency factors", s.arch));
    if (!is_phi3(s) && !is_qwen35(s) && (s.n_rot != 0 || s.longrope))
        return bad(fmt::format("n_rot and LongRoPE are phi3 options; {} rotates the whole head", s.arch));
    if (is_qwen35(s) && s.longrope) return bad("LongRoPE is a phi3 option");
    if ((is_phi3(s) || is_qwen35(s)) && (s.n_rot < 0 || s.n_rot % 2 != 0 || s.n_rot > head_dim_of(s)))
        return bad(fmt::format("n_rot {} must be even and at most the head dimension {}", s.n_rot, head_dim_of(s)));
    if (is_phi3(s) && (s.out_biases || s.weight_scales))
        return bad("biases and per-tensor scales are llama, qwen2 and qwen3 options");
    if (s.longrope && s.longrope_orig_ctx < 1) return bad("the LongRoPE original context must be positive");
    if (is_gpt_oss(s) && (s.n_swa < 1 || s.swa_pattern != 0 || s.rope_freq_base_swa != 0.0f || s.rope_linear_factor != 0.0f))
        return bad("a gpt-oss model here has a window of 1 or more positions in every other layer, at the global RoPE "
                   "base, with YaRN (yarn_factor) as its only scaling");
    if (is_gpt_oss(s) && (!(s.yarn_factor >= 0.0f) || !std::isfinite(s.yarn_factor) || s.yarn_orig_ctx < 1))
        return bad("yarn_factor must be a finite number >= 0 (0: no scaling) and yarn_orig_ctx >= 1");
    if (!is_gemma(s) && !is_gpt_oss(s) &&
        (s.n_swa != 0 || s.swa_pattern != 0 || s.rope_freq_base_swa != 0.0f || s.rope_linear_factor != 0.0f))
        return bad(fmt::format("sliding windows and their RoPE are gemma2, gemma3 and gpt-oss options; {} attends over the "
                               "whole context", s.arch));
    if (is_gemma(s) && (s.n_swa < 0 || s.swa_pattern < 0 || !(s.rope_freq_base_swa >= 0.0f) ||
                        !std::isfinite(s.rope_freq_base_swa) || !(s.rope_linear_factor >= 0.0f) ||
                        !std::isfinite(s.rope_linear_factor)))
        return bad("the sliding window, its pattern, rope_freq_base_swa and the linear RoPE factor must be >= 0");
    if (s.arch != "gemma2" && (s.attn_softcap != 0.0f || s.final_softcap != 0.0f))
        return bad("soft caps are a gemma2 option");
    if (!(s.attn_softcap >= 0.0f) || !std::isfinite(s.attn_softcap) || !(s.final_softcap >= 0.0f) ||
        !std::isfinite(s.final_softcap))
        return bad("the soft caps must be finite and >= 0 (0: Gemma 2's 50 and 30)");
    if (s.arch == "gemma2" && (s.swa_pattern != 0 || s.rope_linear_factor != 0.0f || s.tied_output))
        return bad("gemma2 files here take llama.cpp's pattern (every other layer local), no RoPE scaling, and are "
                   "always tied");
    if (is_gemma(s) && (s.out_biases || s.weight_scales))
        return bad("biases and per-tensor scales are llama, qwen2 and qwen3 options");
    if (s.tied_output && s.arch != "llama" && !is_qwen3(s) && !is_phi3(s) && s.arch != "gemma3" && !is_qwen35(s))
        return bad(fmt::format("a tied output is a llama and qwen3 option; a {} model has {}", s.arch,
                               is_qwen2(s) ? "its LM head tied already" : "an output.weight"));
    if (is_deepseek2(s) && s.weight_scales)
        return bad("per-tensor weight scales are a llama, qwen2 and qwen3 option (the deepseek2 graph does not run them)");
    if (is_gpt_oss(s) && (s.out_biases || s.weight_scales || s.tied_output))
        return bad("a gpt-oss model has its own biases, no per-tensor scales and an output.weight");
    if ((is_deepseek2(s) || is_qwen3(s)) && s.out_biases)
        return bad(fmt::format("output biases are a llama and qwen2 option; llama.cpp's {} loader has none", s.arch));
    if (s.rope_freqs_factor != 0.0f &&
        (!(s.rope_freqs_factor >= 1.0f) || !std::isfinite(s.rope_freqs_factor) || !(s.rope_freqs_low > 0.0f) ||
         !(s.rope_freqs_high > s.rope_freqs_low) || s.rope_freqs_orig_ctx < 1))
        return bad(fmt::format("llama3 rope factors need factor >= 1, 0 < low < high and an original context >= 1 (got "
                               "{}, {}, {}, {})", s.rope_freqs_factor, s.rope_freqs_low, s.rope_freqs_high,
                               s.rope_freqs_orig_ctx));
    if (!(s.rope_freq_base >= 0.0f) || !std::isfinite(s.rope_freq_base))
        return bad("rope_freq_base must be a finite positive number (or 0 for the default)");
    if (!(s.rms_eps >= 0.0f) || !std::isfinite(s.rms_eps))
        return bad("rms_eps must be a finite positive number (or 0 for the default)");
    if (!weight_type_supported(s.type))
        return bad(fmt::format("type '{}' cannot be generated; use f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, "
                               "q2_K, q3_K, q4_K, q5_K, q6_K, mxfp4 or nvfp4", ggml_type_name(s.type) ? ggml_type_name(s.type) : "?"));
    for (const auto& nt : s.tensor_types) {
        const std::string& name = nt.first;
        const GgmlType type = nt.second;
        if (!weight_type_supported(type))
            return bad(fmt::format("tensor {}: type '{}' cannot be generated", name, ggml_type_name(type) ? ggml_type_name(type) : "?"));
        const std::vector<PlannedTensor> plan = plan_tensors(s);
        auto it = std::find_if(plan.begin(), plan.end(), [&](const PlannedTensor& t) { return t.name == name; });
        if (it == plan.end()) return bad(fmt::format("this model has no tensor {} to give type {}", name, ggml_type_name(type)));
        if (it->ne.size() < 2) return bad(fmt::format("tensor {} is a vector; only matrices take another type", name));
        const int64_t block = ggml_type_traits(type)->block_elems;
        if (it->ne[0] % block != 0)
            return bad(fmt::format("tensor {} has rows of {} values, not a multiple of {}'s block of {}", name, it->ne[0],
                                   ggml_type_name(type), block));
    }
    // Tensors are made one at a time: memory holds the largest (as floats), the disk all of them.
    int64_t params = 0, largest = 0;
    for (const PlannedTensor& t : plan_tensors(s)) {
        params += n_elements(t);
        largest = std::max(largest, n_elements(t));
    }
    if (params > (int64_t{1} << 36))
        return bad(fmt::format("the model would have {} parameters; make-model stops at 2^36", params));
    if (largest > (int64_t{1} << 31))
        return bad(fmt::format("a tensor would have {} elements; make-model stops at 2^31 (it makes each tensor in "
                               "memory)", largest));
    return {};
}

GgmlType make_model_tensor_type(GgmlType requested, int64_t ne0) {
    const GgmlTypeTraits* tr = ggml_type_traits(requested);
    if (!tr || ne0 % tr->block_elems == 0) return requested;
    GgmlType fallback = GgmlType::F16;
    switch (requested) {
        case GgmlType::Q4_K: fallback = GgmlType::Q5_0; break;
        case GgmlType::Q5_K: fallback = GgmlType::Q5_1; break;
        case GgmlType::Q6_K: fallback = GgmlType::Q8_0; break;
        case GgmlType::Q2_K: case GgmlType::Q3_K: fallback = GgmlType::Q4_0; break;
        default: break;
    }
    if (ne0 % ggml_type_traits(fallback)->block_elems != 0) fallback = GgmlType::F16;
    return fallback;
}

double make_model_tensor_std(const MakeModelSpec& s, const std::string& name) {
    auto ends = [&](const char* suffix) {
        size_t n = std::strlen(suffix);
        return name.size() >= n && name.compare(name.size() - n, n, suffix) == 0;
    };
    // Q/K and the LM head scale with 1/sqrt(n_embd) so that attention scores and logits have the
    // same spread at every width (the fixtures' values at n_embd 512: 0.06 and 0.05).
    const double width = std::sqrt(512.0 / s.n_embd);
    if (ends("_norm.weight")) return 0.1;
    if (name == "token_embd.weight") return is_qwen2(s) || s.tied_output || is_gemma(s) ? 0.05 * width : 0.02;
    if (name == "output.weight") return is_qwen2(s) ? 0.0 : 0.05 * width;
    if (ends("attn_q.weight") || ends("attn_k.weight") || ends("attn_qkv.weight")) return 0.06 * width;
    if (ends("attn_q.bias") || ends("attn_k.bias")) return is_qwen2(s) ? 0.1 : 0.0;
    if (ends("attn_v.bias")) return is_qwen2(s) ? 0.02 : 0.0;
    // Output biases about the size of what they are added to, so that leaving one out shows.
    if (s.out_biases && (ends("attn_output.bias") || ends("ffn_down.bias"))) return 0.02;
    if (s.out_biases && (ends("ffn_gate.bias") || ends("ffn_up.bias"))) return 0.05;
    if (s.out_biases && name == "output.bias") return 0.5;
    // Scales around 1 (drawn in generate_values), so each product keeps its size.
    if (s.weight_scales && (ends(".scale") || ends(".input_scale"))) return 0.3;
    if (ends("attn_v.weight") || ends("attn_output.weight") || ends("ffn_gate.weight") || ends("ffn_up.weight") ||
        ends("ffn_down.weight"))
        return 0.02;
    // The router 0.1, experts 0.02 (the fixtures' deepseek2-mini).
    if (ends("ffn_gate_inp.weight")) return 0.1;
    if (ends("_exps.weight") || ends("_shexp.weight")) return 0.02;
    if (is_gpt_oss(s)) {
        // Biases about the size of what they are added to; sinks around the scores' size; the
        // experts' gate and up biases with outliers past the SwiGLU clamp of 7 (generate_values).
        if (ends("attn_q.bias") || ends("attn_k.bias")) return 0.1;
        if (ends("attn_v.bias") || ends("attn_output.bias") || ends("ffn_down_exps.bias")) return 0.02;
        if (ends("attn_sinks.weight")) return 1.0;
        if (ends("ffn_gate_inp.bias")) return 0.1;
        if (ends("ffn_gate_exps.bias") || ends("ffn_up_exps.bias")) return 0.05;
    }
    if (is_qwen35(s)) {
        // The DeltaNet's projections like attention's; conv taps about 1/sqrt(taps); the decay
        // gate's bias around 0 and A = -exp(N(0, 0.5)) (generate_values), so exp(g) spreads over (0, 1).
        if (ends("attn_gate.weight") || ends("ssm_out.weight")) return 0.02;
        if (ends("ssm_beta.weight") || ends("ssm_alpha.weight")) return 0.06 * width;
        if (ends("ssm_conv1d.weight")) return 0.3;
        if (ends("ssm_dt.bias")) return 0.5;
        if (ends("ssm_a")) return 0.5;
        if (ends("ffn_gate_inp_shexp.weight")) return 0.1;  // the shared expert's gate: sigmoid spread around 0.5
    }
    if (is_deepseek2(s)) {
        // The fixtures' deepseek2-mini: the query and key paths 0.06.
        if (ends("attn_q_a.weight") || ends("attn_q_b.weight") || ends("attn_kv_a_mqa.weight")) return 0.06 * width;
        if (ends("attn_k_b.weight") || ends("attn_v_b.weight") || ends("attn_kv_b.weight")) return 0.06;
        // A selection bias about the size of the differences between the router's probabilities.
        if (ends("exp_probs_b.bias")) return 0.05;
    }
    return 0.0;
}

namespace {

std::vector<float> generate_values(const MakeModelSpec& s, const PlannedTensor& t) {
    if (t.name == "rope_factors_short.weight" || t.name == "rope_factors_long.weight") {
        // Phi-3's factors rise with the pair (slower rotations stretched more): short ones up to
        // about 1.1, long ones up to about 50 (Phi-3.5-mini's range).
        const bool long_set = t.name == "rope_factors_long.weight";
        std::vector<float> v(static_cast<size_t>(n_elements(t)));
        for (size_t i = 0; i < v.size(); ++i) {
            const double ramp = static_cast<double>(i) / std::max<size_t>(1, v.size() - 1);
            v[i] = static_cast<float>(long_set ? 1.0 + 49.0 * ramp * ramp : 1.0 + 0.1 * ramp);
        }
        return v;
    }
    if (t.name == "rope_freqs.weight")
        return llama3_rope_freq_factors(head_dim_of(s), s.rope_freq_base > 0 ? s.rope_freq_base : 10000.0f,
                                        s.rope_freqs_factor, s.rope_freqs_low, s.rope_freqs_high, s.rope_freqs_orig_ctx);
    const int64_t n = n_elements(t);
    std::vector<float> v(static_cast<size_t>(n));
    Rng rng = tensor_rng(s.seed, t.name);
    double sd = make_model_tensor_std(s, t.name);
    // Norm weights and per-tensor scales lie around 1.
    const auto ends = [&](const std::string& tail) {
        return t.name.size() >= tail.size() && t.name.compare(t.name.size() - tail.size(), tail.size(), tail) == 0;
    };
    bool norm = ends("_norm.weight") || ends(".scale") || ends(".input_scale");
    // Value j is the stream's normal number j, whichever thread makes it.
    make_model_pool().parallel_for(n, 1 << 16, [&](int64_t b, int64_t e) {
        Rng chunk = rng.skip(static_cast<uint64_t>(b) * Rng::kDrawsPerNormal);
        for (int64_t j = b; j < e; ++j) {
            const double z = chunk.normal();
            v[static_cast<size_t>(j)] = norm ? static_cast<float>(std::clamp(1.0 + sd * z, 0.5, 1.5)) : static_cast<float>(sd * z);
        }
    });
    rng = rng.skip(static_cast<uint64_t>(n) * Rng::kDrawsPerNormal);
    if (is_qwen35(s) && ends("ssm_a"))
        for (float& x : v) x = -std::exp(x);  // -exp(A_log), as the converter stores it
    if ((t.name == "token_embd.weight" || t.name == "output.weight") && t.ne[1] > s.vocab) {
        // Padding rows stay small, like rows no token ever trained.
        for (int64_t r = s.vocab; r < t.ne[1]; ++r)
            for (int64_t c = 0; c < t.ne[0]; ++c) v[static_cast<size_t>(r * t.ne[0] + c)] *= 0.1f;
    }
    auto outliers = [&](int count, double lo, double hi) {
        // Large bias entries like real Qwen2.5's: they are added before RoPE, so positions matter.
        std::unordered_set<int64_t> used;
        for (int k = 0; k < count && static_cast<int64_t>(used.size()) < n; ++k) {
            int64_t idx = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(n));
            if (!used.insert(idx).second) { --k; continue; }
            double mag = lo + (hi - lo) * rng.uniform();
            v[static_cast<size_t>(idx)] = static_cast<float>((rng.next() & 1) ? mag : -mag);
        }
    };
    if (is_qwen2(s) && t.name.find("attn_q.bias") != std::string::npos) outliers(std::min<int64_t>(8, n / 4), 3.0, 8.0);
    if (is_qwen2(s) && t.name.find("attn_k.bias") != std::string::npos) outliers(std::min<int64_t>(6, n / 4), 8.0, 12.0);
    // A few gate and up values beyond gpt-oss's clamp (7), so the clamp shows.
    if (is_gpt_oss(s) && (t.name.find("ffn_gate_exps.bias") != std::string::npos ||
                          t.name.find("ffn_up_exps.bias") != std::string::npos))
        outliers(std::min<int64_t>(16, n / 4), 7.5, 10.0);
    return v;
}

// The type a tensor is meant to have before any fallback: 1-D ones and the MoE router F32 (as
// convert_hf_to_gguf and llama-quantize keep them), the rest the requested type; MXFP4 as
// llama-quantize's MXFP4_MOE: tensors with more than one matrix (the experts') MXFP4, the other
// matrices Q8_0; NVFP4 as ModelOpt conversions: token_embd F16, every other matrix NVFP4.
GgmlType recipe_type(const MakeModelSpec& s, const PlannedTensor& t) {
    const std::string router = "ffn_gate_inp.weight";
    if (t.ne.size() < 2) return GgmlType::F32;
    for (const auto& [name, type] : s.tensor_types)
        if (name == t.name) return type;
    if (t.name.size() >= 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0) return GgmlType::F32;  // gpt-oss's {n, E}
    // ggml's SSM_CONV reads f32 taps; llama-quantize keeps them so.
    if (t.name.size() >= 17 && t.name.compare(t.name.size() - 17, 17, "ssm_conv1d.weight") == 0) return GgmlType::F32;
    if (t.name.size() >= router.size() && t.name.compare(t.name.size() - router.size(), router.size(), router) == 0)
        return GgmlType::F32;
    if (s.type == GgmlType::MXFP4) return t.ne.size() >= 3 && t.ne[2] > 1 ? GgmlType::MXFP4 : GgmlType::Q8_0;
    if (s.type == GgmlType::NVFP4 && t.name == "token_embd.weight") return GgmlType::F16;
    return s.type;
}

// The stored type of a tensor: its recipe type or that type's fallback.
GgmlType stored_type(const MakeModelSpec& s, const PlannedTensor& t) {
    const GgmlType recipe = recipe_type(s, t);
    return recipe == GgmlType::F32 ? recipe : make_model_tensor_type(recipe, t.ne[0]);
}

// Everything but the token list's size goes into the file as make_model writes it.
std::vector<GgufKV> build_metadata(const MakeModelSpec& s, int64_t* n_tokens) {
    const bool qwen = is_qwen(s);
    const bool ds2 = is_deepseek2(s);
    const std::string a = s.arch;
    const int64_t rows = padded_rows(s);
    const int n_ctx_train = s.n_ctx_train > 0 ? s.n_ctx_train : (is_qwen3(s) ? 40960 : qwen ? 32768 : ds2 ? 163840 : 2048);
    const float freq_base = s.rope_freq_base > 0 ? s.rope_freq_base : (qwen ? 1000000.0f : 10000.0f);
    const float rms_eps = s.rms_eps > 0 ? s.rms_eps : (qwen || ds2 || is_gemma(s) ? 1e-6f : 1e-5f);
    const ModelConfig c = config_of(s);
    auto u32 = [](int64_t v) { return GgufValue::make_u32(static_cast<uint32_t>(v)); };

    std::vector<GgufKV> kv;
    auto put = [&](std::string key, GgufValue v) { kv.push_back({std::move(key), std::move(v)}); };
    put("general.architecture", GgufValue::make_string(a));
    put("general.name", GgufValue::make_string(fmt::format("layerscope-synthetic-{}", a)));
    put("general.description",
        GgufValue::make_string(fmt::format("synthetic random weights made by layerscope make-model (seed {}); not "
                                           "a trained model", s.seed)));
    put("general.file_type", GgufValue::make_u32(file_type_of(s.type)));
    if (s.type != GgmlType::F32 && s.type != GgmlType::F16 && s.type != GgmlType::BF16)
        put("general.quantization_version", GgufValue::make_u32(2));
    put(a + ".context_length", u32(n_ctx_train));
    put(a + ".embedding_length", u32(s.n_embd));
    put(a + ".block_count", u32(s.n_layer));
    put(a + ".feed_forward_length", u32(s.n_ff));
    put(a + ".attention.head_count", u32(s.n_head));
    put(a + ".attention.head_count_kv", u32(c.n_head_kv));
    put(a + ".rope.freq_base", GgufValue::make_f32(freq_base));
    put(a + ".attention.layer_norm_rms_epsilon", GgufValue::make_f32(rms_eps));
    // Real Qwen2.5 GGUFs omit rope.dimension_count (n_rot = head dim); llama files carry it.
    if (!qwen) put(a + ".rope.dimension_count", u32(c.n_rot));
    put(a + ".vocab_size", u32(rows));
    if (is_qwen35(s)) {
        // As convert_hf_to_gguf writes Qwen3.5: the rotated dims, the sections, the DeltaNet widths.
        put(a + ".rope.dimension_count", u32(c.n_rot));
        std::vector<GgufValue> sections;
        for (int v : s.rope_sections) sections.push_back(GgufValue::make_i32(v));
        put(a + ".rope.dimension_sections", GgufValue::make_array(GgufValueType::INT32, std::move(sections)));
        put(a + ".ssm.conv_kernel", u32(s.ssm_conv));
        put(a + ".ssm.state_size", u32(s.ssm_state));
        put(a + ".ssm.group_count", u32(s.ssm_k_heads));
        put(a + ".ssm.time_step_rank", u32(s.ssm_v_heads));
        put(a + ".ssm.inner_size", u32(c.ssm_d_inner));
        put(a + ".full_attention_interval", u32(s.full_attn_interval));
        if (is_qwen35moe(s)) {
            put(a + ".expert_count", u32(s.n_expert));
            put(a + ".expert_used_count", u32(s.n_expert_used));
            put(a + ".expert_feed_forward_length", u32(s.n_ff_expert));
            put(a + ".expert_shared_feed_forward_length", u32(s.n_ff));
        }
    }
    if (is_qwen3(s) || is_gemma(s) || is_qwen35(s)) {
        put(a + ".attention.key_length", u32(c.head_dim_k));
        put(a + ".attention.value_length", u32(c.head_dim_v));
    }
    if (is_gemma(s)) {
        if (s.n_swa > 0) put(a + ".attention.sliding_window", u32(s.n_swa));
        if (s.swa_pattern > 0) put(a + ".attention.sliding_window_pattern", u32(s.swa_pattern));
        if (s.rope_freq_base_swa > 0) put(a + ".rope.freq_base_swa", GgufValue::make_f32(s.rope_freq_base_swa));
        if (s.rope_linear_factor > 0) {
            put(a + ".rope.scaling.type", GgufValue::make_string("linear"));
            put(a + ".rope.scaling.factor", GgufValue::make_f32(s.rope_linear_factor));
        }
        if (s.arch == "gemma2") {
            put(a + ".attn_logit_softcapping", GgufValue::make_f32(s.attn_softcap > 0 ? s.attn_softcap : 50.0f));
            put(a + ".final_logit_softcapping", GgufValue::make_f32(s.final_softcap > 0 ? s.final_softcap : 30.0f));
        }
    }
    if (s.longrope) {
        // As convert_hf_to_gguf writes Phi-3's LongRoPE: the type, the original context and the
        // magnitude factor sqrt(1 + ln(scale) / ln(orig)) with scale = n_ctx_train / orig.
        const double scale = static_cast<double>(n_ctx_train) / s.longrope_orig_ctx;
        const double attn = scale <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.longrope_orig_ctx)));
        put(a + ".rope.scaling.type", GgufValue::make_string("longrope"));
        put(a + ".rope.scaling.attn_factor", GgufValue::make_f32(static_cast<float>(attn)));
        put(a + ".rope.scaling.original_context_length", u32(s.longrope_orig_ctx));
    }
    if (is_gpt_oss(s)) {
        // As convert_hf_to_gguf writes gpt-oss: heads of their own width, the window (the pattern
        // left to llama.cpp's default of every other layer), YaRN, the experts.
        put(a + ".attention.key_length", u32(c.head_dim_k));
        put(a + ".attention.value_length", u32(c.head_dim_v));
        put(a + ".attention.sliding_window", u32(s.n_swa));
        if (s.yarn_factor > 0) {
            put(a + ".rope.scaling.type", GgufValue::make_string("yarn"));
            put(a + ".rope.scaling.factor", GgufValue::make_f32(s.yarn_factor));
            put(a + ".rope.scaling.original_context_length", u32(s.yarn_orig_ctx));
        }
        put(a + ".expert_count", u32(s.n_expert));
        put(a + ".expert_used_count", u32(s.n_expert_used));
        put(a + ".expert_feed_forward_length", u32(s.n_ff_expert));
    }
    if (is_qwen3moe(s) || is_llama_moe(s)) {
        put(a + ".expert_count", u32(s.n_expert));
        put(a + ".expert_used_count", u32(s.n_expert_used));
        if (is_qwen3moe(s)) put(a + ".expert_feed_forward_length", u32(s.n_ff_expert));
    }
    if (ds2) {
        // What llama.cpp's deepseek2 loader reads. Required there: layer_norm_rms_epsilon,
        // kv_lora_rank, expert_feed_forward_length, expert_shared_count and, unless the depth
        // makes it a Lite model, q_lora_rank (written always: 0 = no q compression).
        put(a + ".attention.q_lora_rank", u32(s.q_lora_rank));
        put(a + ".attention.kv_lora_rank", u32(s.kv_lora_rank));
        put(a + ".attention.key_length", u32(c.head_dim_k));
        put(a + ".attention.value_length", u32(c.head_dim_v));
        if (c.mla_split) {
            put(a + ".attention.key_length_mla", u32(c.head_dim_k_mla));
            put(a + ".attention.value_length_mla", u32(c.head_dim_v_mla));
        }
        put(a + ".leading_dense_block_count", u32(s.n_dense_lead));
        put(a + ".expert_count", u32(s.n_expert));
        put(a + ".expert_used_count", u32(s.n_expert_used));
        put(a + ".expert_shared_count", u32(s.n_expert_shared));
        put(a + ".expert_feed_forward_length", u32(s.n_ff_expert));
        put(a + ".expert_group_count", u32(s.n_expert_groups));
        put(a + ".expert_group_used_count", u32(s.n_expert_groups_used));
        put(a + ".expert_gating_func", u32(s.expert_gating_func));
        put(a + ".expert_weights_scale", GgufValue::make_f32(s.expert_weights_scale));
        put(a + ".expert_weights_norm", GgufValue::make_bool(s.expert_weights_norm));
        if (s.yarn_factor > 0) {
            put(a + ".rope.scaling.type", GgufValue::make_string("yarn"));
            put(a + ".rope.scaling.factor", GgufValue::make_f32(s.yarn_factor));
            put(a + ".rope.scaling.original_context_length", u32(s.yarn_orig_ctx));
            put(a + ".rope.scaling.yarn_log_multiplier", GgufValue::make_f32(s.yarn_log_multiplier));
        }
    }

    MakeModelVocab vocab = make_model_vocab(s.vocab, static_cast<int>(rows));
    if (is_phi3(s)) {
        // llama.cpp's vocabulary loader sets attributes of <|endoftext|> for every model named
        // phi3 (and throws without it), as real Phi-3 vocabularies have it: the last real token.
        vocab.tokens[static_cast<size_t>(s.vocab - 1)] = "<|endoftext|>";
        vocab.types[static_cast<size_t>(s.vocab - 1)] = 3;
        vocab.scores[static_cast<size_t>(s.vocab - 1)] = 0.0f;
    }
    *n_tokens = static_cast<int64_t>(vocab.tokens.size());
    std::vector<GgufValue> scores, types;
    scores.reserve(vocab.scores.size());
    types.reserve(vocab.types.size());
    for (float f : vocab.scores) scores.push_back(GgufValue::make_f32(f));
    for (int32_t t : vocab.types) types.push_back(GgufValue::make_i32(t));
    put("tokenizer.ggml.model", GgufValue::make_string("llama"));
    put("tokenizer.ggml.tokens", GgufValue::make_string_array(std::move(vocab.tokens)));
    put("tokenizer.ggml.scores", GgufValue::make_array(GgufValueType::FLOAT32, std::move(scores)));
    put("tokenizer.ggml.token_type", GgufValue::make_array(GgufValueType::INT32, std::move(types)));
    put("tokenizer.ggml.bos_token_id", GgufValue::make_u32(1));
    put("tokenizer.ggml.eos_token_id", GgufValue::make_u32(2));
    put("tokenizer.ggml.unknown_token_id", GgufValue::make_u32(0));
    put("tokenizer.ggml.padding_token_id", GgufValue::make_u32(2));
    put("tokenizer.ggml.add_bos_token", GgufValue::make_bool(true));
    put("tokenizer.ggml.add_eos_token", GgufValue::make_bool(false));
    return kv;
}

// Makes one tensor's stored bytes at `out` (row_bytes x rows of its type).
Status make_tensor_bytes(const MakeModelSpec& s, const PlannedTensor& t, GgmlType type, uint8_t* out) {
    std::vector<float> values = generate_values(s, t);
    const int64_t ne0 = t.ne[0];
    const int64_t n_rows = static_cast<int64_t>(values.size()) / ne0;
    switch (type) {
        case GgmlType::F32:
            std::memcpy(out, values.data(), values.size() * sizeof(float));
            break;
        case GgmlType::F16:
            fp32_to_fp16_row(values.data(), reinterpret_cast<uint16_t*>(out), static_cast<int64_t>(values.size()));
            break;
        case GgmlType::BF16:
            fp32_to_bf16_row(values.data(), reinterpret_cast<uint16_t*>(out), static_cast<int64_t>(values.size()));
            break;
        default: {
            // Rows are quantized independently: in parallel, chunks of whole rows.
            uint64_t row_bytes = 0;
            if (!ggml_row_bytes(type, ne0, &row_bytes))
                return make_error(ErrorCode::kInternal, fmt::format("{}: cannot quantize to {}", t.name, ggml_type_name(type)));
            std::atomic<bool> ok{true};
            make_model_pool().parallel_for(n_rows, std::max<int64_t>(1, 4096 / ne0), [&](int64_t b, int64_t e) {
                if (!quantize_rows(type, values.data() + b * ne0, out + static_cast<uint64_t>(b) * row_bytes, e - b, ne0))
                    ok = false;
            });
            if (!ok)
                return make_error(ErrorCode::kInternal, fmt::format("{}: cannot quantize to {}", t.name, ggml_type_name(type)));
        }
    }
    return {};
}

}  // namespace

Result<std::vector<GgufKV>> make_model_metadata(const MakeModelSpec& s) {
    if (Status st = validate_make_model_spec(s); !st) return st.error();
    int64_t n_tokens = 0;
    return build_metadata(s, &n_tokens);
}

Result<int64_t> make_model_param_count(const MakeModelSpec& s) {
    if (Status st = validate_make_model_spec(s); !st) return st.error();
    int64_t n = 0;
    for (const PlannedTensor& t : plan_tensors(s)) n += n_elements(t);
    return n;
}

Status make_model(const MakeModelSpec& s, const std::string& path, MakeModelInfo* info, bool overwrite) {
    const std::lock_guard<std::mutex> lock(make_model_mutex());  // one model at a time on the shared pool
    Status st = validate_make_model_spec(s);
    if (!st.ok()) return st;
    // Refused before the weights are made, not after.
    if (st = check_file_target(path, overwrite); !st.ok()) return st;

    MakeModelInfo local;
    MakeModelInfo& inf = info ? *info : local;
    inf = MakeModelInfo{};
    const std::vector<GgufKV> kv = build_metadata(s, &inf.n_tokens);

    const std::vector<PlannedTensor> plan = plan_tensors(s);
    std::vector<GgufWriteTensor> tensors;
    tensors.reserve(plan.size());
    for (const PlannedTensor& t : plan) {
        inf.n_params += n_elements(t);
        const int64_t ne0 = t.ne[0];
        const GgmlType type = stored_type(s, t);
        const GgmlType recipe = recipe_type(s, t);
        if (type != recipe)
            inf.fallbacks.push_back(fmt::format("{}: {} (rows of {} are not a multiple of {}'s block of {})",
                                                t.name, ggml_type_name(type), ne0, ggml_type_name(recipe),
                                                ggml_type_traits(recipe)->block_elems));
        uint64_t row_bytes = 0;
        if (!ggml_row_bytes(type, ne0, &row_bytes))
            return make_error(ErrorCode::kInternal, fmt::format("{}: no row size for {} x {}", t.name,
                                                                ggml_type_name(type), ne0));
        GgufWriteTensor w;
        w.name = t.name;
        w.type = type;
        w.ne = t.ne;
        w.n_bytes = row_bytes * static_cast<uint64_t>(n_elements(t) / ne0);
        tensors.push_back(std::move(w));
    }
    st = gguf_write_streamed(
        path, kv, tensors,
        [&](size_t i, uint8_t* out) { return make_tensor_bytes(s, plan[i], tensors[i].type, out); }, 32, overwrite);
    if (!st.ok()) return st;
    std::error_code ec;
    const uintmax_t total = std::filesystem::file_size(path, ec);
    inf.file_bytes = ec ? 0 : static_cast<uint64_t>(total);
    return {};
}

}  // namespace ls
