// Fuzz target: the GGUF reader and what `layerscope inspect` does with a file it accepted
// (metadata values, model config, lints, tokenizer summary, tensor statistics), and the same bytes
// read as a header alone (GgufFile::parse_header).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/lint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_summary.h"

namespace {

// Tensors larger than this are only looked up, not decoded: a fuzzed shape can name far more
// elements than the few bytes behind it, in a block type whose size check passed.
constexpr int64_t kMaxDecodedElements = 1 << 16;

void walk_value(const ls::GgufValue& v, int depth) {
    int64_t i = 0;
    uint64_t u = 0;
    double d = 0;
    (void)v.to_string();
    (void)v.get_int(&i), (void)v.get_uint(&u), (void)v.get_float(&d);
    if (!v.is_array() || depth > 4) return;
    const size_t n = std::min<size_t>(v.array_size(), 16);
    for (size_t k = 0; k < n; ++k) {
        (void)v.item_int(k, &i), (void)v.item_float(k, &d);
        walk_value(v.item(k), depth + 1);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // The same bytes as a header alone (what a server sends), with a file size from its last
    // bytes: its tensors' data are then null and must not be read, nor decoded.
    if (size >= 8) {
        uint64_t file_size = 0;
        for (int i = 0; i < 8; ++i) file_size = file_size << 8 | data[size - 8 + i];
        auto header = ls::GgufFile::parse_header(std::vector<uint8_t>(data, data + size - 8), file_size, "fuzz-header.gguf");
        if (header) {
            for (const ls::GgufTensorInfo& t : header.value()->tensors()) (void)ls::dequantize_tensor(t);
            if (auto config = ls::model_config_from_gguf(*header.value()))
                (void)ls::derived_lines(config.value(), header.value().get());
        }
    }
    auto parsed = ls::GgufFile::parse(std::vector<uint8_t>(data, data + size), "fuzz.gguf");
    if (!parsed) return 0;
    const ls::GgufFile& file = *parsed.value();
    for (const ls::GgufKV& kv : file.metadata()) {
        walk_value(kv.value, 0);
        (void)file.find(kv.key);
    }
    for (const ls::GgufTensorInfo& t : file.tensors()) {
        (void)file.find_tensor(t.name);
        if (t.n_elements() > kMaxDecodedElements) continue;
        auto values = ls::dequantize_tensor(t);
        if (values) (void)ls::compute_stats(values->data(), static_cast<int64_t>(values->size()));
    }
    (void)ls::model_config_from_gguf(file);
    (void)ls::model_config_from_gguf_unchecked(file);
    (void)ls::lint_model(file);
    (void)ls::summarize_tokenizer(file);
    (void)ls::totals_by_type(file);
    return 0;
}
