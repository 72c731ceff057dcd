// End-to-end tests of `layerscope inspect`: runs the real binary on every fixture model and checks
// its JSON against the facts in ../shared/fixtures/README.md (not against our own earlier output).
#include <gtest/gtest.h>

// GCC 12 at -O3 reports std::string operator+ as overlapping memcpy (GCC bug 105329, a false positive).
#pragma GCC diagnostic ignored "-Wrestrict"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/model_summary.h"
#include "tests/parity_support.h"
#include "tests/test_support.h"

namespace {

using nlohmann::json;

using RunResult = ls::test::CommandResult;

RunResult run(const std::string& args) { return ls::test::run_layerscope(args); }

json inspect_json(const std::string& model, const std::string& extra = "") {
    RunResult r = run("inspect --json '" + ls::test::fixture_path("models/" + model) + "' " + extra);
    EXPECT_EQ(r.exit_code, 0) << model;
    return json::parse(r.out);
}

struct ModelFacts {
    const char* file;
    const char* arch;
    uint64_t bytes;
    int64_t params;
    std::map<std::string, int> type_counts;  // ggml type names
    int64_t n_embd, n_layer, n_head, n_head_kv, n_vocab;
};

// README section 3: the table of models and the per-model key tables.
const std::vector<ModelFacts> kModels = {
    {"stories260K.gguf", "llama", 1185376, 292800, {{"f32", 48}}, 64, 5, 8, 4, 512},
    {"llama-2-tiny-random.gguf", "llama", 1750560, 513048, {{"f16", 9}, {"f32", 3}}, 8, 1, 2, 2, 32000},
    {"llama-gqa-mini-F16.gguf", "llama", 25198176, 12587520, {{"f16", 30}, {"f32", 9}}, 512, 4, 8, 2, 512},
    {"llama-gqa-mini-Q4_K_M.gguf", "llama", 7617152, 12587520, {{"q4_K", 25}, {"f32", 9}, {"q6_K", 5}}, 512, 4, 8, 2, 512},
    {"qwen2-mini-F16.gguf", "qwen2", 7093248, 3476736, {{"f16", 22}, {"f32", 16}}, 256, 3, 4, 2, 4352},
    {"qwen2-mini-Q8_0.gguf", "qwen2", 3836960, 3476736, {{"q8_0", 22}, {"f32", 16}}, 256, 3, 4, 2, 4352},
    {"deepseek2-mini-F16.gguf", "deepseek2", 13192160, 6522816, {{"f16", 32}, {"f32", 12}}, 256, 3, 4, 1, 4352},
    {"deepseek2-mini-Q4_K_M.gguf", "deepseek2", 4288288, 6522816,
     {{"q4_K", 20}, {"f32", 12}, {"q5_0", 6}, {"q6_K", 3}, {"q5_1", 3}}, 256, 3, 4, 1, 4352},
    {"deepseek2-mini-legacy-kvb-Q4_K_M.gguf", "deepseek2", 4306464, 6522816,
     {{"q4_K", 20}, {"f32", 12}, {"q6_K", 3}, {"q8_0", 3}, {"q5_1", 3}}, 256, 3, 4, 4, 4352},
};

TEST(Inspect, EveryFixtureModelMatchesTheReadme) {
    LS_REQUIRE_FIXTURES();
    for (const ModelFacts& m : kModels) {
        SCOPED_TRACE(m.file);
        json j = inspect_json(m.file);
        EXPECT_EQ(j["file_size"].get<uint64_t>(), m.bytes);
        EXPECT_EQ(std::filesystem::file_size(ls::test::fixture_path(std::string("models/") + m.file)), m.bytes);
        EXPECT_EQ(j["version"].get<int>(), 3);
        EXPECT_EQ(j["alignment"].get<int>(), 32);
        EXPECT_EQ(j["metadata"]["general.architecture"]["value"].get<std::string>(), m.arch);
        EXPECT_EQ(j["metadata"]["general.architecture"]["type"].get<std::string>(), "str");

        std::map<std::string, int> counts;
        int64_t params = 0;
        for (const json& t : j["tensors"]) {
            counts[t["type"].get<std::string>()] += 1;
            int64_t n = 1;
            for (const json& d : t["ne"]) n *= d.get<int64_t>();
            params += n;
        }
        EXPECT_EQ(counts, m.type_counts);
        EXPECT_EQ(params, m.params);
        int n_types = 0;
        for (const json& total : j["tensor_types"]) n_types += total["count"].get<int>();
        EXPECT_EQ(n_types, static_cast<int>(j["tensors"].size()));

        const json& c = j["config"];
        ASSERT_FALSE(c.contains("error")) << c.dump();
        EXPECT_EQ(c["arch"].get<std::string>(), m.arch);
        EXPECT_EQ(c["n_embd"].get<int64_t>(), m.n_embd);
        EXPECT_EQ(c["n_layer"].get<int64_t>(), m.n_layer);
        EXPECT_EQ(c["n_head"].get<int64_t>(), m.n_head);
        EXPECT_EQ(c["n_head_kv"].get<int64_t>(), m.n_head_kv);
        EXPECT_EQ(c["n_vocab"].get<int64_t>(), m.n_vocab);
        EXPECT_EQ(j["tokenizer"]["n_tokens"].get<int64_t>(), m.n_vocab);
        EXPECT_EQ(j["metadata"]["tokenizer.ggml.tokens"]["count"].get<int64_t>(), m.n_vocab);

        for (const json& lint : j["lints"]) EXPECT_NE(lint["severity"].get<std::string>(), "error") << lint.dump();
    }
}

TEST(Inspect, ArchitectureDetailsFromTheReadme) {
    LS_REQUIRE_FIXTURES();
    json q = inspect_json("qwen2-mini-Q8_0.gguf");
    EXPECT_EQ(q["config"]["rope_type"], "neox");
    EXPECT_EQ(q["config"]["rope_freq_base"].get<double>(), 1000000.0);
    EXPECT_EQ(q["config"]["n_ff"].get<int64_t>(), 768);
    EXPECT_EQ(q["config"]["n_rot"].get<int64_t>(), 64);  // no rope.dimension_count key: head_dim
    EXPECT_EQ(q["config"]["n_ctx_train"].get<int64_t>(), 32768);
    EXPECT_EQ(q["tokenizer"]["model"], "gpt2");
    EXPECT_EQ(q["tokenizer"]["pre"], "qwen2");
    EXPECT_EQ(q["tokenizer"]["bos_token_id"].get<int64_t>(), 4096);
    EXPECT_EQ(q["tokenizer"]["eos_token_id"].get<int64_t>(), 4098);
    EXPECT_EQ(q["tokenizer"]["n_merges"].get<int64_t>(), 3840);
    EXPECT_TRUE(q["tokenizer"]["chat_template"].get<bool>());

    json g = inspect_json("llama-gqa-mini-Q4_K_M.gguf");
    EXPECT_EQ(g["config"]["rope_type"], "norm");
    EXPECT_EQ(g["config"]["n_rot"].get<int64_t>(), 64);
    EXPECT_EQ(g["config"]["n_ff"].get<int64_t>(), 1536);
    EXPECT_FLOAT_EQ(g["config"]["rms_eps"].get<float>(), 1e-5f);
    EXPECT_FALSE(g["tokenizer"]["chat_template"].get<bool>());
    EXPECT_EQ(g["tokenizer"]["add_bos"], true);

    json d = inspect_json("deepseek2-mini-Q4_K_M.gguf");
    EXPECT_EQ(d["config"]["q_lora_rank"].get<int64_t>(), 0);
    EXPECT_EQ(d["config"]["kv_lora_rank"].get<int64_t>(), 64);
    EXPECT_EQ(d["config"]["n_rot"].get<int64_t>(), 16);
    EXPECT_EQ(d["config"]["head_dim_k_mla"].get<int64_t>(), 48);
    EXPECT_EQ(d["config"]["head_dim_v_mla"].get<int64_t>(), 32);
    EXPECT_EQ(d["config"]["n_expert"].get<int64_t>(), 8);
    EXPECT_EQ(d["config"]["n_expert_used"].get<int64_t>(), 2);
    EXPECT_EQ(d["config"]["n_layer_dense_lead"].get<int64_t>(), 1);
    EXPECT_EQ(d["config"]["rope_scaling"], "yarn");
    EXPECT_TRUE(d["config"]["mla_split"].get<bool>());
    json legacy = inspect_json("deepseek2-mini-legacy-kvb-Q4_K_M.gguf");
    EXPECT_FALSE(legacy["config"]["mla_split"].get<bool>());

    json s = inspect_json("stories260K.gguf");
    EXPECT_EQ(s["config"]["n_ff"].get<int64_t>(), 172);
    EXPECT_EQ(s["config"]["n_ctx_train"].get<int64_t>(), 2048);
}

// Reads `count` little-endian floats of tensor `name` straight from the file.
std::vector<float> raw_f32(const std::string& model, const json& j, const std::string& name, size_t count) {
    uint64_t offset = 0;
    for (const json& t : j["tensors"])
        if (t["name"] == name) offset = t["offset"].get<uint64_t>();
    std::ifstream in(ls::test::fixture_path("models/" + model), std::ios::binary);
    in.seekg(static_cast<std::streamoff>(j["data_offset"].get<uint64_t>() + offset));
    std::vector<float> out(count);
    in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count * sizeof(float)));
    return out;
}

TEST(Inspect, F32TensorValuesAreTheFileFloats) {
    LS_REQUIRE_FIXTURES();
    for (auto [model, name, n] : {std::tuple{"stories260K.gguf", "output_norm.weight", 64},
                                  std::tuple{"llama-gqa-mini-Q4_K_M.gguf", "blk.1.ffn_norm.weight", 100}}) {
        SCOPED_TRACE(name);
        json j = inspect_json(model, std::string("--tensor ") + name + " --values " + std::to_string(n));
        const json& t = j["tensor"];
        ASSERT_EQ(t["values"].size(), static_cast<size_t>(n));
        std::vector<float> raw = raw_f32(model, j, name, static_cast<size_t>(n));
        for (int i = 0; i < n; ++i) EXPECT_EQ(t["values"][i].get<float>(), raw[static_cast<size_t>(i)]) << i;
        EXPECT_EQ(t["stats"]["nan"].get<int64_t>(), 0);
        // Norm weights were drawn as clip(1 + 0.1 N(0,1), 0.5, 1.5) in the synthetic models.
        if (std::string(model) != "stories260K.gguf") {
            EXPECT_GE(t["stats"]["min"].get<double>(), 0.5);
            EXPECT_LE(t["stats"]["max"].get<double>(), 1.5);
        }
    }
}

TEST(Inspect, QwenBiasOutliersFromTheReadme) {
    LS_REQUIRE_FIXTURES();
    json j = inspect_json("qwen2-mini-Q8_0.gguf", "--tensor blk.0.attn_q.bias --values 256");
    const json& v = j["tensor"]["values"];
    ASSERT_EQ(v.size(), 256u);
    EXPECT_NEAR(v[22].get<double>(), -3.81, 0.006);
    EXPECT_NEAR(v[44].get<double>(), -7.14, 0.006);
    EXPECT_NEAR(v[240].get<double>(), 5.10, 0.006);
    EXPECT_NEAR(j["tensor"]["stats"]["max"].get<double>(), 6.50, 0.006);
    EXPECT_NEAR(j["tensor"]["stats"]["min"].get<double>(), -7.14, 0.006);
}

TEST(Inspect, QuantizedTensorStatsMatchTheGeneratorStd) {
    LS_REQUIRE_FIXTURES();
    // attn_q was drawn with std 0.06 (README 3.2); Q4_K keeps the rms within a few percent.
    json j = inspect_json("llama-gqa-mini-Q4_K_M.gguf", "--tensor blk.0.attn_q.weight --values 4");
    EXPECT_EQ(j["tensor"]["stats"]["n"].get<int64_t>(), 512 * 512);
    EXPECT_NEAR(j["tensor"]["stats"]["rms"].get<double>(), 0.06, 0.003);
    EXPECT_NEAR(j["tensor"]["stats"]["mean"].get<double>(), 0.0, 0.001);
}

TEST(Inspect, TextOutputHasTheSections) {
    LS_REQUIRE_FIXTURES();
    RunResult r = run("inspect --tensors '" + ls::test::fixture_path("models/deepseek2-mini-Q4_K_M.gguf") + "'");
    ASSERT_EQ(r.exit_code, 0);
    for (const char* s : {"GGUF v3, alignment 32", "deepseek2.attention.kv_lora_rank", "[4352 x str]",
                          "tokenizer:", "chat template: yes", "blk.0.attn_k_b.weight", "[32, 64, 4]",
                          "bits/weight", "lints: 0 errors"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s;
}

// README section 5 item 10 (checked there against llama.cpp's kq_soft_max): deepseek2-mini's
// YaRN (factor 40, n_ctx_orig 4096, 16 rope dims) gives correction dims [2, 6], the rope op gets
// attn_factor 1/(1 + 0.1 ln 40) = 0.730520, mscale = 1 + 0.1*0.707*ln 40 = 1.260804 and the kq
// scale mscale^2/sqrt(48) = 0.229443. Section 3 and items 11-13: MLA widths and the MoE setup.
TEST(Inspect, Deepseek2DerivedNumbersFromTheReadme) {
    LS_REQUIRE_FIXTURES();
    const std::string model = ls::test::fixture_path("models/deepseek2-mini-F16.gguf");
    RunResult r = run("inspect '" + model + "'");
    ASSERT_EQ(r.exit_code, 0);
    for (const char* s : {"kq scale 0.229443", "mscale 1.260804", "corr dims [2, 6]", "attn_factor 0.730520",
                          "freq_scale 0.025", "absorbed q/k 80", "unabsorbed q/k 48", "v 32;",
                          "top 2 of 8 experts + 1 shared, softmax gating, weights norm no, scale 1;",
                          "1 leading dense layer, 2 MoE layers", "llama.cpp runs the absorbed form"})
        EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;

    json d = inspect_json("deepseek2-mini-F16.gguf")["derived"];
    EXPECT_NEAR(d["kq_scale"].get<double>(), 0.229443, 5e-7);
    EXPECT_NEAR(d["mscale"].get<double>(), 1.260804, 5e-7);
    EXPECT_NEAR(d["rope_attn_factor"].get<double>(), 0.730520, 5e-7);
    EXPECT_NEAR(d["freq_scale"].get<double>(), 0.025, 1e-9);
    EXPECT_NEAR(d["ggml_yarn_factor"].get<double>(), 1.368888, 5e-7);  // 1 + 0.1 ln 40
    EXPECT_NEAR(d["rope_magnitude"].get<double>(), 1.0, 1e-6);         // the two cancel
    EXPECT_EQ(d["yarn_corr_dims"], json::array({2, 6}));
    EXPECT_EQ(d["yarn_n_ctx_orig"].get<int64_t>(), 4096);
    EXPECT_EQ(d["kq_head_dim"].get<int64_t>(), 48);
    EXPECT_EQ(d["mla"]["head_k"].get<int64_t>(), 48);
    EXPECT_EQ(d["mla"]["head_v"].get<int64_t>(), 32);
    EXPECT_EQ(d["mla"]["head_k_absorbed"].get<int64_t>(), 80);  // K 80 wide, V 64 wide (item 11)
    EXPECT_EQ(d["mla"]["head_v_absorbed"].get<int64_t>(), 64);
    EXPECT_EQ(d["mla"]["cache_values_absorbed"].get<int64_t>(), 80);
    EXPECT_EQ(d["mla"]["cache_values_unabsorbed"].get<int64_t>(), 4 * (48 + 32));
    EXPECT_EQ(d["mla"]["llama_form"], "absorbed");
    EXPECT_EQ(d["moe"]["n_expert"].get<int64_t>(), 8);
    EXPECT_EQ(d["moe"]["n_expert_used"].get<int64_t>(), 2);
    EXPECT_EQ(d["moe"]["n_expert_shared"].get<int64_t>(), 1);
    EXPECT_EQ(d["moe"]["n_layer_dense_lead"].get<int64_t>(), 1);
    EXPECT_EQ(d["moe"]["gating"], "softmax");
    EXPECT_FALSE(d["moe"]["weights_norm"].get<bool>());
    EXPECT_EQ(d["moe"]["weights_scale"].get<double>(), 1.0);

    // The legacy kv_b file runs unabsorbed in llama.cpp (item 12), with the same YaRN numbers.
    json legacy = inspect_json("deepseek2-mini-legacy-kvb-Q4_K_M.gguf")["derived"];
    EXPECT_EQ(legacy["mla"]["llama_form"], "unabsorbed");
    EXPECT_NEAR(legacy["kq_scale"].get<double>(), 0.229443, 5e-7);
}

TEST(Inspect, NoYarnLinesWithoutYarn) {
    LS_REQUIRE_FIXTURES();
    RunResult r = run("inspect '" + ls::test::fixture_path("models/stories260K.gguf") + "'");
    ASSERT_EQ(r.exit_code, 0);
    EXPECT_NE(r.out.find("kq scale 0.353553 = 1/sqrt(8)"), std::string::npos) << r.out;  // 64 wide, 8 heads
    for (const char* s : {"yarn", "corr dims", "attn_factor", "mscale", "mla", "moe"})
        EXPECT_EQ(r.out.find(s), std::string::npos) << s;
    json d = inspect_json("stories260K.gguf")["derived"];
    EXPECT_FALSE(d.contains("yarn_corr_dims"));
    EXPECT_FALSE(d.contains("mla"));
    EXPECT_EQ(d["rope_attn_factor"].get<double>(), 1.0);
    EXPECT_EQ(d["freq_scale"].get<double>(), 1.0);
}

// A deepseek2 file with YaRN and no yarn_log_multiplier: llama.cpp's context gives the rope op
// get_mscale(40, 1) / (1 + 0.1 ln 40) = 1, so deepseek2's attn_factor_org and mscale are
// 1 + 0.1 ln 40 = 1.368888 and kq = 1.368888^2/sqrt(48) = 0.270468 (not 1/sqrt(48) = 0.144338).
TEST(Inspect, Deepseek2YarnWithoutLogMultiplierKeepsTheYarnFactor) {
    ls::ModelConfig c;
    c.arch = ls::Arch::kDeepseek2;
    c.n_head = 4;
    c.n_rot = 16;
    c.head_dim_k = c.head_dim_k_mla = 48;
    c.rope_scaling = ls::RopeScaling::kYarn;
    c.rope_scaling_factor = 40;
    c.rope_yarn_log_multiplier = 0;
    EXPECT_NEAR(ls::attention_kq_scale(c), 0.270468, 5e-7);
    const ls::DerivedParams d = ls::derive_params(c);
    EXPECT_NEAR(d.rope_attn_factor, 1.0, 1e-6);
    EXPECT_NEAR(d.mscale, 1.368888, 5e-7);
    EXPECT_NEAR(d.rope_magnitude, 1.368888, 5e-7);
    // No n_ctx_orig: ggml_rope_yarn_corr_dims takes log(0), and its upper end is -inf (a float there
    // and here; it was converted to int, which is undefined).
    EXPECT_EQ(d.corr_dims[0], 0.0f);
    EXPECT_TRUE(std::isinf(d.corr_dims[1]) && d.corr_dims[1] < 0) << d.corr_dims[1];
}

TEST(Inspect, ExitCodes) {
    LS_REQUIRE_FIXTURES();
    std::string good = "'" + ls::test::fixture_path("models/stories260K.gguf") + "'";
    EXPECT_EQ(run("inspect --no-such-flag " + good).exit_code, 2);
    EXPECT_EQ(run("inspect").exit_code, 2);
    EXPECT_EQ(run("no-such-command").exit_code, 2);
    EXPECT_EQ(run("inspect " + good + " --values -3 --tensor output_norm.weight").exit_code, 2);
    EXPECT_EQ(run("inspect " + good + " --tensor no.such.tensor").exit_code, 2);
    EXPECT_EQ(run("--help").exit_code, 0);

    std::string dir = ls::test::make_temp_dir();
    std::string truncated = dir + "/truncated.gguf", garbage = dir + "/garbage.gguf";
    {
        std::ifstream in(ls::test::fixture_path("models/stories260K.gguf"), std::ios::binary);
        std::vector<char> head(5000);
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        std::ofstream(truncated, std::ios::binary).write(head.data(), static_cast<std::streamsize>(head.size()));
        std::string junk(4096, '\0');
        for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 2654435761u) >> 13);
        std::ofstream(garbage, std::ios::binary) << junk;
    }
    EXPECT_EQ(run("inspect '" + truncated + "'").exit_code, 3);
    EXPECT_EQ(run("inspect --json '" + truncated + "'").exit_code, 3);
    EXPECT_EQ(run("inspect '" + garbage + "'").exit_code, 3);
    EXPECT_EQ(run("inspect '" + dir + "/missing.gguf'").exit_code, 3);
    std::filesystem::remove_all(dir);
}

// The quant block inspector: an MXFP4 expert block's exponent, codes, levels and values as the
// file's bytes say (decoded here from the raw bytes at the offset printed: E8M0 2^(e - 128) times
// the doubled E2M1 level), a Q4_K block's codes from its nibbles and its values those the tensor
// dequantizes to; what has no block is refused with the reason.
TEST(Inspect, QuantBlockAsStored) {
    std::string dir = ls::test::make_temp_dir();
    const std::string mx = dir + "/gpt-oss-mxfp4.gguf", q4k = dir + "/q4k.gguf";
    ASSERT_EQ(run("make-model '" + mx + "' --preset gpt-oss-tiny --type mxfp4").exit_code, 0);
    ASSERT_EQ(run("make-model '" + q4k + "' --type q4_K --embd 256 --layers 1 --ff 512 --vocab 400").exit_code, 0);
    auto read_bytes = [](const std::string& path, uint64_t offset, size_t n) {
        std::ifstream in(path, std::ios::binary);
        in.seekg(static_cast<std::streamoff>(offset));
        std::vector<uint8_t> b(n);
        in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
        return b;
    };
    {
        RunResult r = run("inspect --json '" + mx + "' --tensor blk.1.ffn_down_exps.weight --values 0 --block 37");
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const json b = json::parse(r.out)["tensor"]["block"];
        ASSERT_EQ(b["index"], 37);
        ASSERT_EQ(b["bytes"], 17);
        ASSERT_EQ(b["elements"].size(), 32u);
        const std::vector<uint8_t> raw = read_bytes(mx, b["file_offset"].get<uint64_t>(), 17);
        const int doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        EXPECT_NE(b["fields"]["e"].get<std::string>().find(std::to_string(raw[0]) + " (E8M0)"), std::string::npos) << b["fields"];
        for (int j = 0; j < 32; ++j) {
            const json& e = b["elements"][j];
            const int code = j < 16 ? raw[1 + j] & 0xF : raw[1 + j - 16] >> 4;
            EXPECT_EQ(e["index"], 37 * 32 + j);
            EXPECT_EQ(e["code"], code) << j;
            EXPECT_EQ(e["level"], doubled[code]) << j;
            EXPECT_EQ(e["value"].get<float>(), std::ldexp(static_cast<float>(doubled[code]), raw[0] - 128)) << j;
        }
    }
    {
        RunResult r = run("inspect --json '" + q4k + "' --tensor blk.0.ffn_up.weight --values 1000000 --block 5");
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const json t = json::parse(r.out)["tensor"];
        const json b = t["block"];
        ASSERT_EQ(b["elements"].size(), 256u);
        const std::vector<uint8_t> raw = read_bytes(q4k, b["file_offset"].get<uint64_t>(), 144);
        for (int j = 0; j < 256; ++j) {  // qs follow d, dmin and 12 bytes of scales
            const int g = j / 32, byte = raw[16 + 32 * (g / 2) + j % 32];
            const json& e = b["elements"][j];
            EXPECT_EQ(e["code"], g % 2 ? byte >> 4 : byte & 0xF) << j;
            EXPECT_EQ(e["group"], g) << j;
            EXPECT_EQ(e["value"].get<float>(), t["values"][5 * 256 + j].get<float>()) << j;
        }
        EXPECT_NE(b["fields"]["scales"].get<std::string>().find("one per 32 elements"), std::string::npos);
        RunResult text = run("inspect '" + q4k + "' --tensor blk.0.ffn_up.weight --values 0 --block 5");
        EXPECT_NE(text.out.find("block 5 of 512 (q4_K, 256 elements from element 1280"), std::string::npos) << text.out;
    }
    {
        // NVFP4: four UE4M3 scale bytes, then sub-block s's codes in bytes 8s..8s+7 (low nibbles
        // its elements 0-7, high nibbles 8-15); values as the tensor dequantizes them.
        const std::string nv = dir + "/nvfp4.gguf";
        ASSERT_EQ(run("make-model '" + nv + "' --preset qwen3moe-tiny --type nvfp4").exit_code, 0);
        RunResult r = run("inspect --json '" + nv + "' --tensor blk.0.ffn_up_exps.weight --values 1000 --block 3");
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const json t = json::parse(r.out)["tensor"];
        const json b = t["block"];
        ASSERT_EQ(b["bytes"], 36);
        ASSERT_EQ(b["elements"].size(), 64u);
        const std::vector<uint8_t> raw = read_bytes(nv, b["file_offset"].get<uint64_t>(), 36);
        for (int j = 0; j < 64; ++j) {
            const int s = j / 16, k = j % 16, byte = raw[4 + 8 * s + k % 8];
            const json& e = b["elements"][j];
            EXPECT_EQ(e["code"], k < 8 ? byte & 0xF : byte >> 4) << j;
            EXPECT_EQ(e["group"], s) << j;
            EXPECT_EQ(e["value"].get<float>(), t["values"][3 * 64 + j].get<float>()) << j;
        }
        const std::string d = b["fields"]["d"].get<std::string>();
        for (int s = 0; s < 4; ++s) EXPECT_NE(d.find(fmt::format("(0x{:02x})", raw[s])), std::string::npos) << d;
    }
    auto run_err = [](const std::string& args) { return ls::test::run_layerscope(args, true); };
    RunResult r = run_err("inspect '" + mx + "' --block 1");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("--block needs --tensor"), std::string::npos) << r.out;
    r = run_err("inspect '" + mx + "' --tensor blk.0.ffn_up_exps.weight --block 4096");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("has 2048 blocks of 32 elements; block 4096 is outside them"), std::string::npos) << r.out;
    r = run_err("inspect '" + mx + "' --tensor blk.0.attn_sinks.weight --block 0");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("is f32, which has no blocks"), std::string::npos) << r.out;
    std::filesystem::remove_all(dir);
}

using ls::test::rewrite_gguf;

TEST(Inspect, LintErrorsExitOneWarningsAlone0) {
    std::string dir = ls::test::make_temp_dir();
    const std::string model = dir + "/model.gguf";
    ASSERT_EQ(run("make-model '" + model + "' --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 64 --vocab 400")
                  .exit_code, 0);
    EXPECT_EQ(run("inspect '" + model + "'").exit_code, 0);

    // A zero dimension: the model cannot run, its lints say so, the check fails.
    const std::string zero = rewrite_gguf(model, dir + "/zero.gguf", [](auto& kv, auto&) {
        for (ls::GgufKV& x : kv)
            if (x.key == "llama.embedding_length") x.value = ls::GgufValue::make_u32(0);
    });
    RunResult text = ls::test::run_layerscope("inspect '" + zero + "'", true);
    EXPECT_EQ(text.exit_code, 1) << text.out;
    EXPECT_NE(text.out.find("lints: 1 errors"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("1 lint error (llama.embedding_length: llama.embedding_length is 0"), std::string::npos)
        << text.out;
    RunResult js = run("inspect --json '" + zero + "'");
    EXPECT_EQ(js.exit_code, 1);
    EXPECT_EQ(json::parse(js.out)["lints"][0]["severity"], "error");

    // A warning alone (a vocab_size key that disagrees with the token list) passes.
    const std::string warned = rewrite_gguf(model, dir + "/warned.gguf", [&](auto& kv, auto&) {
        for (ls::GgufKV& x : kv)
            if (x.key == "llama.vocab_size") x.value = ls::GgufValue::make_u32(401);
    });
    RunResult w = run("inspect '" + warned + "'");
    EXPECT_EQ(w.exit_code, 0) << w.out;
    EXPECT_NE(w.out.find("lints: 0 errors, 1 warnings"), std::string::npos) << w.out;

    // A tensor no llama model has is an error: llama.cpp refuses the file, and so does run.
    std::vector<float> extra(4, 0.0f);
    const std::string extra_tensor = rewrite_gguf(model, dir + "/extra.gguf", [&](auto&, auto& tensors) {
        tensors.push_back({"extra.weight", ls::GgmlType::F32, {4}, extra.data(), 16});
    });
    RunResult e = run("inspect '" + extra_tensor + "'");
    EXPECT_EQ(e.exit_code, 1) << e.out;
    EXPECT_NE(e.out.find("extra.weight: llama.cpp's llama loader has no tensor of that name"), std::string::npos) << e.out;
    RunResult r = ls::test::run_layerscope("run -m '" + extra_tensor + "' -p hi -n 1", true);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("tensor extra.weight: llama.cpp's llama loader has no tensor of that name"), std::string::npos)
        << r.out;
    std::filesystem::remove_all(dir);
}

}  // namespace
