// Fuzz target: llama-eval-callback / llama-debug logs, parsed and compared with a real dump as
// `layerscope compare DUMP LOG` does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/compare/compare_run.h"
#include "engine/compare/reference_formats.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto log = ls::parse_eval_log(std::string(reinterpret_cast<const char*>(data), size), "fuzz.log");
    if (!log) return 0;
    if (const ls::ReferenceDump* fixture = ls::fuzz::fixture_dump())
        (void)ls::compare_dumps(*fixture, *log.value(), ls::CompareThresholds{}, 1);
    return 0;
}
