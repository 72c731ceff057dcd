// Every fault of the catalogue, run against a clean llama.cpp reference, must be reported with its
// first divergent event at the tensor where the bug lives; the clean run must not diverge. The
// references: the fixtures (an AVX-512 build with native FP16), and dumps of the same models and
// prompts from an AVX2 build (tests/data/llama-avx2), whose arithmetic llama mode reproduces too.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/gguf/gguf.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct FaultCase {
    Fault fault;
    const char* model;
    const char* dump;
    const char* first_event;  // expected first divergent event (dump name)
    const char* doctor;       // the doctor's transform that explains it
    const char* verdict_word; // a word its verdict must contain
};

const FaultCase kCases[] = {
    {Fault::kNone, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "", "", ""},
    {Fault::kTransposedWeight, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0", "transpose", "row-major"},
    {Fault::kTransposedWeight, "models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", "Qcur-0", "transpose", "noise floor"},
    {Fault::kRopeWrongPairing, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0#3", "rope", "instead of halves (NEOX)"},
    {Fault::kRopeSkipped, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0#3", "rope", "instead of not applied"},
    {Fault::kRopePositionOffByOne, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0#3", "rope", "positions from 0 instead of interleaved pairs (NORM) at positions from 1"},
    {Fault::kKvPositionStuck, "models/llama-gqa-mini-F16.gguf", "dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf", "Qcur-0#3@1", "rope", "positions from 4 instead of interleaved pairs (NORM) at positions from 0"},
    {Fault::kAttentionScale, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "kq_soft_max-0", "attention", "instead of scale 1/head_dim"},
    {Fault::kNoCausalMask, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "kq_soft_max-0", "attention", "without the causal mask"},
    {Fault::kPaddedVocabArgmax, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "result_output", "vocab-crop", "cropped to the 512 rows"},
    {Fault::kQkvBiasDropped, "models/qwen2-mini-F16.gguf", "dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf", "Qcur-0#2", "bias-added", "attn_q.bias is added"},
    {Fault::kRmsNormWeightTwice, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "attn_norm-0", "norm-weight-twice", "applied once"},
    {Fault::kRmsNormEpsilon, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "norm-0", "rmsnorm-epsilon", "epsilon 1e-05"},
    {Fault::kQ4KScaleMinSwapped, "models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", "embd", "q4k-scale-min", "swaps scales and mins"},
};

// The same cases against the AVX2 build's dump of the same model and prompt.
std::string avx2_dump_for(const std::string& fixture_dump) {
    static const std::pair<const char*, const char*> kSame[] = {
        {"dumps/stories260K_once_n0_fa-off.gguf", "stories260K_once_n3_fa-off.gguf"},
        {"dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf", "llama-gqa-mini-F16_happy_n4_fa-off.gguf"},
        {"dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf", "qwen2-mini-F16_france_n2_fa-off.gguf"},
        {"dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", "llama-gqa-mini-Q4_K_M_boy_n4_fa-off.gguf"},
    };
    for (const auto& [fixture, avx2] : kSame)
        if (fixture_dump == fixture) return std::string(LAYERSCOPE_TEST_DATA) + "/llama-avx2/" + avx2;
    return "";
}

// The parameter: a case, and whether it runs against the AVX2 build's dump.
class Faults : public ::testing::TestWithParam<std::tuple<FaultCase, bool>> {};

TEST_P(Faults, FirstDivergenceIsWhereTheBugLives) {
    LS_REQUIRE_FIXTURES();
    const auto& [c, avx2] = GetParam();
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    const std::string dump = avx2 ? avx2_dump_for(c.dump) : test::fixture_path(c.dump);
    ASSERT_FALSE(dump.empty()) << "no AVX2 dump for " << c.dump;
    auto reference = ReferenceDump::open(dump);
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.fault = c.fault;
    options.forward.n_ubatch = reference.value()->n_ubatch();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    EXPECT_EQ(r.llama_isa, avx2 ? LlamaIsa::kAvx2 : LlamaIsa::kAvx512Fp16) << r.llama_isa_why;
    if (c.fault == Fault::kNone) {
        EXPECT_EQ(r.summary.first_divergent, -1) << r.comparisons[std::max<int64_t>(0, r.summary.first_divergent)].name;
        EXPECT_EQ(r.summary.warn, 0);
        return;
    }
    ASSERT_GE(r.summary.first_divergent, 0) << "fault " << fault_info(c.fault).name << " was not detected";
    const EventComparison& first = r.comparisons[r.summary.first_divergent];
    EXPECT_EQ(first.name, c.first_event) << "nmse " << first.metrics.nmse << " " << first.note;
    for (int64_t i = 0; i < r.summary.first_divergent; ++i)
        EXPECT_NE(r.comparisons[i].status, CompareStatus::kWarn) << r.comparisons[i].name;
    DoctorReport doctor = diagnose(r, static_cast<size_t>(r.summary.first_divergent), *reference.value(), model.value().get(),
                                   options.thresholds);
    ASSERT_FALSE(doctor.findings.empty()) << "the doctor found no explanation for " << first.name;
    EXPECT_EQ(doctor.findings.front().transform, c.doctor) << doctor.findings.front().verdict;
    EXPECT_NE(doctor.findings.front().verdict.find(c.verdict_word), std::string::npos) << doctor.findings.front().verdict;
    std::printf("[fault] %-26s first divergent %-12s nmse %-9.3g doctor: %s\n", fault_info(c.fault).name, first.name.c_str(),
                first.metrics.nmse, doctor.findings.front().verdict.c_str());
}

INSTANTIATE_TEST_SUITE_P(Catalogue, Faults, ::testing::Combine(::testing::ValuesIn(kCases), ::testing::Bool()), [](const auto& info) {
    std::string n = std::string(std::get<1>(info.param) ? "avx2_" : "fixture_") + fault_info(std::get<0>(info.param).fault).name;
    // A fault tried on a quantized model besides its F16 or f32 one.
    const FaultCase& c = std::get<0>(info.param);
    if (std::string(c.model).find("Q4_K_M") != std::string::npos && c.fault != Fault::kQ4KScaleMinSwapped) n += "_Q4_K_M";
    for (char& ch : n) if (ch == '-') ch = '_';
    return n;
});

// A fixture model, one of its dumps, and our run compared with it (with the dump's batch size and
// flash attention), for the deepseek2 tests below.
struct FixtureCompare {
    FixtureCompare(const char* model_path, const char* dump_path) {
        auto m = Model::open(test::fixture_path(model_path));
        EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
        if (m.ok()) model = std::move(m.value());
        auto r = ReferenceDump::open(test::fixture_path(dump_path));
        EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
        if (r.ok()) reference = std::move(r.value());
    }
    bool ok() const { return model && reference; }
    Result<CompareRunResult> run(CompareRunOptions options) const {
        options.forward.n_ubatch = reference->n_ubatch();
        options.forward.flash_attn = reference->flash_attention();
        return compare_with_reference(*model, *backend, *reference, options);
    }
    DoctorReport doctor(const CompareRunResult& r, size_t event) const {
        return diagnose(r, event, *reference, model.get(), CompareThresholds{});
    }
    std::unique_ptr<Model> model;
    std::unique_ptr<ReferenceDump> reference;
    std::unique_ptr<Backend> backend = make_cpu_backend(0);
};

// deepseek2's own faults (and the shared ones where MLA changes where they show), against the
// fixture's dump: the first divergence, and the doctor's verdict.
const FaultCase kDeepseek2Cases[] = {
    {Fault::kNone, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf", "", "", ""},
    {Fault::kMoeWeightsNorm, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
     "ffn_moe_weighted-1", "moe-weights-norm", "as the router gives them (not renormalised) instead of renormalised"},
    {Fault::kMoeTopKOrder, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
     "ffn_moe_argsort-1", "moe-topk", "largest probability first (the k most likely experts chosen) instead of smallest"},
    {Fault::kMlaScaleWidth, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
     "kq_soft_max-0", "attention", "instead of scale mscale^2/sqrt(80)"},
    {Fault::kAttentionScale, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
     "kq_soft_max-0", "attention", "instead of scale 1/sqrt(head_dim 48)"},
    {Fault::kYarnMscale, "models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
     "q_pe-0#2", "rope", "scaled once more by YaRN's mscale 1.36889"},
    {Fault::kRopeWrongPairing, "models/deepseek2-mini-Q4_K_M.gguf", "dumps/deepseek2-mini-Q4_K_M_paris_n4_fa-off_nocache.gguf",
     "q_pe-0#2", "rope", "instead of halves (NEOX)"},
    {Fault::kNone, "models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf",
     "dumps/deepseek2-mini-legacy-kvb-Q4_K_M_rome_n0_nocache.gguf", "", "", ""},
};

class Deepseek2Faults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(Deepseek2Faults, FirstDivergenceIsWhereTheBugLives) {
    LS_REQUIRE_FIXTURES();
    const FaultCase& c = GetParam();
    const FixtureCompare fixture(c.model, c.dump);
    ASSERT_TRUE(fixture.ok());
    CompareRunOptions options;
    options.forward.fault = c.fault;
    auto run = fixture.run(options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    if (c.fault == Fault::kNone) {
        EXPECT_EQ(r.summary.first_divergent, -1) << r.comparisons[std::max<int64_t>(0, r.summary.first_divergent)].name;
        EXPECT_EQ(r.summary.warn, 0);
        EXPECT_GT(r.summary.compared(), 100);
        return;
    }
    ASSERT_GE(r.summary.first_divergent, 0) << "fault " << fault_info(c.fault).name << " was not detected";
    const EventComparison& first = r.comparisons[r.summary.first_divergent];
    EXPECT_EQ(first.name, c.first_event) << "nmse " << first.metrics.nmse << " " << first.note;
    DoctorReport doctor = fixture.doctor(r, static_cast<size_t>(r.summary.first_divergent));
    ASSERT_FALSE(doctor.findings.empty()) << "the doctor found no explanation for " << first.name;
    EXPECT_EQ(doctor.findings.front().transform, c.doctor) << doctor.findings.front().verdict;
    EXPECT_NE(doctor.findings.front().verdict.find(c.verdict_word), std::string::npos) << doctor.findings.front().verdict;
    std::printf("[fault] %-26s first divergent %-18s nmse %-9.3g doctor: %s\n", fault_info(c.fault).name, first.name.c_str(),
                first.metrics.nmse, doctor.findings.front().verdict.c_str());
}

INSTANTIATE_TEST_SUITE_P(Catalogue, Deepseek2Faults, ::testing::ValuesIn(kDeepseek2Cases), [](const auto& info) {
    std::string n = fault_info(info.param.fault).name;
    if (std::string(info.param.model).find("legacy") != std::string::npos) n += "_legacy";
    else if (std::string(info.param.model).find("Q4_K_M") != std::string::npos) n += "_Q4_K_M";
    for (char& ch : n) if (ch == '-') ch = '_';
    return n;
});

// Our run in the other MLA form than the reference's: Q, K and V cannot pair (their widths are
// the forms'), the doctor says which form each side runs, and the events both forms compute agree.
TEST(Deepseek2MlaForms, AFormMismatchIsNamedAndTheSharedEventsAgree) {
    LS_REQUIRE_FIXTURES();
    const FixtureCompare fixture("models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf");
    ASSERT_TRUE(fixture.ok());
    CompareRunOptions options;
    options.forward.mla = MlaForm::kUnabsorbed;
    auto run = fixture.run(options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    ASSERT_GE(r.summary.first_divergent, 0);
    EXPECT_EQ(r.comparisons[r.summary.first_divergent].name, "Qcur-0");
    DoctorReport doctor = fixture.doctor(r, static_cast<size_t>(r.summary.first_divergent));
    ASSERT_FALSE(doctor.findings.empty());
    EXPECT_EQ(doctor.findings.front().transform, "mla-form");
    EXPECT_NE(doctor.findings.front().verdict.find("ours runs multi-head latent attention unabsorbed and the reference "
                                                   "absorbed"),
              std::string::npos)
        << doctor.findings.front().verdict;
    EXPECT_NE(doctor.findings.front().verdict.find("--mla absorbed"), std::string::npos);
    int shared = 0;
    for (const EventComparison& c : r.comparisons) {
        const bool form_free = c.name.rfind("kq_soft_max-", 0) == 0 || c.name.rfind("l_out-", 0) == 0 ||
                               c.name.rfind("attn_out-", 0) == 0 || c.name == "result_output";
        if (!form_free) continue;
        ++shared;
        EXPECT_EQ(c.status, CompareStatus::kOk) << c.name << " nmse " << c.metrics.nmse;
    }
    EXPECT_GE(shared, 10);
}

// Two experts ranked the other way round by a router whose probabilities are off by about their
// gap is a near tie, and the doctor says so; the same swap with the probabilities unchanged (no
// numerical reason for it) is not. Our run's values are edited to make the two cases.
TEST(Deepseek2Router, ANearTieIsNamedNotPassed) {
    LS_REQUIRE_FIXTURES();
    const FixtureCompare fixture("models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf");
    ASSERT_TRUE(fixture.ok());
    auto run = fixture.run({});
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CaptureLog& log = run.value().captures;
    ASSERT_TRUE(log.find("ffn_moe_argsort-1") && log.find("ffn_moe_probs-1"));
    const size_t argsort_at = log.by_name.at("ffn_moe_argsort-1"), probs_at = log.by_name.at("ffn_moe_probs-1");
    auto doctor_after_swap = [&](int rank_a, bool probs_follow) {
        CompareRunResult r = run.value();
        std::vector<float>& order = r.captures.events[argsort_at].data;
        std::vector<float>& probs = r.captures.events[probs_at].data;
        const int a = static_cast<int>(order[rank_a]), b = static_cast<int>(order[rank_a + 1]);
        std::swap(order[rank_a], order[rank_a + 1]);                // token 0's ranking
        if (probs_follow) std::swap(probs[a], probs[b]);             // as a router off by their gap ranks them
        return fixture.doctor(r, argsort_at);
    };
    auto has = [](const DoctorReport& d, const char* transform) {
        for (const DoctorFinding& f : d.findings)
            if (f.transform == transform) return &f;
        return static_cast<const DoctorFinding*>(nullptr);
    };
    // Ranks 3 and 4 of 8 (top-2 routing): the chosen experts stay the same.
    const DoctorReport tie = doctor_after_swap(3, true);
    const DoctorFinding* f = has(tie, "moe-near-tie");
    ASSERT_TRUE(f) << (tie.findings.empty() ? "no finding" : tie.findings.front().verdict);
    EXPECT_EQ(tie.findings.front().transform, "moe-near-tie");
    EXPECT_NE(f->verdict.find("the chosen experts are the same"), std::string::npos) << f->verdict;
    // Ranks 2 and 3, across the top-2 boundary: the choice itself differs.
    const DoctorReport crossing = doctor_after_swap(1, true);
    f = has(crossing, "moe-near-tie");
    ASSERT_TRUE(f);
    EXPECT_NE(f->verdict.find("the chosen experts differ"), std::string::npos) << f->verdict;
    // The same swap from probabilities equal to the reference's: a real ranking bug, no tie.
    EXPECT_FALSE(has(doctor_after_swap(3, false), "moe-near-tie"));
}

// YaRN is a deepseek2 feature in the fixtures; a llama model with YaRN rope scaling written here
// (stories260K's weights plus the rope.scaling keys) checks the YaRN fault against our own clean
// run as the reference.
TEST(FaultsYarn, DoubleMscaleShowsAfterRope) {
    LS_REQUIRE_FIXTURES();
    auto src = GgufFile::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(src.ok());
    std::vector<GgufKV> kv = src.value()->metadata();
    kv.push_back({"llama.rope.scaling.type", GgufValue::make_string("yarn")});
    kv.push_back({"llama.rope.scaling.factor", GgufValue::make_f32(4.0f)});
    kv.push_back({"llama.rope.scaling.original_context_length", GgufValue::make_u32(512)});
    std::vector<GgufWriteTensor> tensors;
    for (const auto& t : src.value()->tensors())
        tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes});
    std::string dir = test::make_temp_dir();
    ASSERT_TRUE(gguf_write(dir + "/yarn.gguf", kv, tensors).ok());
    auto model = Model::open(dir + "/yarn.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto backend = make_cpu_backend(0);

    // The clean reference: our own run, dumped.
    ForwardOptions fo;
    auto clean = make_forward(*model.value(), *backend, fo);
    ASSERT_TRUE(clean.ok());
    std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
    class Keep : public EventSink {
    public:
        void on_event(const Event& e) override {
            std::vector<float> v(static_cast<size_t>(e.tensor.n_elements()));
            e.backend->download(v.data(), e.tensor.data, v.size() * 4);
            names.push_back(e.dump_name());
            ne.push_back(std::vector<int64_t>(e.tensor.ne, e.tensor.ne + 4));
            data.push_back(std::move(v));
        }
        std::vector<std::string> names;
        std::vector<std::vector<int64_t>> ne;
        std::vector<std::vector<float>> data;
    } keep;
    ASSERT_TRUE(clean.value()->eval(prompt, &keep).ok());
    std::vector<GgufWriteTensor> dump_tensors;
    std::vector<GgufValue> prompt_items;
    for (int32_t id : prompt) prompt_items.push_back(GgufValue::make_i32(id));
    for (size_t i = 0; i < keep.names.size(); ++i)
        dump_tensors.push_back({keep.names[i], GgmlType::F32, keep.ne[i], keep.data[i].data(), keep.data[i].size() * 4});
    ASSERT_TRUE(gguf_write(dir + "/clean.gguf",
                           {{"dump.format_version", GgufValue::make_u32(1)},
                            {"dump.prompt_tokens", GgufValue::make_array(GgufValueType::INT32, prompt_items)}},
                           dump_tensors).ok());
    auto reference = ReferenceDump::open(dir + "/clean.gguf");
    ASSERT_TRUE(reference.ok()) << reference.error().message;

    CompareRunOptions options;
    options.forward.fault = Fault::kYarnMscale;
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    ASSERT_GE(run.value().summary.first_divergent, 0);
    EXPECT_EQ(run.value().comparisons[run.value().summary.first_divergent].name, "Qcur-0#3");
    DoctorReport doctor = diagnose(run.value(), static_cast<size_t>(run.value().summary.first_divergent), *reference.value(),
                                   model.value().get(), options.thresholds);
    ASSERT_FALSE(doctor.findings.empty());
    EXPECT_NE(doctor.findings.front().verdict.find("mscale"), std::string::npos) << doctor.findings.front().verdict;

    // The progress callback sees every step (the same report when it lets the doctor go on), and
    // returning false stops it there: what was tried so far, nothing after.
    const size_t event = static_cast<size_t>(run.value().summary.first_divergent);
    std::vector<std::string> steps;
    DoctorReport watched = diagnose(run.value(), event, *reference.value(), model.value().get(), options.thresholds,
                                    [&](const std::string& step, size_t tried) {
                                        EXPECT_EQ(tried, steps.size());
                                        steps.push_back(step);
                                        return true;
                                    });
    EXPECT_FALSE(watched.cancelled);
    EXPECT_EQ(watched.tried, doctor.tried);
    EXPECT_EQ(steps, doctor.tried);
    ASSERT_EQ(watched.findings.size(), doctor.findings.size());
    ASSERT_GE(doctor.tried.size(), 3u);
    int calls = 0;
    DoctorReport stopped = diagnose(run.value(), event, *reference.value(), model.value().get(), options.thresholds,
                                    [&](const std::string&, size_t) { return ++calls < 3; });
    EXPECT_TRUE(stopped.cancelled);
    EXPECT_EQ(calls, 3);
    EXPECT_EQ(stopped.tried, std::vector<std::string>(doctor.tried.begin(), doctor.tried.begin() + 2));
    std::filesystem::remove_all(dir);
}

TEST(FaultsCatalogue, NamesRoundTripAndRefusals) {
    for (const FaultInfo& f : fault_catalogue()) {
        Fault parsed;
        ASSERT_TRUE(fault_from_name(f.name, &parsed));
        EXPECT_EQ(parsed, f.fault);
    }
    Fault parsed;
    EXPECT_FALSE(fault_from_name("no-such-fault", &parsed));
    LS_REQUIRE_FIXTURES();
    // A fault that needs something the model lacks is refused with a reason, not ignored.
    auto model = Model::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(model.ok());
    auto backend = make_cpu_backend(1);
    for (Fault f : {Fault::kQkvBiasDropped, Fault::kQ4KScaleMinSwapped, Fault::kYarnMscale, Fault::kMoeWeightsNorm,
                    Fault::kMoeTopKOrder, Fault::kMlaScaleWidth, Fault::kMoeBiasInWeights, Fault::kMoeGroupScore,
                    Fault::kMoeGateUpSwapped, Fault::kAttnSinksIgnored, Fault::kSwigluOaiUnclamped, Fault::kSwigluOaiClampBelow,
                    Fault::kMoeSoftmaxBeforeTopk, Fault::kMxfp4NibbleOrder, Fault::kMxfp4ScaleExponent,
                    Fault::kConvStateNotRolled, Fault::kConvStateRolledWrong, Fault::kDecayGateSign,
                    Fault::kOutputGateBeforeNorm, Fault::kDeltaHeadsInterleaved, Fault::kDeltaChunkDecay,
                    Fault::kImropeSectionsReversed}) {
        ForwardOptions fo;
        fo.fault = f;
        auto forward = make_forward(*model.value(), *backend, fo);
        ASSERT_FALSE(forward.ok()) << fault_info(f).name;
        EXPECT_NE(forward.error().message.find(fault_info(f).name), std::string::npos) << forward.error().message;
    }
}

}  // namespace
}  // namespace ls
