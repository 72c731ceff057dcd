// Engines' dumps as their authors write them: .npy files under the engine's own names (Hugging
// Face module paths, Meta / llama2.c names, a custom name map) in token-first or heads-first
// layout, with a planted RoPE bug, compared with llama.cpp's dump of the same prompt: they pair
// without renaming, the first divergence is the right event, and a dump that pairs nothing or too
// little exits 2 with suggestions. Also: a manifest's prompt_tokens, rows kept on either side, and
// `export --from` of such a folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/compare/reference_formats.h"
#include "engine/compare/tensor_names.h"
#include "engine/forward/forward.h"
#include "engine/gguf/gguf.h"
#include "tests/test_support.h"

namespace {

using ls::test::fixture_path;
using ls::test::run_layerscope;

std::string q(const std::string& path) { return "'" + path + "'"; }

const std::vector<int32_t> kTokens = {1, 403, 407, 261, 378};  // "Once upon a time", as the fixture dump
constexpr const char* kModel = "models/stories260K.gguf";
constexpr const char* kDump = "dumps/stories260K_once_n0_fa-off.gguf";
constexpr int kLayers = 5;

struct Captured {
    std::vector<int64_t> ne;  // ggml order
    std::vector<float> data;
};

class Collect : public ls::EventSink {
public:
    std::map<std::string, Captured> events;
    void on_event(const ls::Event& e) override {
        Captured c;
        c.ne.assign(e.tensor.ne, e.tensor.ne + 4);
        c.data.resize(static_cast<size_t>(e.tensor.n_elements()));
        e.backend->download(c.data.data(), e.tensor.data, c.data.size() * sizeof(float));
        events[e.dump_name()] = std::move(c);
    }
};

// Our run of stories260K on the fixture's prompt, as an engine of the user's would compute it.
std::map<std::string, Captured> run_engine(ls::Fault fault, bool all_rows, const char* model_path = kModel,
                                           const std::vector<int32_t>& tokens = kTokens) {
    auto model = ls::Model::open(fixture_path(model_path));
    EXPECT_TRUE(model);
    auto backend = ls::open_backend("cpu", 1);
    EXPECT_TRUE(backend);
    ls::ForwardOptions fo;
    fo.n_ctx = 256;
    fo.fault = fault;
    fo.all_logits = all_rows;
    auto forward = ls::make_forward(*model.value(), *backend.value().backend, fo);
    EXPECT_TRUE(forward);
    Collect sink;
    EXPECT_TRUE(forward.value()->eval(tokens, &sink));
    return std::move(sink.events);
}

enum class Layout { kTokenFirst, kHeadsFirst };

// One tensor the engine dumps: llama.cpp's name of the event, the engine's name for it, its layout.
struct Entry {
    std::string event, name;
    Layout layout = Layout::kTokenFirst;
};

// Writes `entries` of `events` as the engine would: .npy arrays in numpy's natural shapes (token
// first: (T, features) or (T, n_head, head_dim); heads first: (n_head, T, head_dim)) and a
// manifest with the prompt's tokens and no layout hints.
void write_engine_dump(const std::string& dir, const std::map<std::string, Captured>& events, const std::vector<Entry>& entries,
                       const std::vector<int32_t>& tokens = kTokens) {
    std::filesystem::create_directories(dir);
    nlohmann::json m = {{"format", "layerscope-npy"}, {"version", 1}, {"tensors", nlohmann::json::array()},
                        {"prompt_tokens", tokens}};
    int k = 0;
    for (const Entry& e : entries) {
        auto it = events.find(e.event);
        ASSERT_NE(it, events.end()) << e.event;
        const Captured& c = it->second;
        std::vector<int64_t> shape;
        std::vector<float> data = c.data;
        int last = 3;
        while (last > 0 && c.ne[last] == 1) --last;
        if (e.layout == Layout::kHeadsFirst) {
            // ggml [head_dim, n_head, T] -> numpy (n_head, T, head_dim)
            const int64_t hd = c.ne[0], nh = c.ne[1], T = c.ne[2];
            shape = {nh, T, hd};
            for (int64_t h = 0; h < nh; ++h)
                for (int64_t t = 0; t < T; ++t)
                    for (int64_t d = 0; d < hd; ++d) data[(h * T + t) * hd + d] = c.data[(t * nh + h) * hd + d];
        } else {
            for (int i = last; i >= 0; --i) shape.push_back(c.ne[i]);  // (T, ..., ne0): row-major as held
        }
        const std::string file = "t" + std::to_string(k++) + ".npy";
        ASSERT_TRUE(ls::write_npy(dir + "/" + file, "<f4", shape, data.data()));
        m["tensors"].push_back({{"name", e.name}, {"file", file}});
    }
    std::ofstream(dir + "/manifest.json") << m.dump(1);
}

// What a Hugging Face (hf) or Meta (meta) engine dumps of one forward pass, by the event it is.
// `biases`: q/k/v projections with a bias (qwen2), whose output is llama.cpp's second occurrence.
std::vector<Entry> convention_entries(const std::string& convention, int layers = kLayers, bool biases = false) {
    const bool hf = convention == "hf";
    std::vector<Entry> out{{"embd", hf ? "model.embed_tokens" : "tok_embeddings"}};
    for (int l = 0; l < layers; ++l) {
        const std::string n = std::to_string(l);
        const std::string p = hf ? "model.layers." + n + "." : "layers." + n + ".";
        auto add = [&](const std::string& event, const std::string& hf_name, const std::string& meta_name) {
            const bool projection = event == "Qcur" || event == "Kcur" || event == "Vcur";
            out.push_back({event + "-" + n + (projection && biases ? "#2" : ""), p + (hf ? hf_name : meta_name)});
        };
        add("attn_norm", "input_layernorm", "attention_norm");
        add("Qcur", "self_attn.q_proj", "attention.wq");
        add("Kcur", "self_attn.k_proj", "attention.wk");
        add("Vcur", "self_attn.v_proj", "attention.wv");
        add("attn_out", "self_attn.o_proj", "attention.wo");
        add("ffn_norm", "post_attention_layernorm", "ffn_norm");
        add("ffn_gate", "mlp.gate_proj", "feed_forward.w1");
        add("ffn_up", "mlp.up_proj", "feed_forward.w3");
        add("ffn_out", "mlp.down_proj", "feed_forward.w2");
        out.push_back({"l_out-" + n, hf ? "model.layers." + n : "layers." + n});
    }
    out.push_back({"result_norm", hf ? "model.norm" : "norm"});
    out.push_back({"result_output", hf ? "lm_head" : "output"});
    return out;
}

class EngineNames : public ::testing::Test {
protected:
    void SetUp() override {
        if (!ls::test::have_fixtures()) GTEST_SKIP() << "../shared/fixtures not found; these tests need the llama.cpp dumps";
        dir_ = ls::test::make_temp_dir();
    }
    void TearDown() override {
        if (!dir_.empty()) std::filesystem::remove_all(dir_);
    }
    std::string dir_;
};

TEST_F(EngineNames, HuggingFaceAndMetaNamesPairAndFindTheRopeBug) {
    const auto buggy = run_engine(ls::Fault::kRopeWrongPairing, false);
    const auto clean = run_engine(ls::Fault::kNone, false);
    for (const std::string convention : {"hf", "meta"}) {
        SCOPED_TRACE(convention);
        const std::string bad = dir_ + "/" + convention + "-bug", good = dir_ + "/" + convention + "-clean";
        write_engine_dump(bad, buggy, convention_entries(convention));
        write_engine_dump(good, clean, convention_entries(convention));

        auto ok = run_layerscope("compare " + q(good) + " " + q(fixture_path(kDump)), true);
        EXPECT_EQ(ok.exit_code, 0) << ok.out;
        EXPECT_NE(ok.out.find("names:     ours " + convention + " (53 renamed), reference llama"), std::string::npos) << ok.out;
        EXPECT_NE(ok.out.find("53 events, 53 compared"), std::string::npos) << ok.out;

        // The roped Q is not among the modules: the bug shows first in the attention output.
        auto r = run_layerscope("compare --json " + q(bad) + " " + q(fixture_path(kDump)));
        EXPECT_EQ(r.exit_code, 1) << r.out;
        auto doc = nlohmann::json::parse(r.out);
        EXPECT_EQ(doc["names"]["ours"]["convention"], convention);
        EXPECT_EQ(doc["first_divergence"]["name"], "attn_out-0");
        EXPECT_EQ(doc["first_divergence"]["source_name"],
                  convention == "hf" ? "model.layers.0.self_attn.o_proj" : "layers.0.attention.wo");
        EXPECT_EQ(doc["summary"]["compared"], 53);
        // The projections before it agree: q_proj is llama.cpp's Qcur-0.
        EXPECT_EQ(doc["events"][2]["reference"], "Qcur-0");
        EXPECT_EQ(doc["events"][2]["status"], "ok");

        // With the model: the doctor re-runs the span the dump skips and names the pairing; the
        // local error of attn_out-0 needs the attention output the modules do not dump.
        auto d = run_layerscope("compare --json " + q(bad) + " " + q(fixture_path(kDump)) + " -m " + q(fixture_path(kModel)));
        EXPECT_EQ(d.exit_code, 1) << d.out;
        auto diag = nlohmann::json::parse(d.out);
        ASSERT_FALSE(diag["doctor"].empty()) << d.out;
        EXPECT_EQ(diag["doctor"][0]["transform"], "re-run:rope-pairing") << diag["doctor"].dump();
        EXPECT_TRUE(diag["first_divergence"]["origin"].is_null()) << diag["first_divergence"].dump();
        EXPECT_NE(diag["first_divergence"]["origin_why"].get<std::string>().find("our dump has no"), std::string::npos)
            << diag["first_divergence"].dump();

        // The same with the names given explicitly, and the engine's dump as the reference.
        auto named = run_layerscope("compare --names " + convention + " " + q(bad) + " " + q(fixture_path(kDump)));
        EXPECT_EQ(named.exit_code, 1) << named.out;
        auto swapped = run_layerscope("compare -m " + q(fixture_path(kModel)) + " -r " + q(good));
        EXPECT_EQ(swapped.exit_code, 0) << swapped.out;
        auto swapped_bug = run_layerscope("compare -m " + q(fixture_path(kModel)) + " -r " + q(bad));
        EXPECT_EQ(swapped_bug.exit_code, 1) << swapped_bug.out;
        EXPECT_NE(swapped_bug.out.find(std::string("first divergence: attn_out-0 (event 15, the reference's ") +
                                       (convention == "hf" ? "model.layers.0.self_attn.o_proj" : "layers.0.attention.wo") + ")"),
                  std::string::npos) << swapped_bug.out;
    }
}

TEST_F(EngineNames, QwenProjectionsPairWithTheirBiasAdded) {
    // qwen2 adds a bias after each q/k/v product: q_proj's output is llama.cpp's Qcur-N#2 (ADD).
    const std::string dump = fixture_path("dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf");
    auto ref = ls::ReferenceDump::open(dump);
    ASSERT_TRUE(ref);
    const std::vector<int32_t> tokens = ref.value()->prompt_tokens();
    auto model = ls::Model::open(fixture_path("models/qwen2-mini-F16.gguf"));
    ASSERT_TRUE(model);
    const int layers = static_cast<int>(model.value()->config().n_layer);
    write_engine_dump(dir_ + "/qwen", run_engine(ls::Fault::kNone, false, "models/qwen2-mini-F16.gguf", tokens),
                      convention_entries("hf", layers, true), tokens);
    auto r = run_layerscope("compare --json " + q(dir_ + "/qwen") + " " + q(dump));
    EXPECT_EQ(r.exit_code, 0) << r.out;
    auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["summary"]["compared"], 3 + 10 * layers);
    EXPECT_EQ(doc["events"][2]["source_name"], "model.layers.0.self_attn.q_proj");
    EXPECT_EQ(doc["events"][2]["reference"], "Qcur-0#2");
    EXPECT_EQ(doc["events"][2]["status"], "ok");
    // Our run with the engine's dump as the reference: the model has the biases.
    auto m = run_layerscope("compare -m " + q(fixture_path("models/qwen2-mini-F16.gguf")) + " -r " + q(dir_ + "/qwen"));
    EXPECT_EQ(m.exit_code, 0) << m.out;
}

TEST_F(EngineNames, AMapFileWithHeadsFirstQueriesFindsTheRopedQ) {
    const std::string map = dir_ + "/names.json";
    std::ofstream(map) << R"({"format": "layerscope-names", "version": 1, "map": [
        {"pattern": "blocks.{layer}.attn.q", "name": "Qcur-{layer}"},
        {"pattern": "blocks.{layer}.attn.q_rot", "name": "Qcur-{layer}#3", "layout": "heads-first"},
        {"pattern": "blocks.{layer}.attn.out", "name": "attn_out-{layer}"},
        {"pattern": "blocks.{layer}.resid_mid", "name": "ffn_inp-{layer}", "layout": "token-first"},
        {"pattern": "blocks.{layer}", "name": "l_out-{layer}"}]})";
    std::vector<Entry> entries;
    for (int l = 0; l < kLayers; ++l) {
        const std::string n = std::to_string(l);
        entries.push_back({"Qcur-" + n, "blocks." + n + ".attn.q"});
        entries.push_back({"Qcur-" + n + "#3", "blocks." + n + ".attn.q_rot", Layout::kHeadsFirst});
        entries.push_back({"attn_out-" + n, "blocks." + n + ".attn.out"});
        entries.push_back({"ffn_inp-" + n, "blocks." + n + ".resid_mid"});
        if (l < kLayers - 1) entries.push_back({"l_out-" + n, "blocks." + n});
    }
    write_engine_dump(dir_ + "/clean", run_engine(ls::Fault::kNone, false), entries);
    write_engine_dump(dir_ + "/bug", run_engine(ls::Fault::kRopeWrongPairing, false), entries);

    auto ok = run_layerscope("compare --names " + q(map) + " " + q(dir_ + "/clean") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(ok.exit_code, 0) << ok.out;
    EXPECT_NE(ok.out.find("(24 renamed, 5 re-laid)"), std::string::npos) << ok.out;

    auto r = run_layerscope("compare --names " + q(map) + " " + q(dir_ + "/bug") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("first divergence: blocks.0.attn.q_rot (Qcur-0#3) (event 1)"), std::string::npos) << r.out;

    // With the model: the doctor re-runs the span from the q projection (the reshape between is not
    // dumped) and names the pairing, and the local error finds RoPE itself wrong (the model's RoPE
    // on the engine's own q gives llama.cpp's roped Q, not the engine's).
    auto d = run_layerscope("compare --json --names " + q(map) + " " + q(dir_ + "/bug") + " " + q(fixture_path(kDump)) +
                            " -m " + q(fixture_path(kModel)));
    EXPECT_EQ(d.exit_code, 1) << d.out;
    auto doc = nlohmann::json::parse(d.out);
    EXPECT_EQ(doc["first_divergence"]["name"], "Qcur-0#3");
    EXPECT_EQ(doc["first_divergence"]["origin"], "local") << doc["first_divergence"].dump();
    EXPECT_EQ(doc["local_error"]["origin"], "Qcur-0#3") << doc["local_error"].dump();
    ASSERT_FALSE(doc["doctor"].empty());
    EXPECT_EQ(doc["doctor"][0]["transform"], "re-run:rope-pairing") << doc["doctor"].dump();
    // The attention output's own op needs what the engine did not dump: unknown, and why.
    for (const auto& e : doc["events"])
        if (e["name"] == "attn_out-0") {
            EXPECT_TRUE(e["origin"].is_null()) << e.dump();
            EXPECT_EQ(e["origin_why"], "our dump has no kqv_out-0") << e.dump();
        }

    // Without the map these names pair with nothing.
    auto none = run_layerscope("compare " + q(dir_ + "/clean") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(none.exit_code, 2) << none.out;
}

TEST_F(EngineNames, BadMapFilesAreNamedWithTheEntry) {
    const std::string dump = fixture_path(kDump);
    auto write = [&](const std::string& text) {
        std::ofstream(dir_ + "/map.json") << text;
        return run_layerscope("compare --names " + q(dir_ + "/map.json") + " " + q(dump) + " " + q(dump), true);
    };
    auto bad_json = write("{\"format\": ");
    EXPECT_EQ(bad_json.exit_code, 3) << bad_json.out;
    EXPECT_NE(bad_json.out.find("map.json: not valid JSON"), std::string::npos) << bad_json.out;
    auto bad_layout = write(R"({"format": "layerscope-names", "version": 1, "map": [
        {"pattern": "a.{layer}", "name": "l_out-{layer}"}, {"pattern": "b.{layer}", "name": "Qcur-{layer}", "layout": "sideways"}]})");
    EXPECT_EQ(bad_layout.exit_code, 3) << bad_layout.out;
    EXPECT_NE(bad_layout.out.find("map.json: map entry 1 (\"b.{layer}\"): \"layout\" must be"), std::string::npos) << bad_layout.out;
    auto bad_name = write(R"({"format": "layerscope-names", "version": 1, "map": [{"pattern": "a", "name": "l_out-{layer}"}]})");
    EXPECT_EQ(bad_name.exit_code, 3) << bad_name.out;
    EXPECT_NE(bad_name.out.find("map entry 0 (\"a\"): \"name\" uses \"{layer}\""), std::string::npos) << bad_name.out;
    auto unknown = run_layerscope("compare --names nonsense " + q(dump) + " " + q(dump), true);
    EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
    EXPECT_NE(unknown.out.find("--names \"nonsense\": neither auto, llama, hf, meta"), std::string::npos) << unknown.out;
}

TEST_F(EngineNames, ADumpThatPairsNothingExitsTwoWithSuggestions) {
    // An engine's own names that no convention knows, the roped Q among them.
    std::vector<Entry> entries = convention_entries("hf");
    for (Entry& e : entries) e.name = "net." + e.name;
    entries.insert(entries.begin() + 3, Entry{"Qcur-0#3", "net.layers.0.self_attn.rotary_q"});
    write_engine_dump(dir_ + "/own", run_engine(ls::Fault::kRopeWrongPairing, false), entries);

    auto r = run_layerscope("compare " + q(dir_ + "/own") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("54 events, 0 compared"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"net.layers.0.self_attn.rotary_q\" [8, 8, 5]: no known name; nearest by shape and order: "),
              std::string::npos) << r.out;

    auto j = run_layerscope("compare --json " + q(dir_ + "/own") + " " + q(fixture_path(kDump)));
    EXPECT_EQ(j.exit_code, 2);
    auto doc = nlohmann::json::parse(j.out);
    EXPECT_EQ(doc["pairing"]["paired"], 0);
    EXPECT_EQ(doc["pairing"]["unpaired_side"], "ours");
    ASSERT_GE(doc["unpaired"].size(), 4u);
    const auto& rotary = doc["unpaired"][3];
    EXPECT_EQ(rotary["name"], "net.layers.0.self_attn.rotary_q");
    std::vector<std::string> suggested;
    for (const auto& s : rotary["suggestions"]) suggested.push_back(s["name"]);
    EXPECT_NE(std::find(suggested.begin(), suggested.end(), "Qcur-0#3"), suggested.end()) << rotary.dump();
    // The q projection's own suggestions start with tensors of its shape, [64, 5].
    EXPECT_EQ(doc["unpaired"][2]["suggestions"][0]["ne"], nlohmann::json({64, 5, 1, 1}));
}

TEST_F(EngineNames, ADumpPairingUnderTheShareExitsTwo) {
    // Only the embeddings and the layer outputs carry names a convention knows: 6 of 53.
    std::vector<Entry> entries = convention_entries("hf");
    for (Entry& e : entries)
        if (e.name != "model.embed_tokens" && e.event.rfind("l_out-", 0) != 0) e.name = "net." + e.name;
    write_engine_dump(dir_ + "/few", run_engine(ls::Fault::kNone, false), entries);
    auto r = run_layerscope("compare " + q(dir_ + "/few") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("only 6 of the 53 tensors on the smaller side (ours) paired (11%, below --min-paired 0.5)"),
              std::string::npos) << r.out;
    EXPECT_NE(r.out.find("47 of our tensors did not pair"), std::string::npos) << r.out;
    auto lenient = run_layerscope("compare --min-paired 0.1 " + q(dir_ + "/few") + " " + q(fixture_path(kDump)), true);
    EXPECT_EQ(lenient.exit_code, 0) << lenient.out;
}

TEST_F(EngineNames, TheManifestsPromptTokensAreUsed) {
    write_engine_dump(dir_ + "/clean", run_engine(ls::Fault::kNone, false), convention_entries("hf"));
    auto r = run_layerscope("compare -m " + q(fixture_path(kModel)) + " -r " + q(dir_ + "/clean"), true);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("first divergence: none"), std::string::npos) << r.out;
}

TEST_F(EngineNames, RowsPairWhicheverSideKeptOnlyTheOutputRows) {
    // The engine keeps every row of its last layer and every token's logits; llama.cpp and our
    // run keep the last token's.
    write_engine_dump(dir_ + "/all", run_engine(ls::Fault::kNone, true), convention_entries("hf"));
    for (const std::string& args : {"compare " + q(fixture_path(kDump)) + " " + q(dir_ + "/all"),
                                    "compare " + q(dir_ + "/all") + " " + q(fixture_path(kDump)),
                                    "compare -m " + q(fixture_path(kModel)) + " -r " + q(dir_ + "/all") + " --tokens 1,403,407,261,378"}) {
        SCOPED_TRACE(args);
        auto r = run_layerscope(args + " --all", true);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(r.out.find("cannot be paired"), std::string::npos) << r.out;
    }
    auto j = run_layerscope("compare --json " + q(fixture_path(kDump)) + " " + q(dir_ + "/all"));
    auto doc = nlohmann::json::parse(j.out);
    bool seen = false;
    for (const auto& e : doc["events"])
        if (e["name"] == "l_out-4") {
            seen = true;
            EXPECT_EQ(e["note"], "the reference's last row") << e.dump();
        }
    EXPECT_TRUE(seen);
}

TEST_F(EngineNames, ExportFromAnEngineFolderWritesADumpCompareAccepts) {
    write_engine_dump(dir_ + "/clean", run_engine(ls::Fault::kNone, false), convention_entries("meta"));
    const std::string gguf = dir_ + "/engine.gguf";
    auto e = run_layerscope("export --from " + q(dir_ + "/clean") + " --gguf " + q(gguf), true);
    ASSERT_EQ(e.exit_code, 0) << e.out;
    // The context and batch the engine's tokens need: 5 prompt tokens in one batch.
    auto written = ls::GgufFile::open(gguf);
    ASSERT_TRUE(written);
    EXPECT_EQ(written.value()->get_int("dump.n_ctx", 0), 256);
    EXPECT_EQ(written.value()->get_int("dump.n_ubatch", 0), 5);
    auto r = run_layerscope("compare -m " + q(fixture_path(kModel)) + " -r " + q(gguf), true);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("names:     reference meta (53 renamed)"), std::string::npos) << r.out;
}

TEST(TensorNames, ConventionsMapModulePathsToLlamaNames) {
    // The rules by themselves, on a dump of empty-named tensors: renaming and the bias occurrence.
    std::vector<ls::RefTensor> tensors(4);
    const char* names[] = {"model.model.layers.3.self_attn.k_proj", "layers.2.mlp.down_proj", "lm_head", "model.layers.7"};
    for (int i = 0; i < 4; ++i) tensors[i].name = tensors[i].base_name = names[i];
    auto dump = ls::ReferenceDump::from_tensors("t", tensors, {});
    auto report = ls::apply_names(*dump, {ls::llama_names(), ls::hf_names()}, [](const std::string& base) { return base == "Kcur-3"; });
    ASSERT_TRUE(report);
    EXPECT_EQ(report->convention, "hf");
    EXPECT_EQ(report->renamed, 4);
    EXPECT_EQ(dump->tensors()[0].name, "Kcur-3#2");  // the projection with its bias: llama.cpp's ADD
    EXPECT_EQ(dump->tensors()[0].source_name, "model.model.layers.3.self_attn.k_proj");
    EXPECT_EQ(dump->tensors()[1].name, "ffn_out-2");
    EXPECT_EQ(dump->tensors()[2].name, "result_output");
    EXPECT_EQ(dump->tensors()[3].name, "l_out-7");
    EXPECT_TRUE(dump->find("l_out-7"));
}

}  // namespace

namespace {

TEST(TensorNames, AZeroBatchSizeIsRefusedWithTheValues) {
    LS_REQUIRE_FIXTURES();
    auto model = ls::Model::open(fixture_path(kModel));
    ASSERT_TRUE(model);
    auto backend = ls::open_backend("cpu", 1);
    ASSERT_TRUE(backend);
    ls::ForwardOptions fo;
    fo.n_ctx = 256;
    fo.n_ubatch = 0;  // what a dump recording dump.n_ubatch 0 asks for
    auto forward = ls::make_forward(*model.value(), *backend.value().backend, fo);
    ASSERT_FALSE(forward);
    EXPECT_EQ(forward.error().message, "n_ctx (256) and n_ubatch (0) must be positive");
}

}  // namespace
