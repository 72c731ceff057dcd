// `layerscope run` end to end: the text llama-completion printed for every llama fixture model,
// our dumps lining up with llama.cpp's by name and value, exit codes for bad input, and --dump
// never replacing what it must not.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "engine/capture/dump_writer.h"
#include "engine/compare/metrics.h"
#include "engine/forward/forward.h"
#include "engine/forward/generate.h"
#include "engine/compare/reference.h"
#include "kernels/backend.h"
#include "tests/test_support.h"

namespace ls {
namespace {

// The stdout section of a llama-completion log: the prompt and the generated text.
std::string completion_stdout(const std::string& log_path) {
    std::ifstream in(log_path);
    std::string line, out;
    bool in_stdout = false;
    while (std::getline(in, line)) {
        if (line.rfind("# ---------------- stdout", 0) == 0) { in_stdout = true; continue; }
        if (line.rfind("# ---------------- stderr", 0) == 0) break;
        if (in_stdout) out += line + "\n";
    }
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

std::string line_after(const std::string& out, const std::string& prefix) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line))
        if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    return "<no line starting with \"" + prefix + "\">";
}

TEST(RunCli, GreedyTextMatchesLlamaCompletion) {
    LS_REQUIRE_FIXTURES();
    // llama-completion -m M -p "Hello" -n 8 --temp 0 (logs/completion_*.txt).
    for (const char* model : {"stories260K", "llama-2-tiny-random", "llama-gqa-mini-F16", "llama-gqa-mini-Q4_K_M"}) {
        SCOPED_TRACE(model);
        std::string expected = completion_stdout(test::fixture_path(std::string("logs/completion_") + model + ".txt"));
        ASSERT_FALSE(expected.empty());
        auto r = test::run_layerscope("run -m '" + test::fixture_path(std::string("models/") + model + ".gguf") +
                                      "' -p Hello -n 8");
        ASSERT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(" " + line_after(r.out, "text:    "), " " + expected) << r.out;
    }
}

// llama.cpp (commit de3ff81, the fixtures' version; greedy, 32 tokens after "Once upon a time")
// generates this continuation on stories260K; no fixture file records it, so it is written here.
TEST(RunCli, Stories260KOnceUponATime32Tokens) {
    LS_REQUIRE_FIXTURES();
    auto r = test::run_layerscope("run -m '" + test::fixture_path("models/stories260K.gguf") + "' -p 'Once upon a time' -n 32");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(line_after(r.out, "text:    "),
              " Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw");
    EXPECT_EQ(line_after(r.out, "generated: "),
              "32 tokens: 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267 337 410 408 419 292 411 322 265 282 295 "
              "433 426 385 328 432 358 394");
}

TEST(RunCli, DumpLinesUpWithLlamaCppsDump) {
    LS_REQUIRE_FIXTURES();
    std::string dir = test::make_temp_dir();
    std::string out = dir + "/once.gguf";
    auto r = test::run_layerscope("run -m '" + test::fixture_path("models/stories260K.gguf") +
                                  "' -p 'Once upon a time' -n 0 --ubatch 256 --dump '" + out + "'");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    auto ours = ReferenceDump::open(out);
    ASSERT_TRUE(ours.ok()) << ours.error().message;
    auto ref = ReferenceDump::open(test::fixture_path("dumps/stories260K_once_n0_fa-off.gguf"));
    ASSERT_TRUE(ref.ok());
    EXPECT_EQ(ours.value()->prompt_tokens(), ref.value()->prompt_tokens());
    EXPECT_EQ(ours.value()->decode_n_tokens(), ref.value()->decode_n_tokens());
    int matched = 0;
    for (const RefTensor& t : ours.value()->tensors()) {
        const RefTensor* r_t = ref.value()->find(t.name);
        if (!r_t) continue;
        std::vector<float> ours_values = ours.value()->values(t);
        AlignedValues a;
        std::string why;
        ASSERT_TRUE(align_with_reference(ours_values.data(), t.ne(), *ref.value(), *r_t, &a, &why)) << t.name << ": " << why;
        Metrics m = compute_metrics(a.ours.data(), a.ref.data(), static_cast<int64_t>(a.ours.size()));
        EXPECT_LE(m.nmse, 1e-8) << t.name;
        ++matched;
    }
    // embd, result_output, llama_logits and 23 per layer.
    EXPECT_GE(matched, 3 + 23 * 5);
    std::filesystem::remove_all(dir);
}

TEST(RunCli, ExitCodes) {
    LS_REQUIRE_FIXTURES();
    const std::string m = "-m '" + test::fixture_path("models/stories260K.gguf") + "'";
    EXPECT_EQ(test::run_layerscope("run " + m + " --bogus").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("run " + m).exit_code, 2);                       // neither --prompt nor --tokens
    EXPECT_EQ(test::run_layerscope("run " + m + " --tokens 1,x").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("run " + m + " --tokens 1,999999").exit_code, 2);  // out of the vocabulary
    EXPECT_EQ(test::run_layerscope("run " + m + " -p hi --mode fast").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("run -m /no/such/model.gguf -p hi").exit_code, 3);
    auto r = test::run_layerscope("run " + m + " --tokens 1,403 -n 2", true);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    // --llama-isa as compare takes it: the build named is the one reproduced, a bad name is usage.
    auto isa = test::run_layerscope("run " + m + " --tokens 1,403 -n 1 --backend cpu --llama-isa avx512-fp16", true);
    EXPECT_EQ(isa.exit_code, 0) << isa.out;
    EXPECT_NE(isa.out.find("llama.cpp build avx512-fp16"), std::string::npos) << isa.out;
    EXPECT_EQ(test::run_layerscope("run " + m + " -p hi --llama-isa sse3").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("export " + m + " -p hi --gguf /dev/null --llama-isa neon").exit_code, 2);
    // The GUI's capture budget is checked before any window opens.
    auto budget = test::run_layerscope("--capture-budget lots", true);
    EXPECT_EQ(budget.exit_code, 2) << budget.out;
    EXPECT_NE(budget.out.find("--capture-budget lots: not a number"), std::string::npos) << budget.out;
}

// ---- --dump never loses a file -----------------------------------------------------------------

std::string q(const std::string& s) { return "'" + s + "'"; }

// A small synthetic model made by the CLI itself, so these tests need no fixtures.
std::string tiny_model(const std::string& dir) {
    const std::string path = dir + "/tiny.gguf";
    auto r = test::run_layerscope("make-model " + q(path) +
                                  " --type f32 --embd 32 --layers 1 --heads 2 --kv-heads 1 --ff 64 --vocab 400");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return path;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(RunCli, DumpRefusesAnExistingFileWithoutForce) {
    const std::string dir = test::make_temp_dir();
    const std::string run = "run -m " + q(tiny_model(dir)) + " --tokens 1,2,3 -n 1 --dump ";
    const std::string thesis = dir + "/thesis.txt";
    std::ofstream(thesis) << "three years of work\n";
    auto refused = test::run_layerscope(run + q(thesis), true);
    EXPECT_EQ(refused.exit_code, 2) << refused.out;
    EXPECT_NE(refused.out.find("already exists"), std::string::npos) << refused.out;
    EXPECT_NE(refused.out.find("--force"), std::string::npos) << refused.out;
    EXPECT_EQ(read_file(thesis), "three years of work\n");
    // --force replaces a regular file, with a complete dump.
    auto forced = test::run_layerscope(run + q(thesis) + " --force", true);
    ASSERT_EQ(forced.exit_code, 0) << forced.out;
    auto dump = ReferenceDump::open(thesis);
    ASSERT_TRUE(dump) << dump.error().message;
    EXPECT_EQ(dump.value()->prompt_tokens(), (std::vector<int32_t>{1, 2, 3}));
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"thesis.txt", "tiny.gguf"})) << "a staging file was left behind";
    std::filesystem::remove_all(dir);
}

TEST(RunCli, EmptyDumpPathIsAUsageError) {
    const std::string dir = test::make_temp_dir();
    auto r = test::run_layerscope("run -m " + q(tiny_model(dir)) + " --tokens 1,2,3 --dump ''", true);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("--dump"), std::string::npos) << r.out;
    std::filesystem::remove_all(dir);
}

// A dump's values stream to an unnamed file beside it while the run goes (nothing of it is held in
// memory): the file written from there is the in-memory dump's, byte for byte.
TEST(RunCli, AStreamedDumpIsTheInMemoryDumpByteForByte) {
    const std::string dir = test::make_temp_dir();
    auto model = Model::open(tiny_model(dir));
    ASSERT_TRUE(model) << model.error().message;
    auto backend = make_cpu_backend(1);
    ForwardOptions fo;
    auto forward = make_forward(*model.value(), *backend, fo);
    ASSERT_TRUE(forward) << forward.error().message;
    DumpWriter held, streamed;
    ASSERT_TRUE(streamed.stream_to(dir + "/streamed.gguf"));
    struct Both : EventSink {
        DumpWriter *a, *b;
        void on_event(const Event& e) override { a->on_event(e), b->on_event(e); }
    } both;
    both.a = &held, both.b = &streamed;
    const std::vector<int32_t> prompt = {1, 2, 3};
    auto result = generate_greedy(*forward.value(), nullptr, prompt, 2, &both, [&](int d) {
        held.add_logits(d, forward.value()->last_logits(), static_cast<int64_t>(forward.value()->last_logits().size()));
        streamed.add_logits(d, forward.value()->last_logits(), static_cast<int64_t>(forward.value()->last_logits().size()));
    });
    ASSERT_TRUE(result) << result.error().message;
    DumpInfo info;
    info.prompt_tokens = prompt;
    info.generated_tokens = result.value().generated;
    info.n_predict = 2;
    ASSERT_TRUE(held.write(dir + "/held.gguf", info));
    ASSERT_TRUE(streamed.write(dir + "/streamed.gguf", info));
    EXPECT_GT(streamed.n_tensors(), 20u);
    EXPECT_EQ(streamed.bytes(), held.bytes());
    const std::string a = read_file(dir + "/held.gguf"), b = read_file(dir + "/streamed.gguf");
    EXPECT_GT(a.size(), held.bytes());
    EXPECT_TRUE(a == b) << "the streamed dump differs from the in-memory one";
    EXPECT_FALSE(streamed.to_bytes(info)) << "a streamed dump's values are not in memory";
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"held.gguf", "streamed.gguf", "tiny.gguf"})) << "a stream file was left behind";
    std::filesystem::remove_all(dir);
}

// The room a streamed dump needs: its records in memory, its values twice on the disk (streamed,
// then the dump), each refused with the numbers.
TEST(RunCli, ADumpThatDoesNotFitOnTheDiskIsRefusedWithTheNumbers) {
    const uint64_t mib = 1 << 20;
    const BackendMemory ram{true, 1024 * mib, "RAM (MemAvailable)", false};
    const BackendMemory disk{true, 1000 * mib, "the file system of /data", false};
    EXPECT_TRUE(check_dump_room("--dump", 1000, 400 * mib, ram, disk, "Lower -n."));
    Status s = check_dump_room("--dump", 1000, 600 * mib, ram, disk, "Lower -n.");
    ASSERT_FALSE(s);
    for (const char* part : {"--dump needs about 1.17 GiB", "the values streamed 600 MiB (1000 tensors)",
                             "the dump written from them 600 MiB", "1000 MiB available in the file system of /data",
                             "Lower -n."})
        EXPECT_NE(s.error().message.find(part), std::string::npos) << part << "\n" << s.error().message;
    s = check_dump_room("--dump", 1000000, 1, ram, disk, "");
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find("event records 1.91 GiB (1000000 x about 2048 bytes)"), std::string::npos)
        << s.error().message;
    EXPECT_TRUE(check_dump_room("--dump", 1000000, 1 << 30, BackendMemory{}, BackendMemory{}, ""));  // not known: not checked
}

// A FIFO or a device is never replaced by a dump, --force or not; it stays what it was.
TEST(RunCli, DumpRefusesAFifo) {
    const std::string dir = test::make_temp_dir();
    const std::string model = tiny_model(dir);
    const std::string fifo = dir + "/pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    for (const char* force : {"", " --force"}) {
        SCOPED_TRACE(force);
        auto r = test::run_layerscope("run -m " + q(model) + " --tokens 1,2,3 -n 1 --dump " + q(fifo) + force, true);
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_NE(r.out.find("FIFO"), std::string::npos) << r.out;
        struct stat st {};
        ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
        EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// --backend: cpu, auto and cuda-emulated run (the emulated CUDA kernels generate the CPU's
// tokens); auto takes the GPU where one is usable and otherwise says why not; an unknown or
// unavailable backend is a usage error that says why.
TEST(RunCli, BackendChoice) {
    LS_REQUIRE_FIXTURES();
    const std::string model = "-m '" + test::fixture_path("models/stories260K.gguf") + "' -p 'Once upon a time' -n 2";
    const MadeBackend cuda = make_backend(BackendKind::kCuda);
    const test::CommandResult cpu = test::run_layerscope("run " + model + " --backend cpu", true);
    EXPECT_EQ(cpu.exit_code, 0) << cpu.out;
    EXPECT_NE(cpu.out.find("backend: CPU"), std::string::npos) << cpu.out;
    const test::CommandResult a = test::run_layerscope("run " + model + " --backend auto", true);
    const test::CommandResult c = test::run_layerscope("run " + model + " --backend cuda", true);
    EXPECT_EQ(a.exit_code, 0) << a.out;
    if (cuda.backend) {
        EXPECT_NE(a.out.find("backend: " + cuda.backend->name()), std::string::npos) << a.out;
        EXPECT_EQ(c.exit_code, 0) << c.out;
        EXPECT_NE(c.out.find("backend: " + cuda.backend->name()), std::string::npos) << c.out;
    } else {
        // auto says why it did not choose CUDA; cuda itself refuses with the same reason.
        EXPECT_NE(a.out.find("backend: CPU"), std::string::npos) << a.out;
        EXPECT_NE(a.out.find("(CPU: " + cuda.note), std::string::npos) << a.out;
        EXPECT_EQ(c.exit_code, 2) << c.out;
        EXPECT_NE(c.out.find("the cuda backend is not available: " + cuda.note), std::string::npos) << c.out;
    }
    const test::CommandResult e = test::run_layerscope("run " + model + " --backend cuda-emulated", true);
    EXPECT_EQ(e.exit_code, 0) << e.out;
    EXPECT_NE(e.out.find("backend: CUDA (emulated on the CPU)"), std::string::npos) << e.out;
    auto generated = [](const std::string& out) { return out.substr(out.find("generated:"), out.find("\ntext:") - out.find("generated:")); };
    EXPECT_EQ(generated(e.out), generated(cpu.out)) << e.out << cpu.out;
    if (cuda.backend) EXPECT_EQ(generated(c.out), generated(cpu.out)) << c.out << cpu.out;
    const test::CommandResult bad = test::run_layerscope("run " + model + " --backend vulkan", true);
    EXPECT_EQ(bad.exit_code, 2) << bad.out;
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// Both run styles on the CUDA backend's kernels: run mode (the default) and step mode, which syncs
// the backend after every event.
TEST(BenchCli, StepAndRunModesOnTheCudaKernels) {
    LS_REQUIRE_FIXTURES();
    const std::string model = "-m '" + test::fixture_path("models/stories260K.gguf") + "'";
    for (const char* sync : {"needed", "event"}) {
        const test::CommandResult r = test::run_layerscope("bench " + model + " --backend cuda-emulated --prompt-tokens 8 "
                                                           "--gen 2 --repetitions 1 --capture stats --json --sync " + sync);
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const auto j = nlohmann::json::parse(r.out);
        EXPECT_EQ(j["sync"], sync);
        EXPECT_EQ(j["backend"], "CUDA (emulated on the CPU)");
        EXPECT_GT(j["gen_tps"].get<double>(), 0);
    }
    const test::CommandResult bad = test::run_layerscope("bench " + model + " --sync sometimes", true);
    EXPECT_EQ(bad.exit_code, 2) << bad.out;
}

// bench's device counters per decoded token (launches, syncs and copies to the host): none on the
// CPU; on the CUDA kernels, run mode waits once a token (for the logits), step mode adds one sync
// an event, and statistics of every event add one copy to the host an event (the moments and the
// histogram together), so the two modes must agree on how many events a token has.
TEST(BenchCli, DeviceCountsPerDecodedToken) {
    LS_REQUIRE_FIXTURES();
    const std::string model = "-m '" + test::fixture_path("models/stories260K.gguf") + "'";
    const auto counts = [&](const std::string& args) {
        const test::CommandResult r =
            test::run_layerscope("bench " + model + " --prompt-tokens 4 --gen 3 -r 1 --json " + args);
        EXPECT_EQ(r.exit_code, 0) << r.out;
        const auto j = nlohmann::json::parse(r.out);
        return std::array<double, 3>{j["launches_per_token"].get<double>(), j["syncs_per_token"].get<double>(),
                                     j["d2h_copies_per_token"].get<double>()};
    };
    EXPECT_EQ(counts("--backend cpu"), (std::array<double, 3>{0, 0, 0}));
    const auto run = counts("--backend cuda-emulated");
    const auto step = counts("--backend cuda-emulated --sync event");
    const auto stats = counts("--backend cuda-emulated --capture stats");
    for (double v : run) EXPECT_EQ(v, std::floor(v)) << "every token asks the same of the device";
    EXPECT_GT(run[0], 20);  // a launch or more an op
    // Run mode: the token id and positions are queued, not waited for; the logits are read once.
    EXPECT_EQ(run[1], 1);
    EXPECT_EQ(run[2], 1);
    EXPECT_EQ(step[0], run[0]);
    EXPECT_EQ(step[2], run[2]);
    const double events = step[1] - run[1];
    EXPECT_GE(events, 5 * 8) << "stories260K: 5 layers of at least 8 events";
    EXPECT_EQ(stats[2] - run[2], events);
    EXPECT_EQ(stats[1] - run[1], events);
    EXPECT_GE(stats[0] - run[0], 4 * events);  // a memset, the two reductions and the histogram
}

// `layerscope bench --json`: the figures it promises, measured (positive), and the op classes.
TEST(BenchCli, JsonHasTheFigures) {
    LS_REQUIRE_FIXTURES();
    const std::string model = "-m '" + test::fixture_path("models/stories260K.gguf") + "'";
    const test::CommandResult r = test::run_layerscope("bench " + model + " --prompt-tokens 8 --gen 3 --capture all --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    for (const char* key : {"\"prompt_tps\"", "\"gen_tps\"", "\"capture_overhead\"", "\"peak_rss_bytes\"", "\"MUL_MAT\"",
                            "\"RMS_NORM\"", "\"ROPE\""})
        EXPECT_NE(r.out.find(key), std::string::npos) << key << " missing in " << r.out;
    // Numbers, not placeholders: each figure is positive.
    for (const char* key : {"\"prompt_tps\": ", "\"gen_tps\": ", "\"capture_overhead\": ", "\"peak_rss_bytes\": ", "\"open_seconds\": "}) {
        const size_t at = r.out.find(key);
        ASSERT_NE(at, std::string::npos) << key;
        EXPECT_GT(std::stod(r.out.substr(at + std::strlen(key))), 0.0) << key;
    }
    // --depth: the cache holds that many tokens before the timed runs; attention's time apart.
    const test::CommandResult deep = test::run_layerscope("bench " + model + " --prompt-tokens 4 --gen 2 --depth 40 -r 1 --json");
    ASSERT_EQ(deep.exit_code, 0) << deep.out;
    const auto j = nlohmann::json::parse(deep.out);
    EXPECT_EQ(j["depth"], 40);
    EXPECT_GT(j["attention_seconds"].get<double>(), 0.0);
    double op_total = 0;
    for (const auto& [op, seconds] : j["op_seconds"].items()) op_total += seconds.get<double>();
    EXPECT_LT(j["attention_seconds"].get<double>(), op_total);
    EXPECT_EQ(test::run_layerscope("bench " + model + " --depth -1").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("bench " + model + " --capture everything").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("bench " + model + " --repetitions 0").exit_code, 2);
    EXPECT_EQ(test::run_layerscope("bench -m /nonexistent.gguf").exit_code, 3);
}

}  // namespace
}  // namespace ls
