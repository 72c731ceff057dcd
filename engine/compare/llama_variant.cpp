// Guessing the llama.cpp CPU build of a reference from its dump.* metadata.
#include "engine/compare/llama_variant.h"

#include <sstream>

namespace ls {
namespace {

// "AVX512 = 1" in llama.cpp's system_info.
bool has_feature(const std::string& system_info, const std::string& name) {
    return system_info.find("| " + name + " = 1") != std::string::npos ||
           system_info.find(": " + name + " = 1") != std::string::npos;
}

bool has_flag(const std::string& flags, const std::string& name) {
    std::istringstream in(flags);
    std::string f;
    while (in >> f)
        if (f == name) return true;
    return false;
}

}  // namespace

LlamaIsaGuess guess_llama_isa(const ReferenceDump& ref) {
    const std::string info = ref.system_info(), flags = ref.cpu_flags(), backend = ref.backend();
    LlamaIsaGuess g;
    const bool gpu_backend = !backend.empty() && backend.find("CPU") == std::string::npos;
    if (gpu_backend || info.find("CUDA") != std::string::npos || info.find("Metal") != std::string::npos ||
        info.find("Vulkan") != std::string::npos) {
        g.cpu_build = false;
        g.candidates = {LlamaIsa::kAvx2, LlamaIsa::kAvx512, LlamaIsa::kAvx512Fp16};
        g.why = "the reference was made by a GPU build (" + (backend.empty() ? std::string("system_info") : backend) +
                "): no CPU variant reproduces it, differences are judged against the noise floor";
        return g;
    }
    // Our own dumps name the variant they reproduced.
    const std::string tag = "llama.cpp build ";
    if (const size_t at = info.find(tag); at != std::string::npos) {
        LlamaIsa isa;
        const std::string name = info.substr(at + tag.size(), info.find_first_of(", ", at + tag.size()) - at - tag.size());
        if (llama_isa_from_name(name, &isa)) {
            g.candidates = {isa};
            g.why = "made by Layerscope reproducing " + name;
            return g;
        }
    }
    if (has_feature(info, "AVX512")) {
        if (has_flag(flags, "avx512fp16")) {
            g.candidates = {LlamaIsa::kAvx512Fp16, LlamaIsa::kAvx512};
            g.why = "system_info has AVX512 and the processor has avx512fp16";
        } else if (!flags.empty()) {
            g.candidates = {LlamaIsa::kAvx512};
            g.why = "system_info has AVX512 and the processor lacks avx512fp16";
        } else {
            g.candidates = {LlamaIsa::kAvx512Fp16, LlamaIsa::kAvx512};
            g.why = "system_info has AVX512 (it does not say whether f16 arithmetic is native)";
        }
        return g;
    }
    if (has_feature(info, "AVX2")) {
        g.candidates = {LlamaIsa::kAvx2};
        g.why = "system_info has AVX2 and no AVX512";
        return g;
    }
    g.candidates = {LlamaIsa::kAvx2, LlamaIsa::kAvx512, LlamaIsa::kAvx512Fp16};
    g.why = info.empty() ? "the reference does not record its build" : "system_info names no x86 vector extension";
    return g;
}

}  // namespace ls
