// Two files of one model: `compare -m A --against-model B` runs the same tokens through both files
// and compares every event, B's run the reference; the same file twice is clean, a coarser format
// differs more than a finer one from the same F16 source, and files that are not one model in two
// formats are refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <map>
#include <string>

#include "tests/test_json.h"
#include "tests/test_support.h"

namespace {

using ls::test::run_layerscope;
using ls::test::run_layerscope_json;

std::string q(const std::string& path) { return "'" + path + "'"; }

// make-model files of one spec and seed: the same master weights in each format.
const std::string& model_dir() {
    static const std::string dir = [] {
        const std::string d = ls::test::make_temp_dir();
        for (const char* type : {"f16", "q8_0", "q4_K"}) {
            auto r = run_layerscope(std::string("make-model ") + q(d + "/" + type + ".gguf") +
                                        " --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7 --type " + type,
                                    true);
            EXPECT_EQ(r.exit_code, 0) << r.out;
        }
        // Every matrix Q8_0 but one, damaged to Q2_K.
        auto damaged = run_layerscope("make-model " + q(d + "/damaged.gguf") +
                                          " --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7 --type q8_0 "
                                          "--tensor-type blk.1.ffn_down.weight=q2_K",
                                      true);
        EXPECT_EQ(damaged.exit_code, 0) << damaged.out;
        auto r = run_layerscope("make-model " + q(d + "/three_layers.gguf") +
                                    " --embd 256 --layers 3 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7 --type f16",
                                true);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        r = run_layerscope("make-model " + q(d + "/qwen3.gguf") +
                               " --arch qwen3 --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7 --type f16",
                           true);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        return d;
    }();
    return dir;
}

std::string file(const char* name) { return q(model_dir() + "/" + name + ".gguf"); }

const char* kTokens = " --tokens 1,20,33,41,52,7 -n 2";

// The NMSE of the last layer's output of the prompt call.
double last_layer_nmse(const nlohmann::json& j) {
    for (const auto& e : j["events"])
        if (e["name"] == "l_out-1" && e.contains("nmse")) return e["nmse"].get<double>();
    ADD_FAILURE() << "no l_out-1 compared";
    return -1;
}

TEST(ModelPair, TheSameFileTwiceIsClean) {
    for (const char* mode : {"exact", "llama"}) {
        const nlohmann::json j = run_layerscope_json("compare -m " + file("q4_K") + " --against-model " + file("q4_K") + kTokens +
                                                  " --backend cpu --mode " + mode,
                                              0);
        EXPECT_GT(j["summary"]["compared"].get<int>(), 60) << mode;
        EXPECT_EQ(j["summary"]["diverged"], 0) << mode;
        EXPECT_EQ(j["summary"]["warn"], 0) << mode;
        EXPECT_TRUE(j["first_divergence"].is_null()) << mode;
    }
}

TEST(ModelPair, ACoarserFormatDiffersMoreFromTheSameSource) {
    const nlohmann::json q8 = run_layerscope_json("compare -m " + file("q8_0") + " --against-model " + file("f16") + kTokens + " --backend cpu", 1);
    const nlohmann::json q4 = run_layerscope_json("compare -m " + file("q4_K") + " --against-model " + file("f16") + kTokens + " --backend cpu", 1);
    EXPECT_EQ(q8["reference"], "the run of " + model_dir() + "/f16.gguf");
    // Every event pairs: the two runs are one graph.
    EXPECT_EQ(q8["pairing"]["paired"], q8["pairing"]["ours"]);
    EXPECT_EQ(q4["summary"]["compared"], q8["summary"]["compared"]);
    const double e8 = last_layer_nmse(q8), e4 = last_layer_nmse(q4);
    EXPECT_GT(e8, 0.0);
    EXPECT_LT(e8, e4) << "Q8_0 against F16 should differ less than Q4_K against F16";
    // The first event that differs: the embeddings, whose table is quantized too.
    EXPECT_EQ(q8["events"][0]["name"], "embd");
    EXPECT_EQ(q8["events"][0]["status"], "warn") << q8["events"][0];
    auto text = run_layerscope("compare -m " + file("q4_K") + " --against-model " + file("f16") + kTokens + " --backend cpu");
    EXPECT_EQ(text.exit_code, 1) << text.out;
    EXPECT_NE(text.out.find("against:   " + model_dir() + "/f16.gguf (its run is the reference"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("tensors: f16"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("tensors: q4_K"), std::string::npos) << text.out;
}

// The weights ranked by what their format adds on the reference's own inputs: the one damaged
// tensor first, and Q8_0's local error below Q4_K's for every weight.
TEST(ModelPair, AttributionNamesTheDamagedTensor) {
    const nlohmann::json j = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens + " --backend cpu", 1);
    ASSERT_FALSE(j["attribution"].empty()) << j;
    EXPECT_EQ(j["attribution"][0]["tensor"], "blk.1.ffn_down.weight") << j["attribution"];
    EXPECT_EQ(j["attribution"][0]["event"].get<std::string>().rfind("ffn_out-1", 0), 0u) << j["attribution"][0];
    for (size_t i = 1; i < j["attribution"].size(); ++i)
        EXPECT_GE(j["attribution"][i - 1]["local_nmse"].get<double>(), j["attribution"][i]["local_nmse"].get<double>());

    const nlohmann::json q8 = run_layerscope_json("compare -m " + file("q8_0") + " --against-model " + file("f16") + kTokens + " --backend cpu", 1);
    const nlohmann::json q4 = run_layerscope_json("compare -m " + file("q4_K") + " --against-model " + file("f16") + kTokens + " --backend cpu", 1);
    std::map<std::string, double> q4_local;
    for (const auto& a : q4["attribution"]) q4_local[a["tensor"].get<std::string>()] = a["local_nmse"].get<double>();
    int both = 0;
    for (const auto& a : q8["attribution"]) {
        const std::string t = a["tensor"].get<std::string>();
        if (!q4_local.count(t)) continue;
        ++both;
        EXPECT_LT(a["local_nmse"].get<double>(), q4_local[t]) << t;
    }
    // Every product of both layers (q, k, v, output, gate, up, down), the LM head and the embeddings.
    EXPECT_EQ(both, 2 * 7 + 2) << q8["attribution"] << q4["attribution"];

    auto text = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens + " --backend cpu");
    EXPECT_NE(text.out.find("attribution: what each weight's format adds"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("  blk.1.ffn_down.weight"), std::string::npos) << text.out;
}

TEST(ModelPair, MakeModelTensorTypesAreChecked) {
    const std::string d = ls::test::make_temp_dir();
    const std::string base = "make-model " + q(d + "/x.gguf") + " --embd 256 --layers 2 --heads 4 --ff 512 --vocab 400 --type q8_0";
    auto unknown = run_layerscope(base + " --tensor-type blk.7.ffn_down.weight=q2_K", true);
    EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
    EXPECT_NE(unknown.out.find("no tensor blk.7.ffn_down.weight"), std::string::npos) << unknown.out;
    auto vector = run_layerscope(base + " --tensor-type blk.0.attn_norm.weight=q8_0", true);
    EXPECT_EQ(vector.exit_code, 2) << vector.out;
    EXPECT_NE(vector.out.find("is a vector"), std::string::npos) << vector.out;
    auto rows = run_layerscope("make-model " + q(d + "/y.gguf") + " --embd 96 --layers 1 --heads 2 --ff 128 --vocab 400 "
                               "--tensor-type blk.0.attn_q.weight=q4_K", true);
    EXPECT_EQ(rows.exit_code, 2) << rows.out;
    EXPECT_NE(rows.out.find("rows of 96 values, not a multiple of q4_K's block of 256"), std::string::npos) << rows.out;
    auto syntax = run_layerscope(base + " --tensor-type blk.0.attn_q.weight", true);
    EXPECT_EQ(syntax.exit_code, 2) << syntax.out;
    EXPECT_NE(syntax.out.find("give NAME=TYPE"), std::string::npos) << syntax.out;
}

TEST(ModelPair, FilesOfDifferentModelsAreRefusedByName) {
    auto layers = run_layerscope("compare -m " + file("f16") + " --against-model " + file("three_layers") + kTokens, true);
    EXPECT_EQ(layers.exit_code, 3) << layers.out;
    EXPECT_NE(layers.out.find("are not one model in two formats: llama.block_count is 2 in the first, 3 in the second"),
              std::string::npos)
        << layers.out;
    auto arch = run_layerscope("compare -m " + file("f16") + " --against-model " + file("qwen3") + kTokens, true);
    EXPECT_EQ(arch.exit_code, 3) << arch.out;
    EXPECT_NE(arch.out.find("the architecture is llama in the first, qwen3 in the second"), std::string::npos) << arch.out;
    auto missing = run_layerscope("compare -m " + file("f16") + " --against-model " + q(model_dir() + "/none.gguf") + kTokens, true);
    EXPECT_EQ(missing.exit_code, 3) << missing.out;
    EXPECT_NE(missing.out.find("none.gguf"), std::string::npos) << missing.out;
}

TEST(ModelPair, MisuseIsAUsageError) {
    auto no_tokens = run_layerscope("compare -m " + file("f16") + " --against-model " + file("q8_0"), true);
    EXPECT_EQ(no_tokens.exit_code, 2) << no_tokens.out;
    EXPECT_NE(no_tokens.out.find("give -p TEXT or --tokens"), std::string::npos) << no_tokens.out;
    auto both = run_layerscope("compare -m " + file("f16") + " --against-model " + file("q8_0") + " --against-backend cpu" + kTokens, true);
    EXPECT_EQ(both.exit_code, 2) << both.out;
    EXPECT_NE(both.out.find("--against-model compares two files of one model"), std::string::npos) << both.out;
}

}  // namespace
