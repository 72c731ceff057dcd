// Builds GGUF bytes field by field for tests, remembering where each field landed so that a test
// can corrupt exactly one of them.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace ls::test {

class GgufBuilder {
public:
    std::vector<uint8_t> bytes;
    std::map<std::string, size_t> at;  // field label -> byte offset

    size_t size() const { return bytes.size(); }
    void mark(const std::string& label) { at[label] = bytes.size(); }

    template <class T>
    void put(T v) {
        size_t n = bytes.size();
        bytes.resize(n + sizeof v);
        std::memcpy(bytes.data() + n, &v, sizeof v);
    }
    void str(const std::string& s) {
        put<uint64_t>(s.size());
        bytes.insert(bytes.end(), s.begin(), s.end());
    }
    void pad(size_t alignment) {
        while (bytes.size() % alignment) bytes.push_back(0);
    }
    template <class T>
    void patch(const std::string& label, T v) {
        std::memcpy(bytes.data() + at.at(label), &v, sizeof v);
    }
};

// A small valid GGUF v3: 4 metadata keys (a string, a u32, an array of strings, a nested array)
// and three F32 tensors of 8, 16 and 4x2 elements. Field offsets are recorded under labels.
inline GgufBuilder make_small_gguf() {
    GgufBuilder b;
    b.mark("magic");
    b.put<uint32_t>(0x46554747);
    b.mark("version");
    b.put<uint32_t>(3);
    b.mark("n_tensors");
    b.put<uint64_t>(3);
    b.mark("n_kv");
    b.put<uint64_t>(4);

    b.mark("kv0.key");
    b.str("general.architecture");
    b.mark("kv0.type");
    b.put<uint32_t>(8);
    b.mark("kv0.value");
    b.str("llama");

    b.mark("kv1.key");
    b.str("general.alignment");
    b.put<uint32_t>(4);
    b.mark("kv1.value");
    b.put<uint32_t>(32);

    b.mark("kv2.key");
    b.str("tokenizer.ggml.tokens");
    b.put<uint32_t>(9);
    b.mark("kv2.elem_type");
    b.put<uint32_t>(8);
    b.mark("kv2.count");
    b.put<uint64_t>(3);
    b.mark("kv2.item0");
    b.str("<s>");
    b.str("a");
    b.str("bc");

    b.mark("kv3.key");
    b.str("test.nested");
    b.put<uint32_t>(9);
    b.mark("kv3.elem_type");
    b.put<uint32_t>(9);
    b.mark("kv3.count");
    b.put<uint64_t>(2);
    for (int i = 0; i < 2; ++i) {
        b.mark(std::string("kv3.inner").append(std::to_string(i)));
        b.put<uint32_t>(5);  // i32
        b.put<uint64_t>(2);
        b.put<int32_t>(10 * i);
        b.put<int32_t>(10 * i + 1);
    }

    const char* names[3] = {"a.weight", "b.weight", "c.weight"};
    const int64_t ne[3][2] = {{8, 1}, {16, 1}, {4, 2}};
    const uint64_t offsets[3] = {0, 32, 96};
    for (int i = 0; i < 3; ++i) {
        std::string t = std::string("t").append(std::to_string(i));
        b.mark(t + ".name");
        b.str(names[i]);
        b.mark(t + ".n_dims");
        b.put<uint32_t>(2);
        b.mark(t + ".ne0");
        b.put<int64_t>(ne[i][0]);
        b.mark(t + ".ne1");
        b.put<int64_t>(ne[i][1]);
        b.mark(t + ".type");
        b.put<uint32_t>(0);
        b.mark(t + ".offset");
        b.put<uint64_t>(offsets[i]);
    }
    b.pad(32);
    b.mark("data");
    for (int i = 0; i < 3; ++i) {
        while (b.size() - b.at["data"] < offsets[i]) b.bytes.push_back(0);
        b.mark(std::string("t").append(std::to_string(i)).append(".data"));
        for (int64_t k = 0; k < ne[i][0] * ne[i][1]; ++k) b.put<float>(static_cast<float>(i * 100 + k));
    }
    return b;
}

}  // namespace ls::test
