// What a format costs at the output: KL(reference || ours) of the final distributions (as
// llama-perplexity --kl-divergence), per position in `compare --against-model`; `--ablate`, which
// runs the F16 file with one tensor (or layer) of the quantized file at a time (the KL it reports
// for a tensor must equal that of a comparison with a file in which make-model quantized only that
// tensor); and the logit lens, each layer's output through the output head, whose first
// difference must be the one damaged layer, on llama, qwen3 and deepseek2.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/compare/logit_lens.h"
#include "engine/compare/output_kl.h"
#include "tests/test_json.h"
#include "tests/test_support.h"

namespace {

using ls::test::run_layerscope;
using ls::test::run_layerscope_json;

std::string q(const std::string& path) { return "'" + path + "'"; }

const char* kShape = " --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7";

// One spec and seed, so the same master weights in every file.
const std::string& model_dir() {
    static const std::string dir = [] {
        const std::string d = ls::test::make_temp_dir();
        for (const char* args : {"f16.gguf --type f16",
                                 // every matrix Q8_0 but one, damaged to Q2_K
                                 "damaged.gguf --type q8_0 --tensor-type blk.1.ffn_down.weight=q2_K",
                                 // F16 but that one tensor, quantized by make-model itself
                                 "one_q2_K.gguf --type f16 --tensor-type blk.1.ffn_down.weight=q2_K"}) {
            auto r = run_layerscope("make-model " + q(d) + "/" + args + kShape, true);
            EXPECT_EQ(r.exit_code, 0) << r.out;
        }
        return d;
    }();
    return dir;
}

std::string file(const char* name) { return q(model_dir() + "/" + name + ".gguf"); }

const char* kTokens = " --tokens 1,20,33,41,52,7,99,140,3,250 --backend cpu";

TEST(OutputKl, KlOfTwoDistributionsAsDefined) {
    // p = (1/3, 2/3), q = (1/2, 1/2): KL(p || q) = 1/3 ln(2/3) + 2/3 ln(4/3).
    const float p[2] = {0.0f, std::log(2.0f)}, u[2] = {5.0f, 5.0f};
    const ls::PositionKl k = ls::compare_distributions(p, u, 2);
    EXPECT_NEAR(k.kl, std::log(2.0 / 3.0) / 3 + 2 * std::log(4.0 / 3.0) / 3, 1e-7);
    EXPECT_EQ(k.ref_top1, 1);
    EXPECT_EQ(k.our_top1, 0);  // the first on ties
    EXPECT_NEAR(k.ref_p_top1, 2.0 / 3.0, 1e-7);
    EXPECT_NEAR(k.our_p_ref_top1, 0.5, 1e-12);
    EXPECT_EQ(ls::compare_distributions(p, p, 2).kl, 0.0);
    // Ours gives no probability where the reference gives some: +inf. A NaN: NaN.
    const float none[2] = {0.0f, -INFINITY}, nan[2] = {0.0f, NAN};
    EXPECT_EQ(ls::compare_distributions(p, none, 2).kl, INFINITY);
    EXPECT_NEAR(ls::compare_distributions(none, p, 2).kl, std::log(3.0), 1e-7);  // all mass on token 0: ln 3
    EXPECT_TRUE(std::isnan(ls::compare_distributions(p, nan, 2).kl));
}

TEST(OutputKl, StatisticsInterpolateBetweenRanks) {
    std::vector<ls::PositionKl> rows(100);
    for (int i = 0; i < 100; ++i) rows[i].kl = 99 - i, rows[i].ref_top1 = 1, rows[i].our_top1 = i < 75 ? 1 : 2;
    const ls::KlStats s = ls::kl_stats(rows);
    EXPECT_EQ(s.n, 100);
    EXPECT_DOUBLE_EQ(s.mean, 49.5);
    EXPECT_DOUBLE_EQ(s.median, 49.5);
    EXPECT_NEAR(s.p99, 98.01, 1e-12);
    EXPECT_EQ(s.max, 99);
    EXPECT_EQ(s.min, 0);
    EXPECT_DOUBLE_EQ(s.same_top1, 0.75);
    rows[3].kl = NAN;  // sorts last, and the mean is NaN
    const ls::KlStats n = ls::kl_stats(rows);
    EXPECT_TRUE(std::isnan(n.mean));
    EXPECT_TRUE(std::isnan(n.max));
    EXPECT_EQ(n.min, 0);
}

// compare --against-model: a distribution per prompt position, the statistics over them.
TEST(OutputKl, ComparingTwoFormatsReportsKlPerPosition) {
    const nlohmann::json j = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens, 1);
    const nlohmann::json& kl = j["output_kl"];
    ASSERT_TRUE(kl.is_object()) << j;
    ASSERT_EQ(kl["rows"].size(), 10u) << kl;
    for (size_t i = 0; i < 10; ++i) {
        EXPECT_EQ(kl["rows"][i]["position"], i);
        EXPECT_GT(kl["rows"][i]["kl"].get<double>(), 0.0);
    }
    EXPECT_GT(kl["mean"].get<double>(), 0.0);
    EXPECT_GE(kl["p99"].get<double>(), kl["median"].get<double>());
    auto text = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens);
    EXPECT_NE(text.out.find("output:    KL(reference || ours) of the final distributions"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("(10 positions)"), std::string::npos) << text.out;
    // Two formats: each weight adds an error of its own, none is "the bug".
    EXPECT_NE(text.out.find("local error: the first op with a large error of its own is "), std::string::npos) << text.out;
    // The same file twice: KL 0 everywhere.
    const nlohmann::json same = run_layerscope_json("compare -m " + file("f16") + " --against-model " + file("f16") + kTokens, 0);
    EXPECT_EQ(same["output_kl"]["max"], 0.0) << same["output_kl"];
    EXPECT_EQ(same["output_kl"]["same_top1"], 1.0);
}

// The ranking names the damaged tensor, and the KL of its run equals that of an independent run:
// a file make-model wrote with only that tensor quantized, compared event by event.
TEST(Ablate, TheDamagedTensorFirstWithTheKlOfItsOwnFile) {
    const nlohmann::json a = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens +
                                          " --ablate tensors",
                                      0);
    ASSERT_EQ(a["ranking"].size(), 16u) << a;  // 2 x 7 products, the LM head and the embeddings
    EXPECT_EQ(a["runs"], 16);
    EXPECT_FALSE(a["cancelled"].get<bool>());
    EXPECT_EQ(a["ranking"][0]["unit"], "blk.1.ffn_down.weight") << a["ranking"];
    EXPECT_EQ(a["ranking"][0]["types"], "q2_K");
    for (size_t i = 1; i < a["ranking"].size(); ++i) {
        EXPECT_GE(a["ranking"][i - 1]["mean"].get<double>(), a["ranking"][i]["mean"].get<double>());
        EXPECT_EQ(a["ranking"][i]["types"], "q8_0");
    }
    // Independently: the file with only that tensor in Q2_K, through compare's own runs.
    const nlohmann::json one = run_layerscope_json("compare -m " + file("one_q2_K") + " --against-model " + file("f16") + kTokens, 1);
    EXPECT_EQ(a["ranking"][0]["mean"], one["output_kl"]["mean"]) << one["output_kl"];
    EXPECT_EQ(a["ranking"][0]["max"], one["output_kl"]["max"]);
    EXPECT_EQ(a["ranking"][0]["same_top1"], one["output_kl"]["same_top1"]);
    // And the whole file's KL is the comparison's.
    const nlohmann::json whole = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens, 1);
    EXPECT_EQ(a["whole"]["mean"], whole["output_kl"]["mean"]);
    // One file against itself but that tensor: one unit, the same KL again.
    const nlohmann::json single = run_layerscope_json("compare -m " + file("one_q2_K") + " --against-model " + file("f16") + kTokens +
                                               " --ablate tensors",
                                           0);
    ASSERT_EQ(single["ranking"].size(), 1u);
    EXPECT_EQ(single["ranking"][0]["mean"], one["output_kl"]["mean"]);
}

// On qwen3, deepseek2 and qwen3moe as on llama: one coarse tensor among Q8_0 ones is first in both
// rankings, by local error (attribution) and by KL at the output (--ablate). deepseek2-tiny's rows of
// 64 take no K-quant, so its damage is Q4_0, on the latent KV projection; qwen3moe's is an expert
// tensor, whose products are MUL_MAT_ID on the experts the reference chose.
TEST(Ablate, BothRankingsNameTheDamagedTensorOnQwen3Deepseek2AndQwen3moe) {
    const std::string d = ls::test::make_temp_dir();
    struct Case {
        const char* name;
        std::string shape, damaged;
    };
    const Case cases[] = {
        {"qwen3", "--arch qwen3 --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7",
         "blk.1.ffn_down.weight=q2_K"},
        {"deepseek2", "--preset deepseek2-tiny --seed 7", "blk.1.attn_kv_a_mqa.weight=q4_0"},
        // one expert tensor (MUL_MAT_ID) of a mixture of experts
        {"qwen3moe", "--preset qwen3moe-tiny --embd 256 --ff 256 --expert-ff 256 --seed 7", "blk.1.ffn_down_exps.weight=q2_K"}};
    for (const Case& c : cases) {
        const std::string f16 = d + "/" + c.name + ".gguf", damaged = d + "/" + c.name + "_damaged.gguf";
        auto r = run_layerscope("make-model " + q(f16) + " " + c.shape + " --type f16", true);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        r = run_layerscope("make-model " + q(damaged) + " " + c.shape + " --type q8_0 --tensor-type " + c.damaged, true);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const std::string tensor = c.damaged.substr(0, c.damaged.find('='));
        const nlohmann::json j = run_layerscope_json("compare -m " + q(damaged) + " --against-model " + q(f16) + kTokens, 1);
        ASSERT_FALSE(j["attribution"].empty()) << c.name;
        EXPECT_EQ(j["attribution"][0]["tensor"], tensor) << c.name << j["attribution"];
        const nlohmann::json a = run_layerscope_json("compare -m " + q(damaged) + " --against-model " + q(f16) + kTokens +
                                              " --ablate tensors",
                                          0);
        ASSERT_FALSE(a["ranking"].empty()) << c.name;
        EXPECT_EQ(a["ranking"][0]["unit"], tensor) << c.name << a["ranking"];
    }
}

// Q8_0 adds less than Q4_K to every weight it measures, on qwen3, deepseek2 and qwen3moe (widened so
// that Q4_K's blocks fit; the few rows that take no K-quant fall back as llama-quantize's do). Every
// product is measured: deepseek2's absorbed k_b and v_b, the routers, the chosen and the shared
// experts too. The weights both files keep as they are (the routers in F32, deepseek2's k_b whose
// rows of 16 take neither format) add nothing in either.
TEST(Attribution, Q8_0IsBelowQ4_KForEveryWeight) {
    const std::string d = ls::test::make_temp_dir();
    struct Case {
        const char* name;
        std::string shape;
        std::set<std::string> kept;      // stored alike in both files: local nmse 0 in both
        std::set<std::string> measured;  // among the rest
    };
    const Case cases[] = {
        {"qwen3", "--arch qwen3 --embd 256 --layers 2 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 7", {}, {}},
        {"deepseek2", "--preset deepseek2-tiny --embd 256 --ff 256 --expert-ff 256 --kv-lora-rank 256 --seed 7",
         {"blk.0.attn_k_b.weight", "blk.1.attn_k_b.weight", "blk.1.ffn_gate_inp.weight"},
         {"blk.1.attn_v_b.weight", "blk.1.ffn_up_exps.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight",
          "blk.1.ffn_up_shexp.weight", "blk.1.ffn_gate_shexp.weight", "blk.1.ffn_down_shexp.weight"}},
        {"qwen3moe", "--preset qwen3moe-tiny --embd 256 --ff 256 --expert-ff 256 --seed 7",
         {"blk.0.ffn_gate_inp.weight", "blk.1.ffn_gate_inp.weight"},
         {"blk.0.ffn_up_exps.weight", "blk.0.ffn_gate_exps.weight", "blk.0.ffn_down_exps.weight", "blk.1.ffn_down_exps.weight"}}};
    for (const Case& c : cases) {
        const std::string base = d + "/" + c.name + ".gguf";
        auto r = run_layerscope("make-model " + q(base) + " " + c.shape + " --type f16,q8_0,q4_K", true);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const std::string stem = d + "/" + c.name;
        std::map<std::string, double> local[2];
        int i = 0;
        for (const char* type : {"q8_0", "q4_K"}) {
            const nlohmann::json j = run_layerscope_json("compare -m " + q(stem + "-" + type + ".gguf") + " --against-model " +
                                                  q(stem + "-f16.gguf") + kTokens,
                                              1);
            for (const auto& a : j["attribution"]) local[i][a["tensor"].get<std::string>()] = a["local_nmse"].get<double>();
            ++i;
        }
        EXPECT_GE(local[0].size(), 11u) << c.name;
        for (const std::string& t : c.measured) EXPECT_TRUE(local[0].count(t)) << c.name << ": " << t << " not measured";
        for (const auto& [tensor, nmse] : local[0]) {
            ASSERT_TRUE(local[1].count(tensor)) << c.name << " " << tensor;
            if (c.kept.count(tensor)) {
                EXPECT_EQ(nmse, 0.0) << c.name << " " << tensor;
                EXPECT_EQ(local[1][tensor], 0.0) << c.name << " " << tensor;
                continue;
            }
            EXPECT_LT(nmse, local[1][tensor]) << c.name << " " << tensor;
        }
    }
}

// Two formats of one model differ only in their weights, so with the reference's own inputs only an
// op that reads a weight can add an error of its own: no weightless op (a norm, RoPE, the scores, a
// softmax, a sum) may be marked local, on any architecture. Those not recomputed say so.
TEST(Attribution, OnlyOpsThatReadAWeightHaveAnErrorOfTheirOwn) {
    const std::string d = ls::test::make_temp_dir();
    const std::pair<const char*, std::string> cases[] = {
        {"llama", kShape},
        {"qwen3", "--arch qwen3" + std::string(kShape)},
        {"deepseek2", "--preset deepseek2-tiny --seed 7"},
        {"qwen3moe", "--preset qwen3moe-tiny --embd 256 --ff 256 --expert-ff 256 --seed 7"},
        {"gemma2", "--preset gemma2-tiny --embd 256 --ff 512 --seed 7"},
        {"gemma3", "--preset gemma3-tiny --embd 256 --ff 512 --seed 7"},
        {"phi3", "--preset phi3-tiny --embd 256 --ff 512 --seed 7"},
        {"gpt-oss", "--preset gpt-oss-tiny --seed 7"}};
    for (const auto& [name, shape] : cases) {
        const std::string stem = d + "/" + name;
        auto r = run_layerscope("make-model " + q(stem + ".gguf") + " " + shape + " --type f16,q4_K", true);
        ASSERT_EQ(r.exit_code, 0) << name << r.out;
        const nlohmann::json j = run_layerscope_json(
            "compare -m " + q(stem + "-q4_K.gguf") + " --against-model " + q(stem + "-f16.gguf") + kTokens, 1);
        int with_weight = 0;
        for (const auto& e : j["events"]) {
            if (!e.contains("origin")) continue;
            if (e["origin"].is_null()) {
                EXPECT_EQ(e["origin_why"].get<std::string>().rfind("no local recomputation", 0), 0u) << name << " " << e;
                continue;
            }
            if (e.contains("weight")) ++with_weight;
            if (e["origin"] == "local") {
                EXPECT_TRUE(e.contains("weight")) << name << ": " << e["name"] << " has a local error of its own, local nmse "
                                                  << e["local_nmse"];
            }
        }
        EXPECT_GE(with_weight, 7) << name;  // gemma: the embeddings and two layers' q, k and v
    }
    std::filesystem::remove_all(d);
}

// Two dumps and their two models (the reference dump made from the F16 file): each weight's local
// error is the quantized model's op on the reference dump's inputs. With our own dumps of the two
// runs, every weight's is exactly that of --against-model, and so is the KL of the final
// distributions; the damaged tensor comes first.
TEST(Attribution, TwoDumpsAndTheirTwoModels) {
    const std::string d = ls::test::make_temp_dir();
    const std::string ours = d + "/damaged_dump.gguf", ref = d + "/f16_dump.gguf";
    for (const auto& [model, dump] : {std::pair{file("damaged"), ours}, std::pair{file("f16"), ref}}) {
        auto r = run_layerscope("run -m " + model + kTokens + " -n 0 --all-logits --dump " + q(dump), true);
        ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    const std::string two_dumps = "compare " + q(ours) + " " + q(ref) + " -m " + file("damaged") + " --against-model " + file("f16");
    const nlohmann::json two = run_layerscope_json(two_dumps, 1);
    const nlohmann::json run = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens, 1);
    ASSERT_FALSE(two["attribution"].empty()) << two;
    EXPECT_EQ(two["attribution"][0]["tensor"], "blk.1.ffn_down.weight") << two["attribution"];
    std::map<std::string, double> by_run;
    for (const auto& a : run["attribution"]) by_run[a["tensor"].get<std::string>()] = a["local_nmse"].get<double>();
    EXPECT_EQ(two["attribution"].size(), by_run.size());
    for (const auto& a : two["attribution"]) {
        const std::string t = a["tensor"].get<std::string>();
        ASSERT_TRUE(by_run.count(t)) << t;
        EXPECT_DOUBLE_EQ(a["local_nmse"].get<double>(), by_run[t]) << t;
    }
    ASSERT_TRUE(two["output_kl"].is_object()) << two;
    EXPECT_EQ(two["output_kl"]["rows"].size(), run["output_kl"]["rows"].size());
    EXPECT_DOUBLE_EQ(two["output_kl"]["mean"].get<double>(), run["output_kl"]["mean"].get<double>());
    auto text = run_layerscope(two_dumps);
    EXPECT_NE(text.out.find("against:   " + file("f16").substr(1, file("f16").size() - 2)), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("attribution: what each weight's format adds"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("the first op with a large error of its own"), std::string::npos) << text.out;

    // The reference's model without ours, or two models that are not one: refused by name.
    auto alone = run_layerscope("compare " + q(ours) + " " + q(ref) + " --against-model " + file("f16"), true);
    EXPECT_EQ(alone.exit_code, 2) << alone.out;
    EXPECT_NE(alone.out.find("give -m with the first dump's model"), std::string::npos) << alone.out;
    const std::string other = d + "/other.gguf";
    ASSERT_EQ(run_layerscope("make-model " + q(other) + " --embd 256 --layers 1 --heads 4 --kv-heads 2 --ff 512 --vocab 400", true)
                  .exit_code,
              0);
    auto unlike = run_layerscope("compare " + q(ours) + " " + q(ref) + " -m " + file("damaged") + " --against-model " + q(other), true);
    EXPECT_EQ(unlike.exit_code, 3) << unlike.out;
    EXPECT_NE(unlike.out.find("other.gguf"), std::string::npos) << unlike.out;
    std::filesystem::remove_all(d);
}

// llama.cpp's own dumps of a Q4_K_M file and its F16 source, with the two files: the same weights
// measured as on our run of the F16 file; those that read the embeddings (whose values our llama
// mode reproduces exactly) to the digit, the later ones on llama.cpp's inputs within 20%.
TEST(Attribution, LlamaCppsTwoDumpsAndTheirTwoModels) {
    LS_REQUIRE_FIXTURES();
    const std::string q4 = q(ls::test::fixture_path("models/llama-gqa-mini-Q4_K_M.gguf"));
    const std::string f16 = q(ls::test::fixture_path("models/llama-gqa-mini-F16.gguf"));
    const nlohmann::json two = run_layerscope_json(
        "compare " + q(ls::test::fixture_path("dumps/llama-gqa-mini-Q4_K_M_lily_n0_nocache.gguf")) + " " +
            q(ls::test::fixture_path("dumps/llama-gqa-mini-F16_lily_n0_nocache.gguf")) + " -m " + q4 + " --against-model " + f16,
        1);
    const nlohmann::json run = run_layerscope_json(
        "compare -m " + q4 + " --against-model " + f16 + " --tokens 1,317,391,266,267,337 --backend cpu", 1);
    std::map<std::string, double> by_run;
    for (const auto& a : run["attribution"]) by_run[a["tensor"].get<std::string>()] = a["local_nmse"].get<double>();
    EXPECT_EQ(two["attribution"].size(), by_run.size());
    EXPECT_GE(by_run.size(), 30u);  // every matrix of 4 layers, the embeddings and the head
    for (const auto& a : two["attribution"]) {
        const std::string t = a["tensor"].get<std::string>();
        ASSERT_TRUE(by_run.count(t)) << t;
        const double ratio = a["local_nmse"].get<double>() / by_run[t];
        const bool reads_embeddings = t == "token_embd.weight" || t == "blk.0.attn_q.weight" || t == "blk.0.attn_k.weight" ||
                                      t == "blk.0.attn_v.weight";
        EXPECT_NEAR(ratio, 1.0, reads_embeddings ? 1e-6 : 0.2) << t;
    }
    ASSERT_TRUE(two["output_kl"].is_object()) << two;
    EXPECT_EQ(two["output_kl"]["rows"].size(), 1u);  // the dumps keep the last position's logits
}

TEST(Ablate, LayersAndRestoring) {
    const nlohmann::json layers = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens +
                                               " --ablate layers",
                                           0);
    ASSERT_EQ(layers["ranking"].size(), 4u) << layers;  // two layers, the LM head, the embeddings
    EXPECT_EQ(layers["ranking"][0]["unit"], "layer 1") << layers["ranking"];
    EXPECT_EQ(layers["ranking"][0]["tensors"].size(), 7u);
    // Restoring one tensor at a time: restoring the damaged one leaves the least KL.
    const nlohmann::json restore = run_layerscope_json("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens +
                                                " --ablate tensors --ablate-restore",
                                            0);
    EXPECT_EQ(restore["direction"], "restore");
    EXPECT_EQ(restore["ranking"][0]["unit"], "blk.1.ffn_down.weight") << restore["ranking"];
    EXPECT_LT(restore["ranking"][0]["mean"].get<double>(), restore["whole"]["mean"].get<double>());
    EXPECT_EQ(restore["ranking"][0]["types"], "f16");
    auto text = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens + " --ablate tensors",
                               true);
    EXPECT_EQ(text.exit_code, 0) << text.out;
    EXPECT_NE(text.out.find("ablate 16/16 "), std::string::npos) << text.out;  // progress
    EXPECT_NE(text.out.find("   1  blk.1.ffn_down.weight "), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("time:      18 runs in "), std::string::npos) << text.out;
}

TEST(Ablate, MisuseIsRefused) {
    auto alone = run_layerscope("compare -m " + file("damaged") + kTokens + " --ablate tensors", true);
    EXPECT_EQ(alone.exit_code, 2) << alone.out;
    EXPECT_NE(alone.out.find("--ablate ranks the tensors of two files of one model"), std::string::npos) << alone.out;
    auto decode = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens +
                                     " -n 2 --ablate tensors",
                                 true);
    EXPECT_EQ(decode.exit_code, 2) << decode.out;
    EXPECT_NE(decode.out.find("-n does not apply"), std::string::npos) << decode.out;
    auto restore = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens +
                                      " --ablate-restore",
                                  true);
    EXPECT_EQ(restore.exit_code, 2) << restore.out;
    EXPECT_NE(restore.out.find("--ablate-restore goes with --ablate"), std::string::npos) << restore.out;
    auto same = run_layerscope("compare -m " + file("f16") + " --against-model " + file("f16") + kTokens + " --ablate layers",
                               true);
    EXPECT_EQ(same.exit_code, 3) << same.out;
    EXPECT_NE(same.out.find("hold the same bytes in every tensor: nothing to ablate"), std::string::npos) << same.out;
}

// Ctrl-C: the run under way is abandoned and what was measured is reported, exit 130.
TEST(Ablate, InterruptStopsAndReports) {
    const std::string d = ls::test::make_temp_dir();
    for (const char* args : {"big.gguf --type f16", "big_q.gguf --type q4_0"}) {
        auto r = run_layerscope("make-model " + q(d) + "/" + args +
                                    " --embd 256 --layers 12 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 3",
                                true);
        ASSERT_EQ(r.exit_code, 0) << r.out;
    }
    int out[2];
    ASSERT_EQ(pipe(out), 0);
    const std::string bin = LAYERSCOPE_BINARY_DIR "/app/layerscope";
    const std::string m = d + "/big_q.gguf", against = d + "/big.gguf";
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(out[1], 2);
        close(out[0]);
        execl(bin.c_str(), bin.c_str(), "compare", "-m", m.c_str(), "--against-model", against.c_str(), "--tokens",
              "1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "--mode", "exact", "--backend", "cpu", "--ablate", "tensors",
              static_cast<char*>(nullptr));
        _exit(127);
    }
    close(out[1]);
    std::string text;
    char buf[4096];
    bool sent = false;
    for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) {
        text.append(buf, static_cast<size_t>(n));
        if (!sent && text.find("ablate 2/") != std::string::npos) kill(pid, SIGINT), sent = true;
    }
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(sent) << text;
    ASSERT_TRUE(WIFEXITED(status)) << text;
    EXPECT_EQ(WEXITSTATUS(status), 130) << text;
    EXPECT_NE(text.find("interrupted after "), std::string::npos) << text;
    EXPECT_NE(text.find("\n   1  "), std::string::npos) << text;  // the ranking of what was measured
    EXPECT_EQ(text.find("ablate 86/86"), std::string::npos) << text;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
}

// One spec in several formats: one file per type, each the bytes that type alone would write.
TEST(MakeModelTypes, AListWritesOneFilePerTypeFromTheSameWeights) {
    const std::string d = ls::test::make_temp_dir();
    auto r = run_layerscope("make-model " + q(d + "/m.gguf") + kShape + " --type f16,q8_0,q4_K", true);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    for (const char* type : {"f16", "q8_0", "q4_K"}) {
        EXPECT_NE(r.out.find(std::string("wrote ") + d + "/m-" + type + ".gguf"), std::string::npos) << r.out;
        auto one = run_layerscope("make-model " + q(d + "/one.gguf") + kShape + " --force --type " + type, true);
        ASSERT_EQ(one.exit_code, 0) << one.out;
        const std::string a = read_file(d + "/m-" + type + ".gguf");
        EXPECT_FALSE(a.empty()) << type;
        EXPECT_TRUE(a == read_file(d + "/one.gguf")) << type;
    }
    auto unknown = run_layerscope("make-model " + q(d + "/x.gguf") + kShape + " --type f16,q9", true);
    EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
    EXPECT_NE(unknown.out.find("unknown --type 'q9'"), std::string::npos) << unknown.out;
    auto twice = run_layerscope("make-model " + q(d + "/x.gguf") + kShape + " --type q8_0,q8_0", true);
    EXPECT_EQ(twice.exit_code, 2) << twice.out;
    EXPECT_NE(twice.out.find("--type lists q8_0 twice"), std::string::npos) << twice.out;
    EXPECT_FALSE(std::ifstream(d + "/x-f16.gguf").good()) << "nothing is written when a type is unknown";
}

// A model of `make_args` in F16, and the same with every matrix of layer 1 that Q4_0 can hold in
// Q4_0 (the names from inspect --json): the lens must agree exactly before layer 1 and differ from it.
struct DamagedLayer {
    std::string f16, damaged;
};
DamagedLayer damaged_layer(const std::string& dir, const std::string& name, const std::string& make_args) {
    DamagedLayer m{dir + "/" + name + ".gguf", dir + "/" + name + "_layer1.gguf"};
    auto r = run_layerscope("make-model " + q(m.f16) + " " + make_args + " --type f16", true);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json info = nlohmann::json::parse(run_layerscope("inspect --json " + q(m.f16)).out, nullptr, false);
    std::string types;
    for (const auto& t : info["tensors"]) {
        const std::string n = t["name"].get<std::string>();
        if (n.rfind("blk.1.", 0) == 0 && t["ne"].size() >= 2 && t["ne"][0].get<int64_t>() % 32 == 0)
            types += " --tensor-type " + n + "=q4_0";
    }
    EXPECT_FALSE(types.empty()) << info;
    r = run_layerscope("make-model " + q(m.damaged) + " " + make_args + " --type f16" + types, true);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return m;
}

TEST(LogitLens, TheDamagedLayerIsTheFirstThatDiffers) {
    const std::string d = ls::test::make_temp_dir();
    const std::pair<const char*, const char*> models[] = {
        {"llama", "--embd 256 --layers 3 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 5"},
        {"qwen3", "--arch qwen3 --embd 256 --layers 3 --heads 4 --kv-heads 2 --ff 512 --vocab 400 --seed 5"},
        {"deepseek2", "--preset deepseek2-tiny --seed 5"}};
    for (const auto& [name, args] : models) {
        const DamagedLayer m = damaged_layer(d, name, args);
        const nlohmann::json j = run_layerscope_json("compare -m " + q(m.damaged) + " --against-model " + q(m.f16) + kTokens +
                                              " --logit-lens",
                                          1);
        const nlohmann::json& lens = j["logit_lens"];
        ASSERT_TRUE(lens.is_object()) << name << j;
        EXPECT_EQ(lens["first_divergent_layer"], 1) << name << lens["layers"];
        ASSERT_GE(lens["layers"].size(), 2u) << name;
        EXPECT_EQ(lens["layers"][0]["layer"], 0);
        EXPECT_EQ(lens["layers"][0]["kl"]["max"], 0.0) << name << ": the runs are the same bits before layer 1";
        EXPECT_EQ(lens["layers"][0]["kl"]["same_top1"], 1.0) << name;
        EXPECT_GT(lens["layers"][1]["kl"]["mean"].get<double>(), 1e-6) << name;
        ASSERT_EQ(lens["layers"][0]["cells"].size(), 10u) << name;  // every prompt position
        EXPECT_EQ(lens["layers"][0]["cells"][3]["position"], 3);
        EXPECT_EQ(lens["layers"][0]["cells"][3]["ours"].size(), 5u);
        EXPECT_TRUE(lens["layers"][0]["cells"][3]["ours"][0].contains("piece"));
        // The last layer's lens is the output head itself: the final distributions' KL, row by row.
        const nlohmann::json& last = lens["layers"].back();
        const nlohmann::json& rows = j["output_kl"]["rows"];
        ASSERT_EQ(last["cells"].size(), rows.size()) << name;
        for (size_t i = 0; i < rows.size(); ++i) {
            EXPECT_EQ(last["cells"][i]["kl"], rows[i]["kl"]) << name << " position " << i;
            EXPECT_EQ(last["cells"][i]["ours"][0]["token"], rows[i]["our_top1"]) << name << " position " << i;
            EXPECT_EQ(last["cells"][i]["reference"][0]["token"], rows[i]["ref_top1"]) << name << " position " << i;
        }
        // Each weight's local error is measured, or said to be unknown: no op that is not recomputed
        // (deepseek2's latent attention and its inner norms) shows up as an infinite local error.
        for (const auto& e : j["events"]) {
            if (e.contains("origin") && e["origin"] == "local") {
                EXPECT_TRUE(e["local_nmse"].is_number()) << name << " " << e;
            }
        }
        ASSERT_EQ(lens["arrivals"].size(), 10u) << name;
        for (const auto& a : lens["arrivals"]) {
            if (!a["ours_layer"].is_null()) {
                EXPECT_LE(a["ours_layer"].get<int>(), last["layer"].get<int>());
            }
        }
    }
}

// Against llama.cpp's own dumps (l_out-N is all the lens needs from a reference): the same
// distributions at every layer.
TEST(LogitLens, MatchesLlamaCppsDumpsAtEveryLayer) {
    LS_REQUIRE_FIXTURES();
    const std::pair<const char*, const char*> cases[] = {
        {"models/llama-gqa-mini-F16.gguf", "dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf"},
        {"models/qwen2-mini-F16.gguf", "dumps/qwen2-mini-F16_chat_n4_fa-off_nocache.gguf"},
        {"models/deepseek2-mini-F16.gguf", "dumps/deepseek2-mini-F16_hi_n4_fa-off_nocache.gguf"}};
    for (const auto& [model, dump] : cases) {
        const nlohmann::json j = run_layerscope_json("compare -m " + q(ls::test::fixture_path(model)) + " -r " +
                                              q(ls::test::fixture_path(dump)) + " --logit-lens",
                                          0);
        const nlohmann::json& lens = j["logit_lens"];
        EXPECT_TRUE(lens["first_divergent_layer"].is_null()) << model << lens["layers"];
        EXPECT_TRUE(lens["first_top1_change"].is_null()) << model;
        EXPECT_GE(lens["layers"].size(), 3u) << model;
        for (const auto& layer : lens["layers"]) {
            EXPECT_FALSE(layer["cells"].empty()) << model;
            EXPECT_LE(layer["kl"]["max"].get<double>(), ls::kLensKlSame) << model << " layer " << layer["layer"];
        }
    }
}

TEST(LogitLens, TextGridAndMisuse) {
    auto text = run_layerscope("compare -m " + file("damaged") + " --against-model " + file("f16") + kTokens + " --logit-lens");
    EXPECT_EQ(text.exit_code, 1) << text.out;
    EXPECT_NE(text.out.find("logit lens: each layer's output (l_out) through output_norm and the LM head"), std::string::npos)
        << text.out;
    EXPECT_NE(text.out.find("(the last 8 of 10 positions; --all for every one)"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("first layer that differs: 0 (mean KL above 1e-06)"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("the final top-1 token leads from:"), std::string::npos) << text.out;
    const std::string dump = ls::test::make_temp_dir() + "/d.gguf";
    auto made = run_layerscope("run -m " + file("f16") + " --tokens 1,2,3 --dump " + q(dump), true);
    ASSERT_EQ(made.exit_code, 0) << made.out;
    auto dumps = run_layerscope("compare " + q(dump) + " " + q(dump) + " --logit-lens", true);
    EXPECT_EQ(dumps.exit_code, 2) << dumps.out;
    EXPECT_NE(dumps.out.find("--logit-lens reads our run's layer outputs"), std::string::npos) << dumps.out;
}

}  // namespace
