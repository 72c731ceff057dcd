// Whole models on the CUDA backend's kernels, run on the CPU by the SIMT emulator (cuda-emulated)
// and, where a device is usable, on the GPU (cuda; skipped with the reason elsewhere): every llama,
// qwen2 and deepseek2 fixture model generates llama.cpp's greedy tokens, and every event of the run
// agrees with the CPU backend's exact-mode run of the same tokens at NMSE <= 1e-6 (compared with the
// backend A/B machinery of `compare --against-backend`).
#include <gtest/gtest.h>

#include "engine/compare/backend_ab.h"
#include "engine/compare/compare_run.h"
#include "engine/forward/generate.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct ModelCase {
    const char* model;
    const char* dump;  // a llama.cpp dump with generated tokens; nullptr: none (tokens below)
};

const ModelCase kModels[] = {
    {"models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf"},
    {"models/llama-2-tiny-random.gguf", nullptr},
    {"models/llama-gqa-mini-F16.gguf", "dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf"},
    {"models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf"},
    {"models/qwen2-mini-F16.gguf", "dumps/qwen2-mini-F16_chat_n4_fa-off_nocache.gguf"},
    {"models/qwen2-mini-Q8_0.gguf", "dumps/qwen2-mini-Q8_0_code_n4_fa-off_nocache.gguf"},
    {"models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_hi_n4_fa-off_nocache.gguf"},
    {"models/deepseek2-mini-Q4_K_M.gguf", "dumps/deepseek2-mini-Q4_K_M_paris_n4_fa-off_nocache.gguf"},
    {"models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf", "dumps/deepseek2-mini-legacy-kvb-Q4_K_M_paris_n4_fa-off_nocache.gguf"},
};

struct ModelRun {
    std::vector<int32_t> prompt, want;  // want: llama.cpp's greedy tokens (empty without a dump)
    ForwardOptions forward;
};

ModelRun run_for(const ModelCase& c) {
    ModelRun r;
    if (!c.dump) {
        r.prompt = {1, 15043, 3186, 29892};
        r.forward.n_ctx = 256;
        return r;
    }
    auto ref = ReferenceDump::open(test::fixture_path(c.dump));
    EXPECT_TRUE(ref.ok()) << c.dump;
    if (!ref.ok()) return r;
    r.prompt = ref.value()->prompt_tokens();
    r.want = ref.value()->generated_tokens();
    r.forward.n_ubatch = ref.value()->n_ubatch();
    r.forward.n_ctx = 256;
    return r;
}

// The backends under test: the emulated device always, the real one where it is usable.
const BackendKind kCudaKinds[] = {BackendKind::kCudaEmulated, BackendKind::kCuda};

// The CUDA backend of `kind` with two CPU threads; a test of the real device is skipped, with the
// runtime's reason, where there is none.
#define LS_MAKE_CUDA_OR_SKIP(var, kind)                                                          \
    MadeBackend var = make_backend((kind), BackendOptions{2});                                  \
    if (!var.backend && (kind) == BackendKind::kCuda) GTEST_SKIP() << "no usable CUDA device: " << var.note; \
    ASSERT_TRUE(var.backend) << var.note

class CudaModels : public ::testing::TestWithParam<std::tuple<ModelCase, BackendKind>> {};

TEST_P(CudaModels, GreedyTokensAreLlamaCpps) {
    LS_REQUIRE_FIXTURES();
    const auto& [c, kind] = GetParam();
    LS_MAKE_CUDA_OR_SKIP(cuda, kind);
    const ModelRun run = run_for(c);
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto forward = make_forward(*model.value(), *cuda.backend, run.forward);
    ASSERT_TRUE(forward.ok()) << forward.error().message;
    const int n = std::max<int>(4, static_cast<int>(run.want.size()));
    auto g = generate_greedy(*forward.value(), model.value()->tokenizer(), run.prompt, n, nullptr);
    ASSERT_TRUE(g.ok()) << g.error().message;
    const std::vector<int32_t>& got = g.value().generated;
    ASSERT_GE(got.size(), run.want.size());
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + run.want.size()), run.want) << c.model;
    // Without generated tokens from llama.cpp, the CPU's llama-mode tokens.
    if (run.want.empty()) {
        auto cpu = make_cpu_backend(2);
        auto f = make_forward(*model.value(), *cpu, run.forward);
        ASSERT_TRUE(f.ok());
        auto cg = generate_greedy(*f.value(), model.value()->tokenizer(), run.prompt, n, nullptr);
        ASSERT_TRUE(cg.ok());
        EXPECT_EQ(got, cg.value().generated) << c.model;
    }
}

TEST_P(CudaModels, EveryEventMatchesTheCpuExactRun) {
    LS_REQUIRE_FIXTURES();
    const auto& [c, kind] = GetParam();
    LS_MAKE_CUDA_OR_SKIP(cuda, kind);
    ModelRun run = run_for(c);
    run.forward.mode = MathMode::kExact;
    const int n_generate = std::max<int>(3, static_cast<int>(run.want.size()));
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto cpu = make_cpu_backend(2);
    auto reference = run_as_reference(*model.value(), *cpu, run.forward, run.prompt, n_generate, "the cpu run");
    ASSERT_TRUE(reference.ok()) << reference.error().message;

    CompareRunOptions options;
    options.forward = run.forward;
    options.prompt = run.prompt;
    options.thresholds.noise_floor = false;
    options.thresholds.warn_nmse = 1e-6;
    options.thresholds.diverged_nmse = 1e-6;
    auto r = compare_with_reference(*model.value(), *cuda.backend, *reference.value(), options);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const CompareRunResult& result = r.value();
    double worst = 0;
    std::string worst_name = "-";
    for (const EventComparison& e : result.comparisons) {
        if (e.status == CompareStatus::kNoReference) continue;
        EXPECT_TRUE(e.status == CompareStatus::kOk) << c.model << ": " << e.name << " " << compare_status_name(e.status)
                                                    << " nmse " << e.metrics.nmse;
        if (e.metrics.nmse > worst) worst = e.metrics.nmse, worst_name = e.name;
    }
    EXPECT_GT(result.summary.compared(), 50);
    EXPECT_EQ(result.summary.no_reference, 0);
    std::printf("[%s vs cpu exact] %s: %d events over %d decode calls, worst %s nmse %.3g\n", backend_kind_name(kind),
                c.model, result.summary.compared(), 1 + n_generate, worst_name.c_str(), worst);
}

// Against llama.cpp's CPU dumps, the CUDA backend (whose matmuls compute in f32 where the CPU
// quantizes the activations) is judged against the noise the CPU's two math modes leave per event:
// a clean run passes, a bug stands out where it lives.
class CudaModelsAgainstLlamaCpp : public ::testing::TestWithParam<BackendKind> {};

TEST_P(CudaModelsAgainstLlamaCpp, CleanWithinTheCpuFloorAndFaultsStillShow) {
    LS_REQUIRE_FIXTURES();
    LS_MAKE_CUDA_OR_SKIP(cuda, GetParam());
    struct Case {
        const char* model;
        const char* dump;
        Fault fault;
        const char* first;  // "" = clean
    };
    const Case cases[] = {
        {"models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", Fault::kNone, ""},
        {"models/deepseek2-mini-Q4_K_M.gguf", "dumps/deepseek2-mini-Q4_K_M_paris_n4_fa-off_nocache.gguf", Fault::kNone, ""},
        {"models/deepseek2-mini-Q4_K_M.gguf", "dumps/deepseek2-mini-Q4_K_M_paris_n4_fa-off_nocache.gguf",
         Fault::kMoeTopKOrder, "ffn_moe_argsort-1"},
    };
    for (const Case& c : cases) {
        auto model = Model::open(test::fixture_path(c.model));
        ASSERT_TRUE(model.ok()) << model.error().message;
        auto reference = ReferenceDump::open(test::fixture_path(c.dump));
        ASSERT_TRUE(reference.ok()) << reference.error().message;
        CompareRunOptions options;
        options.forward.fault = c.fault;
        options.forward.n_ubatch = reference.value()->n_ubatch();
        auto r = compare_with_reference(*model.value(), *cuda.backend, *reference.value(), options);
        ASSERT_TRUE(r.ok()) << r.error().message;
        const CompareRunResult& result = r.value();
        EXPECT_NE(result.noise_floor.find("on the CPU"), std::string::npos) << result.noise_floor;
        if (!*c.first) {
            EXPECT_EQ(result.summary.first_divergent, -1)
                << c.model << ": " << result.comparisons[std::max<int64_t>(0, result.summary.first_divergent)].name;
            EXPECT_EQ(result.summary.warn, 0) << c.model;
            continue;
        }
        ASSERT_GE(result.summary.first_divergent, 0) << c.model;
        EXPECT_EQ(result.comparisons[result.summary.first_divergent].name, c.first);
    }
}

std::string test_name(std::string s) {
    for (char& ch : s)
        if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModels, ::testing::Combine(::testing::ValuesIn(kModels), ::testing::ValuesIn(kCudaKinds)),
                         [](const auto& info) {
                             std::string s = std::get<0>(info.param).model;
                             s = s.substr(s.find('/') + 1);
                             s = s.substr(0, s.find(".gguf"));
                             return test_name(s + "_" + backend_kind_name(std::get<1>(info.param)));
                         });
INSTANTIATE_TEST_SUITE_P(Fixtures, CudaModelsAgainstLlamaCpp, ::testing::ValuesIn(kCudaKinds),
                         [](const auto& info) { return test_name(backend_kind_name(info.param)); });

}  // namespace
}  // namespace ls
