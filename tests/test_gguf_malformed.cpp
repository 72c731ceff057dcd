// A corpus of malformed GGUF files generated here: each must give a clean kBadInput error that
// names what is wrong and where, never a crash or an unbounded allocation (CI also runs this
// suite under AddressSanitizer and UndefinedBehaviorSanitizer).
#include <gtest/gtest.h>

#include <random>

#include "engine/gguf/gguf.h"
#include "engine/util/quote.h"
#include "tests/gguf_builder.h"

namespace ls {
namespace {

using test::GgufBuilder;
using test::make_small_gguf;

// Parses `bytes` and expects an error whose message contains every fragment.
void expect_bad(const std::vector<uint8_t>& bytes, std::initializer_list<const char*> fragments) {
    auto r = GgufFile::parse(bytes, "corrupt.gguf");
    ASSERT_FALSE(r.ok()) << "a malformed file was accepted";
    EXPECT_EQ(r.error().code, ErrorCode::kBadInput);
    EXPECT_NE(r.error().message.find("corrupt.gguf"), std::string::npos) << r.error().message;
    for (const char* f : fragments) EXPECT_NE(r.error().message.find(f), std::string::npos) << "message: " << r.error().message << "\nexpected to mention: " << f;
}

TEST(GgufMalformed, TheBaseFileIsValid) {
    GgufBuilder b = make_small_gguf();
    auto r = GgufFile::parse(b.bytes);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value()->tensors().size(), 3u);
    EXPECT_EQ(r.value()->metadata().size(), 4u);
}

TEST(GgufMalformed, TruncationAtEveryByteIsAnError) {
    GgufBuilder b = make_small_gguf();
    // The file is valid only when complete: the last tensor ends at the last byte.
    for (size_t n = 0; n < b.size(); ++n) {
        std::vector<uint8_t> cut(b.bytes.begin(), b.bytes.begin() + n);
        auto r = GgufFile::parse(cut, "corrupt.gguf");
        ASSERT_FALSE(r.ok()) << "truncated to " << n << " bytes was accepted";
        EXPECT_EQ(r.error().code, ErrorCode::kBadInput);
    }
}

TEST(GgufMalformed, TruncationAtSectionBoundariesNamesTheField) {
    GgufBuilder b = make_small_gguf();
    struct Case { const char* label; const char* fragment; };
    const Case cases[] = {
        {"version", "version"},
        {"n_tensors", "tensor count"},
        {"n_kv", "metadata count"},
        {"kv0.key", "tensor count 3 cannot fit in the 0 bytes left"},
        {"kv2.count", "array count"},
        {"kv2.item0", "array count 3 cannot fit"},
        {"t0.name", "name of tensor #0"},
        {"t1.ne0", "ne[0]"},
        {"t2.type", "type"},
        {"t2.offset", "offset"},
        {"t0.data", "past its end"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.label);
        size_t n = b.at.at(c.label);
        expect_bad(std::vector<uint8_t>(b.bytes.begin(), b.bytes.begin() + n), {c.fragment, "byte"});
    }
}

TEST(GgufMalformed, BadMagicAndVersions) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    m.patch<uint32_t>("magic", 0x4c4c4747);
    expect_bad(m.bytes, {"not a GGUF file"});
    m = b;
    m.patch<uint32_t>("version", 0x03000000);  // a big-endian v3 read as little-endian
    expect_bad(m.bytes, {"big-endian"});
    m = b;
    m.patch<uint32_t>("version", 1);
    expect_bad(m.bytes, {"version 1"});
    m = b;
    m.patch<uint32_t>("version", 7);
    expect_bad(m.bytes, {"version 7"});
}

TEST(GgufMalformed, AbsurdCountsAndLengthsAreRefusedBeforeAllocating) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    m.patch<uint64_t>("n_tensors", uint64_t(1) << 62);
    expect_bad(m.bytes, {"tensor count", "cannot fit"});
    m = b;
    m.patch<uint64_t>("n_kv", ~uint64_t(0));
    expect_bad(m.bytes, {"metadata count", "cannot fit"});
    m = b;
    m.patch<uint64_t>("kv0.key", ~uint64_t(0));  // key string length
    expect_bad(m.bytes, {"string length", "past the end"});
    m = b;
    m.patch<uint64_t>("kv0.value", uint64_t(1) << 40);  // value string length
    expect_bad(m.bytes, {"general.architecture", "string length"});
    m = b;
    m.patch<uint64_t>("kv2.count", uint64_t(1) << 61);
    expect_bad(m.bytes, {"tokenizer.ggml.tokens", "array count"});
    m = b;
    m.patch<uint64_t>("kv3.count", 1000000);
    expect_bad(m.bytes, {"test.nested", "array count"});
}

TEST(GgufMalformed, UnknownTypes) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    m.patch<uint32_t>("kv0.type", 13);
    expect_bad(m.bytes, {"general.architecture", "unknown value type 13"});
    m = b;
    m.patch<uint32_t>("kv2.elem_type", 99);
    expect_bad(m.bytes, {"unknown array element type 99"});
    m = b;
    m.patch<uint32_t>("t1.type", 4);  // a removed ggml type id
    expect_bad(m.bytes, {"b.weight", "unknown ggml type id 4"});
    m = b;
    m.patch<uint32_t>("t1.type", 0xffffffff);
    expect_bad(m.bytes, {"unknown ggml type"});
}

TEST(GgufMalformed, DeeplyNestedArraysAreRefused) {
    GgufBuilder b;
    b.put<uint32_t>(0x46554747);
    b.put<uint32_t>(3);
    b.put<uint64_t>(0);
    b.put<uint64_t>(1);
    b.str("deep");
    b.put<uint32_t>(9);
    for (int i = 0; i < 100; ++i) {
        b.put<uint32_t>(9);
        b.put<uint64_t>(1);
    }
    b.put<uint32_t>(4);
    b.put<uint64_t>(0);
    expect_bad(b.bytes, {"nested deeper"});
}

TEST(GgufMalformed, TensorShapes) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    m.patch<uint32_t>("t0.n_dims", 5);
    expect_bad(m.bytes, {"a.weight", "n_dims 5"});
    m = b;
    m.patch<uint32_t>("t0.n_dims", 0);
    expect_bad(m.bytes, {"n_dims 0"});
    m = b;
    m.patch<int64_t>("t0.ne0", -8);
    expect_bad(m.bytes, {"negative"});
    m = b;
    m.patch<int64_t>("t0.ne0", int64_t(1) << 40);
    m.patch<int64_t>("t0.ne1", int64_t(1) << 40);
    expect_bad(m.bytes, {"overflows"});
    m = b;
    m.patch<uint32_t>("t0.type", 12);  // q4_K needs ne0 % 256 == 0
    expect_bad(m.bytes, {"not a multiple", "256"});
    m = b;
    m.patch<int64_t>("t2.ne1", int64_t(1) << 30);  // fine for overflow, but far past the end
    expect_bad(m.bytes, {"c.weight", "past its end"});
}

TEST(GgufMalformed, TensorOffsets) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    m.patch<uint64_t>("t1.offset", 33);
    expect_bad(m.bytes, {"b.weight", "alignment"});
    m = b;
    m.patch<uint64_t>("t1.offset", 0);  // b now overlaps a
    expect_bad(m.bytes, {"overlaps"});
    m = b;
    m.patch<uint64_t>("t2.offset", uint64_t(1) << 62);
    expect_bad(m.bytes, {"c.weight", "past its end"});
    m = b;
    m.patch<uint64_t>("t2.offset", ~uint64_t(0) - 31);  // aligned, and offset + size wraps around
    expect_bad(m.bytes, {"c.weight", "past its end"});
}

TEST(GgufMalformed, DuplicatesAndBadAlignment) {
    GgufBuilder b = make_small_gguf();
    GgufBuilder m = b;
    // Rename tensor "b.weight" to "a.weight" (same length).
    std::memcpy(m.bytes.data() + m.at.at("t1.name") + 8, "a", 1);
    expect_bad(m.bytes, {"a.weight", "twice"});
    m = b;
    m.patch<uint32_t>("kv1.value", 24);
    expect_bad(m.bytes, {"general.alignment", "power of two"});
    m = b;
    m.patch<uint32_t>("kv1.value", 0);
    expect_bad(m.bytes, {"general.alignment"});
}

// Whether `message` could go to a terminal as it is: no control byte but newlines.
bool printable(const std::string& message) {
    for (char c : message)
        if (c != '\n' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) return false;
    return true;
}

TEST(GgufMalformed, FileBytesInMessagesAreEscapedAndCapped) {
    // Metadata key 0 renamed to ESC, BEL, NUL and 8 KB of junk, then key 1 renamed the same.
    const std::string junk = std::string("\x1b]0;owned\x07") + '\0' + std::string(8192, 'J');
    GgufBuilder b;
    b.put<uint32_t>(0x46554747);
    b.put<uint32_t>(3);
    b.put<uint64_t>(1);
    b.put<uint64_t>(2);
    for (int k = 0; k < 2; ++k) {
        b.str(junk);
        b.put<uint32_t>(4);
        b.put<uint32_t>(1);
    }
    auto r = GgufFile::parse(b.bytes, "junk.gguf");
    ASSERT_FALSE(r.ok());
    const std::string& m = r.error().message;
    EXPECT_TRUE(printable(m)) << m;
    EXPECT_NE(m.find("metadata key \"\\x1b]0;owned\\x07\\x00JJJ"), std::string::npos) << m;
    EXPECT_NE(m.find("\"... (8103 more bytes) appears twice"), std::string::npos) << m;
    EXPECT_LT(m.size(), 250u) << m;

    // A tensor name of the same junk, in a tensor that runs past the end of the file.
    GgufBuilder t;
    t.put<uint32_t>(0x46554747);
    t.put<uint32_t>(3);
    t.put<uint64_t>(1);
    t.put<uint64_t>(0);
    t.str(junk);
    t.put<uint32_t>(1);
    t.put<int64_t>(1024);
    t.put<uint32_t>(0);  // F32
    t.put<uint64_t>(0);
    t.pad(32);  // the data section starts at the end of the file: the tensor's data runs past it
    auto tr = GgufFile::parse(t.bytes, "junk.gguf");
    ASSERT_FALSE(tr.ok());
    EXPECT_TRUE(printable(tr.error().message)) << tr.error().message;
    EXPECT_NE(tr.error().message.find("more bytes) data [0, 4096)"), std::string::npos) << tr.error().message;
}

TEST(QuoteText, EscapesWhatATerminalWouldActOnAndKeepsText) {
    EXPECT_EQ(quote_text("attn_norm-0"), "\"attn_norm-0\"");
    EXPECT_EQ(quote_text("a\"b\\c"), "\"a\\\"b\\\\c\"");
    EXPECT_EQ(quote_text("\n\r\t"), "\"\\n\\r\\t\"");
    EXPECT_EQ(quote_text(std::string("\x1b[31m\x07") + '\0' + "\x7f"), "\"\\x1b[31m\\x07\\x00\\x7f\"");
    // UTF-8 stays as it is; C1 controls, stray, overlong, surrogate and cut-off bytes do not.
    EXPECT_EQ(quote_text("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e"), "\"h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e\"");
    EXPECT_EQ(quote_text("\xc2\x9b" "2J"), "\"\\xc2\\x9b2J\"");
    EXPECT_EQ(quote_text("\xff\x80"), "\"\\xff\\x80\"");
    EXPECT_EQ(quote_text("\xc0\xaf"), "\"\\xc0\\xaf\"");
    EXPECT_EQ(quote_text("\xed\xa0\x80"), "\"\\xed\\xa0\\x80\"");
    EXPECT_EQ(quote_text("ab\xe2\x9c"), "\"ab\\xe2\\x9c\"");
    // The cap counts the file's bytes and never splits a character.
    std::string capped(1, '"');
    capped.append(100, 'a').append("\"... (30 more bytes)");
    EXPECT_EQ(quote_text(std::string(130, 'a')), capped);
    EXPECT_EQ(quote_text("ab\xe2\x9c\x93", 3), "\"ab\"... (3 more bytes)");
    EXPECT_EQ(quote_text(std::string(10, '\0'), 4), "\"\\x00\\x00\\x00\\x00\"... (6 more bytes)");
    EXPECT_EQ(quote_text(""), "\"\"");
}

TEST(GgufMalformed, RandomMutationsNeverCrash) {
    GgufBuilder b = make_small_gguf();
    std::mt19937_64 rng(12345);
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; ++iter) {
        std::vector<uint8_t> m = b.bytes;
        int n_mut = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < n_mut; ++k) {
            size_t pos = rng() % m.size();
            switch (rng() % 3) {
                case 0: m[pos] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
                case 1: m[pos] = static_cast<uint8_t>(rng()); break;
                case 2: m[pos] = (rng() % 2) ? 0xff : 0x00; break;
            }
        }
        if (rng() % 8 == 0) m.resize(rng() % m.size());
        auto r = GgufFile::parse(m, "mutant.gguf");
        if (r.ok()) {
            ++accepted;
            // Whatever was accepted must be self-consistent: every tensor lies inside the file.
            for (const auto& t : r.value()->tensors())
                ASSERT_LE(r.value()->data_offset() + t.offset + t.n_bytes, m.size()) << t.name;
        } else {
            ++refused;
            ASSERT_EQ(r.error().code, ErrorCode::kBadInput);
            ASSERT_FALSE(r.error().message.empty());
        }
    }
    EXPECT_GT(refused, 1000);
    EXPECT_GT(accepted, 10);  // data-only mutations stay valid
}

}  // namespace
}  // namespace ls
