// Local vs inherited error: with a planted fault on either side of a comparison, the first event
// whose own op (run on the reference's inputs) disagrees with the reference is the fault's event,
// and every other divergent event only inherited it; on a clean run every op agrees.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/capture/dump_writer.h"
#include "engine/compare/compare_run.h"
#include "engine/compare/local_error.h"
#include "tests/test_support.h"

namespace ls {
namespace {

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

struct LocalCase {
    Fault fault;
    const char* model;
    const char* dump;         // llama.cpp's dump of the same model (the clean reference)
    const char* first_event;  // where the fault lives: the first event of ours it changes
    // The events the fault changes by themselves (in every layer): those may be local, no other.
    std::function<bool(const std::string& base, Op op)> own;
};

const LocalCase kCases[] = {
    {Fault::kRopeWrongPairing, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0#3",
     [](const std::string& b, Op op) { return (starts_with(b, "Qcur-") || starts_with(b, "Kcur-")) && op == Op::kRope; }},
    {Fault::kTransposedWeight, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "Qcur-0",
     [](const std::string& b, Op op) { return starts_with(b, "Qcur-") && op == Op::kMulMat; }},
    {Fault::kRmsNormWeightTwice, "models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", "attn_norm-0",
     [](const std::string& b, Op) { return starts_with(b, "attn_norm-") || starts_with(b, "ffn_norm-") || b == "result_norm"; }},
    {Fault::kQkvBiasDropped, "models/qwen2-mini-F16.gguf", "dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf", "Qcur-0#2",
     [](const std::string& b, Op op) {
         return (starts_with(b, "Qcur-") || starts_with(b, "Kcur-") || starts_with(b, "Vcur-")) &&
                (op == Op::kAdd || op == Op::kReshape);
     }},
};

// Checks where the local errors of `r` put the bug; `what` names the comparison in messages.
void expect_local_at_fault(const CompareRunResult& r, const LocalCase& c, const std::string& what) {
    ASSERT_GE(r.summary.first_divergent, 0) << what << ": the fault was not detected";
    const LocalSummary s = summarize_local(r.comparisons);
    ASSERT_GE(s.origin, 0) << what << ": no event has a local error; " << local_summary_line(r.comparisons);
    EXPECT_EQ(r.comparisons[s.origin].name, c.first_event) << what << ": " << local_summary_line(r.comparisons);
    EXPECT_EQ(s.unknown, 0) << what;
    // Every other divergent event only inherited the error: the rule must tell the two apart.
    EXPECT_GT(s.inherited, s.local) << what << ": " << local_summary_line(r.comparisons);
    for (size_t i = 0; i < r.comparisons.size(); ++i) {
        const EventComparison& e = r.comparisons[i];
        const CapturedEvent& ev = r.captures.events[i];
        if (e.status != CompareStatus::kWarn && e.status != CompareStatus::kDiverged) {
            EXPECT_EQ(e.local_origin, LocalOrigin::kNotComputed) << e.name;
            continue;
        }
        if (e.local_origin == LocalOrigin::kLocal) {
            EXPECT_TRUE(c.own(ev.base_name, ev.op)) << what << ": " << e.name << " marked local, local nmse " << e.local_nmse;
        }
        if (e.local_origin == LocalOrigin::kInherited) {
            EXPECT_LE(e.local_nmse, 1e-6) << what << ": " << e.name;
        }
    }
    std::printf("[local] %-22s %-12s %s\n", fault_info(c.fault).name, what.c_str(), local_summary_line(r.comparisons).c_str());
}

class LocalError : public ::testing::TestWithParam<LocalCase> {};

// Ours has the bug, llama.cpp's dump is the reference.
TEST_P(LocalError, OursFaultyAgainstLlamaCpp) {
    LS_REQUIRE_FIXTURES();
    const LocalCase& c = GetParam();
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(test::fixture_path(c.dump));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.fault = c.fault;
    options.forward.n_ubatch = reference.value()->n_ubatch();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    compute_local_errors(model.value().get(), *reference.value(), {options.forward, options.thresholds}, run.value());
    expect_local_at_fault(run.value(), c, "ours faulty");
}

// The other way round, as users compare their own engine: the buggy engine's dump is the
// reference (a dump of ours with the fault), and our clean run is compared with it.
TEST_P(LocalError, ReferenceFaultyAgainstCleanRun) {
    LS_REQUIRE_FIXTURES();
    const LocalCase& c = GetParam();
    auto model = Model::open(test::fixture_path(c.model));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto llama = ReferenceDump::open(test::fixture_path(c.dump));
    ASSERT_TRUE(llama.ok()) << llama.error().message;
    const std::vector<int32_t> prompt = llama.value()->prompt_tokens();
    auto backend = make_cpu_backend(0);

    ForwardOptions faulty;
    faulty.fault = c.fault;
    auto forward = make_forward(*model.value(), *backend, faulty);
    ASSERT_TRUE(forward.ok()) << forward.error().message;
    DumpWriter writer;
    ASSERT_TRUE(forward.value()->eval(prompt, &writer).ok());
    DumpInfo info;
    info.prompt_tokens = prompt;
    info.decode_n_tokens = {static_cast<int32_t>(prompt.size())};
    info.n_ctx = static_cast<uint32_t>(faulty.n_ctx);
    info.n_ubatch = static_cast<uint32_t>(faulty.n_ubatch);
    const std::string dir = test::make_temp_dir();
    ASSERT_TRUE(writer.write(dir + "/faulty.gguf", info).ok());
    auto reference = ReferenceDump::open(dir + "/faulty.gguf");
    ASSERT_TRUE(reference.ok()) << reference.error().message;

    CompareRunOptions options;
    options.forward.n_ubatch = faulty.n_ubatch;
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    compute_local_errors(model.value().get(), *reference.value(), {options.forward, options.thresholds}, run.value());
    expect_local_at_fault(run.value(), c, "reference faulty");
    reference.value().reset();
    std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Faults, LocalError, ::testing::ValuesIn(kCases), [](const auto& info) {
    std::string n = fault_info(info.param.fault).name;
    for (char& ch : n) if (ch == '-') ch = '_';
    return n;
});

// A clean run: every op of ours, run on llama.cpp's inputs, gives llama.cpp's output (each event
// is marked divergent here so that all of them are recomputed): the recomputation itself is right
// for every event kind, both architectures, decode calls, GQA, flash attention and Q4_K weights.
struct CleanCase {
    const char* model;
    const char* dump;
};
class LocalErrorClean : public ::testing::TestWithParam<CleanCase> {};

// Our clean run of `model_file` against llama.cpp's `dump_file` with every compared event marked
// divergent, so that the local pass recomputes all of them; the model and reference kept for it.
struct RecomputedRun {
    std::unique_ptr<Model> model;
    std::unique_ptr<ReferenceDump> reference;
    CompareRunResult run;
    int64_t first_divergent = -2;  // before the marking
};
RecomputedRun recompute_every_event(const char* model_file, const char* dump_file) {
    RecomputedRun out;
    auto model = Model::open(test::fixture_path(model_file));
    EXPECT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(test::fixture_path(dump_file));
    EXPECT_TRUE(reference.ok()) << reference.error().message;
    if (!model || !reference) return out;
    out.model = std::move(model.value());
    out.reference = std::move(reference.value());
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.n_ubatch = out.reference->n_ubatch();
    options.forward.flash_attn = out.reference->flash_attention();
    options.forward.all_logits = out.reference->all_logits();
    auto run = compare_with_reference(*out.model, *backend, *out.reference, options);
    EXPECT_TRUE(run.ok()) << run.error().message;
    if (!run) return out;
    out.run = std::move(run.value());
    out.first_divergent = out.run.summary.first_divergent;
    for (EventComparison& e : out.run.comparisons)
        if (e.status == CompareStatus::kOk) e.status = CompareStatus::kDiverged;
    compute_local_errors(out.model.get(), *out.reference, {options.forward, options.thresholds}, out.run);
    return out;
}

TEST_P(LocalErrorClean, EveryOpAgreesOnTheReferencesInputs) {
    LS_REQUIRE_FIXTURES();
    const CleanCase& c = GetParam();
    RecomputedRun rr = recompute_every_event(c.model, c.dump);
    ASSERT_TRUE(rr.model && rr.reference);
    EXPECT_EQ(rr.first_divergent, -1);
    CompareRunResult& r = rr.run;
    int measured = 0;
    for (const EventComparison& e : r.comparisons) {
        if (e.status != CompareStatus::kDiverged) continue;
        ASSERT_NE(e.local_origin, LocalOrigin::kNotComputed) << e.name;
        EXPECT_NE(e.local_origin, LocalOrigin::kUnknown) << e.name << ": " << e.local_why;
        if (e.local_origin == LocalOrigin::kUnknown) continue;
        EXPECT_EQ(e.local_origin, LocalOrigin::kInherited) << e.name << ": local nmse " << e.local_nmse;
        EXPECT_LE(e.local_nmse, 1e-6) << e.name;
        ++measured;
    }
    EXPECT_GT(measured, 20);
    const LocalSummary s = summarize_local(r.comparisons);
    EXPECT_EQ(s.origin, -1);
    EXPECT_NE(local_summary_line(r.comparisons).find("no event has a large local error"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, LocalErrorClean,
                         ::testing::Values(CleanCase{"models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf"},
                                           CleanCase{"models/stories260K.gguf", "dumps/stories260K_once_n0.gguf"},
                                           CleanCase{"models/qwen2-mini-F16.gguf", "dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf"},
                                           CleanCase{"models/llama-gqa-mini-F16.gguf", "dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf"},
                                           CleanCase{"models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf"}),
                         [](const auto& info) { return "case" + std::to_string(info.index); });

// deepseek2 on llama.cpp's dumps: every product of its latent attention (the absorbed k_b and v_b per
// head, after flash attention too; the legacy kv_b), of the router, the chosen experts (MUL_MAT_ID on
// the experts llama.cpp chose) and the shared experts, recomputed on llama.cpp's inputs, gives its
// output. The events not recomputed yet (latent attention's scores, RoPE'd halves) say so by name.
struct MlaCase {
    const char* model;
    const char* dump;
    std::vector<std::string> weights;  // of layer 1, each the weight of at least one measured product
};
class LocalErrorDeepseek2 : public ::testing::TestWithParam<MlaCase> {};

TEST_P(LocalErrorDeepseek2, EveryProductAgreesOnTheReferencesInputs) {
    LS_REQUIRE_FIXTURES();
    const MlaCase& c = GetParam();
    RecomputedRun rr = recompute_every_event(c.model, c.dump);
    ASSERT_TRUE(rr.model && rr.reference);
    const CompareRunResult& r = rr.run;
    std::set<std::string> weights;
    for (const EventComparison& e : r.comparisons) {
        if (e.status != CompareStatus::kDiverged) continue;
        if (e.local_origin == LocalOrigin::kUnknown) {
            EXPECT_EQ(e.local_why.rfind("no local recomputation", 0), 0u) << e.name << ": " << e.local_why;
            continue;
        }
        EXPECT_EQ(e.local_origin, LocalOrigin::kInherited) << e.name << ": local nmse " << e.local_nmse;
        EXPECT_LE(e.local_nmse, 1e-6) << e.name;
        if (!e.local_weight.empty()) weights.insert(e.local_weight);
    }
    for (const std::string& w : c.weights) EXPECT_TRUE(weights.count("blk.1." + w)) << c.dump << ": no product of blk.1." << w;
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, LocalErrorDeepseek2,
    ::testing::Values(
        MlaCase{"models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf",
                {"attn_q.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight", "attn_v_b.weight", "attn_output.weight",
                 "ffn_gate_inp.weight", "ffn_up_exps.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight",
                 "ffn_up_shexp.weight", "ffn_gate_shexp.weight", "ffn_down_shexp.weight"}},
        // flash attention: v_b on its output
        MlaCase{"models/deepseek2-mini-Q4_K_M.gguf", "dumps/deepseek2-mini-Q4_K_M_rome_n0_nocache.gguf",
                {"attn_k_b.weight", "attn_v_b.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_down_shexp.weight"}},
        // decode calls, and the legacy kv_b on the normed latent
        MlaCase{"models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf",
                "dumps/deepseek2-mini-legacy-kvb-Q4_K_M_paris_n4_fa-off_nocache.gguf",
                {"attn_kv_b.weight", "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight"}}),
    [](const auto& info) { return "case" + std::to_string(info.index); });

// Without a model there is nothing to recompute: no event gets a local verdict.
TEST(LocalErrorNoModel, LeavesComparisonsAlone) {
    CompareRunResult r;
    r.comparisons.resize(1);
    r.comparisons[0].status = CompareStatus::kDiverged;
    r.captures.events.resize(1);
    auto empty = ReferenceDump::from_tensors("none", {}, {});
    compute_local_errors(nullptr, *empty, {}, r);
    EXPECT_EQ(r.comparisons[0].local_origin, LocalOrigin::kNotComputed);
    EXPECT_EQ(local_summary_line(r.comparisons), "");
}

}  // namespace
}  // namespace ls
