// Which llama.cpp CPU build a reference comes from, so that llama mode reproduces its arithmetic:
// from what the dump says of its build, and when that leaves a choice, from which variant matches
// the reference's first events.
#pragma once

#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "kernels/backend.h"

namespace ls {

struct LlamaIsaGuess {
    std::vector<LlamaIsa> candidates;  // the variants the build may have run, likeliest first
    bool cpu_build = true;             // false: a GPU (or other non-CPU) build made the reference
    std::string why;                   // "system_info has AVX512 and the CPU has avx512fp16"
};

// The variants a reference's build may have run: AVX2 when its system_info has AVX2 but not
// AVX512; AVX-512 with or without FP16 when it has AVX512 (system_info does not show FP16: the
// processor flags in dump.cpu_flags do, when the dumper recorded them); all three otherwise.
LlamaIsaGuess guess_llama_isa(const ReferenceDump& reference);

}  // namespace ls
