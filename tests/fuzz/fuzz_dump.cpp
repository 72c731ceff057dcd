// Fuzz target: GGUF tensor dumps as references (ReferenceDump), and a dump comparison with each
// side fuzzed, as `layerscope compare` runs it.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/compare/reference.h"
#include "tests/fuzz/fuzz_support.h"

namespace {
constexpr int64_t kMaxReadElements = 1 << 16;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto parsed = ls::GgufFile::parse(std::vector<uint8_t>(data, data + size), "fuzz-dump.gguf");
    if (!parsed) return 0;
    auto loaded = ls::ReferenceDump::from_gguf(std::move(parsed.value()));
    if (!loaded) return 0;
    const ls::ReferenceDump& dump = *loaded.value();
    for (const ls::RefTensor& t : dump.tensors()) {
        (void)dump.find(t.name);
        (void)dump.out_ids(t.decode, t.ubatch);
        if (t.n_elements() <= kMaxReadElements) (void)dump.values(t);
    }
    (void)dump.prompt_tokens(), (void)dump.generated_tokens(), (void)dump.decode_n_tokens();
    (void)dump.flash_attention(), (void)dump.n_ubatch(), (void)dump.system_info();

    ls::CompareThresholds thresholds;
    (void)ls::compare_dumps(dump, dump, thresholds, 1);
    if (const ls::ReferenceDump* fixture = ls::fuzz::fixture_dump()) {
        (void)ls::compare_dumps(*fixture, dump, thresholds, 1);
        (void)ls::compare_dumps(dump, *fixture, thresholds, 1);
    }
    return 0;
}
