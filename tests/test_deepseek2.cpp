// deepseek2 beyond the dumps: the absorbed and unabsorbed forms of multi-head latent attention
// compute the same function of the weights, for the split (attn_k_b/attn_v_b) and the legacy
// (attn_kv_b) files, and the YaRN numbers the forward pass runs with are llama.cpp's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "engine/compare/metrics.h"
#include "engine/model/make_model.h"
#include "engine/forward/forward.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

// Runs `prompt` and then `n_gen` greedy tokens; every event kept.
struct FormRun {
    test::CaptureAll events;
    std::vector<int32_t> generated;
};

FormRun run(const Model& model, MlaForm form, Fault fault, const std::vector<int32_t>& prompt, int n_gen) {
    auto backend = make_cpu_backend(0);
    ForwardOptions fo;
    fo.mode = MathMode::kExact;
    fo.n_ctx = 256;
    fo.mla = form;
    fo.fault = fault;
    auto forward = make_forward(model, *backend, fo);
    EXPECT_TRUE(forward.ok()) << (forward.ok() ? "" : forward.error().message);
    FormRun r;
    if (!forward.ok()) return r;
    std::vector<int32_t> input = prompt;
    for (int i = 0; i <= n_gen; ++i) {
        Status s = forward.value()->eval(input, &r.events);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
        if (!s.ok()) return r;
        const std::vector<float>& logits = forward.value()->last_logits();
        input = {test::top_k(logits.data(), static_cast<int64_t>(logits.size()), 1)[0]};
        r.generated.push_back(input[0]);
    }
    return r;
}

// The largest NMSE over the events both runs have under the same name with the same shape
// (attention scores and probabilities, each layer's output, the logits), and how many there were.
double worst_shared(const FormRun& a, const FormRun& b, int* shared, std::string* worst_name) {
    double worst = 0;
    *shared = 0;
    for (const auto& [name, ta] : a.events.tensors) {
        auto it = b.events.tensors.find(name);
        if (it == b.events.tensors.end() || it->second.data.size() != ta.data.size()) continue;
        if (name.rfind("kq", 0) != 0 && name.rfind("l_out", 0) != 0 && name.rfind("result_output", 0) != 0 &&
            name.rfind("attn_out", 0) != 0)
            continue;
        const Metrics m = compute_metrics(ta.data.data(), it->second.data.data(), static_cast<int64_t>(ta.data.size()));
        ++*shared;
        if (m.nmse > worst) worst = m.nmse, *worst_name = name;
    }
    return worst;
}

class MlaForms : public ::testing::TestWithParam<const char*> {};

TEST_P(MlaForms, AbsorbedAndUnabsorbedAgree) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(test::fixture_path(GetParam()));
    ASSERT_TRUE(model.ok()) << model.error().message;
    const std::vector<int32_t> prompt = {4096, 549, 2452, 799, 280, 254, 433, 2884, 427, 2792, 641};  // "The history of the Roman Empire"
    const FormRun absorbed = run(*model.value(), MlaForm::kAbsorbed, Fault::kNone, prompt, 3);
    const FormRun unabsorbed = run(*model.value(), MlaForm::kUnabsorbed, Fault::kNone, prompt, 3);
    // The forms name their own intermediates: absorbed q_nope_absorbed and kqv_mla, unabsorbed
    // the per-head keys and values.
    EXPECT_TRUE(absorbed.events.tensors.count("q_nope_absorbed-0"));
    EXPECT_FALSE(unabsorbed.events.tensors.count("q_nope_absorbed-0"));
    EXPECT_TRUE(unabsorbed.events.tensors.count("k_nope_view-0"));
    int shared = 0;
    std::string worst_name;
    const double worst = worst_shared(absorbed, unabsorbed, &shared, &worst_name);
    std::printf("[mla forms] %s: %d shared events, worst %s nmse %.3g\n", GetParam(), shared, worst_name.c_str(), worst);
    EXPECT_GT(shared, 4 * 3 * 4);
    // f32 arithmetic in another association order: rounding only.
    EXPECT_LT(worst, 1e-10) << worst_name;
    EXPECT_EQ(absorbed.generated, unabsorbed.generated);

    // The same measure tells a real difference: the absorbed form scaled over its latent key
    // width instead of the head's.
    const FormRun wrong = run(*model.value(), MlaForm::kAbsorbed, Fault::kMlaScaleWidth, prompt, 0);
    const double gap = worst_shared(wrong, unabsorbed, &shared, &worst_name);
    EXPECT_GT(gap, 1e-4) << worst_name;
}

INSTANTIATE_TEST_SUITE_P(Files, MlaForms,
                         ::testing::Values("models/deepseek2-mini-F16.gguf", "models/deepseek2-mini-legacy-kvb-Q4_K_M.gguf"),
                         [](const auto& info) {
                             return std::string(info.param).find("legacy") != std::string::npos ? "legacy_attn_kv_b"
                                                                                                  : "split_attn_k_b_v_b";
                         });

// The numbers llama.cpp derives from deepseek2-mini's YaRN keys (factor 40, stored multiplier
// 0.0707), as its dumps show them (fixtures README, section 5 item 10): the rope op's attn_factor
// 1/(1 + 0.1 ln 40) = 0.730520, and kq_scale = mscale^2/sqrt(48) = 0.229443 with mscale 1.260804.
TEST(Deepseek2Yarn, RopeAndScaleAreLlamaCpps) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(test::fixture_path("models/deepseek2-mini-F16.gguf"));
    ASSERT_TRUE(model.ok()) << model.error().message;
    const RopeParams rope = rope_params_for(model.value()->config());
    EXPECT_NEAR(rope.attn_factor, 0.730520, 1e-6);
    EXPECT_NEAR(rope.freq_scale, 1.0 / 40, 1e-9);
    EXPECT_EQ(rope.ext_factor, 1.0f);
    EXPECT_EQ(rope.n_ctx_orig, 4096);
    EXPECT_EQ(rope.mode, RopeMode::kNorm);
    EXPECT_EQ(rope.n_rot, 16);
    EXPECT_NEAR(attention_kq_scale(model.value()->config()), 0.229443, 1e-6);
    // ggml's own factor (1 + 0.1 ln 40) times the one llama.cpp passes: cos and sin unscaled.
    EXPECT_NEAR(rope.attn_factor * (1.0f + 0.1f * std::log(40.0f)), 1.0, 1e-6);
}

// The deepseek2 paths the fixtures do not take, against llama.cpp's own dumps (made by its AVX2
// build with the companion dumper, tests/data/deepseek2/README.md) of models make-model writes
// here from the deepseek2-tiny preset: q compression (attn_q_a -> attn_q_a_norm -> attn_q_b), and
// DeepSeek-V3's routing (sigmoid gating, a selection bias, weights renormalised and scaled); its
// grouped routing and fused ffn_gate_up_exps are in tests/test_moe_archs.cpp.
struct VariantCase {
    const char* name;
    const char* dump;  // in tests/data/deepseek2
    void (*tweak)(MakeModelSpec&);
};

const VariantCase kVariants[] = {
    {"q_lora", "deepseek2-tiny-qlora_hello_n3_fa-off.gguf", [](MakeModelSpec& s) { s.q_lora_rank = 32; }},
    {"v3_routing", "deepseek2-tiny-v3routing_hello_n3_fa-off.gguf",
     [](MakeModelSpec& s) {
         s.expert_gating_func = 2;
         s.expert_bias = true;
         s.expert_weights_norm = true;
         s.expert_weights_scale = 2.5f;
         s.n_expert_used = 3;
     }},
};

class Deepseek2Variants : public ::testing::TestWithParam<VariantCase> {};

TEST_P(Deepseek2Variants, EveryTensorMatchesLlamaCpp) {
    const VariantCase& c = GetParam();
    auto spec = make_model_preset("deepseek2-tiny");
    ASSERT_TRUE(spec.ok()) << spec.error().message;
    c.tweak(spec.value());
    const std::string dir = test::make_temp_dir(), model = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), model).ok());
    const std::string dump = std::string(LAYERSCOPE_TEST_DATA) + "/deepseek2/" + c.dump;
    test::ParityResult r = test::run_parity(dump, model, MathMode::kLlama, 1e-8);
    std::filesystem::remove_all(dir);
    std::printf("[deepseek2 %s] %d tensors compared, worst %s nmse %.3g\n", c.name, r.compared, r.worst_name.c_str(),
                r.worst_nmse);
    EXPECT_GT(r.compared, 100);
    for (const std::string& f : r.failures) ADD_FAILURE() << f;
    const std::vector<int32_t> want = test::reference_generated(dump);
    ASSERT_GE(r.generated.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.generated.begin(), r.generated.begin() + want.size()), want);
    for (size_t d = 0; d < r.top5_ref.size() && d < r.top5_ours.size(); ++d)
        EXPECT_EQ(r.top5_ours[d], r.top5_ref[d]) << "top-5 of decode " << d;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, Deepseek2Variants, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MlaFormNames, RoundTrip) {
    for (MlaForm f : {MlaForm::kAuto, MlaForm::kAbsorbed, MlaForm::kUnabsorbed}) {
        MlaForm parsed = MlaForm::kAuto;
        ASSERT_TRUE(mla_form_from_name(mla_form_name(f), &parsed));
        EXPECT_EQ(parsed, f);
    }
    MlaForm parsed;
    EXPECT_FALSE(mla_form_from_name("compressed", &parsed));
}

}  // namespace
}  // namespace ls
