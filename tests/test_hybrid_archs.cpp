// qwen35 and qwen35moe (Qwen3.5): Gated DeltaNet layers with a recurrent state beside gated
// attention (qwen35moe: experts and a gated shared expert), against
// llama.cpp's own dumps (tests/data/hybrid, made by its AVX2 build with the companion dumper) of
// models make-model writes here: every tensor, the greedy tokens and the top-5 logits, in prompts,
// across ubatches and over 8 decoded tokens; the CUDA kernels (emulated) against the CPU; the
// recurrent state as events of every DeltaNet layer, restored exactly when a session goes back;
// and what llama.cpp reads that Layerscope does not run yet, refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/compare/metrics.h"
#include "engine/forward/generate.h"
#include "engine/model/make_model.h"
#include "engine/model/tensor_layout.h"
#include "engine/session/session.h"
#include "kernels/host_ops.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct HybridCase {
    const char* name;
    const char* preset;                // make-model preset (nullptr: model_file)
    GgmlType type;                     // make-model's weight type
    const char* dump;                  // in tests/data/hybrid
    double limit;                      // largest NMSE accepted in llama mode
    const char* model_file = nullptr;  // a llama-quantize model in tests/data/hybrid instead of a made one
    bool fused_gate_up = false;        // qwen35moe: gate and up experts in one ffn_gate_up_exps
};

const HybridCase kCases[] = {
    {"f16_prompt_and_decode", "qwen35-tiny", GgmlType::F16, "qwen35-tiny-F16_story_n8_fa-off.gguf", 1e-8},
    {"f16_ubatches_of_16", "qwen35-tiny", GgmlType::F16, "qwen35-tiny-F16_story_n8_ub16_fa-off.gguf", 1e-8},
    {"f16_flash_attention", "qwen35-tiny", GgmlType::F16, "qwen35-tiny-F16_hello_n8_fa-on.gguf", 1e-8},
    {"q8_0", "qwen35-tiny", GgmlType::Q8_0, "qwen35-tiny-Q8_0_hello_n8_fa-off.gguf", 1e-6},
    {"q4_k_m", nullptr, GgmlType::F16, "qwen35-wide-Q4_K_M_story_n8_fa-off.gguf", 1e-6, "qwen35-wide-Q4_K_M.gguf"},
    {"moe_f16", "qwen35moe-tiny", GgmlType::F16, "qwen35moe-tiny-F16_story_n8_fa-off.gguf", 1e-8},
    {"moe_fused_gate_up_flash", "qwen35moe-tiny", GgmlType::F16, "qwen35moe-tiny-fused-F16_hello_n8_fa-on.gguf", 1e-8,
     nullptr, true},
    {"moe_q8_0", "qwen35moe-tiny", GgmlType::Q8_0, "qwen35moe-tiny-Q8_0_hello_n8_fa-off.gguf", 1e-6},
    {"moe_q4_k_m", nullptr, GgmlType::F16, "qwen35moe-wide-Q4_K_M_story_n8_fa-off.gguf", 1e-6, "qwen35moe-wide-Q4_K_M.gguf"},
};

std::string data_path(const char* file) { return std::string(LAYERSCOPE_TEST_DATA) + "/hybrid/" + file; }

// The case's model, written into a fresh temporary folder (or the stored llama-quantize one).
struct CaseModel {
    explicit CaseModel(const HybridCase& c) {
        if (c.model_file) {
            path = data_path(c.model_file);
            return;
        }
        auto preset = make_model_preset(c.preset);
        EXPECT_TRUE(preset.ok()) << (preset.ok() ? "" : preset.error().message);
        if (!preset.ok()) return;
        MakeModelSpec spec = preset.value();
        spec.type = c.type;
        spec.fused_gate_up = c.fused_gate_up;
        dir = test::make_temp_dir();
        path = dir + "/model.gguf";
        Status s = make_model(spec, path);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    }
    ~CaseModel() {
        if (!dir.empty()) std::filesystem::remove_all(dir);
    }
    std::string dir, path;
};

class HybridArchs : public ::testing::TestWithParam<HybridCase> {};

TEST_P(HybridArchs, EveryTensorMatchesLlamaCpp) {
    const HybridCase& c = GetParam();
    const CaseModel model(c);
    test::ParityResult r = test::run_parity(data_path(c.dump), model.path, MathMode::kLlama, c.limit);
    std::printf("[hybrid %s] %d tensors compared, %d reference nodes not computed, worst %s nmse %.3g\n", c.name, r.compared,
                r.not_computed, r.worst_name.c_str(), r.worst_nmse);
    EXPECT_GT(r.compared, 1000);
    for (const std::string& f : r.failures) ADD_FAILURE() << f;
    const std::vector<int32_t> want = test::reference_generated(data_path(c.dump));
    ASSERT_EQ(want.size(), 8u);
    ASSERT_GE(r.generated.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.generated.begin(), r.generated.begin() + want.size()), want);
    ASSERT_EQ(r.top5_ours.size(), r.top5_ref.size());
    for (size_t d = 0; d < r.top5_ref.size(); ++d) EXPECT_EQ(r.top5_ours[d], r.top5_ref[d]) << "top-5 of decode " << d;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, HybridArchs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The CUDA kernels (on the SIMT emulator) generate llama.cpp's tokens, and every event of their
// exact-mode run agrees with the CPU backend's at NMSE <= 1e-6: qwen35 and qwen35moe.
class HybridArchsCuda : public ::testing::TestWithParam<size_t> {};

TEST_P(HybridArchsCuda, CudaEmulatedAgreesWithTheCpuAndLlamaCpp) {
    const HybridCase& c = kCases[GetParam()];
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto ref = ReferenceDump::open(data_path(c.dump));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    MadeBackend cuda = make_backend(test::whole_model_cuda_kind(), BackendOptions{2});
    ASSERT_TRUE(cuda.backend) << cuda.note;
    ForwardOptions fo;
    const std::vector<int32_t> prompt = ref.value()->prompt_tokens(), want = ref.value()->generated_tokens();
    fo.n_ctx = 256;
    {
        auto forward = make_forward(*model.value(), *cuda.backend, fo);
        ASSERT_TRUE(forward.ok()) << forward.error().message;
        auto g = generate_greedy(*forward.value(), model.value()->tokenizer(), prompt, static_cast<int>(want.size()), nullptr);
        ASSERT_TRUE(g.ok()) << g.error().message;
        EXPECT_EQ(g.value().generated, want);
    }
    test::expect_agrees_with_cpu_exact(*model.value(), *cuda.backend, fo, prompt, 3, 600);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, HybridArchsCuda, ::testing::Values(size_t{0}, size_t{5}),
                         [](const auto& info) { return std::string(kCases[info.param].name); });

// Bugs of Qwen3.5 ports: the first divergent tensor is where the bug lives (everything before it
// matches), and the doctor names it.
struct HybridFault {
    Fault fault;
    const char* first;        // the first divergent event
    const char* transform;    // the doctor's transform that explains it
    const char* verdicts[2];  // what its verdict says
};

const HybridFault kFaults[] = {
    // A sequence's first window starts with the zero state: both conv-state bugs leave zeros there.
    {Fault::kConvStateNotRolled, "conv_state_last-0", "conv-state", {"last 3 inputs of the window", "rolled the wrong way, or never rolled"}},
    {Fault::kConvStateRolledWrong, "conv_state_last-0", "conv-state", {"last 3 inputs of the window", "rolled the wrong way, or never rolled"}},
    {Fault::kDecayGateSign, "gate-0", "decay-gate", {"ssm_a is A = -exp(A_log) already", "instead of softplus(alpha + dt_bias) * -ssm_a"}},
    {Fault::kOutputGateBeforeNorm, "norm-0#2", "output-gate", {"silu(z) multiplied in after the weighted norm", "instead of the delta rule's output times silu(z-0)"}},
    {Fault::kDeltaHeadsInterleaved, "new_state-0", "delta-rule", {"reading q/k head h % 2", "instead of run token by token, value head h reading q/k head h / 2 (interleaved"}},
    {Fault::kDeltaChunkDecay, "new_state-0", "delta-rule", {"reading q/k head h % 2", "instead of run in chunks of 64 without the decay"}},
    {Fault::kGemmaNormPlusOne, "attn_norm-0", "norm-plus-one", {"applied as stored", "ours applies 1 + w"}},
    {Fault::kImropeSectionsReversed, "Qcur-3", "rope", {"halves (NEOX) at positions from 0 instead of", "IMROPE sections reversed ([0, 2, 3, 3] for [3, 3, 2, 0]"}},
};

class HybridArchsFaults : public ::testing::TestWithParam<HybridFault> {};

TEST_P(HybridArchsFaults, FoundWhereTheBugLivesAndNamed) {
    const HybridFault& f = GetParam();
    const HybridCase& c = kCases[0];
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(data_path(c.dump));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.fault = f.fault;
    options.forward.n_ubatch = reference.value()->n_ubatch();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    ASSERT_GE(r.summary.first_divergent, 0) << fault_info(f.fault).name << " was not detected";
    const EventComparison& first = r.comparisons[r.summary.first_divergent];
    EXPECT_EQ(first.name, f.first) << "nmse " << first.metrics.nmse;
    for (int64_t i = 0; i < r.summary.first_divergent; ++i)
        EXPECT_EQ(r.comparisons[i].status, CompareStatus::kOk) << r.comparisons[i].name;
    DoctorReport doctor = diagnose(r, static_cast<size_t>(r.summary.first_divergent), *reference.value(), model.value().get(),
                                   options.thresholds);
    ASSERT_FALSE(doctor.findings.empty()) << "the doctor found no explanation for " << first.name;
    EXPECT_EQ(doctor.findings.front().transform, f.transform) << doctor.findings.front().verdict;
    for (const char* v : f.verdicts)
        EXPECT_NE(doctor.findings.front().verdict.find(v), std::string::npos) << doctor.findings.front().verdict;
    std::printf("[fault] %s first divergent %s nmse %.3g doctor: %s\n", fault_info(f.fault).name, first.name.c_str(),
                first.metrics.nmse, doctor.findings.front().verdict.c_str());
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, HybridArchsFaults, ::testing::ValuesIn(kFaults), [](const auto& info) {
    std::string n = fault_info(info.param.fault).name;
    for (char& ch : n)
        if (ch == '-') ch = '_';
    return n;
});

// The chunked form of the delta rule (chunks of 64) and the recurrent one (token by token) agree on
// prompts that cross chunk boundaries, for the output and the state; leaving the decay between a
// chunk's tokens out does not.
TEST(HybridArchsDeltaRule, ChunkedAndRecurrentFormsAgree) {
    const int64_t S = 32, H_k = 2, H_v = 4, T = 150;  // chunks of 64, 64 and 22
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.02f, 0.98f);
    std::vector<float> q(S * H_k * T), k(q.size()), v(S * H_v * T), g(H_v * T), beta(H_v * T), state(S * S * H_v);
    auto normalised = [&](std::vector<float>& x) {
        for (float& e : x) e = normal(rng);
        for (size_t h = 0; h < x.size(); h += S) {
            double n = 0;
            for (int64_t i = 0; i < S; ++i) n += double(x[h + i]) * x[h + i];
            for (int64_t i = 0; i < S; ++i) x[h + i] = static_cast<float>(x[h + i] / std::sqrt(n));
        }
    };
    normalised(q), normalised(k);
    for (float& e : v) e = normal(rng);
    for (float& e : g) e = std::log(unit(rng));
    for (float& e : beta) e = unit(rng);
    for (float& e : state) e = 0.1f * normal(rng);
    std::vector<float> s_rec = state, s_chunk = state, s_bug = state, o_rec(v.size()), o_chunk(v.size()), o_bug(v.size());
    host_gated_delta_net(q.data(), k.data(), v.data(), g.data(), beta.data(), s_rec.data(), o_rec.data(), S, H_k, H_v, T, 0, 0, H_v);
    host_gated_delta_net_chunked(q.data(), k.data(), v.data(), g.data(), beta.data(), s_chunk.data(), o_chunk.data(), S, H_k,
                                 H_v, T, 64, 0, H_v, true);
    host_gated_delta_net_chunked(q.data(), k.data(), v.data(), g.data(), beta.data(), s_bug.data(), o_bug.data(), S, H_k, H_v,
                                 T, 64, 0, H_v, false);
    auto nmse = [](const std::vector<float>& a, const std::vector<float>& b) {
        return compute_metrics(a.data(), b.data(), static_cast<int64_t>(a.size())).nmse;
    };
    EXPECT_LT(nmse(o_chunk, o_rec), 1e-10);
    EXPECT_LT(nmse(s_chunk, s_rec), 1e-10);
    EXPECT_GT(nmse(o_bug, o_rec), 1e-3);
    std::printf("[delta rule] chunked vs recurrent: output nmse %.3g, state nmse %.3g; without the in-chunk decay %.3g\n",
                nmse(o_chunk, o_rec), nmse(s_chunk, s_rec), nmse(o_bug, o_rec));
}

// A run whose prompts take the chunked form still matches llama.cpp's dump within the comparison's
// thresholds everywhere, and generates its tokens.
TEST(HybridArchsDeltaRule, TheChunkedFormMatchesLlamaCppsRun) {
    const HybridCase& c = kCases[0];  // a 73-token prompt: chunks of 64 and 9
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(data_path(c.dump));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.delta_chunked = true;
    options.forward.n_ubatch = reference.value()->n_ubatch();
    auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    EXPECT_EQ(run.value().summary.first_divergent, -1);
    EXPECT_EQ(run.value().summary.warn, 0);
    double worst = 0;
    for (const EventComparison& e : run.value().comparisons)
        if (e.name.rfind("new_state-", 0) == 0) worst = std::max(worst, e.metrics.nmse);
    EXPECT_GT(worst, 0.0) << "the chunked form did not run";
    std::printf("[delta rule] chunked run against llama.cpp: worst new_state nmse %.3g\n", worst);
}

struct Captured {
    std::string name;
    int layer = -1;
    std::vector<float> values;
};

class CaptureStates : public EventSink {
public:
    void on_event(const Event& e) override {
        Captured c{e.dump_name(), e.layer, std::vector<float>(static_cast<size_t>(e.tensor.n_elements()))};
        e.backend->download(c.values.data(), e.tensor.data, c.values.size() * sizeof(float));
        events.push_back(std::move(c));
    }
    const Captured* find(const std::string& name) const {
        for (const Captured& c : events)
            if (c.name == name) return &c;
        return nullptr;
    }
    std::vector<Captured> events;
};

// Each DeltaNet layer shows its states before and after every evaluation under llama.cpp's names
// (conv_states / conv_state_last, state_predelta / new_state), and one evaluation's new state is
// the next one's old state; the attention layers have none.
TEST(HybridArchsState, EveryDeltaNetLayerShowsItsStatesBeforeAndAfter) {
    const CaseModel made(kCases[0]);  // qwen35-tiny, removed with `made`
    const std::string& path = made.path;
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto cpu = make_cpu_backend(2);
    ForwardOptions fo;
    fo.n_ctx = 256;
    auto forward = make_forward(*model.value(), *cpu, fo);
    ASSERT_TRUE(forward.ok()) << forward.error().message;
    CaptureStates cap;
    ASSERT_TRUE(forward.value()->eval({1, 300, 301, 302, 303}, &cap).ok());
    ASSERT_TRUE(forward.value()->eval({304}, &cap).ok());
    const ModelConfig& c = model.value()->config();
    const size_t conv = static_cast<size_t>(c.ssm_conv_state()), ssm = static_cast<size_t>(c.ssm_state());
    for (int il = 0; il < c.n_layer; ++il) {
        const std::string L = std::to_string(il);
        if (!c.layer_is_recurrent(il)) {
            EXPECT_EQ(cap.find("new_state-" + L), nullptr) << "attention layer " << il;
            continue;
        }
        const Captured *before0 = cap.find("state_predelta-" + L), *after0 = cap.find("new_state-" + L);
        const Captured *before1 = cap.find("state_predelta-" + L + "@1"), *after1 = cap.find("new_state-" + L + "@1");
        const Captured *conv0 = cap.find("conv_states-" + L), *conv_last0 = cap.find("conv_state_last-" + L);
        const Captured* conv1 = cap.find("conv_states-" + L + "@1");
        ASSERT_TRUE(before0 && after0 && before1 && after1 && conv0 && conv_last0 && conv1) << "layer " << il;
        ASSERT_EQ(after0->values.size(), ssm);
        ASSERT_EQ(conv_last0->values.size(), conv);
        for (float v : before0->values) ASSERT_EQ(v, 0.0f) << "a new sequence starts from a zero state";
        for (float v : conv0->values) ASSERT_EQ(v, 0.0f);
        EXPECT_EQ(before1->values, after0->values) << "layer " << il << ": the decode did not start from the prompt's state";
        EXPECT_EQ(conv1->values, conv_last0->values) << "layer " << il;
        EXPECT_NE(after1->values, after0->values);
    }
}

// Going back in a session (restart and replay) gives the states bit for bit.
TEST(HybridArchsState, GoingBackRestoresTheStatesExactly) {
    const CaseModel made(kCases[0]);  // qwen35-tiny, removed with `made`
    const std::string& path = made.path;
    auto opened = Model::open(path);
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    std::shared_ptr<const Model> model(std::move(opened.value()));
    SessionOptions options;
    options.capture = CapturePolicy::all();
    auto session = Session::create(model, options);
    ASSERT_TRUE(session.ok()) << session.error().message;
    Session& s = *session.value();
    constexpr std::chrono::seconds kWait{60};
    auto done = [&](CommandTicket t) {
        auto snap = s.wait_for_ticket(t, kWait);
        EXPECT_TRUE(snap && !snap->error);
        return snap;
    };
    done(s.set_tokens({1, 300, 301, 302, 303}));
    auto first = done(s.generate(2));
    ASSERT_TRUE(first);
    std::vector<int64_t> states;
    for (const auto& r : first->records)
        if (r->info.name.rfind("new_state-", 0) == 0 || r->info.name.rfind("conv_state_last-", 0) == 0)
            states.push_back(r->info.index);
    ASSERT_GE(states.size(), 12u);  // 3 DeltaNet layers x 2 states x (prompt + 1 decode at least)
    auto back = done(s.go_to(states[states.size() / 2]));
    ASSERT_TRUE(back);
    auto again = done(s.go_to(states.back()));
    ASSERT_TRUE(again);
    for (int64_t i : states) {
        auto a = first->capture(i), b = again->capture(i);
        ASSERT_TRUE(a && b) << "event " << i;
        if (i <= states[states.size() / 2]) EXPECT_NE(a.get(), b.get()) << "event " << i << " was not recomputed";
        ASSERT_EQ(a->values->size(), b->values->size());
        EXPECT_EQ(0, std::memcmp(a->values->data(), b->values->data(), a->values->size() * sizeof(float)))
            << a->info.name << " differs after going back";
    }
}

// What llama.cpp's qwen35 graph reads and Layerscope does not run yet is refused by name.
TEST(HybridArchsRefusals, WhatIsNotRunYetIsRefusedByName) {
    const CaseModel made(kCases[0]);  // qwen35-tiny, removed with `made`
    const std::string& dir = made.dir;
    const std::string& path = made.path;
    int edits = 0;
    auto refused = [&](const char* label, const std::function<void(std::vector<GgufKV>&, std::vector<GgufWriteTensor>&)>& edit,
                       const char* expect) {
        const std::string out = test::rewrite_gguf(path, dir + "/edited" + std::to_string(++edits) + ".gguf", edit);
        auto model = Model::open(out);
        std::string message;
        if (model.ok()) {
            auto cpu = make_cpu_backend(1);
            ForwardOptions fo;
            fo.n_ctx = 256;
            auto forward = make_forward(*model.value(), *cpu, fo);
            ASSERT_FALSE(forward.ok()) << label << ": accepted";
            message = forward.error().message;
        } else {
            message = model.error().message;
        }
        EXPECT_NE(message.find(expect), std::string::npos) << label << ": " << message;
    };
    refused("MTP layers", [](std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>&) {
        kv.push_back({"qwen35.nextn_predict_layers", GgufValue::make_u32(1)});
    }, "multi-token-prediction draft layers are not supported yet");
    refused("no sections", [](std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>&) {
        std::erase_if(kv, [](const GgufKV& k) { return k.key == "qwen35.rope.dimension_sections"; });
    }, "qwen35.rope.dimension_sections is missing");
    refused("value heads narrower than the state", [](std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>&) {
        for (GgufKV& k : kv)
            if (k.key == "qwen35.ssm.inner_size") k.value = GgufValue::make_u32(100);
    }, "qwen35.ssm.inner_size 100");
    refused("no attention layer", [](std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>&) {
        for (GgufKV& k : kv)
            if (k.key == "qwen35.full_attention_interval") k.value = GgufValue::make_u32(8);
    }, "llama.cpp's hybrid cache then holds no attention layer and aborts");
    // The layout: an attention layer's fused attn_qkv and the q/k/v biases, and every projection's
    // per-tensor scale, are refused with their reason; the DeltaNet's attn_qkv is required.
    auto config_of = [] {
        ModelConfig c;
        c.arch = Arch::kQwen35;
        c.arch_name = "qwen35";
        c.n_embd = 128, c.n_layer = 4, c.n_head = 4, c.n_head_kv = 2, c.head_dim_k = c.head_dim_v = 64, c.n_ff = 256;
        c.ssm_d_conv = 4, c.ssm_d_state = 32, c.ssm_n_k_heads = 2, c.ssm_n_v_heads = 4, c.ssm_d_inner = 128;
        c.recurrent_layers = {1, 1, 1, 0};
        return c;
    };
    const std::vector<TensorSpec> layout = tensor_layout(config_of(), 512);
    EXPECT_NE(tensor_refusal(layout, "blk.3.attn_qkv.weight", "qwen35").find("fused attn_qkv"), std::string::npos);
    EXPECT_NE(tensor_refusal(layout, "blk.3.attn_q.bias", "qwen35").find("biases"), std::string::npos);
    EXPECT_NE(tensor_refusal(layout, "blk.0.ssm_out.scale", "qwen35").find("scales"), std::string::npos);
    EXPECT_NE(tensor_refusal(layout, "blk.0.attn_q.weight", "qwen35").find("has no tensor"), std::string::npos);
    const TensorSpec* qkv = find_tensor_spec(layout, "blk.0.attn_qkv.weight");
    ASSERT_TRUE(qkv);
    EXPECT_TRUE(qkv->required);
    EXPECT_EQ(qkv->ne, (std::vector<int64_t>{128, 2 * 64 + 128}));
}

// The presets are what llama.cpp's loader calls a 4B and a 35B-A3B model: Qwen3.5-4B's 32 layers
// 2560 wide, every fourth one attention, about 4.2 billion weights with the tied embeddings.
TEST(HybridArchsPresets, ShapedAsTheRealModels) {
    auto spec = make_model_preset("qwen3.5-4b");
    ASSERT_TRUE(spec.ok());
    auto n = make_model_param_count(spec.value());
    ASSERT_TRUE(n.ok()) << n.error().message;
    EXPECT_GT(n.value(), 3'500'000'000);
    EXPECT_LT(n.value(), 5'000'000'000);
    auto meta = make_model_metadata(spec.value());
    ASSERT_TRUE(meta.ok());
    bool interval = false;
    for (const GgufKV& kv : meta.value())
        if (kv.key == "qwen35.full_attention_interval") interval = kv.value.u64 == 4;
    EXPECT_TRUE(interval);
    // Qwen3.5-35B-A3B: 40 layers of 256 experts (8 used) and a shared expert, about 35 billion weights.
    auto moe = make_model_preset("qwen3.5-35b-a3b");
    ASSERT_TRUE(moe.ok());
    auto n_moe = make_model_param_count(moe.value());
    ASSERT_TRUE(n_moe.ok()) << n_moe.error().message;
    EXPECT_GT(n_moe.value(), 30'000'000'000);
    EXPECT_LT(n_moe.value(), 40'000'000'000);
}

}  // namespace
}  // namespace ls
