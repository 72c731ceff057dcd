// References from llama.cpp builds for other instruction sets than the fixtures' machine (AVX-512
// with native FP16): dumps made by an AVX2+FMA+F16C build of the fixtures' llama.cpp commit with
// the companion dumper (tests/data/llama-avx2, --no-extra-bufts), of the fixtures' models. With
// default settings each compares clean: the build is recognised, llama mode reproduces it, no
// event diverges and the greedy tokens are the same. test_faults runs the fault catalogue against
// them as against the fixtures. Long decodes (32 generated tokens, flash attention off) stay bit-exact
// in every event of every decode call as the KV cache grows.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/compare/llama_variant.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

std::string avx2_dump(const std::string& name) { return std::string(LAYERSCOPE_TEST_DATA) + "/llama-avx2/" + name; }

struct IsaReference {
    const char* dump;   // tests/data/llama-avx2/<dump> or, with `fixture`, ../shared/fixtures/<dump>
    const char* model;  // ../shared/fixtures/<model>
    bool fixture;
    LlamaIsa isa;       // the variant the comparison must settle on
};

const IsaReference kReferences[] = {
    {"stories260K_once_n3_fa-off.gguf", "models/stories260K.gguf", false, LlamaIsa::kAvx2},
    {"llama-gqa-mini-F16_happy_n4_fa-off.gguf", "models/llama-gqa-mini-F16.gguf", false, LlamaIsa::kAvx2},
    {"llama-gqa-mini-Q4_K_M_boy_n4_fa-off.gguf", "models/llama-gqa-mini-Q4_K_M.gguf", false, LlamaIsa::kAvx2},
    {"llama-gqa-mini-Q4_K_M_lily_n2_fa-on.gguf", "models/llama-gqa-mini-Q4_K_M.gguf", false, LlamaIsa::kAvx2},
    {"qwen2-mini-F16_france_n2_fa-off.gguf", "models/qwen2-mini-F16.gguf", false, LlamaIsa::kAvx2},
    {"qwen2-mini-Q8_0_code_n2_fa-off.gguf", "models/qwen2-mini-Q8_0.gguf", false, LlamaIsa::kAvx2},
    // The fixtures' own machine: AVX-512 with native f16 arithmetic, told apart by the decode calls.
    {"dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", "models/llama-gqa-mini-Q4_K_M.gguf", true, LlamaIsa::kAvx512Fp16},
    {"dumps/qwen2-mini-F16_chat_n4_fa-off_nocache.gguf", "models/qwen2-mini-F16.gguf", true, LlamaIsa::kAvx512Fp16},
};

class IsaReferences : public ::testing::TestWithParam<IsaReference> {};

TEST_P(IsaReferences, CompareCleanWithDefaultSettings) {
    LS_REQUIRE_FIXTURES();
    const IsaReference& c = GetParam();
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(c.fixture ? test::fixture_path(c.dump) : avx2_dump(c.dump));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;  // defaults, as `layerscope compare -m M -r R`
    options.forward.n_ubatch = reference.value()->n_ubatch();
    options.forward.flash_attn = reference.value()->flash_attention();
    options.forward.all_logits = reference.value()->all_logits();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    EXPECT_EQ(r.llama_isa, c.isa) << r.llama_isa_why;
    EXPECT_EQ(r.summary.diverged, 0) << "first " << r.comparisons[std::max<int64_t>(0, r.summary.first_divergent)].name;
    EXPECT_EQ(r.summary.warn, 0);
    EXPECT_GT(r.summary.ok, 100);
    // Greedy tokens: the argmax of each decode call's last logits row is the reference's token.
    const std::vector<int32_t> ref_tokens = reference.value()->generated_tokens();
    size_t decode = 0;
    int exact_events = 0;
    for (const EventComparison& e : r.comparisons) exact_events += e.status == CompareStatus::kOk && e.metrics.nmse == 0;
    for (const CapturedEvent& e : r.captures.events) {
        if (e.base_name != "result_output" || decode >= ref_tokens.size()) continue;
        const int64_t n_vocab = e.ne[0];
        const std::vector<int32_t> top = test::top_k(e.data.data() + (e.ne[1] - 1) * n_vocab, n_vocab, 1);
        EXPECT_EQ(top[0], ref_tokens[decode]) << "decode call " << decode;
        ++decode;
    }
    EXPECT_EQ(decode, ref_tokens.size());
    std::printf("[isa] %-52s %s: %d ok (%d bit-exact), %d warn, %d diverged; %s\n", c.dump, llama_isa_name(r.llama_isa),
                r.summary.ok, exact_events, r.summary.warn, r.summary.diverged, r.llama_isa_why.c_str());
}

INSTANTIATE_TEST_SUITE_P(Builds, IsaReferences, ::testing::ValuesIn(kReferences), [](const auto& info) {
    std::string n = std::string(info.param.fixture ? "fixture_" : "avx2_") + info.param.dump;
    for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return n;
});

// Long decodes without flash attention, one decode call per generated token, while the KV cache
// grows past 16 and 32 cells. llama.cpp's n_kv stays padded to 256 cells (the softmax and the
// kq_soft_max x V dot products run over all of them, the cells not yet used masked to exact zeros);
// ours covers the cells in use, padded to the same block boundaries. Every event of every decode
// call must be bit-exact, not merely under the thresholds.
struct LongDecode {
    const char* dump;   // tests/data/llama-avx2/<dump>
    const char* model;  // ../shared/fixtures/<model>
    int decode_calls;   // the prompt, then one per generated token
};

const LongDecode kLongDecodes[] = {
    {"stories260K_once_n32_fa-off.gguf", "models/stories260K.gguf", 33},
    {"qwen2-mini-Q8_0_code_n20_fa-off.gguf", "models/qwen2-mini-Q8_0.gguf", 21},  // GQA, Q8_0
};

class LongDecodes : public ::testing::TestWithParam<LongDecode> {};

TEST_P(LongDecodes, EveryEventOfEveryDecodeCallIsBitExact) {
    LS_REQUIRE_FIXTURES();
    const LongDecode& c = GetParam();
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(avx2_dump(c.dump));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    ASSERT_FALSE(reference.value()->flash_attention());
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.llama_isa = LlamaIsa::kAvx2;
    options.forward.n_ubatch = reference.value()->n_ubatch();
    options.forward.all_logits = reference.value()->all_logits();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    ASSERT_EQ(r.comparisons.size(), r.captures.events.size());
    EXPECT_EQ(r.summary.no_reference, 0);
    std::vector<int> events(c.decode_calls, 0), inexact(c.decode_calls, 0);
    int64_t max_kv = 0;
    std::string first;
    for (size_t i = 0; i < r.comparisons.size(); ++i) {
        const EventComparison& cmp = r.comparisons[i];
        const CapturedEvent& e = r.captures.events[i];
        ASSERT_LT(e.decode, c.decode_calls) << e.name;
        ++events[e.decode];
        if (e.base_name.rfind("kq_soft_max-", 0) == 0) max_kv = std::max(max_kv, e.ne[0]);
        if (cmp.status != CompareStatus::kNoReference && cmp.metrics.nmse == 0 && cmp.metrics.max_abs == 0 &&
            cmp.metrics.n_nonfinite == 0)
            continue;
        ++inexact[e.decode];
        if (first.empty())
            first = fmt::format("{} (decode call {}, {} KV cells): nmse {:.3g}, max |diff| {:.3g}", e.name, e.decode,
                                r.prompt.size() + e.decode, cmp.metrics.nmse, cmp.metrics.max_abs);
    }
    EXPECT_GT(max_kv, 16);
    for (int d = 0; d < c.decode_calls; ++d) {
        EXPECT_GT(events[d], 10) << "decode call " << d;
        EXPECT_EQ(inexact[d], 0) << "decode call " << d << " (" << r.prompt.size() + d << " KV cells)";
    }
    EXPECT_TRUE(first.empty()) << "first event not bit-exact: " << first;
    std::printf("[long decode] %-40s %d decode calls, %zu events, up to %lld KV cells, %s\n", c.dump, c.decode_calls,
                r.comparisons.size(), static_cast<long long>(max_kv), first.empty() ? "all bit-exact" : first.c_str());
}

INSTANTIATE_TEST_SUITE_P(Avx2, LongDecodes, ::testing::ValuesIn(kLongDecodes), [](const auto& info) {
    std::string n = info.param.dump;
    for (char& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    return n;
});

// Exact mode against llama.cpp does not quantize activations as llama.cpp does: it is judged
// against the per-event noise floor, and compares clean where the fixed thresholds alone would
// call a correct engine diverged, while a real bug still stands out at its first event.
CompareRunResult compare_exact(const char* model_path, const char* dump, Fault fault, bool noise_floor) {
    auto model = Model::open(test::fixture_path(model_path));
    auto reference = ReferenceDump::open(avx2_dump(dump));
    EXPECT_TRUE(model.ok() && reference.ok());
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.mode = MathMode::kExact;
    options.forward.fault = fault;
    options.thresholds.noise_floor = noise_floor;
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    EXPECT_TRUE(run.ok()) << run.error().message;
    return run.ok() ? std::move(run.value()) : CompareRunResult{};
}

TEST(NoiseFloor, ExactModeAgainstAKQuantReference) {
    LS_REQUIRE_FIXTURES();
    const char* model = "models/llama-gqa-mini-Q4_K_M.gguf";
    const char* dump = "llama-gqa-mini-Q4_K_M_boy_n4_fa-off.gguf";
    const CompareRunResult fixed = compare_exact(model, dump, Fault::kNone, false);
    EXPECT_GT(fixed.summary.diverged, 100);  // the quantization of activations alone, judged by 1e-4
    EXPECT_TRUE(fixed.noise_floor.empty());
    const CompareRunResult floored = compare_exact(model, dump, Fault::kNone, true);
    EXPECT_EQ(floored.summary.diverged, 0);
    EXPECT_EQ(floored.summary.warn, 0);
    EXPECT_NE(floored.noise_floor.find("exact mode"), std::string::npos) << floored.noise_floor;
    int with_floor = 0;
    for (const EventComparison& c : floored.comparisons) with_floor += c.floor_nmse > 0;
    EXPECT_GT(with_floor, 300);
    for (auto [fault, first] : {std::pair{Fault::kRopeWrongPairing, "Qcur-0#3"}, {Fault::kAttentionScale, "kq_soft_max-0"},
                                {Fault::kQ4KScaleMinSwapped, "embd"}}) {
        const CompareRunResult r = compare_exact(model, dump, fault, true);
        ASSERT_GE(r.summary.first_divergent, 0) << fault_info(fault).name;
        EXPECT_EQ(r.comparisons[r.summary.first_divergent].name, first) << fault_info(fault).name;
    }
    const CompareRunResult stuck =
        compare_exact("models/llama-gqa-mini-F16.gguf", "llama-gqa-mini-F16_happy_n4_fa-off.gguf", Fault::kKvPositionStuck, true);
    ASSERT_GE(stuck.summary.first_divergent, 0);
    EXPECT_EQ(stuck.comparisons[stuck.summary.first_divergent].name, "Qcur-0#3@1");
}

// What a dump says of its build decides the candidates.
TEST(LlamaIsaGuess, FromTheDumpsBuildFacts) {
    LS_REQUIRE_FIXTURES();
    auto avx2 = ReferenceDump::open(avx2_dump("stories260K_once_n3_fa-off.gguf"));
    ASSERT_TRUE(avx2.ok());
    const LlamaIsaGuess a = guess_llama_isa(*avx2.value());
    EXPECT_EQ(a.candidates, std::vector<LlamaIsa>{LlamaIsa::kAvx2}) << a.why;
    EXPECT_TRUE(a.cpu_build);
    EXPECT_FALSE(avx2.value()->cpu_flags().empty());  // the dumper records the processor's flags
    auto fixture = ReferenceDump::open(test::fixture_path("dumps/stories260K_once_n0.gguf"));
    ASSERT_TRUE(fixture.ok());
    const LlamaIsaGuess f = guess_llama_isa(*fixture.value());
    EXPECT_EQ(f.candidates, (std::vector<LlamaIsa>{LlamaIsa::kAvx512Fp16, LlamaIsa::kAvx512})) << f.why;
}

}  // namespace
}  // namespace ls
