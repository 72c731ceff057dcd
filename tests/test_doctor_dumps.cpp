// The doctor on any two runs: an engine's dump (made here by our forward pass with a planted fault,
// all its tensors or only some) compared with a llama.cpp dump names the fault when the model is
// given (`compare A B -m MODEL`), re-running our forward pass when the dump lacks the tensors in
// between; on quantized weights a transform is judged against the floor the weight format leaves.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/capture/export.h"
#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "tests/test_json.h"
#include "tests/test_support.h"

namespace ls {
namespace {

using test::fixture_path;
using test::run_layerscope;
using test::run_layerscope_json;

std::string q(const std::string& path) { return "'" + path + "'"; }

// Our forward pass with `fault` on the reference's prompt, as llama.cpp's build made it, exported
// to `path` with the events `globs` select (all when empty).
void write_engine_dump(const std::string& model_path, const ReferenceDump& reference, Fault fault,
                       const std::vector<std::string>& globs, const std::string& path) {
    auto model = Model::open(model_path);
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto backend = make_cpu_backend(0);
    ForwardOptions fo;
    fo.fault = fault;
    fo.n_ubatch = reference.n_ubatch();
    fo.flash_attn = reference.flash_attention();
    fo.all_logits = reference.all_logits();
    fo.llama_isa = LlamaIsa::kAvx512Fp16;  // the fixtures' build
    auto forward = make_forward(*model.value(), *backend, fo);
    ASSERT_TRUE(forward.ok()) << forward.error().message;
    ExportCollector collector(globs);
    ASSERT_TRUE(forward.value()->eval(reference.prompt_tokens(), &collector));
    ExportSet set;
    set.tensors = std::move(collector.tensors());
    set.info.tool = "an engine";
    set.info.prompt_tokens = reference.prompt_tokens();
    set.info.decode_n_tokens = {static_cast<int32_t>(reference.prompt_tokens().size())};
    set.info.n_ctx = static_cast<uint32_t>(fo.n_ctx);
    set.info.n_ubatch = static_cast<uint32_t>(fo.n_ubatch);
    ExportOptions o;
    o.path = path;
    auto written = export_tensors(set, o);
    ASSERT_TRUE(written) << written.error().message;
}

bool doctor_has(const nlohmann::json& j, const std::string& transform, bool from_rerun) {
    if (!j.contains("doctor")) return false;
    for (const auto& f : j["doctor"])
        if (f["transform"] == transform && f["from_rerun"] == from_rerun) return true;
    return false;
}

TEST(DoctorDumps, TwoDumpsWithTheModelNameTheRopePairing) {
    LS_REQUIRE_FIXTURES();
    const std::string model = fixture_path("models/stories260K.gguf");
    const std::string ref_path = fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
    auto ref = ReferenceDump::open(ref_path);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const std::string dir = test::make_temp_dir();
    const std::string ours = dir + "/engine.gguf";
    write_engine_dump(model, *ref.value(), Fault::kRopeWrongPairing, {}, ours);

    // Without the model the doctor cannot try RoPE.
    const nlohmann::json plain = run_layerscope_json("compare " + q(ours) + " " + q(ref_path), 1);
    EXPECT_EQ(plain["first_divergence"]["name"], "Qcur-0#3");
    EXPECT_FALSE(doctor_has(plain, "rope", false)) << plain["doctor"].dump();

    // With it (both spellings), it names the pairing from the dump's own pre-rope Q.
    for (const char* flag : {"-m", "--model"}) {
        const nlohmann::json j = run_layerscope_json("compare " + q(ours) + " " + q(ref_path) + " " + flag + " " + q(model), 1);
        EXPECT_EQ(j["first_divergence"]["name"], "Qcur-0#3");
        ASSERT_TRUE(doctor_has(j, "rope", false)) << j["doctor"].dump();
        EXPECT_NE(j["doctor"][0]["verdict"].get<std::string>().find("instead of halves (NEOX)"), std::string::npos)
            << j["doctor"].dump();
    }
    // The text output says so too.
    auto text = run_layerscope("compare " + q(ours) + " " + q(ref_path) + " -m " + q(model));
    EXPECT_EQ(text.exit_code, 1);
    EXPECT_NE(text.out.find("doctor: Qcur-0#3 matches the reference if RoPE is"), std::string::npos) << text.out;
    std::filesystem::remove_all(dir);
}

// For two dumps the local error runs the model's op on our engine's own inputs and checks our
// engine's output: the op that is wrong is local, everything after it only inherited the error.
TEST(DoctorDumps, TwoDumpsWithTheModelNameTheLocalOp) {
    LS_REQUIRE_FIXTURES();
    const std::string model = fixture_path("models/stories260K.gguf");
    const std::string ref_path = fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
    auto ref = ReferenceDump::open(ref_path);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const std::string dir = test::make_temp_dir();
    const std::string ours = dir + "/engine.gguf";
    write_engine_dump(model, *ref.value(), Fault::kRopeWrongPairing, {}, ours);

    const nlohmann::json plain = run_layerscope_json("compare " + q(ours) + " " + q(ref_path), 1);
    EXPECT_FALSE(plain.contains("local_error")) << "no model, no op to run";

    const nlohmann::json j = run_layerscope_json("compare " + q(ours) + " " + q(ref_path) + " -m " + q(model), 1);
    ASSERT_TRUE(j.contains("local_error")) << j.dump();
    EXPECT_EQ(j["local_error"]["origin"], "Qcur-0#3") << j["local_error"].dump();
    EXPECT_GT(j["local_error"]["inherited"].get<int>(), 10) << j["local_error"].dump();
    std::map<std::string, std::string> origin;
    for (const auto& e : j["events"])
        if (e.contains("origin")) origin[e["name"]] = e["origin"];
    EXPECT_EQ(origin["Qcur-0#3"], "local");
    EXPECT_EQ(origin["Kcur-0#3"], "local");  // the same wrong RoPE on K
    EXPECT_EQ(origin["l_out-0"], "inherited");
    EXPECT_EQ(origin["attn_norm-1"], "inherited");

    auto text = run_layerscope("compare " + q(ours) + " " + q(ref_path) + " -m " + q(model));
    EXPECT_NE(text.out.find("local error: the bug is local to Qcur-0#3"), std::string::npos) << text.out;
    std::filesystem::remove_all(dir);
}

TEST(DoctorDumps, TheLoaderReadsOnlyTheDivergentEventsLayer) {
    LS_REQUIRE_FIXTURES();
    const std::string model = fixture_path("models/stories260K.gguf");
    auto ref = ReferenceDump::open(fixture_path("dumps/stories260K_once_n0_fa-off.gguf"));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const std::string dir = test::make_temp_dir();
    const std::string ours_path = dir + "/engine.gguf";
    write_engine_dump(model, *ref.value(), Fault::kRmsNormWeightTwice, {}, ours_path);
    auto ours = ReferenceDump::open(ours_path);
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    CompareRunResult r = compare_dumps(*ours.value(), *ref.value(), {}, 1);
    load_doctor_inputs(r, *ours.value());
    ASSERT_GE(r.summary.first_divergent, 0);
    EXPECT_EQ(r.comparisons[r.summary.first_divergent].name, "attn_norm-0");
    for (const CapturedEvent& e : r.captures.events) {
        const bool layer0_or_before = e.name == "embd" || e.name == "norm-0" || e.name == "attn_norm-0";
        EXPECT_EQ(!e.data.empty(), layer0_or_before) << e.name;
    }
    std::filesystem::remove_all(dir);
}

TEST(DoctorDumps, ADumpOfLayerOutputsOnlyIsDiagnosedByReRunningTheSpan) {
    LS_REQUIRE_FIXTURES();
    const std::string model = fixture_path("models/stories260K.gguf");
    const std::string ref_path = fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
    auto ref = ReferenceDump::open(ref_path);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const std::string dir = test::make_temp_dir();
    const std::string ours = dir + "/l_out.gguf";
    write_engine_dump(model, *ref.value(), Fault::kRopeWrongPairing, {"l_out-*"}, ours);

    const nlohmann::json plain = run_layerscope_json("compare " + q(ours) + " " + q(ref_path), 1);
    EXPECT_EQ(plain["first_divergence"]["name"], "l_out-0");
    EXPECT_TRUE(plain["doctor"].empty()) << plain["doctor"].dump();

    const nlohmann::json j = run_layerscope_json("compare " + q(ours) + " " + q(ref_path) + " -m " + q(model), 1);
    EXPECT_EQ(j["first_divergence"]["name"], "l_out-0");
    ASSERT_EQ(j["doctor"].size(), 1u) << j["doctor"].dump();  // no other fault reproduces it
    const auto& f = j["doctor"][0];
    EXPECT_EQ(f["transform"], "re-run:rope-pairing");
    EXPECT_EQ(f["from_rerun"], true);
    const std::string verdict = f["verdict"];
    EXPECT_NE(verdict.find("the embeddings and layer 0 (embd .. l_out-0"), std::string::npos) << verdict;
    EXPECT_NE(verdict.find("NORM vs NEOX"), std::string::npos) << verdict;
    EXPECT_GT(f["nmse_before"].get<double>(), 1e-3);
    EXPECT_LT(f["nmse_after"].get<double>(), 1e-10);  // the same build's arithmetic: ours, reproduced
    auto text = run_layerscope("compare " + q(ours) + " " + q(ref_path) + " -m " + q(model));
    EXPECT_NE(text.out.find("doctor: the embeddings and layer 0"), std::string::npos) << text.out;
    std::printf("%s", text.out.substr(text.out.find("first divergence")).c_str());
    std::filesystem::remove_all(dir);
}

// An engine that dumps only what goes into its q projection and what comes out of its o
// projection, on a quantized model: the span between them is re-run.
TEST(DoctorDumps, ADumpOfProjectionsOnlyIsDiagnosedByReRunningTheSpan) {
    LS_REQUIRE_FIXTURES();
    const std::string model = fixture_path("models/qwen2-mini-Q8_0.gguf");
    const std::string ref_path = fixture_path("dumps/qwen2-mini-Q8_0_france_n0_nocache.gguf");
    auto ref = ReferenceDump::open(ref_path);
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    const std::string dir = test::make_temp_dir();
    const std::string ours = dir + "/proj.gguf";
    write_engine_dump(model, *ref.value(), Fault::kQkvBiasDropped, {"attn_norm-*", "attn_out-*"}, ours);

    const nlohmann::json j = run_layerscope_json("compare " + q(ours) + " " + q(ref_path) + " --model " + q(model), 1);
    EXPECT_EQ(j["first_divergence"]["name"], "attn_out-0");
    ASSERT_TRUE(doctor_has(j, "re-run:qkv-bias-dropped", true)) << j["doctor"].dump();
    const std::string verdict = j["doctor"][0]["verdict"];
    EXPECT_NE(verdict.find("layer 0 attention (Qcur-0 .. attn_out-0"), std::string::npos) << verdict;
    std::filesystem::remove_all(dir);
}

TEST(DoctorDumps, ATransposedQuantizedWeightIsJudgedAgainstItsFormatsFloor) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(fixture_path("models/llama-gqa-mini-Q4_K_M.gguf"));
    ASSERT_TRUE(model.ok()) << model.error().message;
    auto ref = ReferenceDump::open(fixture_path("dumps/llama-gqa-mini-Q4_K_M_boy_n4_fa-off_nocache.gguf"));
    ASSERT_TRUE(ref.ok()) << ref.error().message;
    auto backend = make_cpu_backend(0);
    CompareRunOptions options;
    options.forward.fault = Fault::kTransposedWeight;
    options.forward.n_ubatch = ref.value()->n_ubatch();
    options.n_decode = 1;
    auto run = compare_with_reference(*model.value(), *backend, *ref.value(), options);
    ASSERT_TRUE(run.ok()) << run.error().message;
    const CompareRunResult& r = run.value();
    ASSERT_GE(r.summary.first_divergent, 0);
    EXPECT_EQ(r.comparisons[r.summary.first_divergent].name, "Qcur-0");
    const DoctorReport d = diagnose(r, static_cast<size_t>(r.summary.first_divergent), *ref.value(), model.value().get(), {});
    ASSERT_FALSE(d.findings.empty()) << "no transform explains the transposed Q4_K weight";
    const DoctorFinding& f = d.findings.front();
    EXPECT_EQ(f.transform, "transpose") << f.verdict;
    EXPECT_GT(f.nmse_before, 0.1);
    // Above the fixed bar, below ten times the floor the Q4_K format leaves in llama mode.
    EXPECT_GT(f.nmse_after, 1e-5);
    EXPECT_GT(f.floor_nmse, 1e-6);
    EXPECT_LE(f.nmse_after, 10 * f.floor_nmse);
    EXPECT_NE(f.verdict.find("noise floor"), std::string::npos) << f.verdict;
    EXPECT_NE(f.verdict.find("blk.0.attn_q.weight's q4_K format"), std::string::npos) << f.verdict;
}

}  // namespace
}  // namespace ls
