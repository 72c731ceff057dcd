// Tokenizers: small hand-built vocabularies (no fixtures needed), then llama.cpp's own test
// vectors for six real vocabularies, the llama-tokenize logs and the prompts of the dumps.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/gguf/gguf.h"
#include "tests/test_support.h"
#include "engine/tokenizer/pretokenize.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/unicode_text.h"

namespace ls {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string ids_to_string(const std::vector<TokenId>& ids) {
    std::string s;
    for (TokenId id : ids) s += (s.empty() ? "" : " ") + std::to_string(id);
    return s;
}

// Writes `metadata` as a tensor-less GGUF and loads its tokenizer.
Result<Tokenizer> tokenizer_from_metadata(const std::vector<GgufKV>& metadata) {
    const std::string path = test::make_temp_dir() + "/vocab.gguf";
    Status st = gguf_write(path, metadata, {});
    if (!st.ok()) return st.error();
    auto file = GgufFile::open(path);
    if (!file.ok()) return file.error();
    return Tokenizer::from_gguf(*file.value());
}

GgufValue int_array(const std::vector<int32_t>& v) {
    std::vector<GgufValue> items;
    for (int32_t x : v) items.push_back(GgufValue::make_i32(x));
    return GgufValue::make_array(GgufValueType::INT32, std::move(items));
}

GgufValue float_array(const std::vector<float>& v) {
    std::vector<GgufValue> items;
    for (float x : v) items.push_back(GgufValue::make_f32(x));
    return GgufValue::make_array(GgufValueType::FLOAT32, std::move(items));
}

// The words a pre-tokenizer cuts `text` into, as plain UTF-8 (back from the byte-level alphabet).
std::vector<std::string> words(const char* pre, const std::string& text) {
    auto p = PreTokenizer::for_name(pre);
    EXPECT_TRUE(p.ok()) << pre << ": " << (p.ok() ? "" : p.error().message);
    if (!p.ok()) return {};
    std::vector<std::string> out;
    for (const std::string& w : p->words(text)) {
        if (!p->byte_encode()) {
            out.push_back(w);
            continue;
        }
        std::string bytes;
        for (uint32_t cp : unicode::decode_utf8(w)) bytes.push_back(static_cast<char>(unicode::symbol_to_byte(cp)));
        out.push_back(bytes);
    }
    return out;
}

TEST(TokenizerUnit, ByteAlphabetIsABijection) {
    std::map<std::string, int> seen;
    for (int b = 0; b < 256; ++b) {
        const std::string& s = unicode::byte_to_symbol(static_cast<uint8_t>(b));
        const auto cps = unicode::decode_utf8(s);
        ASSERT_EQ(cps.size(), 1u);
        EXPECT_EQ(unicode::symbol_to_byte(cps[0]), b);
        seen[s] = b;
    }
    EXPECT_EQ(seen.size(), 256u);
    EXPECT_EQ(unicode::byte_to_symbol(' '), "\xC4\xA0");  // 'Ġ'
    EXPECT_EQ(unicode::byte_to_symbol('\n'), "\xC4\x8A");  // 'Ċ'
}

TEST(TokenizerUnit, BrokenUtf8BecomesReplacementCharacters) {
    const auto cps = unicode::decode_utf8("a\xC3\x28\xE2\x82\xAC\xFF");
    EXPECT_EQ(cps, (std::vector<uint32_t>{'a', 0xFFFD, '(', 0x20AC, 0xFFFD}));
}

TEST(TokenizerUnit, PreTokenizerPatterns) {
    EXPECT_EQ(words("llama-bpe", "Hello, y'all! 1234567  x\n\n y"),
              (std::vector<std::string>{"Hello", ",", " y", "'all", "!", " ", "123", "456", "7", " ", " x", "\n\n",
                                        " y"}));
    EXPECT_EQ(words("qwen2", "ab 123"), (std::vector<std::string>{"ab", " ", "1", "2", "3"}));
    EXPECT_EQ(words("gpt-2", "Hello, y'all! 1234   x"),
              (std::vector<std::string>{"Hello", ",", " y", "'", "all", "!", " 1234", "  ", " x"}));
    EXPECT_EQ(words("deepseek-llm", "Hi!\n\nA 12 \xE4\xBD\xA0\xE5\xA5\xBD  "),
              (std::vector<std::string>{"Hi", "!", "\n", "\n", "A", " ", "12", " ",
                                        "\xE4\xBD\xA0\xE5\xA5\xBD", "  "}));
}

// A five-symbol byte-level BPE vocabulary: the whole pipeline without fixtures.
TEST(TokenizerUnit, TinyBytelevelBpe) {
    const std::string G = "\xC4\xA0";  // the byte-level symbol of ' '
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("gpt2")},
        {"tokenizer.ggml.pre", GgufValue::make_string("gpt-2")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b", "c", G, "ab", "abc", G + "ab", "<|end|>"})},
        {"tokenizer.ggml.token_type", int_array({1, 1, 1, 1, 1, 1, 1, 3})},
        {"tokenizer.ggml.merges", GgufValue::make_string_array({"a b", "ab c", G + " ab"})},
        {"tokenizer.ggml.eos_token_id", GgufValue::make_u32(7)},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    EXPECT_EQ(t.kind(), TokenizerKind::kBpe);
    EXPECT_EQ(t.encode("abc ab cab", false, false), (std::vector<TokenId>{5, 6, 3, 2, 4}));
    // CONTROL tokens are text unless parse_special; "<|end|>" is also detected as end of turn.
    EXPECT_EQ(t.encode("a<|end|>", false, true), (std::vector<TokenId>{0, 7}));
    EXPECT_NE(t.encode("a<|end|>", false, false).back(), 7);
    EXPECT_TRUE(t.is_eog(7));
    EXPECT_EQ(t.decode({5, 6, 7}), "abc ab<|end|>");
    EXPECT_EQ(t.decode({5, 6, 7}, false, false), "abc ab");
}

// A SentencePiece vocabulary: merges by score, U+2581 for spaces, byte fallback, BOS.
TEST(TokenizerUnit, TinySentencePiece) {
    const std::string S = "\xE2\x96\x81";  // U+2581
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("llama")},
        {"tokenizer.ggml.tokens",
         GgufValue::make_string_array({"<unk>", "<s>", "</s>", "<0x63>", S, "a", "b", S + "a", "ab", S + "ab"})},
        {"tokenizer.ggml.scores", float_array({0, 0, 0, 0, -1, -1, -1, -3, -2, -1})},
        {"tokenizer.ggml.token_type", int_array({2, 3, 3, 6, 1, 1, 1, 1, 1, 1})},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    // "▁ab": "ab" (-2) beats "▁a" (-3), then "▁ab" (-1); 'c' is not a token: byte fallback.
    EXPECT_EQ(t.encode("ab c", true, false), (std::vector<TokenId>{1, 9, 4, 3}));
    EXPECT_EQ(t.encode("", true, false), (std::vector<TokenId>{1}));
    EXPECT_EQ(t.decode({1, 9, 4, 3}), "<s> ab c");
    EXPECT_EQ(t.decode({9, 4, 3}), "ab c");  // the space SPM added is removed again
    EXPECT_EQ(t.newline(), kNoToken);
}

// Lookups by text: every entry finds its own id (the empty one under llama.cpp's stand-in name),
// texts that are no entry find nothing, and a text given twice is refused.
TEST(TokenizerUnit, FindsEveryTokenByItsText) {
    std::vector<std::string> texts = {"<unk>", "<s>", "</s>", "", "a", "ab", "abc", "b", std::string("x\0y", 3)};
    for (int k = 0; k < 300; ++k) texts.push_back("t" + std::to_string(k));  // enough to collide in the table
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("llama")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array(texts)},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    ASSERT_EQ(t.n_tokens(), texts.size());
    for (size_t id = 0; id < t.n_tokens(); ++id) EXPECT_EQ(t.find(t.token(static_cast<TokenId>(id)).text), static_cast<TokenId>(id));
    EXPECT_EQ(t.token(3).text, "[EMPTY_3]");
    EXPECT_EQ(t.find(""), kNoToken);
    EXPECT_EQ(t.find("x"), kNoToken);
    EXPECT_EQ(t.find("abcd"), kNoToken);
    EXPECT_EQ(t.find("t300"), kNoToken);
    EXPECT_EQ(t.find(std::string("x\0y", 3)), 8);
    EXPECT_EQ(Tokenizer().find("a"), kNoToken);  // an empty tokenizer has no entries

    texts.push_back("ab");
    md[1].value = GgufValue::make_string_array(texts);
    auto dup = tokenizer_from_metadata(md);
    ASSERT_FALSE(dup.ok());
    EXPECT_NE(dup.error().message.find("duplicate token \"ab\" at index " + std::to_string(texts.size() - 1)),
              std::string::npos)
        << dup.error().message;
}

// Turn ends are recognized by their texts whatever their type: of several EOT candidates the
// lowest id is EOT, each known end-of-generation text ends generation, and all become CONTROL.
TEST(TokenizerUnit, TurnEndsAreFoundByText) {
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("llama")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"<unk>", "<s>", "</s>", "a", "<|im_end|>",
                                                                 "<|eom_id|>", "<|eot_id|>", "[EOT]", "<|endoftext|>"})},
        {"tokenizer.ggml.token_type", int_array({2, 3, 3, 1, 1, 1, 1, 1, 1})},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    EXPECT_EQ(t.eot(), 4);  // "<|im_end|>" comes before "<|eot_id|>"
    EXPECT_EQ(t.eom(), 5);
    EXPECT_EQ(t.eog_ids(), (std::vector<TokenId>{2, 4, 5, 6, 8}));  // "[EOT]" is an EOT text only
    for (TokenId id : {4, 5, 6, 8}) EXPECT_TRUE(t.is_control(id)) << id;
    EXPECT_FALSE(t.is_control(7));  // not the chosen EOT
    EXPECT_FALSE(t.is_control(3));

    // An EOT id in the metadata wins; the texts still end generation.
    md.push_back({"tokenizer.ggml.eot_token_id", GgufValue::make_u32(7)});
    auto with_id = tokenizer_from_metadata(md);
    ASSERT_TRUE(with_id.ok()) << with_id.error().message;
    EXPECT_EQ(with_id.value().eot(), 7);
    EXPECT_EQ(with_id.value().eog_ids(), (std::vector<TokenId>{2, 4, 5, 6, 7, 8}));
    EXPECT_FALSE(with_id.value().is_control(7));  // typed NORMAL in the file, and not an EOG text
}

// Gemma 4's SentencePiece-style BPE: spaces become U+2581 before the merges, words are raw
// UTF-8 cut only at newline runs, a run of newlines that is a token is taken whole, bytes fall
// back to <0xXX>, and BOS is added even where the file says not to.
TEST(TokenizerUnit, Gemma4StyleBpe) {
    const std::string S = "\xE2\x96\x81";
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("gemma4")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"<pad>", "<eos>", "<bos>", "<0x7A>", "a", "b", S,
                                                                S + "a", "ab", S + "ab", "\n", "\n\n"})},
        {"tokenizer.ggml.token_type", int_array({3, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1})},
        {"tokenizer.ggml.merges", GgufValue::make_string_array({S + " a", "a b", S + "a b"})},
        {"tokenizer.ggml.bos_token_id", GgufValue::make_u32(2)},
        {"tokenizer.ggml.eos_token_id", GgufValue::make_u32(1)},
        {"tokenizer.ggml.add_bos_token", GgufValue::make_bool(false)},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    EXPECT_EQ(t.pre_name(), "gemma4");
    EXPECT_TRUE(t.add_bos());
    EXPECT_EQ(t.encode("ab ab\n\nz", true, false), (std::vector<TokenId>{2, 8, 9, 11, 3}));
    EXPECT_EQ(t.encode("\n", false, false), (std::vector<TokenId>{10}));
    EXPECT_EQ(t.decode({8, 9, 11, 3}), "ab ab\n\nz");
}

// RWKV: the longest entry at each byte, entries written with \n, \xHH and \<char> escapes, no
// BOS even when asked for special tokens.
TEST(TokenizerUnit, RwkvGreedyMatch) {
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("rwkv")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"<s>", "a", "b", "ab", "abc", "\\n", "\\x41", "x\\\\y", "qr"})},
        {"tokenizer.ggml.token_type", int_array({3, 1, 1, 1, 1, 1, 1, 1, 1})},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    EXPECT_EQ(t.kind(), TokenizerKind::kRwkv);
    EXPECT_EQ(t.encode("abcab\nAx\\y", true, false), (std::vector<TokenId>{4, 3, 5, 6, 7}));
    EXPECT_EQ(t.encode("abd", false, false), (std::vector<TokenId>{3}));  // 'd' starts nothing: no unknown token
    EXPECT_EQ(t.encode("qz", false, false), (std::vector<TokenId>{}));   // 'q' starts only "qr"
    EXPECT_EQ(t.encode("a<s>b", false, true), (std::vector<TokenId>{1, 0, 2}));
    EXPECT_EQ(t.decode({4, 5, 6, 7}), "abc\nAx\\y");
}

// PLaMo-2: the pieces whose scores add up best (here "a" + "bc" beats "abc", "ab" + "c" and
// three singles), byte tokens for what no piece covers, no BOS.
TEST(TokenizerUnit, Plamo2BestScoringPieces) {
    std::vector<std::string> texts = {"<|plamo:unk|>", "<|plamo:bos|>", "<|plamo:eos|>", "<|plamo:pad|>"};
    std::vector<int32_t> types = {2, 3, 3, 3};
    std::vector<float> scores = {0, 0, 0, 0};
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        texts.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        types.push_back(6);
        scores.push_back(0);
    }
    const std::pair<const char*, float> pieces[] = {{"a", -1}, {"b", -1}, {"c", -1}, {"ab", -1.5f}, {"bc", -1.2f}, {"abc", -4}};
    for (const auto& [text, score] : pieces) {
        texts.push_back(text);
        types.push_back(1);
        scores.push_back(score);
    }
    auto tok = tokenizer_from_metadata({
        {"tokenizer.ggml.model", GgufValue::make_string("plamo2")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array(texts)},
        {"tokenizer.ggml.token_type", int_array(types)},
        {"tokenizer.ggml.scores", float_array(scores)},
    });
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    const TokenId a = 260, ab = 263, bc = 264;
    EXPECT_EQ(t.encode("abc", true, false), (std::vector<TokenId>{a, bc}));
    EXPECT_EQ(t.encode("abd", false, false), (std::vector<TokenId>{ab, 4 + 'd'}));
    EXPECT_EQ(t.encode("\xC3\xA9", false, false), (std::vector<TokenId>{4 + 0xC3, 4 + 0xA9}));
    EXPECT_EQ(t.decode({a, bc, 4 + 'd'}), "abcd");
    texts.pop_back();  // without "abc" the best cut of "abc" stays "a" + "bc"
    texts[4] = "x";    // and without <0x00> PLaMo-2 refuses the vocabulary
    auto bad = tokenizer_from_metadata({
        {"tokenizer.ggml.model", GgufValue::make_string("plamo2")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array(texts)},
        {"tokenizer.ggml.token_type", int_array(std::vector<int32_t>(types.begin(), types.end() - 1))},
        {"tokenizer.ggml.scores", float_array(std::vector<float>(scores.begin(), scores.end() - 1))},
    });
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("<0x00> is missing"), std::string::npos) << bad.error().message;
}

// HybriDNA: BPE outside <dna>...</dna>, 6-mers of upper-cased bases inside (the last padded
// with 'A', unknown ones <oov>), each k-mer stored with a U+E000 mark that decoding drops.
TEST(TokenizerUnit, HybridnaKmers) {
    const std::string mark = "\xEE\x80\x80";
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("hybriddna")},
        {"tokenizer.ggml.pre", GgufValue::make_string("gpt-2")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b", "ab", "<dna>", "</dna>", "<oov>", "ACGTAC" + mark,
                                                                "GGGAAA" + mark, "c", "d", "e", "f"})},
        {"tokenizer.ggml.merges", GgufValue::make_string_array({"a b"})},
    };
    auto tok = tokenizer_from_metadata(md);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();
    EXPECT_EQ(t.encode("ab<dna>acgtacggg</dna>ab", false, false), (std::vector<TokenId>{2, 3, 6, 7, 4, 2}));
    EXPECT_EQ(t.encode("<dna>TTTTTT", false, false), (std::vector<TokenId>{3, 5}));
    EXPECT_EQ(t.decode({3, 6, 7, 4}), "<dna>ACGTACGGGAAA</dna>");
}

// Kimi-K2 ships no merges (llama.cpp accepts that for it alone); chatglm has no default BOS.
TEST(TokenizerUnit, PreTokenizerFlags) {
    auto vocab = [](const char* pre, bool with_merges) {
        std::vector<GgufKV> md = {
            {"tokenizer.ggml.model", GgufValue::make_string("gpt2")},
            {"tokenizer.ggml.pre", GgufValue::make_string(pre)},
            {"tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b", "ab", "c", "d", "e", "f", "g", "h", "i", "j", "k"})},
        };
        if (with_merges) md.push_back({"tokenizer.ggml.merges", GgufValue::make_string_array({"a b"})});
        return tokenizer_from_metadata(md);
    };
    auto kimi = vocab("kimi-k2", false);
    ASSERT_TRUE(kimi.ok()) << kimi.error().message;
    EXPECT_EQ(kimi->encode("ab", false, false), (std::vector<TokenId>{0, 1}));
    auto qwen = vocab("qwen2", false);
    ASSERT_FALSE(qwen.ok());
    EXPECT_NE(qwen.error().message.find("tokenizer.ggml.merges"), std::string::npos);
    auto glm = vocab("chatglm-bpe", true);
    ASSERT_TRUE(glm.ok());
    EXPECT_EQ(glm->bos(), kNoToken);  // the default of other BPE vocabularies (11) is not used
    EXPECT_EQ(vocab("gpt-2", true)->bos(), 11);
    EXPECT_EQ(glm->encode("ab", true, false), (std::vector<TokenId>{2}));
}

// layerscope tokenize: llama-tokenize's output forms, --json, --against, and its errors.
TEST(TokenizeCommand, OutputsAndErrors) {
    const std::string G = "\xC4\xA0";
    std::vector<GgufKV> md = {
        {"tokenizer.ggml.model", GgufValue::make_string("gpt2")},
        {"tokenizer.ggml.pre", GgufValue::make_string("llama-bpe")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b", "c", G, "ab", "abc", G + "ab", "<|begin|>", "\xC4\x8A"})},
        {"tokenizer.ggml.token_type", int_array({1, 1, 1, 1, 1, 1, 1, 3, 1})},
        {"tokenizer.ggml.merges", GgufValue::make_string_array({"a b", "ab c", G + " ab"})},
        {"tokenizer.ggml.bos_token_id", GgufValue::make_u32(7)},
    };
    const std::string dir = test::make_temp_dir();
    const std::string vocab = dir + "/vocab.gguf";
    ASSERT_TRUE(gguf_write(vocab, md, {}).ok());
    const std::string m = " -m '" + vocab + "'";

    auto r = test::run_layerscope("tokenize" + m + " -p 'abc ab' --ids");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, "[7, 5, 6]\n");  // llama-bpe adds BOS
    r = test::run_layerscope("tokenize" + m + " -p 'abc ab' --ids --no-bos --show-count");
    EXPECT_EQ(r.out, "[5, 6]\nTotal number of tokens: 2\n");
    r = test::run_layerscope("tokenize" + m + " -p 'c\\nab' --no-bos");  // \n processed, as llama-tokenize does
    EXPECT_EQ(r.out, "     2 -> 'c'\n     8 -> '\n'\n     4 -> 'ab'\n");
    r = test::run_layerscope("tokenize" + m + " -p 'c\\nab' --no-bos --no-escape --ids");
    EXPECT_NE(r.out, "[2, 8, 4]\n");

    const std::string text = dir + "/text.txt";
    { std::ofstream(text) << "ab<|begin|>c"; }
    r = test::run_layerscope("tokenize" + m + " -f '" + text + "' --ids --no-bos");
    EXPECT_EQ(r.out, "[4, 7, 2]\n");
    r = test::run_layerscope("tokenize" + m + " -f '" + text + "' --ids --no-bos --no-parse-special");
    EXPECT_NE(r.out.find("[4, "), std::string::npos);
    EXPECT_EQ(r.out.find(" 7,"), std::string::npos);

    r = test::run_layerscope("tokenize" + m + " -p ' abc' --json");
    ASSERT_EQ(r.exit_code, 0);
    auto j = nlohmann::json::parse(r.out);
    ASSERT_EQ(j["tokens"].size(), 3u);
    EXPECT_EQ(j["tokens"][0]["id"], 7);
    EXPECT_TRUE(j["tokens"][0]["special"].get<bool>());
    EXPECT_TRUE(j["tokens"][0]["offset"].is_null());  // BOS is not in the text
    EXPECT_EQ(j["tokens"][1]["piece"], " ");
    EXPECT_EQ(j["tokens"][1]["offset"], 0);
    EXPECT_EQ(j["tokens"][2]["offset"], 1);

    r = test::run_layerscope("tokenize" + m + " -p 'abc ab' --against '[7, 5, 6]'");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out, "same 3 tokens\n");
    const std::string theirs = dir + "/theirs.txt";
    { std::ofstream(theirs) << "7 5 3 4\n"; }
    r = test::run_layerscope("tokenize" + m + " -p 'abc ab' --against '" + theirs + "'");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("first difference at token 2 (of 3 here, 4 there)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\" ab\""), std::string::npos) << r.out;

    // Chat templates: a Jinja file, a conversation, template variables; errors name file and line.
    const std::string tmpl = dir + "/chat.jinja";
    { std::ofstream(tmpl) << "{% for m in messages %}<|begin|>{{ m.role }}:{{ m.content }}\n{% endfor %}"
                             "{% if add_generation_prompt %}<|begin|>assistant:{% endif %}"
                             "{% if enable_thinking is false %}c{% endif %}"; }
    const std::string conv = dir + "/conv.json";
    { std::ofstream(conv) << R"([{"role": "user", "content": "ab"}, {"role": "assistant", "content": "c"}])"; }
    r = test::run_layerscope("tokenize" + m + " --chat-template-file '" + tmpl + "' --messages '" + conv + "' --json --no-bos");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"], "<|begin|>user:ab\n<|begin|>assistant:c\n<|begin|>assistant:");
    r = test::run_layerscope("tokenize" + m + " --chat --chat-template-file '" + tmpl + "' -p ab --json --no-bos "
                             "--chat-template-kwargs '{\"enable_thinking\": false}'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"], "<|begin|>user:ab\n<|begin|>assistant:c");
    const std::string broken = dir + "/broken.jinja";
    { std::ofstream(broken) << "ok\n{% for m in messages %}{{ m.content | nope }}{% endfor %}"; }
    r = test::run_layerscope("tokenize" + m + " --chat --chat-template-file '" + broken + "' -p ab", true);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.out.find("broken.jinja: chat template line 2: unknown filter 'nope'"), std::string::npos) << r.out;
    { std::ofstream(broken) << "{% if x %}"; }
    r = test::run_layerscope("tokenize" + m + " --chat --chat-template-file '" + broken + "' -p ab", true);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.out.find("{% endif %} missing"), std::string::npos) << r.out;
    r = test::run_layerscope("tokenize" + m + " --chat -p ab", true);  // the vocabulary has no template
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.out.find("no tokenizer.chat_template"), std::string::npos) << r.out;
    EXPECT_EQ(test::run_layerscope("tokenize" + m + " --chat -p ab --chat-template chatml --ids").exit_code, 0);
    EXPECT_EQ(test::run_layerscope("tokenize" + m + " --chat -p ab --chat-template-kwargs '[1]'").exit_code, 2);
    { std::ofstream(conv) << R"([{"content": "no role"}])"; }
    EXPECT_EQ(test::run_layerscope("tokenize" + m + " --chat-template-file '" + tmpl + "' --messages '" + conv + "'").exit_code, 3);

    // With tools, the file's tool-use template (tokenizer.chat_template.tool_use) is the one used.
    std::vector<GgufKV> md2 = md;
    md2.push_back({"tokenizer.chat_template", GgufValue::make_string("plain:{{ messages[0].content }}")});
    md2.push_back({"tokenizer.chat_template.tool_use",
                   GgufValue::make_string("tools:{{ tools | map(attribute='function') | map(attribute='name') | join(',') }}")});
    const std::string vocab2 = dir + "/vocab2.gguf";
    ASSERT_TRUE(gguf_write(vocab2, md2, {}).ok());
    { std::ofstream(conv) << R"({"messages": [{"role": "user", "content": "ab"}],
                                 "tools": [{"type": "function", "function": {"name": "f1"}}]})"; }
    r = test::run_layerscope("tokenize -m '" + vocab2 + "' --messages '" + conv + "' --json --no-bos");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"], "tools:f1");
    r = test::run_layerscope("tokenize -m '" + vocab2 + "' --chat -p ab --json --no-bos");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"], "plain:ab");

    EXPECT_EQ(test::run_layerscope("tokenize" + m).exit_code, 2);  // no text
    EXPECT_EQ(test::run_layerscope("tokenize" + m + " -p x --against '1, two'").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("tokenize -m /no/such.gguf -p x").exit_code, 3);
    EXPECT_EQ(test::run_layerscope("tokenize" + m + " -f /no/such.txt").exit_code, 3);
    r = test::run_layerscope("tokenize -m '" + text + "' -p x", true);
    EXPECT_EQ(r.exit_code, 3);
    EXPECT_NE(r.out.find("text.txt"), std::string::npos) << r.out;
}

TEST(TokenizerUnit, RejectsBadMetadata) {
    auto missing = tokenizer_from_metadata({{"general.name", GgufValue::make_string("x")}});
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("tokenizer.ggml.model"), std::string::npos);
    auto unknown_pre = tokenizer_from_metadata({
        {"tokenizer.ggml.model", GgufValue::make_string("gpt2")},
        {"tokenizer.ggml.pre", GgufValue::make_string("no-such-pre")},
        {"tokenizer.ggml.tokens", GgufValue::make_string_array({"a"})},
        {"tokenizer.ggml.merges", GgufValue::make_string_array({})},
    });
    ASSERT_FALSE(unknown_pre.ok());
    EXPECT_EQ(unknown_pre.error().code, ErrorCode::kUnsupported);
}

// ---- fixtures ---------------------------------------------------------------------------------

Result<Tokenizer> load_fixture_tokenizer(const std::string& rel, double* construct_ms = nullptr) {
    auto file = GgufFile::open(test::fixture_path(rel));
    if (!file.ok()) return file.error();
    const auto t0 = Clock::now();
    auto tok = Tokenizer::from_gguf(*file.value());
    if (construct_ms) *construct_ms = ms_since(t0);
    return tok;
}

// The .inp/.out pairs exactly as llama.cpp's test-tokenizer-0 reads them: inputs separated by
// "\n__ggml_vocab_test__\n" (so the newline before each separator is not part of the input),
// one line of ids per input.
std::vector<std::pair<std::string, std::vector<TokenId>>> read_vocab_tests(const std::string& base) {
    const std::string raw = read_file(base + ".inp");
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> inputs;
    for (size_t pos = 0; pos < raw.size();) {
        const size_t next = raw.find(sep, pos);
        if (next == std::string::npos) {
            inputs.push_back(raw.substr(pos));
            break;
        }
        inputs.push_back(raw.substr(pos, next - pos));
        pos = next + sep.size();
    }
    std::ifstream out(base + ".out");
    std::vector<std::pair<std::string, std::vector<TokenId>>> tests;
    size_t i = 0;
    for (std::string line; std::getline(out, line) && i < inputs.size(); ++i) {
        std::istringstream ids(line);
        std::vector<TokenId> expected;
        for (TokenId id; ids >> id;) expected.push_back(id);
        tests.emplace_back(inputs[i], expected);
    }
    EXPECT_EQ(tests.size(), inputs.size()) << base;
    return tests;
}

class VocabVectors : public testing::TestWithParam<const char*> {};

TEST_P(VocabVectors, MatchLlamaCpp) {
    LS_REQUIRE_FIXTURES();
    const std::string name = GetParam();
    const std::string rel = "tokenizer/ggml-vocab-" + name + ".gguf";
    double construct_ms = 0;
    auto tok = load_fixture_tokenizer(rel, &construct_ms);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    const Tokenizer& t = tok.value();

    size_t found_by_text = 0;  // every entry's text finds its own id
    for (size_t id = 0; id < t.n_tokens(); ++id)
        found_by_text += t.find(t.token(static_cast<TokenId>(id)).text) == static_cast<TokenId>(id);
    EXPECT_EQ(found_by_text, t.n_tokens()) << name;

    const auto tests = read_vocab_tests(test::fixture_path(rel));
    ASSERT_FALSE(tests.empty());
    size_t passed = 0;
    std::string all_text;
    for (const auto& [text, expected] : tests) {
        const std::vector<TokenId> got = t.encode(text, false, false);
        if (got == expected) {
            ++passed;
        } else {
            ADD_FAILURE() << name << ": input '" << text << "'\n  expected " << ids_to_string(expected)
                          << "\n  got      " << ids_to_string(got);
        }
        // Byte-level vocabularies without space clean-up decode back to the input exactly.
        if (t.kind() == TokenizerKind::kBpe && name != "llama-bpe" && name != "gpt-2") {
            EXPECT_EQ(t.decode(got), text) << name;
        }
        all_text += text + "\n";
    }

    if (name == "gpt-2") {  // decode drops the space a word-level split left before punctuation
        EXPECT_EQ(t.decode(t.encode(" Hello , world ! It ' s", false, false)), " Hello, world! It's");
    }
    if (name == "llama-spm") {  // decode drops the space SentencePiece put in front...
        EXPECT_EQ(t.decode(t.encode("Hello world", false, false)), "Hello world");
        // ...except after a removed BOS, where llama_detokenize keeps it.
        EXPECT_EQ(t.decode(t.encode("Hello world", true, false), true), " Hello world");
        EXPECT_EQ(t.decode(t.encode("Hello world", true, false)), "<s> Hello world");
    }

    // Random bytes (broken UTF-8, stray special-token fragments) must encode without trouble.
    std::mt19937 rng(1234);
    for (int round = 0; round < 200; ++round) {
        std::string junk(rng() % 64, '\0');
        for (char& c : junk) c = static_cast<char>(rng() % 4 == 0 ? "<|>s\n "[rng() % 6] : rng());
        for (TokenId id : t.encode(junk, true, true)) ASSERT_TRUE(t.valid(id)) << name;
    }

    std::string big;
    while (big.size() < (1u << 20)) big += all_text;  // ~1 MiB of the mixed-script test inputs
    const auto t0 = Clock::now();
    const size_t n_big = t.encode(big, false, false).size();
    const double encode_ms = ms_since(t0);
    std::printf("[tokenizer] %-13s %2zu/%2zu vectors pass | %6zu tokens, %6zu merges | construct %6.1f ms | "
                "encode %.1f MiB -> %zu tokens in %.0f ms (%.1f MiB/s)\n",
                name.c_str(), passed, tests.size(), t.n_tokens(), t.n_merges(), construct_ms,
                big.size() / 1048576.0, n_big, encode_ms, big.size() / 1048576.0 / (encode_ms / 1000.0));
    EXPECT_EQ(passed, tests.size());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, VocabVectors,
                         testing::Values("llama-spm", "phi-3", "llama-bpe", "qwen2", "deepseek-llm", "gpt-2"),
                         [](const testing::TestParamInfo<const char*>& info) {
                             std::string s = info.param;
                             for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                             return s;
                         });

// logs/tokenize_*.txt: '## prompt [name] = "..."' (C escapes) then 'ids: [a, b, ...]'.
struct LoggedPrompt {
    std::string text;
    std::vector<TokenId> ids;
};

std::vector<LoggedPrompt> read_tokenize_log(const std::string& path) {
    std::vector<LoggedPrompt> prompts;
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("## prompt", 0) == 0) {
            const size_t q0 = line.find("= \"");
            const size_t q1 = line.rfind('"');
            LoggedPrompt p;
            for (size_t i = q0 + 3; i < q1; ++i) {
                if (line[i] == '\\' && i + 1 < q1) {
                    const char e = line[++i];
                    p.text.push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
                } else {
                    p.text.push_back(line[i]);
                }
            }
            prompts.push_back(p);
        } else if (line.rfind("ids: [", 0) == 0 && !prompts.empty()) {
            std::string list = line.substr(6);
            for (char& c : list) c = (c == ',' || c == ']') ? ' ' : c;
            std::istringstream ids(list);
            for (TokenId id; ids >> id;) prompts.back().ids.push_back(id);
        }
    }
    return prompts;
}

TEST(TokenizerFixtures, TokenizeLogs) {
    LS_REQUIRE_FIXTURES();
    const std::pair<const char*, std::vector<const char*>> logs[] = {
        {"logs/tokenize_llama-spm512.txt", {"models/llama-gqa-mini-F16.gguf", "models/stories260K.gguf"}},
        {"logs/tokenize_qwen2-mini.txt", {"models/qwen2-mini-F16.gguf"}},
        {"logs/tokenize_deepseek2-mini.txt", {"models/deepseek2-mini-F16.gguf"}},
    };
    for (const auto& [log, models] : logs) {
        const auto prompts = read_tokenize_log(test::fixture_path(log));
        ASSERT_FALSE(prompts.empty()) << log;
        for (const char* model : models) {
            auto tok = load_fixture_tokenizer(model);
            ASSERT_TRUE(tok.ok()) << model << ": " << tok.error().message;
            size_t passed = 0;
            for (const LoggedPrompt& p : prompts) {
                const auto got = tok.value().encode(p.text, true, true);
                EXPECT_EQ(ids_to_string(got), ids_to_string(p.ids)) << model << ": '" << p.text << "'";
                passed += got == p.ids;
            }
            std::printf("[tokenizer] %-34s %zu/%zu logged prompts pass\n", model, passed, prompts.size());
        }
    }
}

TEST(TokenizerFixtures, DumpPrompts) {
    LS_REQUIRE_FIXTURES();
    std::map<std::string, Tokenizer> by_model;
    size_t n_dumps = 0, passed = 0;
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(test::fixture_path("dumps"))) {
        if (entry.path().extension() == ".gguf") paths.push_back(entry.path().string());
    }
    std::sort(paths.begin(), paths.end());
    for (const std::string& path : paths) {
        auto dump = GgufFile::open(path);
        ASSERT_TRUE(dump.ok()) << dump.error().message;
        const GgufFile& d = *dump.value();
        const std::string model = d.get_string("dump.model_path");
        const GgufValue* ids = d.find("dump.prompt_tokens");
        const GgufValue* pieces = d.find("dump.prompt_token_pieces");
        ASSERT_FALSE(model.empty()) << path;
        ASSERT_TRUE(ids && ids->is_array()) << path;
        if (!by_model.count(model)) {
            // Paths are relative to the dumper's folder: "models/x.gguf" or just "x.gguf".
            std::string rel = model;
            if (!std::filesystem::exists(test::fixture_path(rel))) {
                rel = "models/" + std::filesystem::path(model).filename().string();
            }
            auto tok = load_fixture_tokenizer(rel);
            ASSERT_TRUE(tok.ok()) << model << ": " << tok.error().message;
            by_model.emplace(model, std::move(tok.value()));
        }
        const Tokenizer& t = by_model.at(model);
        std::vector<TokenId> expected;
        for (size_t i = 0; i < ids->array_size(); ++i) {
            int64_t id = 0;
            ASSERT_TRUE(ids->item_int(i, &id));
            expected.push_back(static_cast<TokenId>(id));
        }
        const auto got = t.encode(d.get_string("dump.prompt"), d.get_bool("dump.add_special", true), true);
        EXPECT_EQ(ids_to_string(got), ids_to_string(expected)) << path;
        if (pieces && pieces->strings.size() == expected.size()) {
            for (size_t i = 0; i < expected.size(); ++i) {
                EXPECT_EQ(t.token_to_piece(expected[i]), pieces->strings[i]) << path << " token " << i;
            }
        }
        // The generated text is the concatenated pieces; where llama.cpp's text had to replace a
        // cut UTF-8 sequence (U+FFFD) ours keeps the raw bytes, so only whole texts are compared.
        const GgufValue* generated = d.find("dump.generated_tokens");
        const std::string generated_text = d.get_string("dump.generated_text");
        if (generated && generated_text.find("\xEF\xBF\xBD") == std::string::npos) {
            std::vector<TokenId> gen;
            for (size_t i = 0; i < generated->array_size(); ++i) {
                int64_t id = 0;
                if (generated->item_int(i, &id)) gen.push_back(static_cast<TokenId>(id));
            }
            std::string text;
            for (TokenId id : gen) text += t.token_to_piece(id);
            EXPECT_EQ(text, generated_text) << path;
        }
        ++n_dumps;
        passed += got == expected;
    }
    std::printf("[tokenizer] dumps: %zu/%zu prompts pass\n", passed, n_dumps);
    EXPECT_GT(n_dumps, 0u);
}

}  // namespace
}  // namespace ls
