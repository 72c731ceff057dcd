// GGUF reader and writer: every value type, round trips, and facts of the fixture files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/forward/forward.h"
#include "engine/gguf/gguf.h"
#include "engine/gguf/mapped_file.h"
#include "engine/session/null_backend.h"
#include "tests/gguf_builder.h"
#include "tests/test_support.h"

namespace ls {
namespace {

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void expect_same_value(const GgufValue& a, const GgufValue& b, const std::string& key) {
    ASSERT_EQ(a.type, b.type) << key;
    switch (a.type) {
        case GgufValueType::STRING: EXPECT_EQ(a.str, b.str) << key; break;
        case GgufValueType::FLOAT32:
        case GgufValueType::FLOAT64: EXPECT_EQ(std::memcmp(&a.f64, &b.f64, 8), 0) << key; break;
        case GgufValueType::ARRAY:
            ASSERT_EQ(a.elem_type, b.elem_type) << key;
            ASSERT_EQ(a.array_size(), b.array_size()) << key;
            EXPECT_EQ(a.strings, b.strings) << key;
            for (size_t i = 0; i < a.array_size(); ++i) expect_same_value(a.item(i), b.item(i), key);
            break;
        default: EXPECT_EQ(a.u64, b.u64) << key; EXPECT_EQ(a.i64, b.i64) << key;
    }
}

TEST(Gguf, ReadsTheHandBuiltFile) {
    auto r = GgufFile::parse(test::make_small_gguf().bytes);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const GgufFile& f = *r.value();
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->strings, (std::vector<std::string>{"<s>", "a", "bc"}));
    const GgufValue* nested = f.find("test.nested");
    ASSERT_NE(nested, nullptr);
    ASSERT_EQ(nested->array_size(), 2u);
    EXPECT_EQ(nested->item(1).item(1).i64, 11);
    const GgufTensorInfo* c = f.find_tensor("c.weight");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->ne[0], 4);
    EXPECT_EQ(c->ne[1], 2);
    EXPECT_EQ(c->n_bytes, 32u);
    float v;
    std::memcpy(&v, c->data + 7 * 4, 4);
    EXPECT_EQ(v, 207.0f);
    EXPECT_EQ(f.find("missing"), nullptr);
    EXPECT_EQ(f.get_int("missing", -5), -5);
}

// A header alone (what a server sends of a model it runs): the same metadata and tensor table,
// checked against the whole file's size, and no data.
TEST(Gguf, AHeaderAloneParsesWithoutItsData) {
    const std::vector<uint8_t> bytes = test::make_small_gguf().bytes;
    auto whole = GgufFile::parse(bytes);
    ASSERT_TRUE(whole.ok()) << whole.error().message;
    const std::string_view header = whole.value()->header_bytes();
    ASSERT_EQ(header.size(), whole.value()->data_offset());
    ASSERT_LT(header.size(), bytes.size());
    auto alone = GgufFile::parse_header(std::vector<uint8_t>(header.begin(), header.end()), bytes.size(), "srv:small.gguf");
    ASSERT_TRUE(alone.ok()) << alone.error().message;
    const GgufFile& f = *alone.value();
    EXPECT_TRUE(whole.value()->has_data());
    EXPECT_FALSE(f.has_data());
    EXPECT_EQ(f.path(), "srv:small.gguf");
    EXPECT_EQ(f.file_size(), bytes.size());
    EXPECT_EQ(f.data_offset(), whole.value()->data_offset());
    ASSERT_EQ(f.metadata().size(), whole.value()->metadata().size());
    for (size_t i = 0; i < f.metadata().size(); ++i) {
        EXPECT_EQ(f.metadata()[i].key, whole.value()->metadata()[i].key);
        expect_same_value(f.metadata()[i].value, whole.value()->metadata()[i].value, f.metadata()[i].key);
    }
    ASSERT_EQ(f.tensors().size(), whole.value()->tensors().size());
    for (size_t i = 0; i < f.tensors().size(); ++i) {
        EXPECT_EQ(f.tensors()[i].name, whole.value()->tensors()[i].name);
        EXPECT_EQ(f.tensors()[i].offset, whole.value()->tensors()[i].offset);
        EXPECT_EQ(f.tensors()[i].n_bytes, whole.value()->tensors()[i].n_bytes);
        EXPECT_EQ(f.tensors()[i].data, nullptr);
    }
    EXPECT_EQ(f.header_bytes(), header);
    // A header cut inside the tensor table (40 bytes: past the at most 31 bytes of padding before
    // the data), a file too short for its tensors' data, or a header longer than its file: refused,
    // naming what is wrong.
    auto cut = GgufFile::parse_header(std::vector<uint8_t>(header.begin(), header.end() - 40), bytes.size(), "srv:small.gguf");
    ASSERT_FALSE(cut.ok());
    EXPECT_NE(cut.error().message.find("srv:small.gguf"), std::string::npos) << cut.error().message;
    auto short_file = GgufFile::parse_header(std::vector<uint8_t>(header.begin(), header.end()), header.size() + 1, "srv:small.gguf");
    ASSERT_FALSE(short_file.ok());
    EXPECT_NE(short_file.error().message.find("runs past"), std::string::npos) << short_file.error().message;
    auto longer = GgufFile::parse_header(std::vector<uint8_t>(header.begin(), header.end()), header.size() - 1, "srv:small.gguf");
    ASSERT_FALSE(longer.ok());
    EXPECT_NE(longer.error().message.find("a header of"), std::string::npos) << longer.error().message;
}

TEST(Gguf, EveryValueTypeRoundTrips) {
    std::vector<GgufKV> kv;
    auto add = [&](std::string key, GgufValue v) { kv.push_back({std::move(key), std::move(v)}); };
    GgufValue v;
    v.type = GgufValueType::UINT8; v.u64 = 250; add("u8", v);
    v = {}; v.type = GgufValueType::INT8; v.i64 = -100; add("i8", v);
    v = {}; v.type = GgufValueType::UINT16; v.u64 = 65000; add("u16", v);
    v = {}; v.type = GgufValueType::INT16; v.i64 = -32000; add("i16", v);
    add("u32", GgufValue::make_u32(4000000000u));
    add("i32", GgufValue::make_i32(-2000000000));
    add("f32", GgufValue::make_f32(-1.5e-7f));
    add("bool", GgufValue::make_bool(true));
    add("str", GgufValue::make_string(std::string("with\0nul", 8)));
    v = {}; v.type = GgufValueType::UINT64; v.u64 = ~uint64_t(0); add("u64", v);
    v = {}; v.type = GgufValueType::INT64; v.i64 = INT64_MIN; add("i64", v);
    v = {}; v.type = GgufValueType::FLOAT64; v.f64 = 3.141592653589793; add("f64", v);
    add("strs", GgufValue::make_string_array({"", "x", std::string(1000, 'y')}));
    add("empty", GgufValue::make_array(GgufValueType::FLOAT32, {}));
    add("nested", GgufValue::make_array(GgufValueType::ARRAY,
                                        {GgufValue::make_array(GgufValueType::INT32, {GgufValue::make_i32(1)}),
                                         GgufValue::make_string_array({"deep"})}));

    std::vector<float> a(256 * 2);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i) * 0.25f;
    std::vector<uint8_t> q(144 * 3, 0x5a);  // 3 Q4_K blocks
    std::vector<GgufWriteTensor> tensors = {
        {"a", GgmlType::F32, {256, 2}, a.data(), a.size() * 4},
        {"q", GgmlType::Q4_K, {256, 3}, q.data(), q.size()},
    };
    std::string dir = test::make_temp_dir();
    std::string path = dir + "/rt.gguf";
    for (uint32_t alignment : {32u, 64u}) {
        ASSERT_TRUE(gguf_write(path, kv, tensors, alignment, /*overwrite=*/true).ok());
        auto r = GgufFile::open(path);
        ASSERT_TRUE(r.ok()) << r.error().message;
        const GgufFile& f = *r.value();
        EXPECT_EQ(f.alignment(), alignment);
        for (const GgufKV& want : kv) {
            const GgufValue* got = f.find(want.key);
            ASSERT_NE(got, nullptr) << want.key;
            expect_same_value(want.value, *got, want.key);
        }
        ASSERT_EQ(f.tensors().size(), 2u);
        EXPECT_EQ(std::memcmp(f.find_tensor("a")->data, a.data(), a.size() * 4), 0);
        EXPECT_EQ(std::memcmp(f.find_tensor("q")->data, q.data(), q.size()), 0);
        EXPECT_EQ((f.data_offset() + f.find_tensor("q")->offset) % alignment, 0u);
        // The same file in memory, byte for byte.
        auto bytes = gguf_to_bytes(kv, tensors, alignment);
        ASSERT_TRUE(bytes.ok()) << bytes.error().message;
        std::ifstream in(path, std::ios::binary);
        const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        EXPECT_TRUE(bytes.value() == file) << "in memory " << bytes.value().size() << " bytes, on disk " << file.size();
    }
    // No temporary file is left behind.
    int files = 0;
    for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++files;
    EXPECT_EQ(files, 1);
    std::filesystem::remove_all(dir);
}

// keep_in_memory: every tensor keeps its address and bytes; the bytes are a copy (the file changed
// on disk afterwards is not seen, where the mapping would show it); giving pages back no longer
// drops them; a second call does nothing more.
TEST(Gguf, KeptInMemoryTheBytesStayAtTheirAddresses) {
    std::vector<uint8_t> big(5u << 20), small(4096);
    uint32_t x = 12345;
    for (uint8_t& b : big) b = static_cast<uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
    for (size_t i = 0; i < small.size(); ++i) small[i] = static_cast<uint8_t>(i * 7);
    const std::vector<GgufKV> kv = {{"general.architecture", GgufValue::make_string("llama")}};
    const std::vector<GgufWriteTensor> tensors = {
        {"big", GgmlType::F32, {static_cast<int64_t>(big.size() / 4)}, big.data(), big.size()},
        {"small", GgmlType::F32, {static_cast<int64_t>(small.size() / 4)}, small.data(), small.size()}};
    const std::string dir = test::make_temp_dir(), path = dir + "/kept.gguf";
    ASSERT_TRUE(gguf_write(path, kv, tensors, 32, false).ok());
    auto opened = GgufFile::open(path);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    const GgufFile& f = *opened.value();
    const uint8_t* at_big = f.find_tensor("big")->data;
    const uint8_t* at_small = f.find_tensor("small")->data;
    EXPECT_FALSE(f.in_memory());
    EXPECT_EQ(f.residency(), "mapped");

    const std::string note = f.keep_in_memory();
    EXPECT_EQ(f.residency(), note);
    EXPECT_EQ(note.rfind("in memory, ", 0), 0u) << note;
    EXPECT_TRUE(f.in_memory());
    EXPECT_EQ(f.find_tensor("big")->data, at_big);
    EXPECT_EQ(f.find_tensor("small")->data, at_small);
    EXPECT_EQ(std::memcmp(at_big, big.data(), big.size()), 0);
    EXPECT_EQ(std::memcmp(at_small, small.data(), small.size()), 0);

    {  // the file's tensor bytes overwritten in place
        std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
        out.seekp(static_cast<std::streamoff>(f.file_offset_of(at_big)));
        const std::vector<char> zeros(big.size(), 0);
        out.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
        ASSERT_TRUE(out.good());
    }
    f.release_behind(at_big, big.size());
    EXPECT_EQ(std::memcmp(at_big, big.data(), big.size()), 0) << "the copy must neither follow the file nor be dropped";
    EXPECT_EQ(f.keep_in_memory(), note);
    std::filesystem::remove_all(dir);
}

TEST(Gguf, CopiedIntoMemoryOnlyWhenItFitsInHalfTheMemoryAvailable) {
    const uint64_t gib = uint64_t{1} << 30;
    EXPECT_EQ(copy_refusal(4 * gib, 8 * gib), "");
    EXPECT_EQ(copy_refusal(5 * gib, 8 * gib), "its 5.0 GiB exceed half the memory available (8.0 GiB)");
    EXPECT_NE(copy_refusal(1, 0).find("unknown"), std::string::npos);
}

// The CPU backend reads a model's weights from memory of its own: make_forward moves them there.
// A dry run (the null backend, which plans a GPU session's events too) leaves them mapped.
TEST(GgufFixtures, AForwardPassOnTheCpuKeepsTheModelInMemory) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(model.ok()) << model.error().message;
    const GgufFile& file = model.value()->file();
    EXPECT_FALSE(file.in_memory());
    ForwardOptions options;
    options.n_ctx = 256;
    auto null_backend = make_null_backend();
    auto dry = make_forward(*model.value(), *null_backend, options);
    ASSERT_TRUE(dry.ok()) << dry.error().message;
    EXPECT_FALSE(file.in_memory());
    EXPECT_EQ(file.residency(), "mapped");

    auto backend = make_cpu_backend(1);
    auto forward = make_forward(*model.value(), *backend, options);
    ASSERT_TRUE(forward.ok()) << forward.error().message;
    EXPECT_TRUE(file.in_memory());
    EXPECT_EQ(file.residency().rfind("in memory, ", 0), 0u) << file.residency();
}

// Number and bool arrays are kept packed as in the file; every element reads back through
// item(), item_int() and item_float() with its type and value, and a bool that is neither 0 nor 1
// is refused at its byte.
TEST(Gguf, NumberArraysReadBackElementByElement) {
    auto array_of = [](GgufValueType type, std::vector<GgufValue> items) {
        for (GgufValue& v : items) v.type = type;
        return GgufValue::make_array(type, std::move(items));
    };
    auto u = [](uint64_t x) { GgufValue v; v.u64 = x; return v; };
    auto i = [](int64_t x) { GgufValue v; v.i64 = x; return v; };
    auto f = [](double x) { GgufValue v; v.f64 = x; return v; };
    std::vector<GgufKV> kv = {
        {"u8", array_of(GgufValueType::UINT8, {u(0), u(255)})},
        {"i8", array_of(GgufValueType::INT8, {i(-128), i(127)})},
        {"u16", array_of(GgufValueType::UINT16, {u(65535), u(1)})},
        {"i16", array_of(GgufValueType::INT16, {i(-32768), i(5)})},
        {"u32", array_of(GgufValueType::UINT32, {u(4000000000u), u(7)})},
        {"i32", array_of(GgufValueType::INT32, {i(-2000000000), i(3)})},
        {"u64", array_of(GgufValueType::UINT64, {u(~uint64_t(0)), u(9)})},
        {"i64", array_of(GgufValueType::INT64, {i(INT64_MIN), i(-1)})},
        {"f32", array_of(GgufValueType::FLOAT32, {f(-1.5), f(0.25)})},
        {"f64", array_of(GgufValueType::FLOAT64, {f(3.141592653589793), f(-0.0)})},
        {"bool", array_of(GgufValueType::BOOL, {u(1), u(0)})},
    };
    std::string dir = test::make_temp_dir();
    std::string path = dir + "/arrays.gguf";
    ASSERT_TRUE(gguf_write(path, kv, {}).ok());
    auto r = GgufFile::open(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (const GgufKV& want : kv) {
        const GgufValue* got = r.value()->find(want.key);
        ASSERT_NE(got, nullptr) << want.key;
        expect_same_value(want.value, *got, want.key);
        ASSERT_EQ(got->array_size(), 2u) << want.key;
        EXPECT_EQ(got->packed.size(), 2 * gguf_scalar_size(want.value.elem_type)) << want.key;
        for (size_t k = 0; k < 2; ++k) {
            const GgufValue item = got->item(k);
            EXPECT_EQ(item.type, want.value.elem_type) << want.key;
            int64_t as_int = 0, item_as_int = 0;
            EXPECT_EQ(got->item_int(k, &as_int), item.get_int(&item_as_int)) << want.key;
            EXPECT_EQ(as_int, item_as_int) << want.key;
            double as_float = 0, item_as_float = 0;
            EXPECT_EQ(got->item_float(k, &as_float), item.get_float(&item_as_float)) << want.key;
            EXPECT_EQ(as_float, item_as_float) << want.key;
        }
    }
    const GgufValue* i8 = r.value()->find("i8");
    int64_t x = 0;
    ASSERT_TRUE(i8->item_int(0, &x));
    EXPECT_EQ(x, -128);
    const GgufValue* u64 = r.value()->find("u64");
    EXPECT_FALSE(u64->item_int(0, &x));  // does not fit in int64
    EXPECT_EQ(u64->item(0).u64, ~uint64_t(0));
    double y = 0;
    ASSERT_TRUE(r.value()->find("f32")->item_float(1, &y));
    EXPECT_EQ(y, 0.25);
    EXPECT_EQ(r.value()->find("u8")->item(1).u64, 255u);
    EXPECT_FALSE(GgufValue::make_string_array({"1"}).item_int(0, &x));  // strings are no numbers

    // The bool array's second element made 2.
    std::vector<uint8_t> bytes = read_all(path);
    const std::string key = "bool";
    const size_t key_at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end()) - bytes.begin();
    const size_t second = key_at + key.size() + 4 + 4 + 8 + 1;  // type, element type, count, first element
    bytes[second] = 2;
    auto bad = GgufFile::parse(bytes, "bad.gguf");
    ASSERT_FALSE(bad.ok());
    const std::string want = "at byte " + std::to_string(second) + ": metadata \"bool\": bool value 2 is neither 0 nor 1";
    EXPECT_NE(bad.error().message.find(want), std::string::npos) << bad.error().message;
    std::filesystem::remove_all(dir);
}

TEST(Gguf, AFailedWriteLeavesTheOldFileIntact) {
    std::string dir = test::make_temp_dir();
    std::string path = dir + "/keep.gguf";
    std::vector<float> a(8, 1.0f);
    ASSERT_TRUE(gguf_write(path, {{"k", GgufValue::make_u32(1)}}, {{"a", GgmlType::F32, {8}, a.data(), 32}}).ok());
    auto before = read_all(path);
    // A tensor whose byte size disagrees with its shape is refused before anything is written.
    Status s = gguf_write(path, {}, {{"a", GgmlType::F32, {8}, a.data(), 28}});
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(read_all(path), before);
    // A directory that does not exist: a clear error, nothing created.
    s = gguf_write(dir + "/no/such/dir/x.gguf", {}, {});
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error().message.find("no/such/dir"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(Gguf, StreamedWriteIsTheSameFileAndAProducerErrorLeavesNone) {
    std::string dir = test::make_temp_dir();
    std::vector<float> a(8), b(64);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
    const std::vector<GgufKV> kv = {{"k", GgufValue::make_u32(7)}};
    const std::vector<GgufWriteTensor> tensors = {{"a", GgmlType::F32, {8}, a.data(), 32},
                                                  {"b", GgmlType::F32, {16, 4}, b.data(), 256}};
    ASSERT_TRUE(gguf_write(dir + "/whole.gguf", kv, tensors).ok());
    std::vector<size_t> asked;
    auto produce = [&](size_t i, uint8_t* out) -> Status {
        asked.push_back(i);
        std::memcpy(out, tensors[i].data, tensors[i].n_bytes);
        return {};
    };
    ASSERT_TRUE(gguf_write_streamed(dir + "/streamed.gguf", kv, tensors, produce).ok());
    EXPECT_EQ(asked, (std::vector<size_t>{0, 1}));
    EXPECT_EQ(read_all(dir + "/streamed.gguf"), read_all(dir + "/whole.gguf"));

    Status s = gguf_write_streamed(dir + "/failed.gguf", kv, tensors, [](size_t i, uint8_t*) -> Status {
        if (i == 1) return make_error(ErrorCode::kInternal, "no data for b");
        return {};
    });
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message, "no data for b");
    EXPECT_FALSE(std::filesystem::exists(dir + "/failed.gguf"));
    std::filesystem::remove_all(dir);
    EXPECT_FALSE(std::filesystem::exists(dir));
}

// Facts of the fixture models, from ../shared/fixtures/README.md section 3.
struct ModelFact {
    const char* file;
    uint64_t bytes;
    const char* arch;
    int n_tensors;
    int64_t n_embd;
    int64_t n_layer;
};
const ModelFact kModels[] = {
    {"models/stories260K.gguf", 1185376, "llama", 48, 64, 5},
    {"models/llama-2-tiny-random.gguf", 1750560, "llama", 12, 8, 1},
    {"models/llama-gqa-mini-F16.gguf", 25198176, "llama", 39, 512, 4},
    {"models/llama-gqa-mini-Q4_K_M.gguf", 7617152, "llama", 39, 512, 4},
    {"models/qwen2-mini-F16.gguf", 7093248, "qwen2", 38, 256, 3},
    {"models/qwen2-mini-Q8_0.gguf", 3836960, "qwen2", 38, 256, 3},
    {"models/deepseek2-mini-F16.gguf", 13192160, "deepseek2", 44, 256, 3},
    {"models/deepseek2-mini-Q4_K_M.gguf", 4288288, "deepseek2", 44, 256, 3},
    {"models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf", 4306464, "deepseek2", 41, 256, 3},
};

TEST(GgufFixtures, ModelsMatchTheirDocumentedFacts) {
    LS_REQUIRE_FIXTURES();
    for (const ModelFact& m : kModels) {
        SCOPED_TRACE(m.file);
        auto r = GgufFile::open(test::fixture_path(m.file));
        ASSERT_TRUE(r.ok()) << r.error().message;
        const GgufFile& f = *r.value();
        EXPECT_EQ(f.file_size(), m.bytes);
        EXPECT_EQ(f.version(), 3u);
        EXPECT_EQ(f.get_string("general.architecture"), m.arch);
        EXPECT_EQ(static_cast<int>(f.tensors().size()), m.n_tensors);
        EXPECT_EQ(f.get_int(std::string(m.arch) + ".embedding_length", -1), m.n_embd);
        EXPECT_EQ(f.get_int(std::string(m.arch) + ".block_count", -1), m.n_layer);
        // The data section ends at the end of the file (after the last tensor's padding).
        uint64_t end = 0;
        for (const auto& t : f.tensors()) end = std::max(end, f.data_offset() + t.offset + t.n_bytes);
        EXPECT_LE(f.file_size() - end, f.alignment());
    }
}

TEST(GgufFixtures, Stories260KTensorShapes) {
    LS_REQUIRE_FIXTURES();
    auto r = GgufFile::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const GgufFile& f = *r.value();
    const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, GgmlType::F32);
    EXPECT_EQ(emb->ne[0], 64);
    EXPECT_EQ(emb->ne[1], 512);
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->strings.size(), 512u);
    EXPECT_EQ(f.get_int("llama.attention.head_count", -1), 8);
    EXPECT_EQ(f.get_int("llama.attention.head_count_kv", -1), 4);
    // seperator/padding ids are 4294967295 in this file (u32).
    EXPECT_EQ(f.get_int("tokenizer.ggml.padding_token_id", -1), 4294967295LL);
}

TEST(GgufFixtures, EveryFixtureFileOpens) {
    LS_REQUIRE_FIXTURES();
    int opened = 0;
    for (const char* sub : {"models", "dumps", "quant", "tokenizer"}) {
        for (const auto& e : std::filesystem::directory_iterator(test::fixture_path(sub))) {
            if (e.path().extension() != ".gguf") continue;
            SCOPED_TRACE(e.path().string());
            auto r = GgufFile::open(e.path().string());
            ASSERT_TRUE(r.ok()) << r.error().message;
            ++opened;
        }
    }
    EXPECT_EQ(opened, 9 + 18 + 26 + 6);  // models, dumps, quant, tokenizer
}

TEST(GgufFixtures, DumpMetadataAndIntegerTensors) {
    LS_REQUIRE_FIXTURES();
    auto r = GgufFile::open(test::fixture_path("dumps/stories260K_once_n0.gguf"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    const GgufFile& f = *r.value();
    EXPECT_EQ(f.get_int("dump.format_version", -1), 1);
    EXPECT_EQ(f.get_string("dump.prompt"), "Once upon a time");
    const GgufValue* names = f.find("dump.tensor.orig_name");
    ASSERT_NE(names, nullptr);
    EXPECT_EQ(names->strings.size(), f.tensors().size());
    const GgufTensorInfo* tokens = f.find_tensor("inp_tokens");
    ASSERT_NE(tokens, nullptr);
    EXPECT_EQ(tokens->type, GgmlType::I32);
    EXPECT_EQ(tokens->ne[0], 5);  // "Once upon a time" is 5 tokens with BOS
    const GgufValue* prompt = f.find("dump.prompt_tokens");
    ASSERT_NE(prompt, nullptr);
    ASSERT_EQ(prompt->array_size(), 5u);
    for (size_t i = 0; i < 5; ++i) {
        int32_t id;
        std::memcpy(&id, tokens->data + 4 * i, 4);
        EXPECT_EQ(id, prompt->item(i).i64);
    }
}

// Rewriting a fixture with our writer gives the same bytes: same header, metadata encoding,
// tensor infos, alignment padding and data.
TEST(GgufFixtures, RewritingReproducesTheFileByteForByte) {
    LS_REQUIRE_FIXTURES();
    std::string dir = test::make_temp_dir();
    for (const char* rel : {"models/stories260K.gguf", "models/qwen2-mini-Q8_0.gguf", "quant/Q4_K.gguf",
                            "dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf"}) {
        SCOPED_TRACE(rel);
        std::string src = test::fixture_path(rel);
        auto r = GgufFile::open(src);
        ASSERT_TRUE(r.ok()) << r.error().message;
        const GgufFile& f = *r.value();
        std::vector<GgufWriteTensor> tensors;
        for (const auto& t : f.tensors())
            tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes});
        std::vector<GgufKV> kv = f.metadata();
        std::string out = dir + "/copy.gguf";
        Status s = gguf_write(out, kv, tensors, static_cast<uint32_t>(f.alignment()), /*overwrite=*/true);
        ASSERT_TRUE(s.ok()) << s.error().message;
        EXPECT_TRUE(read_all(out) == read_all(src)) << "rewritten file differs from " << rel;
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
