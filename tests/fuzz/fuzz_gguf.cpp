// Fuzz target: the GGUF reader and what `layerscope inspect` does with a file it accepted
// (metadata values, model config, lints, tokenizer summary, tensor statistics).
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
