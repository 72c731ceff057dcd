// `layerscope compare` end to end: clean runs against llama.cpp's dumps and eval-callback logs exit
// 0, a fault exits 1 with its first divergence and the doctor's verdict, two dumps compare, and
// bad input gets exit codes 2 and 3: a comparison that compared nothing, a reference tensor
// without values, a reference's bad token ids or batch size, file bytes quoted in a message.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/capture/export.h"
#include "engine/gguf/gguf.h"
#include "tests/gguf_builder.h"
#include "tests/test_support.h"

namespace {

using ls::test::fixture_path;
using ls::test::run_layerscope;

std::string q(const std::string& path) { return "'" + path + "'"; }

std::vector<float> ramp(size_t n, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = std::sin(scale * static_cast<float>(i) + 0.25f);
    return v;
}

// Writes a dump of `tensors` (dump name, ne, values) with `info`; returns its path.
std::string write_dump(const std::string& path, const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<float>>>& tensors,
                       const ls::DumpInfo& info = {}, std::vector<ls::GgufKV> metadata = {}) {
    ls::ExportSet set;
    set.info = info;
    set.source_metadata = std::move(metadata);
    for (const auto& [name, ne, values] : tensors) set.tensors.push_back(ls::make_export_tensor(name, ne, values));
    ls::ExportOptions o;
    o.path = path;
    auto r = ls::export_tensors(set, o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return path;
}

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
    // The local-error column and summary: the bug is in the roped Q, the rest only inherited it.
    EXPECT_NE(r.out.find("local error: the bug is local to Qcur-0#3 (event "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" inherited"), std::string::npos) << r.out;

    auto j = run_layerscope("compare --json -m " + q(fixture_path("models/stories260K.gguf")) + " -r " +
                            q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")) + " --fault no-causal-mask");
    EXPECT_EQ(j.exit_code, 1);
    auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["first_divergence"]["name"], "kq_soft_max-0");
    EXPECT_EQ(doc["first_divergence"]["status"], "diverged");
    ASSERT_FALSE(doc["doctor"].empty());
    EXPECT_EQ(doc["doctor"][0]["transform"], "attention");
    EXPECT_GT(doc["events"].size(), 100u);
    // Per event: the local error of the flagged ones (kq_soft_max-0's own op differs: no mask).
    EXPECT_EQ(doc["local_error"]["origin"], "kq_soft_max-0") << doc["local_error"];
    EXPECT_GT(doc["local_error"]["inherited"].get<int>(), 0);
    int flagged = 0, inherited = 0;
    for (const auto& e : doc["events"]) {
        if (e["status"] != "diverged" && e["status"] != "warn") {
            EXPECT_FALSE(e.contains("origin")) << e;
            continue;
        }
        ++flagged;
        ASSERT_TRUE(e.contains("origin") && e.contains("local_nmse")) << e;
        if (e["name"] == "kq_soft_max-0") {
            EXPECT_EQ(e["origin"], "local") << e;
        }
        inherited += e["origin"] == "inherited";
    }
    EXPECT_GT(flagged, 10);
    EXPECT_GT(inherited, flagged / 2);
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
    EXPECT_NE(same.out.find("events, 119 compared: "), std::string::npos) << same.out;
    auto js = run_layerscope("compare --json " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")));
    EXPECT_EQ(js.exit_code, 0) << js.out;
    auto doc = nlohmann::json::parse(js.out);
    EXPECT_EQ(doc["volume"]["tensors"], 119);
    EXPECT_EQ(doc["summary"]["compared"], 119);
    EXPECT_GT(doc["volume"]["bytes"].get<int64_t>(), 0);
    // Our dump against llama.cpp's flash-attention dump: kqv_out pairs with the unnamed FA node.
    auto fa = run_layerscope("compare " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0.gguf")) +
                             " --diverged 1e-3");
    EXPECT_EQ(fa.exit_code, 0) << fa.out;
    // The flags of a model run mean nothing to two dumps: refused by name, never ignored.
    auto flags = run_layerscope("compare " + q(dir + "/ours.gguf") + " " + q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf")) +
                                " -m " + q(fixture_path("models/stories260K.gguf")) +
                                " --mode exact --tokens 1,2 --backend cpu --fault rope-skipped", true);
    EXPECT_EQ(flags.exit_code, 2) << flags.out;
    EXPECT_NE(flags.out.find("apply to a model run"), std::string::npos) << flags.out;
    for (const char* flag : {"--mode", "--tokens", "--backend", "--fault"})
        EXPECT_NE(flags.out.find(flag), std::string::npos) << flag << ": " << flags.out;
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

TEST(CompareCli, NothingComparedExitsTwoAndNamesBothSides) {
    const std::string dir = ls::test::make_temp_dir();
    const std::string ours = write_dump(dir + "/ours.gguf", {{"ffn_out-0", {8, 2}, ramp(16, 0.1f)},
                                                             {"l_out-0", {8, 2}, ramp(16, 0.2f)}});
    const std::string ref = write_dump(dir + "/ref.gguf", {{"blk0.ffn", {8, 2}, ramp(16, 0.1f)},
                                                           {"blk0.out", {8, 2}, ramp(16, 0.2f)}});
    auto r = run_layerscope("compare " + q(ours) + " " + q(ref), true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("2 events, 0 compared"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("first divergence: unknown: nothing was compared"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("nothing was compared"), std::string::npos) << r.out;
    for (const char* name : {"\"ffn_out-0\"", "\"l_out-0\"", "\"blk0.ffn\"", "\"blk0.out\""})
        EXPECT_NE(r.out.find(name), std::string::npos) << name << " not named:\n" << r.out;
    auto j = run_layerscope("compare --json " + q(ours) + " " + q(ref));
    EXPECT_EQ(j.exit_code, 2);
    auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["summary"]["compared"], 0);
    EXPECT_NE(doc["error"].get<std::string>().find("nothing was compared"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(CompareCli, AReferenceTensorWithoutValuesIsBadInputUnlessSomethingDiverged) {
    const std::string dir = ls::test::make_temp_dir();
    const std::string ours = write_dump(dir + "/ours.gguf", {{"attn_norm-0", {8, 2}, ramp(16, 0.1f)},
                                                             {"l_out-0", {8, 2}, ramp(16, 0.2f)}});
    // attn_norm-0 with ne [8, 0]: what our exporter refuses to write, so written field by field.
    auto raw = [&](const std::string& path, const std::vector<float>& l_out) {
        std::vector<ls::GgufWriteTensor> t = {{"attn_norm-0", ls::GgmlType::F32, {8, 0}, l_out.data(), 0},
                                              {"l_out-0", ls::GgmlType::F32, {8, 2}, l_out.data(), l_out.size() * 4}};
        EXPECT_TRUE(ls::gguf_write(path, {{"dump.format_version", ls::GgufValue::make_u32(1)}}, t));
        return path;
    };
    const std::vector<float> same = ramp(16, 0.2f), other = ramp(16, 0.7f);
    auto r = run_layerscope("compare " + q(ours) + " " + q(raw(dir + "/empty.gguf", same)), true);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("1 unusable"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("could not be compared"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("holds no values (ne [8, 0, 1, 1])"), std::string::npos) << r.out;
    // A real divergence after it is the first divergence, and the exit code says diverged.
    auto d = run_layerscope("compare " + q(ours) + " " + q(raw(dir + "/empty-and-diverged.gguf", other)), true);
    EXPECT_EQ(d.exit_code, 1) << d.out;
    EXPECT_NE(d.out.find("first divergence: l_out-0 (event 1)"), std::string::npos) << d.out;
    std::filesystem::remove_all(dir);
}

TEST(CompareCli, BadTokenIdsOrBatchSizeInAReferenceAreBadInput) {
    const std::string dir = ls::test::make_temp_dir();
    const std::string model = dir + "/model.gguf";
    ASSERT_EQ(run_layerscope("make-model " + q(model) + " --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 64 "
                             "--vocab 400").exit_code, 0);
    const std::vector<float> v = ramp(64, 0.3f);
    auto compare = [&](const std::string& ref) { return run_layerscope("compare -m " + q(model) + " -r " + q(ref), true); };

    ls::DumpInfo bad_prompt;
    bad_prompt.prompt_tokens = {1, 99999};
    auto r = compare(write_dump(dir + "/bad-prompt.gguf", {{"attn_norm-0", {32, 2}, v}}, bad_prompt));
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("dump.prompt_tokens holds token id 99999"), std::string::npos) << r.out;

    ls::DumpInfo bad_generated;
    bad_generated.prompt_tokens = {1, 2};
    bad_generated.n_predict = 1;
    bad_generated.generated_tokens = {-5};
    bad_generated.decode_n_tokens = {2, 1};
    r = compare(write_dump(dir + "/bad-generated.gguf", {{"attn_norm-0", {32, 2}, v}}, bad_generated));
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("dump.generated_tokens holds token id -5"), std::string::npos) << r.out;

    r = compare(write_dump(dir + "/no-batch.gguf", {{"attn_norm-0", {32, 2}, v}}, {},
                           {{"dump.format_version", ls::GgufValue::make_u32(1)},
                            {"dump.prompt_tokens", ls::GgufValue::make_array(ls::GgufValueType::INT32,
                                                                             {ls::GgufValue::make_i32(1), ls::GgufValue::make_i32(2)})},
                            {"dump.n_ubatch", ls::GgufValue::make_u32(0)}}));
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("dump.n_ubatch is 0"), std::string::npos) << r.out;
    std::filesystem::remove_all(dir);
}

TEST(CompareCli, FileBytesInAnErrorAreEscapedAndCapped) {
    const std::string dir = ls::test::make_temp_dir();
    // A GGUF whose one metadata key appears twice; the key holds ESC, BEL, NUL and 8 KB of junk.
    const std::string key = std::string("\x1b[2J\x07") + '\0' + std::string(8192, 'j');
    ls::test::GgufBuilder b;
    b.put<uint32_t>(0x46554747);
    b.put<uint32_t>(3);
    b.put<uint64_t>(0);
    b.put<uint64_t>(2);
    for (int k = 0; k < 2; ++k) {
        b.str(key);
        b.put<uint32_t>(4);  // u32
        b.put<uint32_t>(7);
    }
    std::ofstream(dir + "/junk.gguf", std::ios::binary).write(reinterpret_cast<const char*>(b.bytes.data()), b.size());
    auto r = run_layerscope("compare " + q(dir + "/junk.gguf") + " " + q(dir + "/junk.gguf"), true);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("metadata key \"\\x1b[2J\\x07\\x00jjj"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("more bytes) appears twice"), std::string::npos) << r.out;  // the NUL cut nothing
    EXPECT_LT(r.out.size(), 400u) << r.out;
    for (char c : r.out) EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f)) << int(c);
    std::filesystem::remove_all(dir);
}

}  // namespace
