// `layerscope compare` end to end: clean runs against llama.cpp's dumps and eval-callback logs exit
// 0, a fault exits 1 with its first divergence and the doctor's verdict, two dumps compare, and
// bad input gets exit codes 2 and 3.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/test_support.h"

namespace {

using ls::test::fixture_path;
using ls::test::run_layerscope;

std::string q(const std::string& path) { return "'" + path + "'"; }

TEST(CompareCli, CleanRunsAgainstDumpsAndLogsExitZero) {
    LS_REQUIRE_FIXTURES();
    struct Case { const char* model; const char* reference; const char* extra; };
    const Case cases[] = {
        {"models/stories260K.gguf", "dumps/stories260K_once_n0_fa-off.gguf", ""},
        {"models/stories260K.gguf", "dumps/stories260K_once_n0.gguf", ""},  // flash attention
        {"models/llama-gqa-mini-Q4_K_M.gguf", "dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf", ""},
        {"models/qwen2-mini-Q8_0.gguf", "dumps/qwen2-mini-Q8_0_code_n4_fa-off_nocache.gguf", ""},
        {"models/stories260K.gguf", "logs/stories260K_once_evalcb_c256_fa-off.txt", "-p 'Once upon a time'"},
        {"models/stories260K.gguf", "logs/stories260K_once_evalcb_c256.txt", "-p 'Once upon a time'"},
        {"models/qwen2-mini-F16.gguf", "logs/qwen2-mini-F16_france_evalcb_fa-off.txt", "-p 'The capital of France is'"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.reference);
        auto r = run_layerscope("compare -m " + q(fixture_path(c.model)) + " -r " + q(fixture_path(c.reference)) + " " + c.extra);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        EXPECT_NE(r.out.find("first divergence: none"), std::string::npos) << r.out;
    }
}

TEST(CompareCli, FaultIsFoundAndExplained) {
    LS_REQUIRE_FIXTURES();
    auto r = run_layerscope("compare -m " + q(fixture_path("models/stories260K.gguf")) + " -r " +
                            q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")) + " --fault rope-pairing");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("first divergence: Qcur-0#3 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("doctor: Qcur-0#3 matches the reference if RoPE is interleaved pairs (NORM)"), std::string::npos) << r.out;

    auto j = run_layerscope("compare --json -m " + q(fixture_path("models/stories260K.gguf")) + " -r " +
                            q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")) + " --fault no-causal-mask");
    EXPECT_EQ(j.exit_code, 1);
    auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["first_divergence"]["name"], "kq_soft_max-0");
    EXPECT_EQ(doc["first_divergence"]["status"], "diverged");
    ASSERT_FALSE(doc["doctor"].empty());
    EXPECT_EQ(doc["doctor"][0]["transform"], "attention");
    EXPECT_GT(doc["events"].size(), 100u);
}

TEST(CompareCli, TwoDumps) {
    LS_REQUIRE_FIXTURES();
    std::string dir = ls::test::make_temp_dir();
    auto run = run_layerscope("run -m " + q(fixture_path("models/stories260K.gguf")) + " -p 'Once upon a time' -n 0 --dump " +
                              q(dir + "/ours.gguf"));
    ASSERT_EQ(run.exit_code, 0) << run.out;
    auto same = run_layerscope("compare " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")));
    EXPECT_EQ(same.exit_code, 0) << same.out;
    EXPECT_NE(same.out.find("compared 119 tensor pairs, "), std::string::npos) << same.out;
    auto js = run_layerscope("compare --json " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")));
    EXPECT_EQ(js.exit_code, 0) << js.out;
    auto doc = nlohmann::json::parse(js.out);
    EXPECT_EQ(doc["volume"]["tensors"], 119);
    EXPECT_GT(doc["volume"]["bytes"].get<int64_t>(), 0);
    // Our dump against llama.cpp's flash-attention dump: kqv_out pairs with the unnamed FA node.
    auto fa = run_layerscope("compare " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0.gguf")) +
                             " --diverged 1e-3");
    EXPECT_EQ(fa.exit_code, 0) << fa.out;
    std::filesystem::remove_all(dir);
}

TEST(CompareCli, BadInput) {
    LS_REQUIRE_FIXTURES();
    const std::string m = "-m " + q(fixture_path("models/stories260K.gguf"));
    const std::string r = " -r " + q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf"));
    EXPECT_EQ(run_layerscope("compare " + m).exit_code, 2);                       // no reference
    EXPECT_EQ(run_layerscope("compare " + m + r + " --fault nonsense").exit_code, 2);
    EXPECT_EQ(run_layerscope("compare " + m + r + " --warn 1 --diverged 0.1").exit_code, 2);
    EXPECT_EQ(run_layerscope("compare onlyone.gguf").exit_code, 2);
    EXPECT_EQ(run_layerscope("compare " + m + " -r /no/such/dump.gguf").exit_code, 3);
    EXPECT_EQ(run_layerscope("compare " + m + " -r " + q(fixture_path("models/stories260K.gguf"))).exit_code, 3);  // a model, not a dump
    std::string dir = ls::test::make_temp_dir();
    std::ofstream(dir + "/garbage.txt") << "this is not a log\n";
    auto g = run_layerscope("compare " + m + " -r " + q(dir + "/garbage.txt") + " -p hi", true);
    EXPECT_EQ(g.exit_code, 3) << g.out;
    EXPECT_NE(g.out.find("garbage.txt"), std::string::npos) << g.out;
    // Two dumps, one cut off in its tensor data, either way round: exit 3 naming the file.
    const std::string dump = fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
    std::filesystem::copy_file(dump, dir + "/cut.gguf");
    std::filesystem::resize_file(dir + "/cut.gguf", std::filesystem::file_size(dump) / 2);
    for (const std::string& pair : {q(dir + "/cut.gguf") + " " + q(dump), q(dump) + " " + q(dir + "/cut.gguf")}) {
        auto cut = run_layerscope("compare " + pair, true);
        EXPECT_EQ(cut.exit_code, 3) << cut.out;
        EXPECT_NE(cut.out.find("cut.gguf: malformed GGUF"), std::string::npos) << cut.out;
        EXPECT_NE(cut.out.find("truncated"), std::string::npos) << cut.out;
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
