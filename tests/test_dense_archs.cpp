// The dense architectures as llama.cpp's graphs build them, beyond the shared fixtures: Llama
// 3.1's rope_freqs, llama's optional attention-output and feed-forward biases and tied LM head,
// qwen2's output.bias, qwen3's per-head q/k norms. Against llama.cpp's own dumps (tests/data/dense,
// made by its AVX2 build with the companion dumper) of models make-model writes here: every tensor,
// the greedy tokens and the top-5 logits; the same models on the CUDA kernels (emulated); the
// rope_freqs fault found where it lives and named; and what llama.cpp reads that Layerscope does not
// run yet, refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>

#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/forward/generate.h"
#include "engine/model/make_model.h"
#include "engine/session/session.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct DenseCase {
    const char* name;
    const char* preset;               // nullptr: MakeModelSpec's defaults
    void (*tweak)(MakeModelSpec&);    // nullptr: the preset as it is
    const char* dump;                 // in tests/data/dense
    double limit;                     // largest NMSE accepted in llama mode
    const char* model_file = nullptr;  // a model in tests/data/dense instead of a made one (llama-quantize's i-quants)
    // Whether the CUDA kernels run it too (not for a second dump of a model and graph they already
    // run: flash attention's CUDA kernel has its own test, test_cuda_attention).
    bool emulate_cuda = true;
};

void qwen2_output_bias(MakeModelSpec& s) {
    s.arch = "qwen2";
    s.n_embd = 128;
    s.n_head = 4;
    s.n_head_kv = 2;
    s.n_ff = 384;
    s.vocab = 400;
    s.out_biases = true;
}

// F16 weights: 1e-8 (flash attention included); quantized weights: 1e-6.
const DenseCase kCases[] = {
    {"llama3_rope_freqs", "llama3-tiny", nullptr, "llama3-tiny-F16_story_n4_fa-off.gguf", 1e-8},
    {"llama3_rope_freqs_flash", "llama3-tiny", nullptr, "llama3-tiny-F16_hello_n2_fa-on.gguf", 1e-8},
    {"llama3_q4_K", "llama3-tiny", [](MakeModelSpec& s) { s.type = GgmlType::Q4_K; },
     "llama3-tiny-Q4_K_hello_n3_fa-off.gguf", 1e-6},
    {"llama_biases_tied", "llama3-tiny",
     [](MakeModelSpec& s) {
         s.out_biases = true;
         s.tied_output = true;
     },
     "llama3-tiny-biases-tied-F16_hello_n3_fa-off.gguf", 1e-8},
    {"qwen2_output_bias", nullptr, qwen2_output_bias, "qwen2-tiny-output-bias-F16_hello_n3_fa-off.gguf", 1e-8},
    {"qwen3", "qwen3-tiny", nullptr, "qwen3-tiny-F16_hello_n3_fa-off.gguf", 1e-8},
    {"llama_scales_biases", "llama3-tiny",
     [](MakeModelSpec& s) {
         s.weight_scales = true;
         s.out_biases = true;
     },
     "llama3-tiny-scales-biases-F16_hello_n3_fa-off.gguf", 1e-8},
    {"qwen3_scales", "qwen3-tiny", [](MakeModelSpec& s) { s.weight_scales = true; }, "qwen3-tiny-scales-F16_hello_n3_fa-off.gguf",
     1e-8},
    // phi3: fused attn_qkv and ffn_up, partial NEOX rope, the Q scaled before attention; LongRoPE's
    // long factors (the 256-cell context beyond the original 128) and short ones (original 2048).
    {"phi3_longrope_long", "phi3-tiny", nullptr, "phi3-tiny-F16_hello_n3_fa-off.gguf", 1e-8},
    {"phi3_longrope_short", "phi3-tiny", [](MakeModelSpec& s) { s.longrope_orig_ctx = 2048; },
     "phi3-tiny-short-F16_hello_n3_fa-off.gguf", 1e-8},
    // The original context equal to the reference's 256 cells: short factors, as long as the run
    // takes the reference's context size (a default of 512 would take the long ones).
    {"phi3_longrope_edge", "phi3-tiny", [](MakeModelSpec& s) { s.longrope_orig_ctx = 256; },
     "phi3-tiny-edge-F16_hello_n3_fa-off.gguf", 1e-8},
    // qwen2's graph multiplies q, k, v and o by their scales, and leaves the feed-forward's unused.
    {"qwen2_scales", nullptr,
     [](MakeModelSpec& s) {
         qwen2_output_bias(s);
         s.out_biases = false;
         s.weight_scales = true;
     },
     "qwen2-tiny-scales-F16_hello_n3_fa-off.gguf", 1e-8},
    {"qwen3_q8_0", "qwen3-tiny", [](MakeModelSpec& s) { s.type = GgmlType::Q8_0; }, "qwen3-tiny-Q8_0_hello_n3_fa-off.gguf",
     1e-6},
    // gemma: a window of 8 that the 73-token prompt (and the short prompt's decodes) cross.
    {"gemma3_swa", "gemma3-tiny", nullptr, "gemma3-tiny-F16_story_n3_fa-off.gguf", 1e-8},
    {"gemma3_swa_flash", "gemma3-tiny", nullptr, "gemma3-tiny-F16_hello_n4_fa-on.gguf", 1e-8},
    {"gemma3_q4_K", "gemma3-tiny", [](MakeModelSpec& s) { s.type = GgmlType::Q4_K; }, "gemma3-tiny-Q4_K_hello_n3_fa-off.gguf",
     1e-6},
    {"gemma2_softcap", "gemma2-tiny", nullptr, "gemma2-tiny-F16_story_n3_fa-off.gguf", 1e-8},
    {"gemma2_softcap_flash", "gemma2-tiny", nullptr, "gemma2-tiny-F16_hello_n4_fa-on.gguf", 1e-8},
    {"gemma2_q8_0", "gemma2-tiny", [](MakeModelSpec& s) { s.type = GgmlType::Q8_0; }, "gemma2-tiny-Q8_0_hello_n3_fa-off.gguf",
     1e-6},
    // i-quants, quantized by llama.cpp's llama-quantize (make-model has no i-quant quantizer).
    {"gemma3_iq4_nl", nullptr, nullptr, "gemma3-tiny-IQ4_NL_story_n3_fa-off.gguf", 1e-6, "gemma3-tiny-IQ4_NL.gguf"},
    {"gemma3_iq4_xs", nullptr, nullptr, "gemma3-wide-IQ4_XS_story_n3_fa-off.gguf", 0, "gemma3-wide-IQ4_XS.gguf"},
    {"llama3_tq1_0", nullptr, nullptr, "llama3-wide-TQ1_0_hello_n3_fa-off.gguf", 1e-6, "llama3-wide-TQ1_0.gguf"},
    {"llama3_tq2_0", nullptr, nullptr, "llama3-wide-TQ2_0_hello_n3_fa-off.gguf", 1e-6, "llama3-wide-TQ2_0.gguf"},
    // ggml's tiled flash attention (prompts of 64 tokens or more) and its decode calls over 512
    // cells or more, split into one chunk per thread of the reference's run.
    {"llama3_flash_tiled_split", "llama3-tiny", nullptr, "llama3-tiny-F16_long_n2_fa-on.gguf", 1e-8, nullptr, false},
    {"gemma2_softcap_flash_tiled", "gemma2-tiny", nullptr, "gemma2-tiny-F16_story_n3_fa-on.gguf", 1e-8, nullptr, false},
};

std::string dump_path(const DenseCase& c) { return std::string(LAYERSCOPE_TEST_DATA) + "/dense/" + c.dump; }

// The case's model, written into a fresh temporary folder.
struct CaseModel {
    explicit CaseModel(const DenseCase& c) {
        if (c.model_file) {
            path = std::string(LAYERSCOPE_TEST_DATA) + "/dense/" + c.model_file;
            return;
        }
        MakeModelSpec spec;
        if (c.preset) {
            auto preset = make_model_preset(c.preset);
            EXPECT_TRUE(preset.ok()) << (preset.ok() ? "" : preset.error().message);
            if (preset.ok()) spec = preset.value();
        }
        if (c.tweak) c.tweak(spec);
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

class DenseArchs : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseArchs, EveryTensorMatchesLlamaCpp) {
    const DenseCase& c = GetParam();
    const CaseModel model(c);
    test::ParityResult r = test::run_parity(dump_path(c), model.path, MathMode::kLlama, c.limit);
    std::printf("[dense %s] %d tensors compared, %d reference nodes not computed, worst %s nmse %.3g\n", c.name, r.compared,
                r.not_computed, r.worst_name.c_str(), r.worst_nmse);
    EXPECT_GT(r.compared, 100);
    for (const std::string& f : r.failures) ADD_FAILURE() << f;
    const std::vector<int32_t> want = test::reference_generated(dump_path(c));
    ASSERT_FALSE(want.empty());
    ASSERT_GE(r.generated.size(), want.size());
    EXPECT_EQ(std::vector<int32_t>(r.generated.begin(), r.generated.begin() + want.size()), want);
    ASSERT_EQ(r.top5_ours.size(), r.top5_ref.size());
    for (size_t d = 0; d < r.top5_ref.size(); ++d) EXPECT_EQ(r.top5_ours[d], r.top5_ref[d]) << "top-5 of decode " << d;
}

// The CUDA kernels (on the SIMT emulator) generate llama.cpp's tokens, and every event of their
// exact-mode run agrees with the CPU backend's at NMSE <= 1e-6.
class DenseArchsCuda : public ::testing::TestWithParam<DenseCase> {};

TEST_P(DenseArchsCuda, CudaEmulatedAgreesWithTheCpuAndLlamaCpp) {
    const DenseCase& c = GetParam();
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto ref = ReferenceDump::open(dump_path(c));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    MadeBackend cuda = make_backend(test::whole_model_cuda_kind(), BackendOptions{2});
    ASSERT_TRUE(cuda.backend) << cuda.note;
    ForwardOptions fo;
    const std::vector<int32_t> prompt = ref.value()->prompt_tokens(), want = ref.value()->generated_tokens();
    fo.n_ctx = std::max<int64_t>(256, (static_cast<int64_t>(prompt.size() + want.size()) + 255) / 256 * 256);
    {
        auto forward = make_forward(*model.value(), *cuda.backend, fo);
        ASSERT_TRUE(forward.ok()) << forward.error().message;
        auto g = generate_greedy(*forward.value(), model.value()->tokenizer(), prompt, static_cast<int>(want.size()), nullptr);
        ASSERT_TRUE(g.ok()) << g.error().message;
        EXPECT_EQ(g.value().generated, want);
    }
    test::expect_agrees_with_cpu_exact(*model.value(), *cuda.backend, fo, prompt, 2, 60);
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, DenseArchs, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

std::vector<DenseCase> cuda_cases() {
    std::vector<DenseCase> v;
    for (const DenseCase& c : kCases)
        if (c.emulate_cuda) v.push_back(c);
    return v;
}
INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, DenseArchsCuda, ::testing::ValuesIn(cuda_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// Bugs of ports of these models: the first divergent tensor is where the bug lives (everything
// before it matches), and the doctor names it. A Llama 3.1 port that ignores rope_freqs; a Qwen3
// port that normalises q and k after RoPE.
struct DenseFault {
    Fault fault;
    size_t dump_case;         // index into kCases
    const char* first;        // the first divergent event
    const char* transform;    // the doctor's transform that explains it
    const char* verdicts[2];  // what its verdict says
};

const DenseFault kFaults[] = {
    {Fault::kRopeFreqsIgnored, 0, "Qcur-0#3", "rope", {"with the rope_freqs factors instead of", "rope_freqs.weight ignored"}},
    {Fault::kQkNormAfterRope, 5, "Qcur-0#3", "rope", {"after their RMS norm (attn_q_norm before RoPE) instead of", "halves (NEOX)"}},
    {Fault::kLongRopeSwapped, 8, "Qcur-0#2", "rope", {"with the rope_factors_long factors instead of", "rope_factors_short"}},
    {Fault::kLongRopeSwapped, 9, "Qcur-0#2", "rope", {"with the rope_factors_short factors instead of", "rope_factors_long"}},
    {Fault::kQkvSplitSwapped, 8, "Vcur-0", "qkv-split", {"rows 384..511 (V's, after Q's and K's) instead of", "(K's, after Q's)"}},
    {Fault::kGemmaNormPlusOne, 13, "attn_norm-0", "norm-plus-one", {"applied as stored", "ours applies 1 + w"}},
    {Fault::kEmbdScaleMissing, 13, "inp_scaled", "embd-scale", {"multiplied by sqrt(n_embd)", "sqrt(128)"}},
    {Fault::kSwaOffByOne, 13, "kq_soft_max-0", "attention", {"layer 0's sliding window of 8 instead of", "off by one"}},
    {Fault::kSwaWrongLayers, 13, "Qcur-1#3", "rope", {"layer 1 taken as a global layer", "on the wrong layers"}},
    {Fault::kSoftcapMissing, 16, "kq_soft_max-0", "re-run:softcap-missing", {"reproduced by re-running", "soft caps left out"}},
    {Fault::kSwaWrongLayers, 16, "kq_soft_max-0", "attention", {"layer 0 taken as a global layer", "on the wrong layers"}},
};

class DenseArchsFaults : public ::testing::TestWithParam<DenseFault> {};

TEST_P(DenseArchsFaults, FoundWhereTheBugLivesAndNamed) {
    const DenseFault& f = GetParam();
    const DenseCase& c = kCases[f.dump_case];
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto reference = ReferenceDump::open(dump_path(c));
    ASSERT_TRUE(reference.ok()) << reference.error().message;
    auto backend = make_cpu_backend(0);
    for (Fault fault : {Fault::kNone, f.fault}) {
        CompareRunOptions options;
        options.forward.fault = fault;
        options.forward.n_ubatch = reference.value()->n_ubatch();
        auto run = compare_with_reference(*model.value(), *backend, *reference.value(), options);
        ASSERT_TRUE(run.ok()) << run.error().message;
        const CompareRunResult& r = run.value();
        EXPECT_EQ(r.llama_isa, LlamaIsa::kAvx2) << r.llama_isa_why;
        if (fault == Fault::kNone) {
            EXPECT_EQ(r.summary.first_divergent, -1) << r.comparisons[std::max<int64_t>(0, r.summary.first_divergent)].name;
            EXPECT_EQ(r.summary.warn, 0);
            continue;
        }
        ASSERT_GE(r.summary.first_divergent, 0) << fault_info(fault).name << " was not detected";
        const EventComparison& first = r.comparisons[r.summary.first_divergent];
        EXPECT_EQ(first.name, f.first) << "nmse " << first.metrics.nmse;
        for (int64_t i = 0; i < r.summary.first_divergent; ++i)
            EXPECT_EQ(r.comparisons[i].status, CompareStatus::kOk) << r.comparisons[i].name;
        DoctorReport doctor = diagnose(r, static_cast<size_t>(r.summary.first_divergent), *reference.value(),
                                       model.value().get(), options.thresholds);
        ASSERT_FALSE(doctor.findings.empty()) << "the doctor found no explanation for " << first.name;
        EXPECT_EQ(doctor.findings.front().transform, f.transform) << doctor.findings.front().verdict;
        for (const char* v : f.verdicts)
            EXPECT_NE(doctor.findings.front().verdict.find(v), std::string::npos) << doctor.findings.front().verdict;
        std::printf("[fault] %s first divergent %s nmse %.3g doctor: %s\n", fault_info(fault).name, first.name.c_str(),
                    first.metrics.nmse, doctor.findings.front().verdict.c_str());
    }
}

INSTANTIATE_TEST_SUITE_P(LlamaCppAvx2, DenseArchsFaults, ::testing::ValuesIn(kFaults), [](const auto& info) {
    std::string n = std::string(fault_info(info.param.fault).name) + "_" + kCases[info.param.dump_case].name;
    for (char& ch : n)
        if (ch == '-') ch = '_';
    return n;
});

// The fault needs factors to leave out.
TEST(DenseArchsFaultRefusals, RopeFreqsIgnoredNeedsAModelWithThem) {
    auto spec = make_model_preset("llama3-tiny");
    ASSERT_TRUE(spec.ok());
    spec.value().rope_freqs_factor = 0;
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto backend = make_cpu_backend(1);
    ForwardOptions fo;
    fo.n_ctx = 256;
    fo.fault = Fault::kRopeFreqsIgnored;
    auto forward = make_forward(*model.value(), *backend, fo);
    ASSERT_FALSE(forward.ok());
    EXPECT_EQ(forward.error().code, ErrorCode::kUsage);
    EXPECT_NE(forward.error().message.find("needs a model with rope frequency factors"), std::string::npos)
        << forward.error().message;
    std::filesystem::remove_all(dir);
}

// convert_hf_to_gguf's llama3 factors, recomputed here from Meta's formula for Llama 3.1 8B's
// rope_scaling (factor 8, low 1, high 4, from 8192; 128-wide heads, theta 500000).
TEST(DenseArchsRope, Llama3FactorsFollowMetasFormula) {
    const std::vector<float> f = llama3_rope_freq_factors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
    ASSERT_EQ(f.size(), 64u);
    int ones = 0, eights = 0;
    for (size_t i = 0; i < f.size(); ++i) {
        const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * static_cast<double>(i) / 128.0);
        if (wavelen < 8192.0 / 4) {
            EXPECT_EQ(f[i], 1.0f) << i;
            ++ones;
        } else if (wavelen > 8192.0) {
            EXPECT_EQ(f[i], 8.0f) << i;
            ++eights;
        } else {
            const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
            EXPECT_NEAR(f[i], 1.0 / ((1 - smooth) / 8.0 + smooth), 1e-5) << i;
        }
        if (i > 0) {
            EXPECT_GE(f[i], f[i - 1]) << i;
        }
    }
    EXPECT_GT(ones, 10);
    EXPECT_GT(eights, 10);
}

// rope.scaling.* as llama.cpp reads them: a factor without a type scales linearly; attn_factor
// multiplies cos/sin; longrope is refused by name.
TEST(DenseArchsRope, ScalingKeysAreReadAsLlamaCppReadsThem) {
    auto spec = make_model_preset("llama3-tiny");
    ASSERT_TRUE(spec.ok());
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    auto with = [&](const std::string& out, std::vector<GgufKV> extra) {
        return test::rewrite_gguf(path, dir + "/" + out, [&](std::vector<GgufKV>& kv, auto&) {
            for (GgufKV& e : extra) kv.push_back(e);
        });
    };
    auto linear = Model::open(with("linear.gguf", {{"llama.rope.scaling.factor", GgufValue::make_f32(4.0f)},
                                                   {"llama.rope.scaling.attn_factor", GgufValue::make_f32(0.5f)}}));
    ASSERT_TRUE(linear.ok()) << linear.error().message;
    EXPECT_EQ(linear.value()->config().rope_scaling, RopeScaling::kLinear);
    const RopeParams p = rope_params_for(linear.value()->config());
    EXPECT_EQ(p.freq_scale, 0.25f);
    EXPECT_EQ(p.attn_factor, 0.5f);
    EXPECT_EQ(p.ext_factor, 0.0f);
    auto none = Model::open(with("none.gguf", {{"llama.rope.scaling.type", GgufValue::make_string("none")},
                                               {"llama.rope.scaling.factor", GgufValue::make_f32(4.0f)}}));
    ASSERT_TRUE(none.ok()) << none.error().message;
    EXPECT_EQ(rope_params_for(none.value()->config()).freq_scale, 1.0f);  // "never scale if scaling type is none"
    auto longrope = Model::open(with("longrope.gguf", {{"llama.rope.scaling.type", GgufValue::make_string("longrope")}}));
    ASSERT_FALSE(longrope.ok());
    EXPECT_NE(longrope.error().message.find("llama.rope.scaling.type is \"longrope\""), std::string::npos)
        << longrope.error().message;
    std::filesystem::remove_all(dir);
}

// Element-wise operands (norms, biases, scales) stored in another type than f32: llama.cpp aborts
// on them; `run` refuses the file naming the tensor and its type (exit 3), never reads them as f32.
TEST(DenseArchsRefusals, ElementWiseOperandsMustBeF32) {
    auto spec = make_model_preset("llama3-tiny");
    ASSERT_TRUE(spec.ok());
    spec.value().out_biases = true;
    const std::string dir = test::make_temp_dir(), path = dir + "/model.gguf";
    ASSERT_TRUE(make_model(spec.value(), path).ok());
    for (const char* name : {"blk.0.attn_norm.weight", "output_norm.weight", "blk.1.ffn_down.bias"}) {
        std::vector<uint16_t> halves;
        const std::string out = test::rewrite_gguf(path, dir + "/f16.gguf", [&](auto&, std::vector<GgufWriteTensor>& t) {
            for (GgufWriteTensor& w : t)
                if (w.name == name) {
                    halves.assign(static_cast<size_t>(w.ne[0]), 0x3C00);  // 1.0 in f16
                    w.type = GgmlType::F16;
                    w.data = halves.data();
                    w.n_bytes = halves.size() * sizeof(uint16_t);
                }
        });
        const test::CommandResult r = test::run_layerscope("run -m '" + out + "' -p hello -n 1", true);
        EXPECT_EQ(r.exit_code, 3) << name << ": " << r.out;
        EXPECT_NE(r.out.find(std::string("tensor ") + name + " is f16; it is an element-wise operand, which must be f32"),
                  std::string::npos)
            << r.out;
        const test::CommandResult lint = test::run_layerscope("inspect '" + out + "'", true);
        EXPECT_EQ(lint.exit_code, 1) << lint.out;
        EXPECT_NE(lint.out.find("an element-wise operand (norm, bias, scale) must be f32"), std::string::npos) << lint.out;
        std::filesystem::remove(dir + "/f16.gguf");
    }
    std::filesystem::remove_all(dir);
}

// Tensors llama.cpp's graph would use and Layerscope does not run yet make `run` refuse the file,
// naming the tensor (exit 3), never skip them; so do tensors llama.cpp's loader does not know.
TEST(DenseArchsRefusals, TensorsLlamaCppUsesAreRunOrRefusedByName) {
    struct Refusal {
        const char* preset;
        const char* tensor;
        std::vector<int64_t> ne;
        const char* why;
    };
    const Refusal cases[] = {
        {"llama3-tiny", "output.scale", {1}, "only for an untied NVFP4 output.weight"},
        {"llama3-tiny", "blk.0.attn_qkv.weight", {256, 512}, "fused QKV projections"},
        {"llama3-tiny", "blk.1.attn_qkv.scale", {1}, "per-tensor weight scales on attn_qkv"},
        {"qwen3-tiny", "blk.0.attn_output.bias", {128}, "loader has no tensor of that name"},
        {"gemma2-tiny", "output.weight", {128, 512}, "loader has no tensor of that name"},
        {"gemma3-tiny", "blk.0.attn_qkv.weight", {128, 512}, "fused QKV projections"},
        {"gemma3-tiny", "dense_2.weight", {128, 384}, "loader refuses the file: it creates it with 0 features"},
        {"gemma3-tiny", "dense_3.weight", {384, 128}, "reads no dense_3_feat_in key"},
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
        const std::string out = test::rewrite_gguf(path, dir + "/refused.gguf", [&](auto&, std::vector<GgufWriteTensor>& t) {
            t.push_back({c.tensor, GgmlType::F32, c.ne, zeros.data(), zeros.size() * sizeof(float)});
        });
        const test::CommandResult r = test::run_layerscope("run -m '" + out + "' -p hello -n 1", true);
        EXPECT_EQ(r.exit_code, 3) << c.tensor << ": " << r.out;
        EXPECT_NE(r.out.find(std::string("tensor ") + c.tensor + ": "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(c.why), std::string::npos) << r.out;
        const test::CommandResult lint = test::run_layerscope("inspect '" + out + "'", true);
        EXPECT_EQ(lint.exit_code, 1) << lint.out;
        EXPECT_NE(lint.out.find(c.tensor), std::string::npos) << lint.out;
        std::filesystem::remove(dir + "/refused.gguf");
    }
    std::filesystem::remove_all(dir);
}

// A local layer's cache holds its window plus a ubatch, not the context: once the positions pass
// its cells, the window slides (the cells still seen move to the front). The logits must be those
// of a run whose local caches never slide (exact mode: the same sums whatever the ubatch).
TEST(DenseArchsSlidingWindow, TheWindowSlidesThroughASmallCacheWithTheSameLogits) {
    const DenseCase c{"gemma3_slide", "gemma3-tiny", nullptr, "", 0};
    const CaseModel made(c);
    auto model = Model::open(made.path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto cpu = make_cpu_backend(2);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 300; ++i) prompt.push_back(3 + (i * 37) % 500);
    auto logits = [&](int64_t n_ubatch) {
        ForwardOptions fo;
        fo.mode = MathMode::kExact;
        fo.n_ctx = 1024;
        fo.n_ubatch = n_ubatch;  // the local caches: 256 cells with 16, 768 (never full here) with 512
        auto forward = make_forward(*model.value(), *cpu, fo);
        EXPECT_TRUE(forward.ok()) << forward.error().message;
        if (!forward.ok()) return std::vector<float>{};
        std::vector<float> out;
        // The prompt in pieces, then two decode calls: the window slides inside the prompt and again after.
        for (size_t first = 0; first < prompt.size(); first += 100) {
            Status s = forward.value()->eval(std::vector<int32_t>(prompt.begin() + first, prompt.begin() + first + 100), nullptr);
            EXPECT_TRUE(s.ok()) << s.error().message;
        }
        for (int32_t t : {7, 11}) {
            Status s = forward.value()->eval({t}, nullptr);
            EXPECT_TRUE(s.ok()) << s.error().message;
            out.insert(out.end(), forward.value()->last_logits().begin(), forward.value()->last_logits().end());
        }
        return out;
    };
    const std::vector<float> sliding = logits(16), whole = logits(512);
    ASSERT_EQ(sliding.size(), whole.size());
    ASSERT_FALSE(sliding.empty());
    double err = 0, norm = 0;
    for (size_t i = 0; i < sliding.size(); ++i) err += (sliding[i] - whole[i]) * (sliding[i] - whole[i]), norm += whole[i] * whole[i];
    EXPECT_LT(err / norm, 1e-12) << "the sliding caches changed the logits";
    // And a window that really is one: without it (a model whose pattern makes every layer global)
    // the logits differ.
    const std::string dir = test::make_temp_dir();
    const std::string global = test::rewrite_gguf(made.path, dir + "/global.gguf", [](std::vector<GgufKV>& kv, auto&) {
        for (GgufKV& k : kv)
            if (k.key == "gemma3.attention.sliding_window_pattern") k.value = GgufValue::make_u32(1);
    });
    auto global_model = Model::open(global);
    ASSERT_TRUE(global_model.ok()) << global_model.error().message;
    ForwardOptions fo;
    fo.mode = MathMode::kExact;
    fo.n_ctx = 1024;
    auto forward = make_forward(*global_model.value(), *cpu, fo);
    ASSERT_TRUE(forward.ok());
    ASSERT_TRUE(forward.value()->eval(prompt, nullptr).ok());
    ASSERT_TRUE(forward.value()->eval({7}, nullptr).ok());
    double diff = 0;
    for (size_t i = 0; i < forward.value()->last_logits().size(); ++i)
        diff += std::abs(forward.value()->last_logits()[i] - whole[i]);
    EXPECT_GT(diff, 1e-3);
    std::filesystem::remove_all(dir);
}

// A reference made with flash attention keeps no softmax: the session rebuilds its maps from the
// reference's roped Q and K, with each layer's sliding window and gemma2's soft cap, so that they
// are what llama.cpp attended to (the prompt's 7 tokens and 3 decoded ones cross the window of 8).
TEST(DenseArchsSlidingWindow, FlashAttentionReferenceMapsKeepTheWindowAndTheCap) {
    for (const char* name : {"gemma3_swa_flash", "gemma2_softcap_flash"}) {
        const DenseCase* c = nullptr;
        for (const DenseCase& k : kCases)
            if (std::string(k.name) == name) c = &k;
        ASSERT_TRUE(c) << name;
        const CaseModel made(*c);
        auto opened = Model::open(made.path);
        ASSERT_TRUE(opened.ok()) << opened.error().message;
        std::shared_ptr<const Model> model = std::move(opened.value());
        auto ref_opened = ReferenceDump::open(dump_path(*c));
        ASSERT_TRUE(ref_opened.ok()) << ref_opened.error().message;
        std::shared_ptr<const ReferenceDump> ref = std::move(ref_opened.value());
        SessionOptions options;
        options.capture = CapturePolicy::all();
        auto created = Session::create(model, options);
        ASSERT_TRUE(created.ok()) << created.error().message;
        std::unique_ptr<Session> s = std::move(created.value());
        s->wait_for_ticket(s->set_reference(ref), std::chrono::seconds(60));
        s->wait_for_ticket(s->set_tokens(ref->prompt_tokens()), std::chrono::seconds(60));
        auto snap = s->wait_for_ticket(s->generate(3, ref->generated_tokens()), std::chrono::seconds(120));
        ASSERT_TRUE(snap && !snap->error) << name;
        int checked = 0;
        for (const EventInfo& e : *snap->events) {
            if (e.base_name != "kq_soft_max-0" || e.decode < 3) continue;  // layer 0 is local; position 9 sees 2..9
            const EventRecord* rec = snap->record(e.index);
            ASSERT_TRUE(rec && rec->attention && rec->ref_attention) << name << " " << e.name;
            EXPECT_TRUE(rec->ref_attention->reconstructed);
            double worst = 0;
            for (int64_t h = 0; h < rec->attention->n_head; ++h)
                for (int64_t k = 0; k < rec->attention->n_key; ++k)
                    worst = std::max(worst, std::fabs(static_cast<double>(rec->attention->at(h, 0, k) - rec->ref_attention->at(h, 0, k))));
            EXPECT_LT(worst, 1e-3) << name << " " << e.name;
            EXPECT_EQ(rec->ref_attention->at(0, 0, 1), 0.0f) << "position 1 is outside the window";
            ++checked;
        }
        EXPECT_EQ(checked, 1) << name;
    }
}

}  // namespace
}  // namespace ls
