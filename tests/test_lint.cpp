// Model config and lint tests on small synthetic GGUFs (written with ls::gguf_write) whose
// tensors disagree with their metadata: each lint must say exactly what was expected and found.
#include <gtest/gtest.h>

// GCC 12 at -O3 reports std::string operator+ as overlapping memcpy (GCC bug 105329, a false positive).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <algorithm>
#include <filesystem>
#include <functional>

#include "engine/gguf/gguf.h"
#include "engine/model/lint.h"
#include "engine/model/model_config.h"
#include "tests/test_support.h"

namespace {

using namespace ls;

// A tiny model description: metadata plus tensor shapes (all F32 zeros).
struct SyntheticModel {
    std::vector<GgufKV> metadata;
    std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;

    void set(const std::string& key, GgufValue v) {
        for (GgufKV& kv : metadata)
            if (kv.key == key) { kv.value = std::move(v); return; }
        metadata.push_back({key, std::move(v)});
    }
    void erase_key(const std::string& key) {
        metadata.erase(std::remove_if(metadata.begin(), metadata.end(), [&](const GgufKV& kv) { return kv.key == key; }),
                       metadata.end());
    }
    void reshape(const std::string& name, std::vector<int64_t> ne) {
        for (auto& t : tensors)
            if (t.first == name) t.second = std::move(ne);
    }
    void drop(const std::string& name) {
        tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.first == name; }),
                      tensors.end());
    }
    void add(const std::string& name, std::vector<int64_t> ne) { tensors.push_back({name, std::move(ne)}); }
};

// llama: n_embd 16, 1 layer, 2 heads of 8, 1 KV head, n_ff 32, 8 tokens.
SyntheticModel make_llama(const std::string& arch = "llama", int64_t n_vocab = 8) {
    SyntheticModel m;
    m.set("general.architecture", GgufValue::make_string(arch));
    m.set(arch + ".context_length", GgufValue::make_u32(128));
    m.set(arch + ".embedding_length", GgufValue::make_u32(16));
    m.set(arch + ".block_count", GgufValue::make_u32(1));
    m.set(arch + ".feed_forward_length", GgufValue::make_u32(32));
    m.set(arch + ".attention.head_count", GgufValue::make_u32(2));
    m.set(arch + ".attention.head_count_kv", GgufValue::make_u32(1));
    m.set(arch + ".attention.layer_norm_rms_epsilon", GgufValue::make_f32(1e-5f));
    if (arch == "llama") m.set(arch + ".rope.dimension_count", GgufValue::make_u32(8));
    std::vector<std::string> tokens;
    for (int64_t i = 0; i < n_vocab; ++i) tokens.push_back("t" + std::to_string(i));
    m.set("tokenizer.ggml.model", GgufValue::make_string("llama"));
    m.set("tokenizer.ggml.tokens", GgufValue::make_string_array(tokens));
    m.add("token_embd.weight", {16, n_vocab});
    m.add("output_norm.weight", {16});
    m.add("output.weight", {16, n_vocab});
    m.add("blk.0.attn_norm.weight", {16});
    m.add("blk.0.attn_q.weight", {16, 16});
    m.add("blk.0.attn_k.weight", {16, 8});
    m.add("blk.0.attn_v.weight", {16, 8});
    m.add("blk.0.attn_output.weight", {16, 16});
    m.add("blk.0.ffn_norm.weight", {16});
    m.add("blk.0.ffn_gate.weight", {16, 32});
    m.add("blk.0.ffn_down.weight", {32, 16});
    m.add("blk.0.ffn_up.weight", {16, 32});
    return m;
}

class LintTest : public ::testing::Test {
protected:
    void SetUp() override { dir_ = ls::test::make_temp_dir(); }
    void TearDown() override { std::filesystem::remove_all(dir_); }

    std::unique_ptr<GgufFile> write(const SyntheticModel& m) {
        std::vector<std::vector<float>> storage;
        std::vector<GgufWriteTensor> tensors;
        storage.reserve(m.tensors.size());
        for (const auto& [name, ne] : m.tensors) {
            int64_t n = 1;
            for (int64_t d : ne) n *= d;
            storage.emplace_back(static_cast<size_t>(n), 0.0f);
            tensors.push_back({name, GgmlType::F32, ne, storage.back().data(), static_cast<uint64_t>(n) * 4});
        }
        std::string path = dir_ + "/model.gguf";
        Status s = gguf_write(path, m.metadata, tensors);
        EXPECT_TRUE(s.ok()) << s.error().message;
        auto file = GgufFile::open(path);
        EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
        return std::move(file.value());
    }

    std::vector<Lint> lint(const SyntheticModel& m) { return lint_model(*write(m)); }

    std::string dir_;
};

std::string describe(const std::vector<Lint>& lints) {
    std::string out;
    for (const Lint& l : lints) out += std::string(lint_severity_name(l.severity)) + " " + l.subject + ": " + l.message + "\n";
    return out;
}

// The lint about `subject`, or nullptr.
const Lint* find(const std::vector<Lint>& lints, const std::string& subject) {
    for (const Lint& l : lints)
        if (l.subject == subject) return &l;
    return nullptr;
}

TEST_F(LintTest, GoodModelHasNoLints) {
    auto lints = lint(make_llama());
    EXPECT_TRUE(lints.empty()) << describe(lints);
}

TEST_F(LintTest, WrongShapeSaysExpectedAndGot) {
    SyntheticModel m = make_llama();
    m.reshape("blk.0.attn_q.weight", {16, 8});
    auto lints = lint(m);
    const Lint* l = find(lints, "blk.0.attn_q.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
    EXPECT_EQ(l->message, "expected ne [16, 16] got [16, 8]");
    EXPECT_EQ(count_lints(lints, LintSeverity::kError), 1) << describe(lints);
}

TEST_F(LintTest, MissingTensorIsNamedWithItsShape) {
    SyntheticModel m = make_llama();
    m.drop("blk.0.ffn_up.weight");
    auto lints = lint(m);
    const Lint* l = find(lints, "blk.0.ffn_up.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
    EXPECT_EQ(l->message, "missing; llama models need it (expected ne [16, 32])");
}

TEST_F(LintTest, OutputRowsDisagreeWithVocab) {
    SyntheticModel m = make_llama();
    m.reshape("output.weight", {16, 10});
    auto lints = lint(m);
    const Lint* l = find(lints, "output.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
    EXPECT_EQ(l->message,
              "expected ne [16, 8] got [16, 10]: 10 rows but the vocabulary (tokenizer.ggml.tokens) has 8 tokens");
}

TEST_F(LintTest, TokenEmbeddingRowsDisagreeWithTokenList) {
    SyntheticModel m = make_llama();
    m.reshape("token_embd.weight", {16, 12});
    auto lints = lint(m);
    const Lint* l = find(lints, "token_embd.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->message,
              "expected ne [16, 8] got [16, 12]: 12 rows but the vocabulary (tokenizer.ggml.tokens) has 8 tokens");
}

TEST_F(LintTest, VocabSizeKeyDisagreesWithTokenList) {
    SyntheticModel m = make_llama();
    m.set("llama.vocab_size", GgufValue::make_u32(32));
    auto lints = lint(m);
    const Lint* l = find(lints, "llama.vocab_size");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kWarning);
    EXPECT_EQ(l->message, "is 32 but tokenizer.ggml.tokens has 8 entries; llama.cpp uses the token list");
}

TEST_F(LintTest, LlamaRopeDimsMustEqualHeadDim) {
    SyntheticModel m = make_llama();
    m.set("llama.rope.dimension_count", GgufValue::make_u32(4));
    auto file = write(m);
    auto lints = lint_model(*file);
    const Lint* l = find(lints, "llama.rope.dimension_count");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
    EXPECT_NE(l->message.find("is 4 but the head dimension is 8"), std::string::npos) << l->message;
    // The strict config refuses it like llama.cpp does.
    auto config = model_config_from_gguf(*file);
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.error().message.find("invalid n_rot"), std::string::npos);
}

TEST_F(LintTest, UnknownArchitecture) {
    SyntheticModel m = make_llama();
    m.set("general.architecture", GgufValue::make_string("mamba"));
    auto lints = lint(m);
    ASSERT_EQ(lints.size(), 1u) << describe(lints);
    EXPECT_EQ(lints[0].subject, "general.architecture");
    EXPECT_NE(lints[0].message.find("architecture \"mamba\" is not supported"), std::string::npos);
}

TEST_F(LintTest, MissingRequiredKey) {
    SyntheticModel m = make_llama();
    m.erase_key("llama.block_count");
    auto file = write(m);
    auto config = model_config_from_gguf(*file);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().code, ErrorCode::kBadInput);
    EXPECT_EQ(config.error().message, "llama.block_count is missing; llama models need it");
    auto lints = lint_model(*file);
    const Lint* l = find(lints, "llama.block_count");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
}

// llama.cpp refuses a file with a tensor its loader does not create (wrong number of tensors),
// and so do we: what it would compute is undefined.
TEST_F(LintTest, UnexpectedTensorIsAnError) {
    SyntheticModel m = make_llama();
    m.add("blk.0.mystery.weight", {4});
    auto lints = lint(m);
    const Lint* l = find(lints, "blk.0.mystery.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
    EXPECT_NE(l->message.find("llama.cpp's llama loader has no tensor of that name"), std::string::npos) << l->message;
    EXPECT_EQ(count_lints(lints, LintSeverity::kError), 1) << describe(lints);
}

// A tensor llama.cpp's graph would use and we do not run is an error naming it, never skipped; one
// it loads and never reads is accepted with an info saying so.
TEST_F(LintTest, TensorsLlamaCppLoadsAndNeverReadsAreInfos) {
    SyntheticModel m = make_llama("qwen2", 8);
    m.add("blk.0.ffn_up.scale", {1});
    m.add("blk.0.attn_q.input_scale", {1});
    auto lints = lint(m);
    for (const char* name : {"blk.0.ffn_up.scale", "blk.0.attn_q.input_scale"}) {
        const Lint* l = find(lints, name);
        ASSERT_NE(l, nullptr) << name << "\n" << describe(lints);
        EXPECT_EQ(l->severity, LintSeverity::kInfo);
        EXPECT_NE(l->message.find("unused"), std::string::npos) << l->message;
    }
}

// A tensor llama.cpp's graph would use and we do not run is an error naming it, never skipped.
TEST_F(LintTest, TensorsLlamaCppUsesAndWeDoNotAreErrors) {
    SyntheticModel m = make_llama();
    m.add("blk.0.attn_qkv.scale", {1});
    m.add("blk.0.attn_qkv.weight", {16, 32});
    auto lints = lint(m);
    for (const char* name : {"blk.0.attn_qkv.scale", "blk.0.attn_qkv.weight"}) {
        const Lint* l = find(lints, name);
        ASSERT_NE(l, nullptr) << name << "\n" << describe(lints);
        EXPECT_EQ(l->severity, LintSeverity::kError);
        EXPECT_NE(l->message.find("llama.cpp's llama graph uses it"), std::string::npos) << l->message;
        EXPECT_NE(l->message.find("not supported yet"), std::string::npos) << l->message;
    }
}

TEST_F(LintTest, Qwen2PaddedVocabAndTiedOutputAreInfosOnly) {
    SyntheticModel m = make_llama("qwen2", 8);
    m.drop("output.weight");
    m.add("blk.0.attn_q.bias", {16});
    m.add("blk.0.attn_k.bias", {8});
    m.add("blk.0.attn_v.bias", {8});
    std::vector<GgufValue> types(8, GgufValue::make_i32(1));
    types[6] = types[7] = GgufValue::make_i32(5);  // UNUSED padding rows
    m.set("tokenizer.ggml.token_type", GgufValue::make_array(GgufValueType::INT32, types));
    m.set("tokenizer.ggml.model", GgufValue::make_string("gpt2"));
    m.set("tokenizer.ggml.merges", GgufValue::make_string_array({"t 0"}));
    auto file = write(m);
    auto lints = lint_model(*file);
    EXPECT_EQ(count_lints(lints, LintSeverity::kError), 0) << describe(lints);
    EXPECT_EQ(count_lints(lints, LintSeverity::kWarning), 0) << describe(lints);
    ASSERT_NE(find(lints, "output.weight"), nullptr);
    const Lint* pad = find(lints, "tokenizer.ggml.token_type");
    ASSERT_NE(pad, nullptr) << describe(lints);
    EXPECT_NE(pad->message.find("the last 2 of 8 tokens are UNUSED padding"), std::string::npos) << pad->message;

    auto config = model_config_from_gguf(*file);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->rope_type, RopeType::kNeox);
    EXPECT_EQ(config->n_rot, 8);  // no rope.dimension_count: the head dim
    EXPECT_EQ(config->rope_freq_base, 10000.0);
}

TEST_F(LintTest, BpeWithoutMergesIsAnError) {
    SyntheticModel m = make_llama();
    m.set("tokenizer.ggml.model", GgufValue::make_string("gpt2"));
    auto lints = lint(m);
    const Lint* l = find(lints, "tokenizer.ggml.merges");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->severity, LintSeverity::kError);
}

TEST_F(LintTest, HeadCountKvDefaultsToHeadCount) {
    SyntheticModel m = make_llama();
    m.erase_key("llama.attention.head_count_kv");
    auto lints = lint(m);
    // With 2 KV heads, attn_k/attn_v must be 16 wide.
    const Lint* l = find(lints, "blk.0.attn_k.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->message, "expected ne [16, 16] got [16, 8]");
}

// deepseek2: 2 layers, MLA split, 1 dense + 1 MoE layer.
SyntheticModel make_deepseek2() {
    SyntheticModel m;
    const std::string a = "deepseek2";
    m.set("general.architecture", GgufValue::make_string(a));
    for (auto [k, v] : std::initializer_list<std::pair<const char*, uint32_t>>{
             {"context_length", 128}, {"embedding_length", 16}, {"block_count", 2}, {"feed_forward_length", 32},
             {"attention.head_count", 2}, {"attention.head_count_kv", 1}, {"attention.q_lora_rank", 0},
             {"attention.kv_lora_rank", 8}, {"attention.key_length", 12}, {"attention.value_length", 8},
             {"attention.key_length_mla", 12}, {"attention.value_length_mla", 6}, {"rope.dimension_count", 4},
             {"expert_count", 4}, {"expert_used_count", 2}, {"expert_shared_count", 1},
             {"expert_feed_forward_length", 8}, {"leading_dense_block_count", 1}})
        m.set(a + "." + k, GgufValue::make_u32(v));
    m.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::make_f32(1e-6f));
    m.set("tokenizer.ggml.model", GgufValue::make_string("llama"));
    m.set("tokenizer.ggml.tokens", GgufValue::make_string_array({"a", "b", "c", "d"}));
    m.add("token_embd.weight", {16, 4});
    m.add("output_norm.weight", {16});
    m.add("output.weight", {16, 4});
    for (int il = 0; il < 2; ++il) {
        std::string p = "blk." + std::to_string(il) + ".";
        m.add(p + "attn_norm.weight", {16});
        m.add(p + "attn_q.weight", {16, 2 * 12});
        m.add(p + "attn_kv_a_mqa.weight", {16, 8 + 4});
        m.add(p + "attn_kv_a_norm.weight", {8});
        m.add(p + "attn_k_b.weight", {8, 8, 2});  // {nope 8, kv_lora 8, n_head}
        m.add(p + "attn_v_b.weight", {8, 6, 2});  // {kv_lora, v 6, n_head}
        m.add(p + "attn_output.weight", {2 * 6, 16});
        m.add(p + "ffn_norm.weight", {16});
    }
    m.add("blk.0.ffn_gate.weight", {16, 32});
    m.add("blk.0.ffn_down.weight", {32, 16});
    m.add("blk.0.ffn_up.weight", {16, 32});
    m.add("blk.1.ffn_gate_inp.weight", {16, 4});
    m.add("blk.1.ffn_gate_exps.weight", {16, 8, 4});
    m.add("blk.1.ffn_down_exps.weight", {8, 16, 4});
    m.add("blk.1.ffn_up_exps.weight", {16, 8, 4});
    m.add("blk.1.ffn_gate_shexp.weight", {16, 8});
    m.add("blk.1.ffn_down_shexp.weight", {8, 16});
    m.add("blk.1.ffn_up_shexp.weight", {16, 8});
    return m;
}

TEST_F(LintTest, Deepseek2GoodModelAndConfig) {
    auto file = write(make_deepseek2());
    auto lints = lint_model(*file);
    EXPECT_TRUE(lints.empty()) << describe(lints);
    auto config = model_config_from_gguf(*file);
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_TRUE(config->mla_split);
    EXPECT_EQ(config->qk_nope_dim(), 8);
    EXPECT_EQ(config->rope_type, RopeType::kNorm);
    EXPECT_FALSE(config->layer_is_moe(0));
    EXPECT_TRUE(config->layer_is_moe(1));
}

TEST_F(LintTest, Deepseek2MissingQLoraRank) {
    SyntheticModel m = make_deepseek2();
    m.erase_key("deepseek2.attention.q_lora_rank");
    auto file = write(m);
    auto config = model_config_from_gguf(*file);
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().message, "deepseek2.attention.q_lora_rank is missing; deepseek2 models need it");
}

TEST_F(LintTest, Deepseek2LegacyNeedsKvB) {
    SyntheticModel m = make_deepseek2();
    m.erase_key("deepseek2.attention.key_length_mla");
    m.erase_key("deepseek2.attention.value_length_mla");
    m.set("deepseek2.attention.value_length", GgufValue::make_u32(6));
    auto lints = lint(m);
    const Lint* l = find(lints, "blk.0.attn_kv_b.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->message, "missing; deepseek2 models need it (expected ne [8, 28])");  // 2 * (8 + 6)
    ASSERT_NE(find(lints, "blk.0.attn_k_b.weight"), nullptr);  // now unexpected
}

TEST_F(LintTest, Deepseek2ExpertShapes) {
    SyntheticModel m = make_deepseek2();
    m.reshape("blk.1.ffn_down_exps.weight", {8, 16, 3});
    auto lints = lint(m);
    const Lint* l = find(lints, "blk.1.ffn_down_exps.weight");
    ASSERT_NE(l, nullptr) << describe(lints);
    EXPECT_EQ(l->message, "expected ne [8, 16, 4] got [8, 16, 3]");
}

}  // namespace
