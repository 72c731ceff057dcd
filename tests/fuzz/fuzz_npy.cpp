// Fuzz target: the .npy reader (header dict, dtypes, shapes, data length, f16/f64 conversion).
#include <cstddef>
#include <cstdint>

#include "engine/compare/reference_formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    auto array = ls::parse_npy(data, size, "fuzz.npy");
    if (array) (void)array->n_elements();
    return 0;
}
