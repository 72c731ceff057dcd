// Parity with llama.cpp for the llama, qwen2 and deepseek2 architectures: every tensor of every fixture dump,
// greedy tokens and top-5 logits, in llama mode (and exact mode's agreement, for information).
#include <gtest/gtest.h>

#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct DumpCase {
    const char* dump;
    const char* model;
    double limit;  // largest NMSE accepted in llama mode
};

// F32/F16 weights without flash attention: 1e-8; quantized weights: 1e-6; flash-attention dumps:
// 1e-6 (llama.cpp's own flash and plain attention differ by ~1e-7).
const DumpCase kCases[] = {
    {"dumps/stories260K_once_n0_fa-off.gguf", "models/stories260K.gguf", 1e-8},
    {"dumps/stories260K_once_n0.gguf", "models/stories260K.gguf", 1e-6},
    {"dumps/stories260K_girl_n0_ub4_nocache.gguf", "models/stories260K.gguf", 1e-6},
    {"dumps/stories260K_lily_n0_all-logits_nocache.gguf", "models/stories260K.gguf", 1e-6},
    {"dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf", "models/llama-gqa-mini-F16.gguf", 1e-8},
    {"dumps/llama-gqa-mini-F16_lily_n0_nocache.gguf", "models/llama-gqa-mini-F16.gguf", 1e-6},
    {"dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", "models/llama-gqa-mini-Q4_K_M.gguf", 1e-6},
    {"dumps/llama-gqa-mini-Q4_K_M_lily_n0_nocache.gguf", "models/llama-gqa-mini-Q4_K_M.gguf", 1e-6},
    // qwen2: QKV biases, NEOX rope, tied embeddings, padded vocabulary.
    {"dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf", "models/qwen2-mini-F16.gguf", 1e-8},
    {"dumps/qwen2-mini-F16_chat_n4_fa-off_nocache.gguf", "models/qwen2-mini-F16.gguf", 1e-8},
    {"dumps/qwen2-mini-Q8_0_code_n4_fa-off_nocache.gguf", "models/qwen2-mini-Q8_0.gguf", 1e-6},
    {"dumps/qwen2-mini-Q8_0_france_n0_nocache.gguf", "models/qwen2-mini-Q8_0.gguf", 1e-6},
    // deepseek2: MLA (absorbed for the split files, unabsorbed for the legacy attn_kv_b one), YaRN,
    // MoE with a shared expert after a dense block.
    {"dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf", "models/deepseek2-mini-F16.gguf", 1e-8},
    {"dumps/deepseek2-mini-F16_hi_n4_fa-off_nocache.gguf", "models/deepseek2-mini-F16.gguf", 1e-8},
    {"dumps/deepseek2-mini-Q4_K_M_paris_n4_fa-off_nocache.gguf", "models/deepseek2-mini-Q4_K_M.gguf", 1e-6},
    {"dumps/deepseek2-mini-Q4_K_M_rome_n0_nocache.gguf", "models/deepseek2-mini-Q4_K_M.gguf", 1e-6},
    {"dumps/deepseek2-mini-legacy-kvb-Q4_K_M_paris_n4_fa-off_nocache.gguf", "models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf", 1e-6},
    {"dumps/deepseek2-mini-legacy-kvb-Q4_K_M_rome_n0_nocache.gguf", "models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf", 1e-6},
};

class Parity : public ::testing::TestWithParam<DumpCase> {};

TEST_P(Parity, EveryTensorMatchesInLlamaMode) {
    LS_REQUIRE_FIXTURES();
    const DumpCase& c = GetParam();
    test::ParityResult r = test::run_parity(test::fixture_path(c.dump), test::fixture_path(c.model), MathMode::kLlama, c.limit);
    std::printf("[parity llama mode] %s: %d tensors compared, %d reference nodes not computed by us, worst %s\n", c.dump,
                r.compared, r.not_computed,
                r.worst_nmse == 0 ? "nmse 0 (all bit-exact)" : (r.worst_name + " nmse " + std::to_string(r.worst_nmse)).c_str());
    EXPECT_GT(r.compared, 20);
    for (const std::string& f : r.failures) ADD_FAILURE() << f;
    // Greedy tokens: ours after each decode call, the reference's generated tokens (one fewer).
    std::vector<int32_t> want = test::reference_generated(test::fixture_path(c.dump));
    ASSERT_GE(r.generated.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.generated.begin(), r.generated.begin() + want.size()), want);
    ASSERT_EQ(r.top5_ours.size(), r.top5_ref.size());
    for (size_t d = 0; d < r.top5_ref.size(); ++d) EXPECT_EQ(r.top5_ours[d], r.top5_ref[d]) << "top-5 of decode " << d;
}

TEST_P(Parity, ExactModeForInformation) {
    LS_REQUIRE_FIXTURES();
    const DumpCase& c = GetParam();
    test::ParityResult r = test::run_parity(test::fixture_path(c.dump), test::fixture_path(c.model), MathMode::kExact, 1.0);
    std::printf("[parity exact mode] %s: worst %s nmse %.3g\n", c.dump, r.worst_name.c_str(), r.worst_nmse);
    EXPECT_GT(r.compared, 20);
}

INSTANTIATE_TEST_SUITE_P(Dumps, Parity, ::testing::ValuesIn(kCases), [](const auto& info) {
    std::string n = info.param.dump;
    n = n.substr(n.find('/') + 1);
    n = n.substr(0, n.find(".gguf"));
    for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return n;
});

}  // namespace
}  // namespace ls
