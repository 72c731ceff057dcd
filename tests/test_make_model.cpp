// make-model: synthetic models are deterministic, load in every weight type without error lints,
// tokenize round-trip, have the requested weight statistics, and run (the GUI demo included);
// deepseek2 files have every key and tensor llama.cpp's loader needs, and the presets real models'
// shapes.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "kernels/backend.h"
#include "kernels/cpu/dequant.h"
#include "engine/forward/forward.h"
#include "engine/forward/generate.h"
#include "engine/gguf/gguf.h"
#include "engine/model/lint.h"
#include "engine/model/make_model.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "tests/test_support.h"

namespace ls {
namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string made(const MakeModelSpec& spec, const std::string& name, MakeModelInfo* info = nullptr) {
    static const std::string dir = test::make_temp_dir();
    std::string path = dir + "/" + name;
    Status st = make_model(spec, path, info);
    EXPECT_TRUE(st.ok()) << st.error().message;
    return path;
}

std::string fmt_name(const char* arch, GgmlType t) { return std::string(arch) + "_" + ggml_type_name(t); }

MakeModelSpec small_spec(GgmlType type = GgmlType::F16, const char* arch = "llama") {
    MakeModelSpec s;
    s.arch = arch;
    s.n_embd = 256;  // K-quant rows need multiples of 256
    s.n_layer = 1;
    s.n_ff = 512;
    s.vocab = 400;
    s.type = type;
    return s;
}

// Runs the prompt and `n` greedy tokens; the generated ids.
std::vector<int32_t> greedy(const Model& model, const std::vector<int32_t>& prompt, int n, double* ms_per_token = nullptr) {
    auto backend = make_cpu_backend(1);
    ForwardOptions fo;
    fo.n_ctx = 256;
    auto forward = make_forward(model, *backend, fo);
    EXPECT_TRUE(forward.ok()) << forward.error().message;
    if (!forward.ok()) return {};
    auto res = generate_greedy(*forward.value(), model.tokenizer(), prompt, n, nullptr);
    EXPECT_TRUE(res.ok()) << res.error().message;
    if (!res.ok()) return {};
    for (float x : forward.value()->last_logits()) {
        EXPECT_TRUE(std::isfinite(x));
        if (!std::isfinite(x)) break;
    }
    if (ms_per_token && res.value().decode_ms.size() > 1) {
        double sum = 0;
        for (size_t d = 1; d < res.value().decode_ms.size(); ++d) sum += res.value().decode_ms[d];
        *ms_per_token = sum / static_cast<double>(res.value().decode_ms.size() - 1);
    }
    return res.value().generated;
}

TEST(MakeModel, SameSpecGivesByteIdenticalFiles) {
    for (const char* arch : {"llama", "qwen2"}) {
        MakeModelSpec s = small_spec(GgmlType::Q4_K, arch);
        std::string a = read_all(made(s, std::string(arch) + "_a.gguf"));
        std::string b = read_all(made(s, std::string(arch) + "_b.gguf"));
        ASSERT_GT(a.size(), 100000u);
        EXPECT_TRUE(a == b) << arch;
        s.seed = 2;
        std::string c = read_all(made(s, std::string(arch) + "_c.gguf"));
        EXPECT_EQ(a.size(), c.size());
        EXPECT_FALSE(a == c) << arch << ": another seed must give other weights";
    }
}

TEST(MakeModel, EveryWeightTypeOpensRunsAndHasNoErrorLints) {
    const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
    for (const char* arch : {"llama", "qwen2"}) {
        for (GgmlType t : types) {
            std::string label = fmt_name(arch, t);
            MakeModelInfo info;
            std::string path = made(small_spec(t, arch), label + ".gguf", &info);
            EXPECT_TRUE(info.fallbacks.empty()) << label;
            auto model = Model::open(path);
            ASSERT_TRUE(model.ok()) << label << ": " << model.error().message;
            const GgufTensorInfo* q = model.value()->find("blk.0.attn_q.weight");
            ASSERT_NE(q, nullptr);
            EXPECT_EQ(q->type, t) << label;
            EXPECT_EQ(model.value()->find("blk.0.attn_norm.weight")->type, GgmlType::F32);
            EXPECT_EQ(count_lints(lint_model(model.value()->file()), LintSeverity::kError), 0) << label;
            EXPECT_FALSE(greedy(*model.value(), {1, 300, 301}, 2).empty()) << label;

            auto r = test::run_layerscope("inspect --json '" + path + "'");
            ASSERT_EQ(r.exit_code, 0) << label << r.out;
            auto j = nlohmann::json::parse(r.out);
            for (const auto& l : j.at("lints")) EXPECT_NE(l.at("severity"), "error") << label << ": " << l.dump();
        }
    }
}

TEST(MakeModel, KQuantRowsThatDoNotFitFallBackLikeLlamaQuantize) {
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q4_K, 128), GgmlType::Q5_0);
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q5_K, 128), GgmlType::Q5_1);
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q6_K, 384), GgmlType::Q8_0);
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q3_K, 384), GgmlType::Q4_0);
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q4_K, 512), GgmlType::Q4_K);
    EXPECT_EQ(make_model_tensor_type(GgmlType::Q8_0, 48), GgmlType::F16);

    MakeModelSpec s = small_spec(GgmlType::Q4_K);
    s.n_ff = 384;  // ffn_down rows are 384 long
    MakeModelInfo info;
    auto model = Model::open(made(s, "fallback.gguf", &info));
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model.value()->find("blk.0.ffn_down.weight")->type, GgmlType::Q5_0);
    EXPECT_EQ(model.value()->find("blk.0.ffn_up.weight")->type, GgmlType::Q4_K);
    ASSERT_EQ(info.fallbacks.size(), 1u);
    EXPECT_NE(info.fallbacks[0].find("blk.0.ffn_down.weight: q5_0"), std::string::npos) << info.fallbacks[0];
    EXPECT_FALSE(greedy(*model.value(), {1, 300}, 1).empty());
}

TEST(MakeModel, TokenizerRoundTrips) {
    const char* texts[] = {"Hello world", "The quick brown fox jumps over the lazy dog.",
                           "  two leading spaces and a tab\there", "line one\nline two\n",
                           "na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE6\x9D\xB1\xE4\xBA\xAC 42!", "<s> is text here"};
    for (const char* arch : {"llama", "qwen2"}) {
        MakeModelSpec s = small_spec(GgmlType::F16, arch);
        s.vocab = 2000;
        auto model = Model::open(made(s, std::string("tok_") + arch + ".gguf"));
        ASSERT_TRUE(model.ok()) << model.error().message;
        const Tokenizer* tok = model.value()->tokenizer();
        ASSERT_NE(tok, nullptr);
        EXPECT_EQ(tok->kind(), TokenizerKind::kSpm);
        EXPECT_EQ(tok->bos(), 1);
        EXPECT_EQ(tok->eos(), 2);
        EXPECT_TRUE(tok->add_bos());
        EXPECT_EQ(tok->find("<0x41>"), 3 + 0x41);
        EXPECT_NE(tok->find("\xE2\x96\x81the"), kNoToken);
        for (const char* text : texts) {
            EXPECT_EQ(tok->encode(text, true, false).at(0), 1);
            // Without BOS: llama.cpp keeps the prefix space when it strips a leading BOS.
            std::vector<TokenId> ids = tok->encode(text, false, false);
            ASSERT_FALSE(ids.empty());
            EXPECT_EQ(tok->decode(ids), text) << arch;
        }
        // Common words are single pieces, not letters.
        std::vector<TokenId> ids = tok->encode("the world", false, false);
        EXPECT_EQ(ids.size(), 2u);
    }
}

TEST(MakeModel, WeightsHaveTheRequestedStatistics) {
    for (const char* arch : {"llama", "qwen2"}) {
        MakeModelSpec s = small_spec(GgmlType::F32, arch);
        s.n_layer = 2;
        std::string path = made(s, std::string("stats_") + arch + ".gguf");
        auto file = GgufFile::open(path);
        ASSERT_TRUE(file.ok());
        for (const GgufTensorInfo& t : file.value()->tensors()) {
            ASSERT_EQ(t.type, GgmlType::F32);
            const float* v = reinterpret_cast<const float*>(t.data);
            int64_t n = t.n_elements();
            bool norm = t.name.find("_norm.weight") != std::string::npos;
            double sum = 0, sq = 0, lo = 1e30, hi = -1e30;
            for (int64_t i = 0; i < n; ++i) {
                double x = norm ? v[i] - 1.0 : v[i];
                sum += x, sq += x * x, lo = std::min(lo, double(v[i])), hi = std::max(hi, double(v[i]));
            }
            double want = make_model_tensor_std(s, t.name);
            ASSERT_GT(want, 0.0) << t.name;
            if (norm) {
                EXPECT_GE(lo, 0.5) << t.name;
                EXPECT_LE(hi, 1.5) << t.name;
            }
            if (t.name.find(".bias") != std::string::npos) continue;  // q/k biases carry outliers
            if (t.name == "token_embd.weight" && s.arch == "qwen2") n = s.n_embd * s.vocab;  // padding rows are x0.1
            double rms = std::sqrt(sq / n);
            EXPECT_NEAR(rms, want, 0.1 * want) << arch << " " << t.name;
            EXPECT_NEAR(sum / n, 0.0, 4 * want / std::sqrt(double(n))) << arch << " " << t.name;  // 4 standard errors
        }
    }
    // Attention is not uniform: Q/K are wider than the rest.
    MakeModelSpec s = small_spec();
    EXPECT_GT(make_model_tensor_std(s, "blk.0.attn_q.weight"), 2 * make_model_tensor_std(s, "blk.0.attn_v.weight"));
}

TEST(MakeModel, ForwardIsFiniteAndGreedyGenerationDeterministic) {
    for (const char* arch : {"llama", "qwen2"}) {
        auto model = Model::open(made(small_spec(GgmlType::Q8_0, arch), std::string("gen_") + arch + ".gguf"));
        ASSERT_TRUE(model.ok()) << model.error().message;
        std::vector<TokenId> prompt = model.value()->tokenizer()->encode("Once upon a time there was", true, false);
        std::vector<int32_t> a = greedy(*model.value(), prompt, 12);
        std::vector<int32_t> b = greedy(*model.value(), prompt, 12);
        EXPECT_FALSE(a.empty());  // generation stops early at </s>
        EXPECT_EQ(a, b) << arch;
    }
}

TEST(MakeModel, DemoModelRunsFast) {
    MakeModelSpec s = demo_model_spec();
    EXPECT_EQ(validate_make_model_spec(s).ok(), true);
    MakeModelInfo info;
    std::string path = made(s, "demo.gguf", &info);
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model.value()->config().n_vocab, s.vocab);
    EXPECT_TRUE(info.fallbacks.empty());
    std::vector<TokenId> prompt = model.value()->tokenizer()->encode("The capital of France is", true, false);
    double ms = 0;
    std::vector<int32_t> out = greedy(*model.value(), prompt, 16, &ms);
    EXPECT_FALSE(out.empty());
    std::printf("demo model: %llu bytes, %lld parameters, %.3f ms/token (1 thread)\n",
                static_cast<unsigned long long>(info.file_bytes), static_cast<long long>(info.n_params), ms);
    EXPECT_LT(ms, 100.0);
}

// The metadata of a spec as a GGUF reads it back: header only, no weights made.
std::unique_ptr<GgufFile> metadata_of(const MakeModelSpec& spec) {
    auto kv = make_model_metadata(spec);
    EXPECT_TRUE(kv.ok()) << kv.error().message;
    if (!kv.ok()) return nullptr;
    auto bytes = gguf_to_bytes(kv.value(), {});
    EXPECT_TRUE(bytes.ok());
    auto file = GgufFile::parse(std::move(bytes.value()));
    EXPECT_TRUE(file.ok()) << file.error().message;
    return file.ok() ? std::move(file.value()) : nullptr;
}

MakeModelSpec preset(const char* name) {
    auto p = make_model_preset(name);
    EXPECT_TRUE(p.ok()) << name;
    return p.ok() ? p.value() : MakeModelSpec{};
}

// --type mxfp4 is llama-quantize's MXFP4_MOE: the experts MXFP4, every other matrix Q8_0, the
// router F32, file type 38; such a model opens, runs and has no error lints.
TEST(MakeModel, Mxfp4IsLlamaQuantizesMoeRecipe) {
    MakeModelSpec s = preset("qwen3moe-tiny");
    s.type = GgmlType::MXFP4;
    MakeModelInfo info;
    const std::string path = made(s, "qwen3moe_mxfp4.gguf", &info);
    EXPECT_TRUE(info.fallbacks.empty());
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const Model& m = *model.value();
    for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight"})
        EXPECT_EQ(m.find(name)->type, GgmlType::MXFP4) << name;
    for (const char* name : {"blk.0.attn_q.weight", "blk.1.attn_output.weight", "token_embd.weight"})
        EXPECT_EQ(m.find(name)->type, GgmlType::Q8_0) << name;
    if (const GgufTensorInfo* out = m.find("output.weight")) {
        EXPECT_EQ(out->type, GgmlType::Q8_0);
    }
    EXPECT_EQ(m.find("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
    EXPECT_EQ(m.file().get_int("general.file_type", -1), 38);
    EXPECT_EQ(count_lints(lint_model(m.file()), LintSeverity::kError), 0);
    EXPECT_FALSE(greedy(m, {1, 300, 301}, 2).empty());
    // A 32-block type has no smaller block to fall back to: rows that do not fit are F16.
    EXPECT_EQ(make_model_tensor_type(GgmlType::MXFP4, 16), GgmlType::F16);
}

// --type nvfp4 is a ModelOpt conversion's layout: every matrix NVFP4 but token_embd (F16) and the
// router (F32), file type 39; with weight_scales each projection has its .scale and .input_scale,
// the experts one per expert, the (untied, NVFP4) LM head its own. Such a model opens, runs and has
// no error lints.
TEST(MakeModel, Nvfp4IsAModelOptConversionsLayout) {
    MakeModelSpec s = preset("qwen3moe-tiny");
    s.type = GgmlType::NVFP4;
    s.weight_scales = true;
    MakeModelInfo info;
    const std::string path = made(s, "qwen3moe_nvfp4.gguf", &info);
    EXPECT_TRUE(info.fallbacks.empty());
    auto model = Model::open(path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    const Model& m = *model.value();
    for (const char* name : {"blk.0.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight", "blk.0.attn_q.weight",
                             "blk.1.attn_output.weight", "output.weight"})
        EXPECT_EQ(m.find(name)->type, GgmlType::NVFP4) << name;
    EXPECT_EQ(m.find("token_embd.weight")->type, GgmlType::F16);
    EXPECT_EQ(m.find("blk.0.ffn_gate_inp.weight")->type, GgmlType::F32);
    for (const char* name : {"blk.0.attn_q.scale", "blk.1.attn_output.input_scale", "output.scale", "output.input_scale"}) {
        ASSERT_NE(m.find(name), nullptr) << name;
        EXPECT_EQ(m.find(name)->n_elements(), 1) << name;
    }
    for (const char* name : {"blk.0.ffn_up_exps.scale", "blk.1.ffn_down_exps.input_scale"}) {
        ASSERT_NE(m.find(name), nullptr) << name;
        EXPECT_EQ(m.find(name)->n_elements(), s.n_expert) << name;
    }
    EXPECT_EQ(m.file().get_int("general.file_type", -1), 39);
    EXPECT_EQ(count_lints(lint_model(m.file()), LintSeverity::kError), 0);
    EXPECT_FALSE(greedy(m, {1, 300, 301}, 2).empty());
    EXPECT_EQ(make_model_tensor_type(GgmlType::NVFP4, 32), GgmlType::F16);
}

TEST(MakeModel, Deepseek2FilesHaveEveryTensorOfTheLayoutAndNoErrorLints) {
    struct Variant { const char* label; MakeModelSpec spec; };
    std::vector<Variant> variants;
    variants.push_back({"tiny", preset("deepseek2-tiny")});
    variants.push_back({"legacy_kvb", preset("deepseek2-tiny")});
    variants.back().spec.legacy_kv_b = true;
    variants.push_back({"q_lora", preset("deepseek2-tiny")});
    variants.back().spec.q_lora_rank = 16, variants.back().spec.n_layer = 3, variants.back().spec.type = GgmlType::Q8_0;
    variants.push_back({"q4_K_sigmoid", preset("deepseek2-tiny")});
    variants.back().spec.type = GgmlType::Q4_K, variants.back().spec.expert_gating_func = 2;
    for (const Variant& v : variants) {
        std::string path = made(v.spec, std::string("ds2_") + v.label + ".gguf");
        auto file = GgufFile::open(path);
        ASSERT_TRUE(file.ok()) << v.label << ": " << file.error().message;
        auto config = model_config_from_gguf(*file.value());
        ASSERT_TRUE(config.ok()) << v.label << ": " << config.error().message;
        const ModelConfig& c = config.value();
        const bool legacy = v.spec.legacy_kv_b;
        EXPECT_EQ(c.arch, Arch::kDeepseek2);
        EXPECT_EQ(c.n_embd, 64);
        EXPECT_EQ(c.n_layer, v.spec.n_layer);
        EXPECT_EQ(c.n_head, 4);
        EXPECT_EQ(c.n_head_kv, legacy ? 4 : 1) << v.label;
        EXPECT_EQ(c.head_dim_k, legacy ? 24 : 40) << v.label;  // MLA: kv_lora_rank 32 + rope 8
        EXPECT_EQ(c.head_dim_v, legacy ? 16 : 32) << v.label;
        EXPECT_EQ(c.n_rot, 8);
        EXPECT_EQ(c.n_ff, 128);
        EXPECT_EQ(c.n_ctx_train, 163840);
        EXPECT_EQ(c.n_vocab, 400);
        EXPECT_FLOAT_EQ(static_cast<float>(c.rms_eps), 1e-6f);
        EXPECT_EQ(c.rope_type, RopeType::kNorm);
        EXPECT_EQ(c.rope_scaling, RopeScaling::kYarn);
        EXPECT_DOUBLE_EQ(c.rope_scaling_factor, 40.0);
        EXPECT_EQ(c.rope_orig_ctx, 4096);
        EXPECT_FLOAT_EQ(static_cast<float>(c.rope_yarn_log_multiplier), 0.0707f);
        EXPECT_EQ(c.q_lora_rank, v.spec.q_lora_rank);
        EXPECT_EQ(c.kv_lora_rank, 32);
        EXPECT_EQ(c.mla_split, !legacy);
        EXPECT_EQ(c.head_dim_k_mla, 24);
        EXPECT_EQ(c.head_dim_v_mla, 16);
        EXPECT_EQ(c.n_expert, 4);
        EXPECT_EQ(c.n_expert_used, 2);
        EXPECT_EQ(c.n_expert_shared, 1);
        EXPECT_EQ(c.n_ff_expert, 32);
        EXPECT_EQ(c.n_layer_dense_lead, 1);
        EXPECT_EQ(c.expert_gating_func, v.spec.expert_gating_func);
        EXPECT_DOUBLE_EQ(c.expert_weights_scale, 1.0);
        EXPECT_FALSE(c.expert_weights_norm);
        EXPECT_EQ(file.value()->get_int("deepseek2.expert_group_count", -1), 1);
        EXPECT_EQ(file.value()->get_int("deepseek2.expert_group_used_count", -1), 1);

        // Every tensor the layout names is there with its shape, and nothing else is.
        std::vector<TensorSpec> layout = tensor_layout(c, c.n_vocab);
        for (const TensorSpec& t : layout) {
            const GgufTensorInfo* info = file.value()->find_tensor(t.name);
            if (!t.required && !info) continue;
            ASSERT_NE(info, nullptr) << v.label << ": " << t.name;
            EXPECT_EQ(std::vector<int64_t>(info->ne, info->ne + info->n_dims), t.ne)
                << v.label << ": " << t.name;
        }
        for (const GgufTensorInfo& t : file.value()->tensors())
            EXPECT_NE(find_tensor_spec(layout, t.name), nullptr) << v.label << ": " << t.name;
        // The shapes llama.cpp creates (src/models/deepseek2.cpp), written out.
        auto ne = [&](const char* name) {
            const GgufTensorInfo* t = file.value()->find_tensor(name);
            return t ? std::vector<int64_t>(t->ne, t->ne + t->n_dims) : std::vector<int64_t>{};
        };
        if (v.spec.q_lora_rank > 0) {
            EXPECT_EQ(ne("blk.0.attn_q_a.weight"), (std::vector<int64_t>{64, 16}));
            EXPECT_EQ(ne("blk.0.attn_q_b.weight"), (std::vector<int64_t>{16, 96}));
            EXPECT_EQ(ne("blk.0.attn_q_a_norm.weight"), (std::vector<int64_t>{16}));
        } else {
            EXPECT_EQ(ne("blk.0.attn_q.weight"), (std::vector<int64_t>{64, 96}));
        }
        EXPECT_EQ(ne("blk.0.attn_kv_a_mqa.weight"), (std::vector<int64_t>{64, 40}));
        if (legacy) {
            EXPECT_EQ(ne("blk.0.attn_kv_b.weight"), (std::vector<int64_t>{32, 128}));
            EXPECT_TRUE(ne("blk.0.attn_k_b.weight").empty());
        } else {
            EXPECT_EQ(ne("blk.0.attn_k_b.weight"), (std::vector<int64_t>{16, 32, 4}));
            EXPECT_EQ(ne("blk.0.attn_v_b.weight"), (std::vector<int64_t>{32, 16, 4}));
            EXPECT_TRUE(ne("blk.0.attn_kv_b.weight").empty());
        }
        EXPECT_EQ(ne("blk.0.attn_output.weight"), (std::vector<int64_t>{64, 64}));
        EXPECT_EQ(ne("blk.0.ffn_gate.weight"), (std::vector<int64_t>{64, 128}));
        EXPECT_TRUE(ne("blk.0.ffn_gate_inp.weight").empty());  // the leading dense block
        EXPECT_EQ(ne("blk.1.ffn_gate_inp.weight"), (std::vector<int64_t>{64, 4}));
        EXPECT_EQ(file.value()->find_tensor("blk.1.ffn_gate_inp.weight")->type, GgmlType::F32);
        EXPECT_EQ(ne("blk.1.ffn_gate_exps.weight"), (std::vector<int64_t>{64, 32, 4}));
        EXPECT_EQ(ne("blk.1.ffn_down_exps.weight"), (std::vector<int64_t>{32, 64, 4}));
        EXPECT_EQ(ne("blk.1.ffn_up_shexp.weight"), (std::vector<int64_t>{64, 32}));
        EXPECT_EQ(ne("output.weight"), (std::vector<int64_t>{64, 400}));

        EXPECT_EQ(count_lints(lint_model(*file.value()), LintSeverity::kError), 0) << v.label;
        auto r = test::run_layerscope("inspect --json '" + path + "'");
        ASSERT_EQ(r.exit_code, 0) << v.label << r.out;
        auto j = nlohmann::json::parse(r.out);
        for (const auto& l : j.at("lints")) EXPECT_NE(l.at("severity"), "error") << v.label << ": " << l.dump();
    }
}

TEST(MakeModel, PresetsHaveTheRealModelsShapes) {
    // DeepSeek-V2-Lite's config.json.
    auto ds = metadata_of(preset("deepseek-v2-lite"));
    ASSERT_NE(ds, nullptr);
    EXPECT_EQ(ds->get_string("general.architecture"), "deepseek2");
    const std::pair<const char*, int64_t> ds_ints[] = {
        {"embedding_length", 2048}, {"block_count", 27}, {"attention.head_count", 16},
        {"attention.head_count_kv", 1}, {"feed_forward_length", 10944}, {"context_length", 163840},
        {"attention.q_lora_rank", 0}, {"attention.kv_lora_rank", 512}, {"attention.key_length", 576},
        {"attention.value_length", 512}, {"attention.key_length_mla", 192}, {"attention.value_length_mla", 128},
        {"rope.dimension_count", 64}, {"expert_count", 64}, {"expert_used_count", 6}, {"expert_shared_count", 2},
        {"expert_feed_forward_length", 1408}, {"leading_dense_block_count", 1}, {"expert_gating_func", 1},
        {"expert_group_count", 1}, {"expert_group_used_count", 1}, {"rope.scaling.original_context_length", 4096},
        {"vocab_size", 102400},
    };
    for (auto [key, want] : ds_ints) EXPECT_EQ(ds->get_int(std::string("deepseek2.") + key, -1), want) << key;
    EXPECT_EQ(ds->get_string("deepseek2.rope.scaling.type"), "yarn");
    EXPECT_FLOAT_EQ(static_cast<float>(ds->get_float("deepseek2.rope.scaling.factor", 0)), 40.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(ds->get_float("deepseek2.rope.scaling.yarn_log_multiplier", 0)), 0.0707f);
    EXPECT_FLOAT_EQ(static_cast<float>(ds->get_float("deepseek2.rope.freq_base", 0)), 10000.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(ds->get_float("deepseek2.attention.layer_norm_rms_epsilon", 0)), 1e-6f);
    EXPECT_FLOAT_EQ(static_cast<float>(ds->get_float("deepseek2.expert_weights_scale", 0)), 1.0f);
    EXPECT_FALSE(ds->get_bool("deepseek2.expert_weights_norm", true));
    EXPECT_EQ(ds->find("tokenizer.ggml.tokens")->array_size(), 102400u);

    auto tl = metadata_of(preset("tinyllama-1.1b"));
    ASSERT_NE(tl, nullptr);
    EXPECT_EQ(tl->get_string("general.architecture"), "llama");
    const std::pair<const char*, int64_t> tl_ints[] = {
        {"embedding_length", 2048}, {"block_count", 22}, {"attention.head_count", 32}, {"attention.head_count_kv", 4},
        {"feed_forward_length", 5632}, {"context_length", 2048}, {"rope.dimension_count", 64}, {"vocab_size", 32000},
    };
    for (auto [key, want] : tl_ints) EXPECT_EQ(tl->get_int(std::string("llama.") + key, -1), want) << key;
    EXPECT_FLOAT_EQ(static_cast<float>(tl->get_float("llama.rope.freq_base", 0)), 10000.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(tl->get_float("llama.attention.layer_norm_rms_epsilon", 0)), 1e-5f);

    auto qw = metadata_of(preset("qwen2.5-0.5b"));
    ASSERT_NE(qw, nullptr);
    EXPECT_EQ(qw->get_string("general.architecture"), "qwen2");
    const std::pair<const char*, int64_t> qw_ints[] = {
        {"embedding_length", 896}, {"block_count", 24}, {"attention.head_count", 14}, {"attention.head_count_kv", 2},
        {"feed_forward_length", 4864}, {"context_length", 32768}, {"vocab_size", 151936},
    };
    for (auto [key, want] : qw_ints) EXPECT_EQ(qw->get_int(std::string("qwen2.") + key, -1), want) << key;
    EXPECT_FLOAT_EQ(static_cast<float>(qw->get_float("qwen2.rope.freq_base", 0)), 1000000.0f);
    EXPECT_FLOAT_EQ(static_cast<float>(qw->get_float("qwen2.attention.layer_norm_rms_epsilon", 0)), 1e-6f);
    EXPECT_EQ(qw->find("tokenizer.ggml.tokens")->array_size(), 151936u);

    // The parameter counts the models publish (Hugging Face's safetensors totals): every shape,
    // the tied LM head and the q/k/v biases included.
    const std::pair<const char*, int64_t> counts[] = {
        {"deepseek-v2-lite", 15706484224}, {"tinyllama-1.1b", 1100048384}, {"qwen2.5-0.5b", 494032768}};
    for (auto [name, want] : counts) {
        auto n = make_model_param_count(preset(name));
        ASSERT_TRUE(n.ok()) << name;
        EXPECT_EQ(n.value(), want) << name;
    }
    EXPECT_EQ(make_model_param_count(preset("deepseek2-tiny")).value(), 140928);
}

TEST(MakeModel, FlagsBesideAPresetOverrideIt) {
    std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("make-model '" + dir + "/ds.gguf' --preset deepseek2-tiny --layers 3 --experts 6 "
                                  "--experts-used 3 --q-lora-rank 16 --legacy-kvb --type q8_0");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto ds = GgufFile::open(dir + "/ds.gguf");
    ASSERT_TRUE(ds.ok()) << ds.error().message;
    EXPECT_EQ(ds.value()->get_int("deepseek2.block_count", -1), 3);
    EXPECT_EQ(ds.value()->get_int("deepseek2.expert_count", -1), 6);
    EXPECT_EQ(ds.value()->get_int("deepseek2.expert_used_count", -1), 3);
    EXPECT_EQ(ds.value()->get_int("deepseek2.attention.q_lora_rank", -1), 16);
    EXPECT_EQ(ds.value()->find("deepseek2.attention.key_length_mla"), nullptr);
    EXPECT_NE(ds.value()->find_tensor("blk.2.attn_kv_b.weight"), nullptr);
    EXPECT_EQ(ds.value()->get_int("deepseek2.embedding_length", -1), 64);  // the preset's
    EXPECT_EQ(ds.value()->get_int("deepseek2.attention.kv_lora_rank", -1), 32);
    EXPECT_EQ(ds.value()->get_int("deepseek2.leading_dense_block_count", -1), 1);

    r = test::run_layerscope("make-model '" + dir + "/tl.gguf' --preset tinyllama-1.1b --embd 64 --heads 4 "
                             "--kv-heads 2 --layers 1 --ff 128 --vocab 400");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto tl = GgufFile::open(dir + "/tl.gguf");
    ASSERT_TRUE(tl.ok()) << tl.error().message;
    EXPECT_EQ(tl.value()->get_string("general.architecture"), "llama");
    EXPECT_EQ(tl.value()->get_int("llama.embedding_length", -1), 64);
    EXPECT_EQ(tl.value()->get_int("llama.attention.head_count_kv", -1), 2);
    EXPECT_EQ(tl.value()->get_int("llama.vocab_size", -1), 400);
    EXPECT_FLOAT_EQ(static_cast<float>(tl.value()->get_float("llama.attention.layer_norm_rms_epsilon", 0)), 1e-5f);

    r = test::run_layerscope("make-model '" + dir + "/qw.gguf' --preset qwen2.5-0.5b --embd 64 --heads 2 --kv-heads 1 "
                             "--layers 1 --ff 128 --vocab 400");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto qw = GgufFile::open(dir + "/qw.gguf");
    ASSERT_TRUE(qw.ok()) << qw.error().message;
    EXPECT_EQ(qw.value()->get_int("qwen2.vocab_size", -1), 512);  // --vocab drops the preset's 151936 rows
    EXPECT_FLOAT_EQ(static_cast<float>(qw.value()->get_float("qwen2.rope.freq_base", 0)), 1000000.0f);
    EXPECT_NE(qw.value()->find_tensor("blk.0.attn_q.bias"), nullptr);
    EXPECT_EQ(qw.value()->find_tensor("output.weight"), nullptr);
}

TEST(MakeModel, UnknownPresetExitsTwoNamingThePresets) {
    std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("make-model '" + dir + "/x.gguf' --preset deepseek-v9", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    for (const std::string& name : make_model_preset_names()) EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("unknown preset 'deepseek-v9'"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
    r = test::run_layerscope("make-model '" + dir + "/x.gguf' --preset deepseek2-tiny --demo", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
}

TEST(MakeModel, BadSpecsAreRefusedWithAClearMessage) {
    auto refused = [](MakeModelSpec s, const char* needle) {
        Status st = validate_make_model_spec(s);
        ASSERT_FALSE(st.ok()) << needle;
        EXPECT_EQ(st.error().code, ErrorCode::kUsage);
        EXPECT_NE(st.error().message.find(needle), std::string::npos) << st.error().message;
    };
    MakeModelSpec s;
    s.n_embd = 100, s.n_head = 3;
    refused(s, "n_embd 100 is not divisible by n_head 3");
    s = {}, s.n_head_kv = 3;
    refused(s, "n_head_kv 3 does not divide n_head 4");
    s = {}, s.arch = "gpt9";
    refused(s, "arch 'gpt9' is not supported");
    s = {}, s.vocab = 100;
    refused(s, "vocab 100 is out of range");
    s = {}, s.type = GgmlType::IQ2_XXS;
    refused(s, "cannot be generated");
    s = {}, s.n_layer = 0;
    refused(s, "n_layer is 0");
    s = {}, s.n_embd = 6, s.n_head = 2;
    refused(s, "is odd");
    s = preset("deepseek2-tiny"), s.n_layer = 27, s.q_lora_rank = 16;
    refused(s, "llama.cpp reads deepseek2 models of this depth as Lite models");
    s = preset("deepseek2-tiny"), s.n_expert_used = 5;
    refused(s, "n_expert_used is 5; it must be in 1..4");
    s = preset("deepseek2-tiny"), s.qk_rope_dim = 7;
    refused(s, "qk_rope_dim 7 is odd");
    s = preset("deepseek2-tiny"), s.n_expert_groups = 4;
    refused(s, "n_expert_groups 4 must be in 1..3");
    s = preset("deepseek2-tiny"), s.n_dense_lead = 3;
    refused(s, "n_dense_lead is 3; it must be in 0..2");
    s = preset("deepseek2-tiny"), s.n_embd = 60, s.n_head = 7;  // head widths are their own keys
    EXPECT_TRUE(validate_make_model_spec(s).ok());

    std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("make-model '" + dir + "/x.gguf' --embd 100 --heads 3", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("not divisible"), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
    r = test::run_layerscope("make-model '" + dir + "/x.gguf' --type q9_9", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    r = test::run_layerscope("make-model '" + dir + "/no/such/dir/x.gguf'", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;  // an output that cannot be written: usage, as DESIGN.md section 7 fixes
    EXPECT_NE(r.out.find("no/such/dir does not exist"), std::string::npos) << r.out;
}

TEST(MakeModel, CliWritesTheSameFileAsTheLibrary) {
    std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("make-model '" + dir + "/demo.gguf' --demo");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("q8_0"), std::string::npos) << r.out;
    ASSERT_TRUE(make_model(demo_model_spec(), dir + "/lib.gguf").ok());
    EXPECT_TRUE(read_all(dir + "/demo.gguf") == read_all(dir + "/lib.gguf"));

    r = test::run_layerscope("make-model '" + dir + "/q.gguf' --arch qwen2 --type q6_K --embd 128 --heads 2 "
                             "--kv-heads 1 --ff 256 --layers 1 --vocab 600 --seed 7");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("fallback"), std::string::npos) << r.out;  // 128-wide rows cannot be q6_K
    auto model = Model::open(dir + "/q.gguf");
    ASSERT_TRUE(model.ok()) << model.error().message;
    EXPECT_EQ(model.value()->config().arch, Arch::kQwen2);
    EXPECT_EQ(model.value()->config().rope_type, RopeType::kNeox);
    EXPECT_EQ(model.value()->find("output.weight"), nullptr);
    EXPECT_EQ(model.value()->find("blk.0.attn_q.weight")->type, GgmlType::Q8_0);
    EXPECT_EQ(model.value()->find("blk.0.ffn_down.weight")->type, GgmlType::Q6_K);
    EXPECT_EQ(model.value()->config().n_vocab, 768);
}

}  // namespace
}  // namespace ls
