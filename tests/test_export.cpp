// Export: GGUF and .npy round trips through ReferenceDump::open, refusal to overwrite, nothing left
// behind by a cancelled export, nothing of the user's lost to one (folders that appear while it
// runs, --force on a folder that is not an export, concurrent exports, a FIFO, staging left by a
// killed export), and `layerscope export` end to end (exit codes, --from).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <thread>

#include "engine/capture/export.h"
#include "engine/compare/reference_formats.h"
#include "tests/test_support.h"

namespace ls {
namespace {

namespace fs = std::filesystem;

// Values whose bits a lossy path would change: NaN, -0, a denormal, infinities.
std::vector<float> awkward_values(size_t n, float seed) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = seed * static_cast<float>(i) - 1.5f + 1e-7f * static_cast<float>(i * i);
    if (n > 4) {
        v[0] = std::numeric_limits<float>::quiet_NaN();
        v[1] = -0.0f;
        v[2] = std::numeric_limits<float>::denorm_min();
        v[3] = -std::numeric_limits<float>::infinity();
    }
    return v;
}

ExportSet sample_set() {
    ExportSet set;
    set.info.tool = "test";
    set.info.prompt_tokens = {1, 403, 407};
    set.info.generated_tokens = {29, 7};
    set.tensors.push_back(make_export_tensor("attn_norm-0", {8, 3}, awkward_values(24, 0.25f)));
    set.tensors.push_back(make_export_tensor("Qcur-0", {4, 2, 3}, awkward_values(24, -0.5f)));
    set.tensors.push_back(make_export_tensor("Qcur-0#3", {4, 2, 3}, awkward_values(24, 0.125f)));
    set.tensors.push_back(make_export_tensor("Qcur-0#3@1", {4, 2, 1}, awkward_values(8, 3.0f)));
    set.tensors.push_back(make_export_tensor("l_out-0@2.1", {8}, awkward_values(8, 1.0f)));
    ExportTensor logits = make_export_tensor("llama_logits@1", {16}, awkward_values(16, 2.0f));
    logits.kind = RefKind::kLogits;
    logits.op = "LLAMA_GET_LOGITS";
    set.tensors.push_back(logits);
    return set;
}

void expect_same(const ExportSet& set, const ReferenceDump& dump) {
    ASSERT_EQ(dump.tensors().size(), set.tensors.size());
    for (size_t i = 0; i < set.tensors.size(); ++i) {
        const ExportTensor& want = set.tensors[i];
        SCOPED_TRACE(want.dump_name());
        const RefTensor& got = dump.tensors()[i];  // execution order is kept
        EXPECT_EQ(got.name, want.dump_name());
        EXPECT_EQ(got.base_name, want.base_name);
        EXPECT_EQ(got.occurrence, want.occurrence);
        EXPECT_EQ(got.decode, want.decode);
        EXPECT_EQ(got.ubatch, want.ubatch);
        EXPECT_EQ(got.kind, want.kind);
        EXPECT_EQ(got.stored_type, want.type);
        int64_t ne[4] = {1, 1, 1, 1};
        for (size_t k = 0; k < want.ne.size(); ++k) ne[k] = want.ne[k];
        for (int k = 0; k < 4; ++k) EXPECT_EQ(got.ne()[k], ne[k]) << "ne" << k;
        ASSERT_TRUE(got.complete());
        ASSERT_EQ(got.n_elements(), want.n_elements());
        EXPECT_EQ(std::memcmp(got.data, want.data, want.n_bytes()), 0) << "values are not bit-identical";
    }
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    return names;
}

TEST(Export, GgufRoundTripIsBitIdentical) {
    const std::string dir = test::make_temp_dir();
    const ExportSet set = sample_set();
    ExportOptions o;
    o.format = ExportFormat::kGgufDump;
    o.path = dir + "/out.gguf";
    auto r = export_tensors(set, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->n_tensors, set.tensors.size());
    EXPECT_FALSE(r->cancelled);
    auto dump = ReferenceDump::open(o.path);
    ASSERT_TRUE(dump) << dump.error().message;
    expect_same(set, *dump.value());
    EXPECT_EQ(dump.value()->prompt_tokens(), set.info.prompt_tokens);
    EXPECT_EQ(dump.value()->generated_tokens(), set.info.generated_tokens);
    EXPECT_EQ(entries(dir), std::vector<std::string>{"out.gguf"});
    fs::remove_all(dir);
}

TEST(Export, NpyRoundTripIsBitIdentical) {
    const std::string dir = test::make_temp_dir();
    const ExportSet set = sample_set();
    ExportOptions o;
    o.format = ExportFormat::kNpyFolder;
    o.path = dir + "/out/";  // a trailing slash names the same folder
    size_t calls = 0, last_done = 0, last_total = 0;
    o.progress = [&](size_t done, size_t total) {
        ++calls;
        last_done = done, last_total = total;
        return true;
    };
    auto r = export_tensors(set, o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_GE(calls, set.tensors.size());
    EXPECT_EQ(last_done, set.tensors.size());
    EXPECT_EQ(last_total, set.tensors.size());
    auto folder = load_npy_folder(dir + "/out");
    ASSERT_TRUE(folder) << folder.error().message;
    expect_same(set, *folder.value().dump);
    EXPECT_EQ(folder.value().prompt_tokens, set.info.prompt_tokens);
    EXPECT_EQ(folder.value().generated_tokens, set.info.generated_tokens);
    auto opened = ReferenceDump::open(dir + "/out");  // the generic entry point picks the folder reader
    ASSERT_TRUE(opened) << opened.error().message;
    EXPECT_EQ(entries(dir), std::vector<std::string>{"out"});
    fs::remove_all(dir);
}

TEST(Export, CapturesAreSelectedByGlobsInExecutionOrder) {
    CaptureMap captures;
    const char* names[][2] = {{"attn_norm-0", "attn_norm-0"}, {"Qcur-0", "Qcur-0"}, {"Qcur-0#2", "Qcur-0"},
                              {"attn_norm-1", "attn_norm-1"}};
    for (int i = 0; i < 4; ++i) {
        auto c = std::make_shared<CapturedTensor>();
        c->info.index = i;
        c->info.name = names[i][0];
        c->info.base_name = names[i][1];
        c->info.occurrence = i == 2 ? 2 : 1;
        c->info.ne[0] = 4;
        c->info.ne[1] = 2;
        c->values = std::make_shared<const std::vector<float>>(awkward_values(8, static_cast<float>(i)));
        captures.emplace(i, c);
    }
    ExportSet all = export_set_from_captures(captures, {});
    ASSERT_EQ(all.tensors.size(), 4u);
    EXPECT_EQ(all.tensors[2].dump_name(), "Qcur-0#2");
    ExportSet some = export_set_from_captures(captures, split_export_globs("Qcur-*, *-1"));
    ASSERT_EQ(some.tensors.size(), 3u);
    EXPECT_EQ(some.tensors[0].dump_name(), "Qcur-0");
    EXPECT_EQ(some.tensors[2].dump_name(), "attn_norm-1");

    const std::string dir = test::make_temp_dir();
    ExportOptions o;
    o.format = ExportFormat::kNpyFolder;
    o.path = dir + "/caps";
    ASSERT_TRUE(export_tensors(some, o));
    auto dump = ReferenceDump::open(o.path);
    ASSERT_TRUE(dump) << dump.error().message;
    expect_same(some, *dump.value());
    fs::remove_all(dir);
}

TEST(Export, RefusesToOverwriteUnlessAsked) {
    const std::string dir = test::make_temp_dir();
    const ExportSet set = sample_set();
    for (ExportFormat format : {ExportFormat::kGgufDump, ExportFormat::kNpyFolder}) {
        SCOPED_TRACE(export_format_name(format));
        ExportOptions o;
        o.format = format;
        o.path = dir + "/out." + export_format_name(format);
        ASSERT_TRUE(export_tensors(set, o));
        ExportSet smaller;
        smaller.tensors.push_back(set.tensors[0]);
        auto again = export_tensors(smaller, o);
        ASSERT_FALSE(again);
        EXPECT_EQ(again.error().code, ErrorCode::kUsage);  // exit 2, as a refusal to overwrite
        EXPECT_NE(again.error().message.find("already exists"), std::string::npos) << again.error().message;
        auto old = ReferenceDump::open(o.path);
        ASSERT_TRUE(old);
        EXPECT_EQ(old.value()->tensors().size(), set.tensors.size()) << "the refused export touched the old one";

        o.overwrite = true;
        auto replaced = export_tensors(smaller, o);
        ASSERT_TRUE(replaced) << replaced.error().message;
        auto now = ReferenceDump::open(o.path);
        ASSERT_TRUE(now);
        expect_same(smaller, *now.value());
    }
    // Even with overwrite, a folder that is not an earlier export is left alone.
    fs::create_directory(dir + "/precious");
    std::ofstream(dir + "/precious/notes.txt") << "keep me";
    ExportOptions o;
    o.format = ExportFormat::kNpyFolder;
    o.path = dir + "/precious";
    o.overwrite = true;
    auto refused = export_tensors(set, o);
    ASSERT_FALSE(refused);
    EXPECT_TRUE(fs::exists(dir + "/precious/notes.txt"));
    o.format = ExportFormat::kGgufDump;
    EXPECT_FALSE(export_tensors(set, o));
    EXPECT_TRUE(fs::exists(dir + "/precious/notes.txt"));
    fs::remove_all(dir);
}

TEST(Export, CancelledMidwayLeavesNothing) {
    const ExportSet set = sample_set();
    for (ExportFormat format : {ExportFormat::kGgufDump, ExportFormat::kNpyFolder}) {
        SCOPED_TRACE(export_format_name(format));
        const std::string dir = test::make_temp_dir();
        ExportOptions o;
        o.format = format;
        o.path = dir + "/out";
        o.progress = [](size_t done, size_t) { return done < 3; };  // gives up after three tensors
        auto r = export_tensors(set, o);
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_TRUE(r->cancelled);
        EXPECT_TRUE(entries(dir).empty()) << "left behind: " << entries(dir).front();

        // A cancel request from another thread works the same way, and an old export survives it.
        o.progress = nullptr;
        ASSERT_TRUE(export_tensors(set, o));
        std::atomic<bool> cancel{true};
        o.cancel = &cancel;
        o.overwrite = true;
        auto r2 = export_tensors(set, o);
        ASSERT_TRUE(r2);
        EXPECT_TRUE(r2->cancelled);
        EXPECT_EQ(entries(dir), std::vector<std::string>{"out"});
        fs::remove_all(dir);
    }
}

TEST(Export, RejectsBadSets) {
    const std::string dir = test::make_temp_dir();
    ExportOptions o;
    o.path = dir + "/x.gguf";
    auto empty = export_tensors(ExportSet{}, o);
    ASSERT_FALSE(empty);
    EXPECT_EQ(empty.error().code, ErrorCode::kUsage);
    ExportSet dup = sample_set();
    dup.tensors.push_back(dup.tensors[0]);
    EXPECT_FALSE(export_tensors(dup, o));
    o.path = dir + "/missing/x.gguf";
    auto no_parent = export_tensors(sample_set(), o);
    ASSERT_FALSE(no_parent);
    EXPECT_EQ(no_parent.error().code, ErrorCode::kIo);
    EXPECT_TRUE(entries(dir).empty());
    fs::remove_all(dir);
}

// ---- the command line ------------------------------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }

// A small synthetic model made by the CLI itself, so these tests need no fixtures.
std::string tiny_model(const std::string& dir) {
    const std::string path = dir + "/tiny.gguf";
    auto r = test::run_layerscope("make-model " + q(path) +
                                  " --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 64 --vocab 400");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return path;
}

TEST(ExportCli, ExitCodes) {
    const std::string dir = test::make_temp_dir();
    const std::string model = tiny_model(dir);
    // 2: usage (no output, two outputs, no source, nothing selected).
    EXPECT_EQ(test::run_layerscope("export --model " + q(model) + " --tokens 1,2,3").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("export --model " + q(model) + " --tokens 1,2 --gguf a.gguf --npy b").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("export --gguf " + q(dir + "/a.gguf")).exit_code, 2);
    EXPECT_EQ(test::run_layerscope("export --model " + q(model) + " --tokens 1,2 --events 'nothing-*' --gguf " +
                                   q(dir + "/a.gguf")).exit_code, 2);
    // 3: unreadable input.
    EXPECT_EQ(test::run_layerscope("export --model " + q(dir + "/absent.gguf") + " --tokens 1 --gguf " + q(dir + "/a.gguf"))
                  .exit_code, 3);
    EXPECT_EQ(test::run_layerscope("export --from " + q(dir + "/absent.gguf") + " --npy " + q(dir + "/a")).exit_code, 3);
    // 2: an output that cannot be written (its folder is a regular file; refused even to root),
    // never the undocumented 4.
    std::ofstream(dir + "/plain-file") << "not a folder\n";
    for (const std::string& out : {"--gguf " + q(dir + "/plain-file/run.gguf"), "--npy " + q(dir + "/plain-file/run")}) {
        auto unwritable = test::run_layerscope("export --model " + q(model) + " --tokens 1,2 " + out, true);
        EXPECT_EQ(unwritable.exit_code, 2) << unwritable.out;
        EXPECT_NE(unwritable.out.find("plain-file"), std::string::npos) << unwritable.out;
    }
    // 0, then 2 for an existing output, then 0 with --force.
    const std::string out = dir + "/run.gguf";
    auto ok = test::run_layerscope("export --model " + q(model) + " --tokens 1,2,3 -n 1 --events 'attn_norm-*,llama_logits*' --gguf " +
                                   q(out), true);
    ASSERT_EQ(ok.exit_code, 0) << ok.out;
    auto exists = test::run_layerscope("export --model " + q(model) + " --tokens 1,2,3 --gguf " + q(out), true);
    EXPECT_EQ(exists.exit_code, 2) << exists.out;
    EXPECT_NE(exists.out.find("--force"), std::string::npos) << exists.out;
    EXPECT_EQ(test::run_layerscope("export --model " + q(model) + " --tokens 1,2,3 --force --gguf " + q(out)).exit_code, 0);
    // The forced run exported every event; the dump reads back with the prompt.
    auto dump = ReferenceDump::open(out);
    ASSERT_TRUE(dump) << dump.error().message;
    EXPECT_EQ(dump.value()->prompt_tokens(), (std::vector<int32_t>{1, 2, 3}));
    EXPECT_NE(dump.value()->find("attn_norm-0"), nullptr);
    EXPECT_NE(dump.value()->find("result_output"), nullptr);
    fs::remove_all(dir);
}

TEST(ExportCli, SelectedEventsOfARunInBothFormatsAgree) {
    const std::string dir = test::make_temp_dir();
    const std::string model = tiny_model(dir);
    const std::string run = "export --model " + q(model) + " --tokens 5,6,7,8 -n 2 --events 'attn_norm-*,Qcur-0,llama_logits*' ";
    ASSERT_EQ(test::run_layerscope(run + "--gguf " + q(dir + "/a.gguf")).exit_code, 0);
    ASSERT_EQ(test::run_layerscope(run + "--npy " + q(dir + "/b")).exit_code, 0);
    auto a = ReferenceDump::open(dir + "/a.gguf");
    auto b = ReferenceDump::open(dir + "/b");
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    ASSERT_EQ(a.value()->tensors().size(), b.value()->tensors().size());
    bool saw_decode2 = false, saw_logits = false;
    for (size_t i = 0; i < a.value()->tensors().size(); ++i) {
        const RefTensor& x = a.value()->tensors()[i];
        const RefTensor& y = b.value()->tensors()[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_TRUE(x.base_name.rfind("attn_norm-", 0) == 0 || x.base_name == "Qcur-0" || x.base_name == "llama_logits")
            << x.name;
        saw_decode2 |= x.decode == 2;
        saw_logits |= x.kind == RefKind::kLogits && y.kind == RefKind::kLogits;
        ASSERT_EQ(x.n_elements(), y.n_elements());
        EXPECT_EQ(std::memcmp(x.data, y.data, static_cast<size_t>(x.n_elements()) * 4), 0) << x.name;
    }
    EXPECT_TRUE(saw_decode2);
    EXPECT_TRUE(saw_logits);
    fs::remove_all(dir);
}

TEST(ExportCli, FromFixtureDumpToNpyIsIdentical) {
    LS_REQUIRE_FIXTURES();
    const std::string src = test::fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
    const std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("export --from " + q(src) + " --npy " + q(dir + "/npy"), true);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto a = ReferenceDump::open(src);
    auto b = ReferenceDump::open(dir + "/npy");
    ASSERT_TRUE(a) << a.error().message;
    ASSERT_TRUE(b) << b.error().message;
    ASSERT_EQ(a.value()->tensors().size(), b.value()->tensors().size());
    for (size_t i = 0; i < a.value()->tensors().size(); ++i) {
        const RefTensor& x = a.value()->tensors()[i];
        const RefTensor& y = b.value()->tensors()[i];
        SCOPED_TRACE(x.name);
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.base_name, y.base_name);
        EXPECT_EQ(x.occurrence, y.occurrence);
        EXPECT_EQ(x.decode, y.decode);
        EXPECT_EQ(x.ubatch, y.ubatch);
        EXPECT_EQ(x.kind, y.kind);
        EXPECT_EQ(x.op, y.op);
        EXPECT_EQ(x.stored_type, y.stored_type);
        for (int k = 0; k < 4; ++k) EXPECT_EQ(x.ne()[k], y.ne()[k]);
        ASSERT_EQ(x.complete(), y.complete());
        if (x.complete()) {
            const size_t bytes = static_cast<size_t>(x.n_elements()) * (x.stored_type == GgmlType::I64 ? 8 : 4);
            EXPECT_EQ(std::memcmp(x.data, y.data, bytes), 0);
        }
    }
    auto folder = load_npy_folder(dir + "/npy");
    ASSERT_TRUE(folder);
    EXPECT_EQ(folder.value().prompt_tokens, a.value()->prompt_tokens());

    // And the folder converts back to a GGUF dump with the same tensors and tokens.
    auto back = test::run_layerscope("export --from " + q(dir + "/npy") + " --gguf " + q(dir + "/back.gguf"), true);
    ASSERT_EQ(back.exit_code, 0) << back.out;
    auto d = ReferenceDump::open(dir + "/back.gguf");
    ASSERT_TRUE(d) << d.error().message;
    ASSERT_EQ(d.value()->tensors().size(), a.value()->tensors().size());
    EXPECT_EQ(d.value()->prompt_tokens(), a.value()->prompt_tokens());
    for (size_t i = 0; i < a.value()->tensors().size(); ++i) EXPECT_EQ(d.value()->tensors()[i].name, a.value()->tensors()[i].name);

    // A subset back to GGUF keeps the source's dump.* metadata.
    auto sub = test::run_layerscope("export --from " + q(src) + " --events 'l_out-*' --gguf " + q(dir + "/sub.gguf"), true);
    ASSERT_EQ(sub.exit_code, 0) << sub.out;
    auto c = ReferenceDump::open(dir + "/sub.gguf");
    ASSERT_TRUE(c) << c.error().message;
    ASSERT_FALSE(c.value()->tensors().empty());
    for (const RefTensor& t : c.value()->tensors()) EXPECT_EQ(t.base_name.rfind("l_out-", 0), 0u) << t.name;
    EXPECT_EQ(c.value()->prompt(), a.value()->prompt());
    EXPECT_EQ(c.value()->prompt_tokens(), a.value()->prompt_tokens());
    fs::remove_all(dir);
}

// ---- nothing the user made is lost ------------------------------------------------------------

// Every file and folder under `dir` with its contents ("sub/" for a folder), to compare before
// and after.
std::vector<std::string> tree(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
        const std::string rel = fs::relative(e.path(), dir).string();
        if (e.is_directory()) {
            out.push_back(rel + "/");
        } else {
            std::ifstream in(e.path(), std::ios::binary);
            out.push_back(rel + ": " + std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()));
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> sorted_entries(const std::string& dir) {
    std::vector<std::string> names = entries(dir);
    std::sort(names.begin(), names.end());
    return names;
}

// A folder of the user's: a file, a subfolder and a manifest.json that is not ours.
void make_user_folder(const std::string& path) {
    fs::create_directories(path + "/icons");
    std::ofstream(path + "/manifest.json") << "{}";
    std::ofstream(path + "/notes.txt") << "keep me";
    std::ofstream(path + "/icons/icon.png") << "PNG";
}

// Calls `during` once, after the last tensor is written and before the export is put in place.
std::function<bool(size_t, size_t)> just_before_the_end(const ExportSet& set, std::function<void()> during) {
    return [&set, during, called = false](size_t, size_t total) mutable {
        if (total > set.tensors.size() && !called) called = true, during();
        return true;
    };
}

TEST(Export, AFolderCreatedWhileItRunsIsNeverDeleted) {
    const ExportSet set = sample_set();
    for (bool overwrite : {false, true}) {
        SCOPED_TRACE(overwrite ? "with overwrite" : "without overwrite");
        const std::string dir = test::make_temp_dir();
        const std::string out = dir + "/out";
        ExportOptions o;
        o.format = ExportFormat::kNpyFolder;
        o.path = out;
        o.overwrite = overwrite;
        o.progress = just_before_the_end(set, [&] { make_user_folder(out); });
        auto r = export_tensors(set, o);
        ASSERT_FALSE(r) << "the export replaced a folder that appeared while it ran";
        EXPECT_EQ(r.error().code, ErrorCode::kUsage);
        EXPECT_NE(r.error().message.find(overwrite ? "not replaced" : "already exists"), std::string::npos)
            << r.error().message;
        EXPECT_EQ(tree(out), (std::vector<std::string>{"icons/", "icons/icon.png: PNG", "manifest.json: {}",
                                                       "notes.txt: keep me"}));
        EXPECT_EQ(sorted_entries(dir), std::vector<std::string>{"out"}) << "a staging folder was left behind";
        fs::remove_all(dir);
    }
}

TEST(Export, AFileCreatedWhileAGgufExportRunsIsNeverReplaced) {
    const ExportSet set = sample_set();
    const std::string dir = test::make_temp_dir();
    ExportOptions o;
    o.format = ExportFormat::kGgufDump;
    o.path = dir + "/out.gguf";
    o.progress = just_before_the_end(set, [&] { std::ofstream(o.path) << "the user's"; });
    auto r = export_tensors(set, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kUsage);
    EXPECT_EQ(tree(dir), std::vector<std::string>{"out.gguf: the user's"});
    // With overwrite a regular file may be replaced, but a FIFO that took the name is not.
    fs::remove(o.path);
    o.overwrite = true;
    o.progress = just_before_the_end(set, [&] { ASSERT_EQ(mkfifo(o.path.c_str(), 0600), 0); });
    r = export_tensors(set, o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kUsage);
    struct stat st {};
    ASSERT_EQ(lstat(o.path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
    EXPECT_EQ(sorted_entries(dir), std::vector<std::string>{"out.gguf"});
    fs::remove_all(dir);
}

TEST(Export, ForceRefusesAFolderWithAManifestButNoMarker) {
    const ExportSet set = sample_set();
    const std::string dir = test::make_temp_dir();
    const std::string extension = dir + "/extension";
    make_user_folder(extension);
    const std::vector<std::string> before = tree(extension);
    ExportOptions o;
    o.format = ExportFormat::kNpyFolder;
    o.path = extension;
    o.overwrite = true;
    auto r = export_tensors(set, o);
    ASSERT_FALSE(r) << "--force replaced a folder holding a manifest.json that no export wrote";
    EXPECT_EQ(r.error().code, ErrorCode::kUsage);
    EXPECT_NE(r.error().message.find(".layerscope-folder.json"), std::string::npos) << r.error().message;
    EXPECT_EQ(tree(extension), before);

    // An earlier export is replaced, but not once something of the user's was put into it.
    o.path = dir + "/export";
    o.overwrite = false;
    ASSERT_TRUE(export_tensors(set, o));
    std::ofstream(o.path + "/notes.txt") << "my notes";
    o.overwrite = true;
    r = export_tensors(set, o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("notes.txt"), std::string::npos) << r.error().message;
    EXPECT_TRUE(fs::exists(o.path + "/notes.txt"));
    fs::remove(o.path + "/notes.txt");
    ExportSet smaller;
    smaller.tensors.push_back(set.tensors[0]);
    ASSERT_TRUE(export_tensors(smaller, o));
    auto now = ReferenceDump::open(o.path);
    ASSERT_TRUE(now) << now.error().message;
    expect_same(smaller, *now.value());
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"export", "extension"}));
    fs::remove_all(dir);
}

// Two exports to one new folder or file: one wins, the other fails cleanly and leaves the
// winner's output intact. Here the second export (another process) runs to its end while the
// first is about to put its own in place.
TEST(Export, OfTwoExportsToOneNewTargetOneWins) {
    const ExportSet set = sample_set();
    for (ExportFormat format : {ExportFormat::kGgufDump, ExportFormat::kNpyFolder}) {
        SCOPED_TRACE(export_format_name(format));
        const std::string dir = test::make_temp_dir();
        const std::string source = dir + "/source.gguf";
        ExportSet other;
        other.tensors.push_back(set.tensors[1]);
        ExportOptions so;
        so.path = source;
        ASSERT_TRUE(export_tensors(other, so));
        ExportOptions o;
        o.format = format;
        o.path = dir + "/out";
        o.progress = just_before_the_end(set, [&] {
            auto r = test::run_layerscope(std::string("export --from ") + q(source) +
                                              (format == ExportFormat::kGgufDump ? " --gguf " : " --npy ") + q(o.path),
                                          true);
            EXPECT_EQ(r.exit_code, 0) << r.out;
        });
        auto r = export_tensors(set, o);
        ASSERT_FALSE(r) << "both exports succeeded";
        EXPECT_EQ(r.error().code, ErrorCode::kUsage);
        EXPECT_NE(r.error().message.find("already exists"), std::string::npos) << r.error().message;
        auto winner = ReferenceDump::open(o.path);
        ASSERT_TRUE(winner) << winner.error().message;
        expect_same(other, *winner.value());
        EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"out", "source.gguf"}));
        fs::remove_all(dir);
    }
}

// The same with threads started together: however they interleave, exactly one succeeds.
TEST(Export, OfConcurrentExportsToOneNewTargetExactlyOneSucceeds) {
    const ExportSet set = sample_set();
    constexpr int kWriters = 4;
    for (ExportFormat format : {ExportFormat::kGgufDump, ExportFormat::kNpyFolder}) {
        SCOPED_TRACE(export_format_name(format));
        const std::string dir = test::make_temp_dir();
        ExportOptions o;
        o.format = format;
        o.path = dir + "/out";
        std::barrier start(kWriters);
        std::vector<std::optional<Result<ExportSummary>>> results(kWriters);
        std::vector<std::thread> writers;
        for (int i = 0; i < kWriters; ++i)
            writers.emplace_back([&, i] {
                start.arrive_and_wait();
                results[i].emplace(export_tensors(set, o));
            });
        for (std::thread& t : writers) t.join();
        int succeeded = 0;
        for (const auto& r : results) {
            if (r->ok()) {
                ++succeeded;
                continue;
            }
            EXPECT_EQ(r->error().code, ErrorCode::kUsage);
            EXPECT_NE(r->error().message.find("already exists"), std::string::npos) << r->error().message;
        }
        EXPECT_EQ(succeeded, 1);
        auto winner = ReferenceDump::open(o.path);
        ASSERT_TRUE(winner) << winner.error().message;
        expect_same(set, *winner.value());
        EXPECT_EQ(sorted_entries(dir), std::vector<std::string>{"out"});
        fs::remove_all(dir);
    }
}

// What a killed export leaves (its staging folder or file) is removed by the next export to the
// same name, once the process that left it is gone.
TEST(Export, StagingLeftByAKilledExportIsRemovedByTheNextOne) {
    const ExportSet set = sample_set();
    const std::string dir = test::make_temp_dir();
    ExportOptions o;
    o.format = ExportFormat::kNpyFolder;
    o.path = dir + "/out";
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        o.progress = [](size_t done, size_t) {
            if (done == 3) kill(getpid(), SIGKILL);  // kill -9 halfway through
            return true;
        };
        (void)export_tensors(set, o);
        _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ASSERT_EQ(entries(dir).size(), 1u) << "the killed export left nothing to clean up";
    EXPECT_FALSE(fs::exists(o.path));

    // A GGUF writer killed while writing leaves its staging file, named after the target and the
    // writer's process id: this child's, which is gone.
    const std::string stale_gguf = dir + "/.out.gguf.layerscope-staging." + std::to_string(child) + ".0";
    std::ofstream(stale_gguf) << "GGUF half";

    o.progress = nullptr;
    ASSERT_TRUE(export_tensors(set, o));
    o.format = ExportFormat::kGgufDump;
    o.path = dir + "/out.gguf";
    ASSERT_TRUE(export_tensors(set, o));
    EXPECT_EQ(sorted_entries(dir), (std::vector<std::string>{"out", "out.gguf"}));
    fs::remove_all(dir);
}

}  // namespace
}  // namespace ls
