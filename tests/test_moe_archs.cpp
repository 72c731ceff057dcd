// The mixture-of-experts architectures beyond deepseek2's fixtures: qwen3moe (Qwen3-30B-A3B's
// layout), llama files with experts (Mixtral), deepseek2 with DeepSeek-V3's group-limited
// routing or fused gate/up experts, and gpt-oss (sinks, windows, biased experts, the clamped
// SwiGLU), as llama.cpp's graphs build them. Against llama.cpp's own
// dumps (tests/data/moe, made by its AVX2 build with the companion dumper) of models make-model
// writes here (F16) or llama-quantize made from them (Q4_K_M, Q5_K_M, IQ4_XS, stored): every
// tensor, the greedy tokens and the top-5 logits; the same models on the CUDA kernels (emulated);
// the routing faults found at their true first event and named; and what llama.cpp reads that
// Layerscope does not run, refused by name.
#include <gtest/gtest.h>

#include <filesystem>

#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/forward/generate.h"
#include "engine/model/make_model.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct MoeCase {
    const char* name;
    const char* preset;               // nullptr: model_file instead
    void (*tweak)(MakeModelSpec&);    // nullptr: the preset as it is
    const char* dump;                 // in tests/data/moe
    double limit;                     // largest NMSE accepted in llama mode
    const char* model_file = nullptr;  // in tests/data/moe (llama-quantize's mixes and i-quants)
    // The CUDA backend's llama mode computes as exact mode (kernels/cuda/matmul.cu); where the
    // CPU's exact mode already picks other tokens than llama.cpp, the CUDA run is held to those.
    bool exact_tokens_differ = false;
};

void v3_groups(MakeModelSpec& s) {
    s.n_expert = 32;
    s.n_expert_used = 4;
    s.n_expert_groups = 8;
    s.n_expert_groups_used = 3;
    s.expert_gating_func = 2;
    s.expert_bias = true;
    s.expert_weights_norm = true;
    s.expert_weights_scale = 2.5f;
}

// F16 weights: 1e-8 (flash attention included); quantized: 1e-6. IQ4_XS: 0, the MUL_MAT_ID form
// of ggml's IQ panel gemm (an expert given 8 or more of the 73-token prompt's rows) reproduced
// to the bit.
const MoeCase kCases[] = {
    {"qwen3moe", "qwen3moe-tiny", nullptr, "qwen3moe-tiny-F16_hello_n3_fa-off.gguf", 1e-8},
    {"qwen3moe_flash", "qwen3moe-tiny", nullptr, "qwen3moe-tiny-F16_hello_n4_fa-on.gguf", 1e-8},
    {"qwen3moe_q4_K_M", nullptr, nullptr, "qwen3moe-wide-Q4_K_M_hello_n3_fa-off.gguf", 1e-6, "qwen3moe-wide-Q4_K_M.gguf"},
    {"qwen3moe_q5_K_M", nullptr, nullptr, "qwen3moe-wide-Q5_K_M_hello_n3_fa-off.gguf", 1e-6, "qwen3moe-wide-Q5_K_M.gguf"},
    {"qwen3moe_iq4_xs", nullptr, nullptr, "qwen3moe-wide-IQ4_XS_story_n3_fa-off.gguf", 0, "qwen3moe-wide-IQ4_XS.gguf"},
    {"llama_moe", "llama-moe-tiny", nullptr, "llama-moe-tiny-F16_hello_n3_fa-off.gguf", 1e-8},
    // DeepSeek-V3's routing at a small size: sigmoid gating with a selection bias, 32 experts in 8
    // groups of 4 (the 3 best groups kept, by the sum of their two best), top 4, renormalised,
    // times 2.5. The masked experts tie at -inf: ffn_moe_argsort orders them as ggml's std::sort.
    {"deepseek2_v3_groups", "deepseek2-tiny", v3_groups, "deepseek2-tiny-v3groups_hello_n3_fa-off.gguf", 1e-8},
    // Gate and up experts fused in one ffn_gate_up_exps (current converters).
    {"deepseek2_fused_gate_up", "deepseek2-tiny", [](MakeModelSpec& s) { s.fused_gate_up = true; },
     "deepseek2-tiny-fused_hello_n3_fa-off.gguf", 1e-8},
    // gpt-oss: attention sinks, the even layer over a window of 4, YaRN, biased router and experts,
    // swiglu_oai with gate and up values beyond its clamp; bit-exact, with flash attention too (one
    // row at a time for 20 tokens, ggml's tiled kernel for the 73-token story) and Q8_0 weights.
    {"gpt_oss", "gpt-oss-tiny", nullptr, "gptoss-tiny-F16_hello_n4_fa-off.gguf", 0},
    {"gpt_oss_flash", "gpt-oss-tiny", nullptr, "gptoss-tiny-F16_hello_n4_fa-on.gguf", 0},
    {"gpt_oss_story_flash", "gpt-oss-tiny", nullptr, "gptoss-tiny-F16_story_n3_fa-on.gguf", 0},
    {"gpt_oss_q8_0", nullptr, nullptr, "gptoss-tiny-Q8_0_hello_n4_fa-off.gguf", 0, "gptoss-tiny-Q8_0.gguf"},
    // MXFP4 experts (gpt-oss's own format; the other matrices Q8_0, as llama-quantize's MXFP4_MOE)
    // over the 73-token prompt: MUL_MAT_ID's mxfp4 . q8_0 dots.
    // llama.cpp's Q8_0 activations move the second token's logits by 0.2 here: exact mode (and
    // so CUDA) picks token 72 where llama.cpp picks 415.
    {"gpt_oss_mxfp4", "gpt-oss-tiny", [](MakeModelSpec& s) { s.type = GgmlType::MXFP4; },
     "gptoss-tiny-MXFP4_story_n3_fa-off.gguf", 0, nullptr, true},
    // NVFP4 as ModelOpt conversions write it (every matrix but token_embd and the router), with
    // the per-tensor, per-expert and LM head scales, over the 73-token prompt: the nvfp4 . q8_0
    // dots of MUL_MAT and MUL_MAT_ID, each expert slot times its expert's scale
    // (ffn_moe_*_scaled), the logits times output.scale; bit-exact. Exact mode (and so CUDA)
    // picks another third token than llama.cpp's Q8_0 activations give.
    {"qwen3moe_nvfp4", "qwen3moe-tiny",
     [](MakeModelSpec& s) {
         s.type = GgmlType::NVFP4;
         s.weight_scales = true;
     },
     "qwen3moe-tiny-NVFP4_story_n3_fa-off.gguf", 0, nullptr, true},
};

std::string data_path(const char* file) { return std::string(LAYERSCOPE_TEST_DATA) + "/moe/" + file; }

// The case's model: written into a fresh temporary folder, or the stored one.
struct CaseModel {
    explicit CaseModel(const MoeCase& c) {
        if (c.model_file) {
            path = data_path(c.model_file);
            return;
        }
        auto spec = make_model_preset(c.preset);
        EXPECT_TRUE(spec.ok()) << (spec.ok() ? "" : spec.error().message);
        if (!spec.ok()) return;
        if (c.tweak) c.tweak(spec.value());
        dir = test::make_temp_dir();
        path = dir + "/model.gguf";
        Status s = make_model(spec.value(), path);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    }
    ~CaseModel() {
        if (!dir.empty()) std::filesystem::remove_all(dir);
    }
    std::string dir, path;
};

class MoeArchs : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeArchs, EveryTensorMatchesLlamaCpp) {
    const MoeCase& c = GetParam();
    const CaseModel model(c);
    const std::string dump = data_path(c.dump);
    test::ParityResult r = test::run_parity(dump, model.path, MathMode::kLlama, c.limit);
    std::printf("[moe %s] %d tensors compared, %d reference nodes not computed, worst %s nmse %.3g\n", c.name, r.compared,
                r.not_computed, r.worst_name.c_str(), r.worst_nmse);
    EXPECT_GT(r.compared, 200);
    for (const std::string& f : r.failures) ADD_FAILURE() << f;
    const std::vector<int32_t> want = test::reference_generated(dump);
    ASSERT_FALSE(want.empty());
    ASSERT_GE(r.generated.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.generated.begin(), r.generated.begin() + want.size()), want);
    ASSERT_EQ(r.top5_ours.size(), r.top5_ref.size());
    for (size_t d = 0; d < r.top5_ref.size(); ++d) EXPECT_EQ(r.top5_ours[d], r.top5_ref[d]) << "top-5 of decode " << d;
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, MoeArchs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// The CUDA kernels (on the SIMT emulator) generate llama.cpp's tokens, and every event of their
// exact-mode run agrees with the CPU backend's at NMSE <= 1e-6.
class MoeArchsCuda : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeArchsCuda, CudaEmulatedAgreesWithTheCpuAndLlamaCpp) {
    const MoeCase& c = GetParam();
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto ref = ReferenceDump::open(data_path(c.dump));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    MadeBackend cuda = make_backend(test::whole_model_cuda_kind(), BackendOptions{2});
    ASSERT_TRUE(cuda.backend) << cuda.note;
    ForwardOptions fo;
    const std::vector<int32_t> prompt = ref.value()->prompt_tokens();
    std::vector<int32_t> want = ref.value()->generated_tokens();
    fo.n_ctx = 256;
    if (c.exact_tokens_differ) {
        auto cpu = make_cpu_backend(2);
        ForwardOptions exact = fo;
        exact.mode = MathMode::kExact;
        auto forward = make_forward(*model.value(), *cpu, exact);
        ASSERT_TRUE(forward.ok()) << forward.error().message;
        auto g = generate_greedy(*forward.value(), model.value()->tokenizer(), prompt, static_cast<int>(want.size()), nullptr);
        ASSERT_TRUE(g.ok()) << g.error().message;
        EXPECT_NE(g.value().generated, want) << "exact mode now agrees with llama.cpp: drop exact_tokens_differ";
        want = g.value().generated;
    }
    {
        auto forward = make_forward(*model.value(), *cuda.backend, fo);
        ASSERT_TRUE(forward.ok()) << forward.error().message;
        auto g = generate_greedy(*forward.value(), model.value()->tokenizer(), prompt, static_cast<int>(want.size()), nullptr);
        ASSERT_TRUE(g.ok()) << g.error().message;
        EXPECT_EQ(g.value().generated, want);
    }
    test::expect_agrees_with_cpu_exact(*model.value(), *cuda.backend, fo, prompt, 2, 100);
}

// One case per architecture and weight family (the flash dump's model is the first case's).
std::vector<MoeCase> cuda_cases() {
    std::vector<MoeCase> v;
    for (const MoeCase& c : kCases)
        if (std::string(c.name).find("flash") == std::string::npos) v.push_back(c);
    return v;
}
INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, MoeArchsCuda, ::testing::ValuesIn(cuda_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Routing bugs of MoE ports: the first divergent tensor is where the bug lives (everything before
// it matches), and the doctor names it.
struct MoeFault {
    Fault fault;
    size_t dump_case;     // index into kCases
    const char* first;    // the first divergent event
    const char* transform;
    const char* verdict;  // in the doctor's verdict
};

const MoeFault kFaults[] = {
    {Fault::kMoeTopKOrder, 0, "ffn_moe_argsort-0", "moe-topk", "the k most likely experts chosen"},
    {Fault::kMoeWeightsNorm, 0, "ffn_moe_weighted-0", "moe-weights-norm", "instead of as the router gives them"},
    {Fault::kMoeTopKOrder, 5, "ffn_moe_argsort-0", "moe-topk", "the k most likely experts chosen"},
    {Fault::kMoeWeightsNorm, 5, "ffn_moe_weighted-0", "moe-weights-norm", "instead of as the router gives them"},
    // DeepSeek-V3's: the selection bias in the weights too; groups ranked by their best expert (the
    // prompt's tokens keep the same groups either way; the first decoded one does not).
    {Fault::kMoeBiasInWeights, 6, "ffn_moe_weights-1", "moe-bias-in-weights", "instead of the biased selection values"},
    {Fault::kMoeGroupScore, 6, "ffn_moe_group_topk-1@1", "moe-group-score", "the sum of its two best experts"},
    {Fault::kMoeTopKOrder, 6, "ffn_moe_argsort-1", "moe-topk", "the k most likely experts chosen"},
    {Fault::kMoeGateUpSwapped, 7, "ffn_moe_gate-1", "moe-gate-up", "is its first half of each expert's rows"},
    // gpt-oss's: the sinks left out, the SwiGLU unclamped or its gate clamped from below, a softmax
    // over every expert first.
    {Fault::kAttnSinksIgnored, 8, "kq_soft_max-0", "attention", "instead of scale 0.176777 with the causal mask and layer "
                                                               "0's sliding window of 4 and no attention sinks"},
    {Fault::kSwigluOaiUnclamped, 8, "ffn_moe_swiglu_oai-0", "swiglu-oai", "is clamped"},
    {Fault::kSwigluOaiClampBelow, 8, "ffn_moe_swiglu_oai-0", "swiglu-oai", "instead of with the gate clamped from below"},
    {Fault::kMoeSoftmaxBeforeTopk, 8, "ffn_moe_probs-0", "moe-gating", "is the biased logits themselves"},
    // MXFP4 decoders: the nibbles the wrong way round, the scale's exponent off by one.
    {Fault::kMxfp4NibbleOrder, 12, "ffn_moe_up-0", "mxfp4", "instead of with the nibbles swapped"},
    {Fault::kMxfp4ScaleExponent, 12, "ffn_moe_up-0", "mxfp4", "instead of with the scale one power of two too large"},
};

class MoeArchsFaults : public ::testing::TestWithParam<MoeFault> {};

TEST_P(MoeArchsFaults, FoundWhereTheBugLivesAndNamed) {
    const MoeFault& f = GetParam();
    const MoeCase& c = kCases[f.dump_case];
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
    DoctorReport doctor = diagnose(r, static_cast<size_t>(r.summary.first_divergent), *reference.value(),
                                   model.value().get(), options.thresholds);
    ASSERT_FALSE(doctor.findings.empty()) << "the doctor found no explanation for " << first.name;
    EXPECT_EQ(doctor.findings.front().transform, f.transform) << doctor.findings.front().verdict;
    EXPECT_NE(doctor.findings.front().verdict.find(f.verdict), std::string::npos) << doctor.findings.front().verdict;
    std::printf("[fault] %s first divergent %s doctor: %s\n", fault_info(f.fault).name, first.name.c_str(),
                doctor.findings.front().verdict.c_str());
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, MoeArchsFaults, ::testing::ValuesIn(kFaults), [](const auto& info) {
    std::string n = std::string(fault_info(info.param.fault).name) + "_" + kCases[info.param.dump_case].name;
    for (char& ch : n)
        if (ch == '-') ch = '_';
    return n;
});

// What llama.cpp reads (or its loader refuses) and Layerscope does not run: `run` refuses the
// file naming the tensor or key (exit 3), and `inspect` lists the tensor. Expert groups without
// expert_group_used_count: llama.cpp's loader asserts.
TEST(MoeArchsRefusals, TensorsAndKeysLlamaCppUsesAreRunOrRefusedByName) {
    struct Refusal {
        const char* preset;
        const char* tensor;  // added (nullptr: a key instead)
        std::vector<int64_t> ne;
        const char* key;     // added as a u32 of value 2
        const char* why;
        int exit = 3;        // the input's fault; 2: a file of a kind not supported yet
    };
    const Refusal cases[] = {
        {"qwen3moe-tiny", "blk.0.ffn_gate_up_exps.weight", {128, 128, 8}, nullptr, "loader has no tensor of that name"},
        // The LM head's scales exist only for an NVFP4 head (llama.cpp's loader never creates them
        // for another).
        {"qwen3moe-tiny", "output.scale", {1}, nullptr, "only for an untied NVFP4 output.weight"},
        {"llama-moe-tiny", "output.input_scale", {1}, nullptr, "only for an untied NVFP4 output.weight"},
        {"llama-moe-tiny", "blk.0.ffn_gate.weight", {128, 128}, nullptr, "loader has no tensor of that name"},
        {"qwen3moe-tiny", nullptr, {}, "qwen3moe.expert_group_count", "expert_group_used_count is 0"},
        {"gpt-oss-tiny", "blk.0.attn_qkv.scale", {1}, nullptr, "per-tensor weight scales on attn_qkv"},
        {"gpt-oss-tiny", nullptr, {}, "gpt-oss.attention.key_length_swa", "sliding-window layers of another head width", 2},
    };
    const std::string dir = test::make_temp_dir();
    for (const Refusal& c : cases) {
        auto spec = make_model_preset(c.preset);
        ASSERT_TRUE(spec.ok());
        const std::string path = dir + "/" + c.preset + ".gguf";
        if (!std::filesystem::exists(path)) {
            ASSERT_TRUE(make_model(spec.value(), path).ok());
        }
        int64_t n = 1;
        for (int64_t d : c.ne) n *= d;
        std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
        const std::string out = test::rewrite_gguf(path, dir + "/refused.gguf", [&](auto& kv, std::vector<GgufWriteTensor>& t) {
            if (c.tensor) t.push_back({c.tensor, GgmlType::F32, c.ne, zeros.data(), zeros.size() * sizeof(float)});
            if (c.key) kv.push_back({c.key, GgufValue::make_u32(2)});
        });
        const test::CommandResult r = test::run_layerscope("run -m '" + out + "' -p hello -n 1", true);
        EXPECT_EQ(r.exit_code, c.exit) << (c.tensor ? c.tensor : c.key) << ": " << r.out;
        EXPECT_NE(r.out.find(c.tensor ? c.tensor : c.key), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(c.why), std::string::npos) << r.out;
        if (c.tensor) {
            const test::CommandResult lint = test::run_layerscope("inspect '" + out + "'", true);
            EXPECT_EQ(lint.exit_code, 1) << lint.out;
            EXPECT_NE(lint.out.find(c.tensor), std::string::npos) << lint.out;
        }
        std::filesystem::remove(dir + "/refused.gguf");
    }
    std::filesystem::remove_all(dir);
}

// A llama file whose experts have no gate (llama.cpp runs silu(up x) then): refused by name.
TEST(MoeArchsRefusals, LlamaExpertsWithoutAGateAreRefused) {
    auto spec = make_model_preset("llama-moe-tiny");
    ASSERT_TRUE(spec.ok());
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    const std::string out = test::rewrite_gguf(path, dir + "/no-gate.gguf", [&](auto&, std::vector<GgufWriteTensor>& t) {
        std::erase_if(t, [](const GgufWriteTensor& w) { return w.name.find("ffn_gate_exps") != std::string::npos; });
    });
    const test::CommandResult r = test::run_layerscope("run -m '" + out + "' -p hello -n 1", true);
    EXPECT_NE(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("experts without ffn_gate_exps.weight"), std::string::npos) << r.out;
    std::filesystem::remove_all(dir);
}

// The config a qwen3moe file gives: llama.cpp's loader's widths and the routing its graph fixes.
TEST(MoeArchsConfig, Qwen3MoeReadsAsLlamaCppLoadsIt) {
    auto spec = make_model_preset("qwen3moe-tiny");
    ASSERT_TRUE(spec.ok());
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const ModelConfig& c = model.value()->config();
    EXPECT_EQ(c.arch, Arch::kQwen3Moe);
    EXPECT_EQ(c.n_expert, 8);
    EXPECT_EQ(c.n_expert_used, 2);
    EXPECT_EQ(c.n_ff_expert, 64);
    EXPECT_TRUE(c.expert_weights_norm);
    EXPECT_EQ(c.expert_weights_scale, 0.0);
    // Without expert_feed_forward_length the experts are n_ff / n_expert_used wide (384 / 2).
    const std::string no_key = test::rewrite_gguf(path, dir + "/no-key.gguf", [](std::vector<GgufKV>& kv, auto&) {
        std::erase_if(kv, [](const GgufKV& e) { return e.key == "qwen3moe.expert_feed_forward_length"; });
    });
    ASSERT_TRUE(std::filesystem::exists(no_key));
    auto file = GgufFile::open(no_key);
    ASSERT_TRUE(file.ok()) << file.error().message;
    auto config = model_config_from_gguf(*file.value());
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config.value().n_ff_expert, 192);
    // expert_used_count 0: llama.cpp throws "n_expert_used must be > 0 for QWEN3MOE".
    const std::string zero = test::rewrite_gguf(path, dir + "/zero.gguf", [](std::vector<GgufKV>& kv, auto&) {
        for (GgufKV& e : kv)
            if (e.key == "qwen3moe.expert_used_count") e.value = GgufValue::make_u32(0);
    });
    auto bad = Model::open(zero);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("qwen3moe.expert_used_count"), std::string::npos) << bad.error().message;
    std::filesystem::remove_all(dir);
}

// Per-layer arrays: llama.cpp reads head counts and feed_forward_length as one value or one per
// layer; an array of equal values is that value, differing values are refused by name (not run
// with layer 0's), and an array where llama.cpp reads one integer is a type error.
TEST(MoeArchsConfig, PerLayerArraysAreReadWholeOrRefused) {
    auto spec = make_model_preset("qwen3moe-tiny");
    ASSERT_TRUE(spec.ok());
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    auto base = Model::open(path);
    ASSERT_TRUE(base.ok()) << base.error().message;
    const int64_t n_layer = base.value()->config().n_layer, n_head_kv = base.value()->config().n_head_kv;
    auto with_array = [&](const std::string& name, const std::string& key, std::vector<int64_t> values) {
        return test::rewrite_gguf(path, dir + "/" + name, [&](std::vector<GgufKV>& kv, auto&) {
            std::vector<GgufValue> items;
            for (int64_t v : values) items.push_back(GgufValue::make_u32(static_cast<uint32_t>(v)));
            for (GgufKV& e : kv)
                if (e.key == key) e.value = GgufValue::make_array(GgufValueType::UINT32, items);
        });
    };
    auto config_of = [](const std::string& file_path) {
        auto file = GgufFile::open(file_path);
        EXPECT_TRUE(file.ok());
        return model_config_from_gguf(*file.value());
    };
    const std::string same = with_array("same.gguf", "qwen3moe.attention.head_count_kv",
                                        std::vector<int64_t>(static_cast<size_t>(n_layer), n_head_kv));
    auto ok = config_of(same);
    ASSERT_TRUE(ok.ok()) << ok.error().message;
    EXPECT_EQ(ok.value().n_head_kv, n_head_kv);

    std::vector<int64_t> varied(static_cast<size_t>(n_layer), n_head_kv);
    varied.back() = n_head_kv * 2;
    auto differ = config_of(with_array("differ.gguf", "qwen3moe.attention.head_count_kv", varied));
    ASSERT_FALSE(differ.ok());
    EXPECT_NE(differ.error().message.find("qwen3moe.attention.head_count_kv differs between layers"), std::string::npos)
        << differ.error().message;

    auto short_array = config_of(with_array("short.gguf", "qwen3moe.feed_forward_length", {384}));
    ASSERT_FALSE(short_array.ok());
    EXPECT_NE(short_array.error().message.find("qwen3moe.feed_forward_length has 1 entries for"), std::string::npos)
        << short_array.error().message;

    auto used = config_of(with_array("used.gguf", "qwen3moe.expert_used_count",
                                     std::vector<int64_t>(static_cast<size_t>(n_layer), 2)));
    ASSERT_TRUE(used.ok()) << used.error().message;
    EXPECT_EQ(used.value().n_expert_used, 2);

    auto count = config_of(with_array("count.gguf", "qwen3moe.expert_count",
                                      std::vector<int64_t>(static_cast<size_t>(n_layer), 8)));
    ASSERT_FALSE(count.ok());
    EXPECT_NE(count.error().message.find("qwen3moe.expert_count is an array"), std::string::npos)
        << count.error().message;
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
