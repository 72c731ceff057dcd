// Inputs and runs too large for the machine, or that are not files at all: refused up front with
// the numbers (exit 3; 2 for a flag out of range), never std::bad_alloc, an abort or a hang. No test
// here allocates more than a few MiB: everything large is a sparse file or an address-space limit.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/compare/reference_formats.h"
#include "engine/forward/forward.h"
#include "engine/forward/generate.h"
#include "engine/forward/memory_estimate.h"
#include "engine/model/make_model.h"
#include "engine/session/event_plan.h"
#include "engine/util/input_file.h"
#include "kernels/backend.h"
#include "kernels/common/host_memory.h"
#include "tests/forwarding_backend.h"
#include "tests/gguf_builder.h"
#include "tests/test_support.h"

namespace ls {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// A sanitized build reserves terabytes of address space for its shadow memory, so it cannot run
// under ulimit -v: it runs without, and the tests whose refusal depends on that limit skip.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

#define LS_REQUIRE_ADDRESS_SPACE_LIMIT()                                                   \
    do {                                                                                   \
        if (kSanitized) GTEST_SKIP() << "needs ulimit -v, which a sanitized build ignores"; \
    } while (0)

// Runs layerscope under a limit of `address_space_kib` (ulimit -v: what it may map or allocate,
// so that a regression fails with bad_alloc instead of taking the machine's memory) and
// `timeout_s` (a regression that blocks is killed: exit 137). stderr is captured with stdout.
test::CommandResult run_limited(const std::string& args, uint64_t address_space_kib = 4 << 20, int timeout_s = 60) {
    test::CommandResult r;
    const std::string limit = kSanitized ? "" : "ulimit -v " + std::to_string(address_space_kib) + "; ";
    const std::string cmd = limit + "exec timeout -s KILL " + std::to_string(timeout_s) +
                            " '" LAYERSCOPE_BINARY_DIR "/app/layerscope' " + args + " 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

std::string stories() { return "'" + test::fixture_path("models/stories260K.gguf") + "'"; }

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A .npy header for a C-order <f4 (or `descr`) array of `shape`, padded as numpy pads it.
std::string npy_header(const std::string& shape, const std::string& descr = "<f4") {
    std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + shape + "), }";
    h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
    h += '\n';
    std::string pre = "\x93NUMPY";
    pre += '\x01';
    pre += '\x00';
    pre += static_cast<char>(h.size() & 0xff);
    pre += static_cast<char>(h.size() >> 8);
    return pre + h;
}

// A one-tensor manifest naming `file` as "embd"; `extra` adds fields to the entry.
std::string manifest(const std::string& file, const std::string& extra = "") {
    return R"({"format": "layerscope-npy", "version": 1, "tensors": [{"name": "embd", "file": ")" + file + "\"" + extra + "}]}";
}

// ---- the host memory and the estimates

TEST(HostMemory, TheSmallestBoundWins) {
    const std::string meminfo = "MemTotal:       32000000 kB\nMemFree:  1000 kB\nMemAvailable:   20971520 kB\n";
    HostMemory m = host_memory_from(meminfo, UINT64_MAX, UINT64_MAX);
    ASSERT_TRUE(m.known);
    EXPECT_EQ(m.available_bytes, 20 * kGiB);
    EXPECT_EQ(m.source, "MemAvailable");
    m = host_memory_from(meminfo, 3 * kGiB, UINT64_MAX);
    EXPECT_EQ(m.available_bytes, 3 * kGiB);
    EXPECT_EQ(m.source, "the cgroup's memory limit");
    m = host_memory_from(meminfo, 3 * kGiB, kGiB);
    EXPECT_EQ(m.available_bytes, kGiB);
    EXPECT_EQ(m.source, "ulimit -v");
    EXPECT_FALSE(host_memory_from("", UINT64_MAX, UINT64_MAX).known);
}

TEST(HostMemory, CgroupRoomCountsInactiveFileCacheAsFree) {
    EXPECT_EQ(cgroup_room_from("max\n", "123\n", "", "inactive_file"), UINT64_MAX);
    EXPECT_EQ(cgroup_room_from("1000\n", "300\n", "", "inactive_file"), 700u);
    EXPECT_EQ(cgroup_room_from("1000\n", "900\n", "anon 500\ninactive_file 400\nactive_file 0\n", "inactive_file"), 500u);
    EXPECT_EQ(cgroup_room_from("1000\n", "1200\n", "", "inactive_file"), 0u);
    EXPECT_EQ(cgroup_room_from("1000", "900", "total_inactive_file 100\n", "total_inactive_file"), 200u);
}

TEST(HostMemory, BytesText) {
    EXPECT_EQ(bytes_text(512), "512 B");
    EXPECT_EQ(bytes_text(3 * 1024), "3.00 KiB");
    EXPECT_EQ(bytes_text(uint64_t{532} * kGiB), "532 GiB");
    EXPECT_EQ(bytes_text(kGiB * 12 + kGiB * 3 / 10), "12.3 GiB");
    EXPECT_EQ(mul_sat(uint64_t{1} << 40, uint64_t{1} << 40), UINT64_MAX);
}

TEST(MemoryCheck, RefusesWithEveryPartLargestFirst) {
    MemoryEstimate need;
    need.add("KV cache", "n_ctx 8", 2 * kGiB);
    need.add("attention scores", "n_ctx 8 x ubatch 4", 8 * kGiB);
    const BackendMemory memory{true, 5 * kGiB, "RAM (MemAvailable)", false};
    Status s = check_memory("this run", need, memory, "Lower --ctx.");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, ErrorCode::kBadInput);
    EXPECT_EQ(s.error().message, "this run needs about 10.0 GiB: attention scores 8.00 GiB (n_ctx 8 x ubatch 4), KV cache "
                                 "2.00 GiB (n_ctx 8); 5.00 GiB available in RAM (MemAvailable). Lower --ctx.");
    EXPECT_TRUE(check_memory("this run", need, BackendMemory{true, 10 * kGiB, "RAM", false}, "").ok());
    EXPECT_TRUE(check_memory("this run", need, BackendMemory{}, "").ok());  // a backend that cannot tell
}

// A backend that counts what it allocates and reports `available` as its memory.
class CountingBackend final : public test::ForwardingBackend {
public:
    CountingBackend(uint64_t available) : available_(available) {}
    uint64_t allocated = 0;

    std::string name() const override { return "counting"; }
    BackendMemory memory() const override { return {true, available_, "the test's budget", false}; }
    void* alloc(size_t bytes) override {
        allocated += bytes;
        return inner_->alloc(bytes);
    }

private:
    uint64_t available_;
};

// The estimate is what the forward pass allocates, to the byte: a budget of exactly that runs,
// one byte less is refused. stories260K (llama), and qwen35's DeltaNet layers (no KV cache, a
// recurrent state, buffers of their own).
TEST(MemoryCheck, TheEstimateIsWhatTheForwardPassAllocates) {
    LS_REQUIRE_FIXTURES();
    auto stories = Model::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(stories.ok()) << stories.error().message;
    auto spec = make_model_preset("qwen35-tiny");
    ASSERT_TRUE(spec.ok());
    const std::string dir = test::make_temp_dir();
    struct RemoveDir {
        std::string dir;
        ~RemoveDir() { std::filesystem::remove_all(dir); }
    } cleanup{dir};  // on a failed assertion too
    ASSERT_TRUE(make_model(spec.value(), dir + "/qwen35.gguf").ok());
    auto qwen35 = Model::open(dir + "/qwen35.gguf");
    ASSERT_TRUE(qwen35.ok()) << qwen35.error().message;
    for (const Model* model : {stories.value().get(), qwen35.value().get()})
    for (int64_t n_ctx : {256, 1000}) {
        SCOPED_TRACE(model->path());
        SCOPED_TRACE(n_ctx);
        ForwardOptions fo;
        fo.n_ctx = n_ctx;
        fo.n_ubatch = 300;
        CountingBackend unlimited(UINT64_MAX);
        auto forward = make_forward(*model, unlimited, fo);
        ASSERT_TRUE(forward.ok()) << forward.error().message;
        const uint64_t needed = unlimited.allocated;
        EXPECT_GT(needed, 0u);
        forward.value().reset();

        CountingBackend exact(needed);
        EXPECT_TRUE(make_forward(*model, exact, fo).ok());
        CountingBackend short_by_one(needed - 1);
        auto refused = make_forward(*model, short_by_one, fo);
        ASSERT_FALSE(refused.ok());
        EXPECT_EQ(short_by_one.allocated, 0u) << "refused before allocating anything";
        EXPECT_NE(refused.error().message.find("the test's budget"), std::string::npos) << refused.error().message;
    }
}

// The closed form of a long run's events equals what a real run announces.
TEST(MemoryCheck, PlannedEventVolumeEqualsARealRun) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(model.ok());
    struct Count : EventSink {
        EventVolume v;
        void on_event(const Event& e) override {
            ++v.n_events;
            v.f32_bytes += 4 * static_cast<uint64_t>(e.tensor.n_elements());
        }
    };
    const std::vector<int32_t> prompt = {1, 403, 407};
    for (int n : {0, 1, 2, 7}) {
        SCOPED_TRACE(n);
        ForwardOptions fo;
        fo.n_ctx = 256;
        std::unique_ptr<Backend> cpu = make_cpu_backend(1);
        auto forward = make_forward(*model.value(), *cpu, fo);
        ASSERT_TRUE(forward.ok());
        Count real;
        ASSERT_TRUE(generate_greedy(*forward.value(), nullptr, prompt, n, &real).ok());
        auto planned = planned_event_volume(*model.value(), fo, prompt, n);
        ASSERT_TRUE(planned.ok()) << planned.error().message;
        EXPECT_EQ(planned->n_events, real.v.n_events);
        EXPECT_EQ(planned->f32_bytes, real.v.f32_bytes);
    }
}

TEST(Context, DefaultsAndTheTrainedContext) {
    ModelConfig c;
    c.arch_name = "llama";
    c.n_ctx_train = 2048;
    EXPECT_EQ(context_for_run(c, 3, 16, 0, false).value(), 256);
    EXPECT_EQ(context_for_run(c, 3, 600, 0, false).value(), 768);
    EXPECT_EQ(context_for_run(c, 40, 2000, 0, false).value(), 2048);  // rounding stops at the trained context
    EXPECT_EQ(context_for_run(c, 3, 16, 1000, false).value(), 1000);
    auto beyond = context_for_run(c, 3, 16, 4096, false);
    ASSERT_FALSE(beyond.ok());
    EXPECT_EQ(beyond.error().code, ErrorCode::kUsage);
    EXPECT_NE(beyond.error().message.find("llama.context_length = 2048"), std::string::npos) << beyond.error().message;
    EXPECT_EQ(context_for_run(c, 3, 16, 4096, true).value(), 4096);
    auto long_run = context_for_run(c, 3, 1048576, 0, false);
    ASSERT_FALSE(long_run.ok());
    EXPECT_NE(long_run.error().message.find("-n 1048576 need 1048579 KV cells"), std::string::npos) << long_run.error().message;
    EXPECT_EQ(context_for_run(c, 3, 1048576, 0, true).value(), 1048832);
    c.n_ctx_train = 0;  // unknown: bounded by memory only
    EXPECT_EQ(context_for_run(c, 3, 5000, 0, false).value(), 5120);
}

// ---- run: --ctx, -n and the model's hyperparameters

// --ctx 16777216 was std::bad_alloc (the attention scores are n_ctx x ubatch x n_head).
TEST(RunGuards, HugeContextIsRefusedWithTheNumbers) {
    LS_REQUIRE_FIXTURES();
    auto r = run_limited("run -m " + stories() + " -p hi --ctx 16777216");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("--ctx 16777216 is beyond the model's trained context (llama.context_length = 2048)"),
              std::string::npos) << r.out;

    r = run_limited("run -m " + stories() + " -p hi --ctx 16777216 --ctx-beyond-train");
    EXPECT_EQ(r.exit_code, 3) << r.out;
    for (const char* part : {"needs about 532 GiB", "attention scores 512 GiB (n_ctx 16777216 x ubatch 512 x 8 heads",
                             "KV cache 20.0 GiB", "available in RAM", "Lower --ctx or --ubatch"})
        EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
}

// --ctx 1048576 -n 2 on a 260K-parameter model took 12 GB: refused past the trained context, and
// by memory when asked for anyway.
TEST(RunGuards, LongContextOnATinyModelIsRefused) {
    LS_REQUIRE_FIXTURES();
    LS_REQUIRE_ADDRESS_SPACE_LIMIT();
    auto r = run_limited("run -m " + stories() + " -p hi --ctx 1048576 -n 2");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    r = run_limited("run -m " + stories() + " -p hi --ctx 1048576 -n 2 --ctx-beyond-train");
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("attention scores 32.0 GiB (n_ctx 1048576 x ubatch 512 x 8 heads"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("available in RAM (ulimit -v)"), std::string::npos) << r.out;
}

// -n 1048576 grew to 6.4 GB in 40 s: the context it needs is refused before anything runs.
TEST(RunGuards, HugePredictionCountIsRefusedUpFront) {
    LS_REQUIRE_FIXTURES();
    auto r = run_limited("run -m " + stories() + " -p hi -n 1048576", 4 << 20, 30);
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_NE(r.out.find("a 3-token prompt and -n 1048576 need 1048579 KV cells, beyond the model's trained context"),
              std::string::npos) << r.out;
    if (kSanitized) return;  // the rest needs ulimit -v
    r = run_limited("run -m " + stories() + " -p hi -n 1048576 --ctx-beyond-train", 4 << 20, 30);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("with n_ctx 1048832 and ubatch 512 needs about 33.3 GiB"), std::string::npos) << r.out;
}

// A dump streams every event of every decode call to the disk, keeping a record of each in memory:
// a run whose records cannot fit is refused before it starts; one whose values alone are larger
// than the memory limit is written.
TEST(RunGuards, DumpThatCannotFitIsRefusedBeforeRunning) {
    LS_REQUIRE_FIXTURES();
    LS_REQUIRE_ADDRESS_SPACE_LIMIT();
    const std::string dir = test::make_temp_dir();
    auto r = run_limited("run -m " + stories() + " -p hi -t 2 -n 2000 --dump '" + dir + "/long.gguf'", 440 << 10, 120);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    for (const char* part : {"--dump with -n 2000 needs about 469 MiB", "event records 469 MiB (240120 x about 2048 bytes)",
                             "available in RAM (ulimit -v)", "Lower -n"})
        EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
    EXPECT_TRUE(fs::is_empty(dir));

    // 679 MiB of values under a 700 MiB address-space limit.
    r = run_limited("run -m " + stories() + " -p hi -t 2 -n 2000 --dump '" + dir + "/long.gguf'", 700 << 10, 120);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("dump:    240120 tensors, 679.38 MiB"), std::string::npos) << r.out;
    EXPECT_GT(fs::file_size(dir + "/long.gguf"), uint64_t{700} << 20);
    auto dump = ReferenceDump::open(dir + "/long.gguf");
    ASSERT_TRUE(dump) << dump.error().message;
    EXPECT_EQ(dump.value()->tensors().size(), 240120u);
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "only the dump is left";
    dump.value().reset();
    fs::remove_all(dir);
}

// A llama model whose feed_forward_length is 2^24 with weights to match (Q4_0, a sparse file of
// 864 MiB): its feed-forward buffers alone are 48 GiB.
std::string write_huge_ffn_model(const std::string& path) {
    constexpr int64_t kEmbd = 32, kFf = int64_t{1} << 24, kVocab = 8;
    test::GgufBuilder b;
    b.put<uint32_t>(0x46554747);
    b.put<uint32_t>(3);
    struct T { const char* name; std::vector<int64_t> ne; uint32_t type; uint64_t bytes; };
    const uint64_t q4_0 = kEmbd * kFf / 32 * 18;
    const std::vector<T> tensors = {
        {"token_embd.weight", {kEmbd, kVocab}, 0, kEmbd * kVocab * 4}, {"output_norm.weight", {kEmbd}, 0, kEmbd * 4},
        {"blk.0.attn_norm.weight", {kEmbd}, 0, kEmbd * 4},         {"blk.0.attn_q.weight", {kEmbd, kEmbd}, 0, kEmbd * kEmbd * 4},
        {"blk.0.attn_k.weight", {kEmbd, kEmbd}, 0, kEmbd * kEmbd * 4}, {"blk.0.attn_v.weight", {kEmbd, kEmbd}, 0, kEmbd * kEmbd * 4},
        {"blk.0.attn_output.weight", {kEmbd, kEmbd}, 0, kEmbd * kEmbd * 4}, {"blk.0.ffn_norm.weight", {kEmbd}, 0, kEmbd * 4},
        {"blk.0.ffn_gate.weight", {kEmbd, kFf}, 2, q4_0},         {"blk.0.ffn_up.weight", {kEmbd, kFf}, 2, q4_0},
        {"blk.0.ffn_down.weight", {kFf, kEmbd}, 2, q4_0}};
    b.put<uint64_t>(tensors.size());
    b.put<uint64_t>(8);
    b.str("general.architecture"), b.put<uint32_t>(8), b.str("llama");
    for (auto [key, value] : {std::pair{"llama.context_length", 2048}, {"llama.embedding_length", kEmbd},
                              {"llama.block_count", 1}, {"llama.attention.head_count", 1},
                              {"llama.attention.head_count_kv", 1}, {"llama.feed_forward_length", kFf}}) {
        b.str(key);
        b.put<uint32_t>(4);
        b.put<uint32_t>(static_cast<uint32_t>(value));
    }
    b.str("llama.attention.layer_norm_rms_epsilon"), b.put<uint32_t>(6), b.put<float>(1e-5f);
    uint64_t offset = 0;
    for (const T& t : tensors) {
        b.str(t.name);
        b.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) b.put<int64_t>(d);
        b.put<uint32_t>(t.type);
        b.put<uint64_t>(offset);
        offset += (t.bytes + 31) / 32 * 32;
    }
    b.pad(32);
    const uint64_t total = b.size() + offset;
    {
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(b.bytes.data()), static_cast<std::streamsize>(b.size()));
    }
    fs::resize_file(path, total);  // zeros, and no disk blocks
    return path;
}

// feed_forward_length = 2^24 was std::bad_alloc with no numbers.
TEST(RunGuards, AbsurdFeedForwardWidthIsRefusedWithTheNumbers) {
    LS_REQUIRE_ADDRESS_SPACE_LIMIT();
    const std::string dir = test::make_temp_dir();
    const std::string model = write_huge_ffn_model(dir + "/ff24.gguf");
    auto r = run_limited("run -m '" + model + "' --tokens 1,2 -n 1");
    EXPECT_EQ(r.exit_code, 3) << r.out;
    for (const char* part : {"feed-forward activations 48.0 GiB (ubatch 256 x n_ff 16777216 x 3 (gate, up, swiglu)",
                             "Lower --ubatch"})
        EXPECT_NE(r.out.find(part), std::string::npos) << part << "\n" << r.out;
    // Its 2^29 weights of one matrix as f32: 2 GiB, more than a 2.5 GiB limit leaves beside the mapping.
    r = run_limited("inspect '" + model + "' --tensor blk.0.ffn_gate.weight", 5 << 19);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("blk.0.ffn_gate.weight: its 536870912 values as f32 need 2.00 GiB"), std::string::npos) << r.out;
    fs::remove_all(dir);
}

// A block_count of 2^32 - 1 sized per-layer tables from the metadata alone: std::bad_alloc.
TEST(RunGuards, AbsurdBlockCountIsRefused) {
    LS_REQUIRE_FIXTURES();
    const std::string dir = test::make_temp_dir();
    const std::string model = dir + "/layers.gguf";
    fs::copy_file(test::fixture_path("models/stories260K.gguf"), model);
    {
        std::ifstream in(model, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        const size_t at = bytes.find("llama.block_count");
        ASSERT_NE(at, std::string::npos);
        std::fstream out(model, std::ios::binary | std::ios::in | std::ios::out);
        out.seekp(static_cast<std::streamoff>(at + 17 + 4));  // after the key and its u32 type
        const uint32_t layers = 0xffffffffu;
        out.write(reinterpret_cast<const char*>(&layers), 4);
    }
    auto r = run_limited("run -m '" + model + "' -p hi -n 1");
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("llama.block_count is 4294967295 but the file holds only 48 tensors"), std::string::npos) << r.out;
    r = run_limited("inspect '" + model + "'");
    EXPECT_EQ(r.out.find("out of memory"), std::string::npos) << r.out;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1) << r.out;
    fs::remove_all(dir);
}

// What nothing foresaw still ends in a message and exit 3: here 1024 threads that cannot start.
TEST(RunGuards, ExceptionsBecomeMessagesAtTheCommandBoundary) {
    LS_REQUIRE_FIXTURES();
    LS_REQUIRE_ADDRESS_SPACE_LIMIT();
    auto r = run_limited("run -m " + stories() + " -p hi -n 1 -t 1024", 2000000, 60);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("layerscope run: cannot start 1024 CPU threads"), std::string::npos) << r.out;
}

// ---- references: sizes checked against the file, nothing copied whole

// A valid 64 GiB .npy reference (a sparse file) was std::bad_alloc: it is now read in place.
TEST(ReferenceGuards, HugeNpyIsMappedNotCopied) {
    const std::string dir = test::make_temp_dir();
    const std::string header = npy_header("4294967296, 4");
    write_text(dir + "/big.npy", header);
    fs::resize_file(dir + "/big.npy", header.size() + (uint64_t{64} << 30));
    write_text(dir + "/manifest.json", manifest("big.npy"));

    {
        auto folder = load_npy_folder(dir);
        ASSERT_TRUE(folder.ok()) << folder.error().message;
        const RefTensor* t = folder.value().dump->find("embd");
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->n_elements(), int64_t{1} << 34);
        ASSERT_NE(t->f32(), nullptr);
        EXPECT_EQ(t->f32()[(int64_t{1} << 34) - 1], 0.0f);  // the last value, read from the mapping
        EXPECT_EQ(folder.value().dump->values(*t, int64_t{1} << 33, 4).size(), 4u);
    }

    // A comparison with it pairs nothing and copies nothing (exit 1: embd diverged).
    if (test::have_fixtures()) {
        auto r = run_limited("compare -m " + stories() + " -r '" + dir + "' -p hi", uint64_t{80} << 20, 60);
        EXPECT_EQ(r.exit_code, 1) << r.out;
        EXPECT_NE(r.out.find("cannot be paired with the reference's [4, 4294967296, 1, 1]"), std::string::npos) << r.out;
    }
    fs::remove_all(dir);
}

// A header that claims 64 GiB over a small file is refused against the file's size.
TEST(ReferenceGuards, NpyLargerThanItsFileIsRefusedWithTheNumbers) {
    const std::string dir = test::make_temp_dir();
    write_text(dir + "/big.npy", npy_header("4294967296, 4") + std::string(64, '\0'));
    write_text(dir + "/manifest.json", manifest("big.npy"));
    auto folder = load_npy_folder(dir);
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.error().message.find("needs 68719476736 data bytes but the file has 64"), std::string::npos)
        << folder.error().message;
    fs::remove_all(dir);
}

// A manifest.json that is a directory threw std::__ios_failure out of the loader.
TEST(ReferenceGuards, ManifestThatIsADirectory) {
    const std::string dir = test::make_temp_dir();
    fs::create_directory(dir + "/manifest.json");
    auto folder = load_npy_folder(dir);
    ASSERT_FALSE(folder.ok());
    EXPECT_EQ(folder.error().message, dir + "/manifest.json: is a directory; expected a regular file");
    if (test::have_fixtures()) {
        auto r = run_limited("compare -m " + stories() + " -r '" + dir + "' -p hi");
        EXPECT_EQ(r.exit_code, 3) << r.out;
        EXPECT_NE(r.out.find("manifest.json: is a directory"), std::string::npos) << r.out;
    }
    fs::remove_all(dir);
}

// "ne" whose product overflows int64 was signed overflow; the release build accepted it and
// export --from wrote a GGUF our own reader rejects. 126580369563608 x 88426246179885 x
// 245822784779487 is 8 modulo 2^64: the element count of the 8-value file.
TEST(ReferenceGuards, ManifestNeOverflowIsRefused) {
    const std::string dir = test::make_temp_dir();
    std::string values(32, '\0');
    write_text(dir + "/a.npy", npy_header("8,") + values);
    write_text(dir + "/manifest.json",
               manifest("a.npy", R"(, "order": "row-major", "ne": [126580369563608, 88426246179885, 245822784779487])"));
    auto folder = load_npy_folder(dir);
    ASSERT_FALSE(folder.ok());
    EXPECT_NE(folder.error().message.find("tensor 0 (\"embd\"): \"ne\" [126580369563608,88426246179885,245822784779487]: "
                                          "the element count overflows 64 bits"),
              std::string::npos) << folder.error().message;

    const std::string out = test::make_temp_dir() + "/out.gguf";
    auto r = run_limited("export --from '" + dir + "' --gguf '" + out + "'");
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_FALSE(fs::exists(out));
    fs::remove_all(dir);
    fs::remove_all(fs::path(out).parent_path());
}

// ---- inputs that are not regular files

// A FIFO given as a model, a log, a manifest, a .npy file or a dump blocked forever; each is now
// refused before it is opened (a regression is killed after 10 s: exit 137).
TEST(InputGuards, FifosAndDevicesAreRefusedWithoutBlocking) {
    LS_REQUIRE_FIXTURES();
    const std::string dir = test::make_temp_dir();
    const std::string fifo = dir + "/pipe";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    fs::create_directory(dir + "/npy_fifo");
    ASSERT_EQ(mkfifo((dir + "/npy_fifo/a.npy").c_str(), 0600), 0);
    write_text(dir + "/npy_fifo/manifest.json", manifest("a.npy"));
    fs::create_directory(dir + "/manifest_fifo");
    ASSERT_EQ(mkfifo((dir + "/manifest_fifo/manifest.json").c_str(), 0600), 0);

    const std::string m = stories();
    struct Case { std::string args, expected; };
    const std::vector<Case> cases = {
        {"inspect '" + fifo + "'", fifo + ": is a named pipe (FIFO)"},
        {"run -m '" + fifo + "' -p hi", fifo + ": is a named pipe (FIFO)"},
        {"compare -m " + m + " -r '" + fifo + "' -p hi", fifo + ": is a named pipe (FIFO)"},  // a log or a dump
        {"compare '" + fifo + "' '" + fifo + "'", fifo + ": is a named pipe (FIFO)"},
        {"compare -m " + m + " -r '" + dir + "/npy_fifo' -p hi", dir + "/npy_fifo/a.npy: is a named pipe (FIFO)"},
        {"compare -m " + m + " -r '" + dir + "/manifest_fifo' -p hi", dir + "/manifest_fifo/manifest.json: is a named pipe"},
        {"run -m /dev/null -p hi", "/dev/null: is a character device; expected a regular file"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.args);
        auto r = run_limited(c.args, 4 << 20, 10);
        EXPECT_EQ(r.exit_code, 3) << r.out;
        EXPECT_NE(r.out.find(c.expected), std::string::npos) << r.out;
        // The file is named once ("cannot read X: X: is a named pipe" named it twice).
        const std::string path = c.expected.substr(0, c.expected.find(": "));
        size_t named = 0;
        for (size_t at = r.out.find(path); at != std::string::npos; at = r.out.find(path, at + path.size())) ++named;
        EXPECT_EQ(named, 1u) << r.out;
    }
    fs::remove_all(dir);
}

TEST(InputGuards, ReadInputFileRefusesWhatItCannotHold) {
    const std::string dir = test::make_temp_dir();
    write_text(dir + "/small.txt", "hello");
    auto text = read_input_file(dir + "/small.txt", 100);
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(text.value(), "hello");
    auto capped = read_input_file(dir + "/small.txt", 4);
    ASSERT_FALSE(capped.ok());
    EXPECT_EQ(capped.error().message, dir + "/small.txt: is 5 B; a file of this kind is at most 4 B");
    auto missing = read_input_file(dir + "/none.txt", 100);
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().message, dir + "/none.txt: cannot open: No such file or directory");
    EXPECT_FALSE(check_input_file(dir).ok());
    fs::remove_all(dir);
}

}  // namespace
}  // namespace ls

namespace ls {
namespace {

// ---- the CUDA backend's device memory (emulated with a size: LAYERSCOPE_SIMT_DEVICE_MEMORY)

// A model whose weights do not fit the device is refused before anything runs, with the numbers
// and where the memory was measured; one that fits runs.
TEST(DeviceGuards, AModelLargerThanTheDeviceIsRefusedUpFront) {
    LS_REQUIRE_FIXTURES();
    const std::string model = "'" + test::fixture_path("models/llama-gqa-mini-F16.gguf") + "'";
    ::setenv("LAYERSCOPE_SIMT_DEVICE_MEMORY", "4M", 1);  // the weights alone are 24 MiB
    auto r = test::run_layerscope("run -m " + model + " --tokens 1,2,3 -n 1 --backend cuda-emulated", true);
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("emulated CUDA device memory (LAYERSCOPE_SIMT_DEVICE_MEMORY)"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Segmentation"), std::string::npos) << r.out;
    ::setenv("LAYERSCOPE_SIMT_DEVICE_MEMORY", "256M", 1);
    r = test::run_layerscope("run -m " + model + " --tokens 1,2,3 -n 1 --backend cuda-emulated", true);
    ::unsetenv("LAYERSCOPE_SIMT_DEVICE_MEMORY");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

// An allocation the device cannot give is an error that names the call, the file and the line,
// and the backend stays usable.
TEST(DeviceGuards, OutOfDeviceMemoryIsAMessage) {
    ::setenv("LAYERSCOPE_SIMT_DEVICE_MEMORY", "1M", 1);
    MadeBackend made = make_backend(BackendKind::kCudaEmulated);
    ASSERT_TRUE(made.backend) << made.note;
    const BackendMemory m = made.backend->memory();
    EXPECT_TRUE(m.known);
    EXPECT_LE(m.available_bytes, 1u << 20);
    std::string message;
    try {
        made.backend->alloc(2u << 20);
    } catch (const std::runtime_error& e) {
        message = e.what();
    }
    EXPECT_NE(message.find("CUDA error: out of memory in cudaMalloc"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda_backend.cu:"), std::string::npos) << message;
    void* small = made.backend->alloc(4096);  // what fits still does
    EXPECT_NE(small, nullptr);
    made.backend->release(small);
    made.backend.reset();
    ::unsetenv("LAYERSCOPE_SIMT_DEVICE_MEMORY");
}

// The device arena: a released block is handed out again (zeroed) for the same size, counts as
// available, and is given back to the device when an allocation of another size needs the room.
TEST(DeviceGuards, ReleasedDeviceMemoryIsReusedAndGivenBackWhenFull) {
    ::setenv("LAYERSCOPE_SIMT_DEVICE_MEMORY", "1M", 1);
    MadeBackend made = make_backend(BackendKind::kCudaEmulated);
    ASSERT_TRUE(made.backend) << made.note;
    Backend& be = *made.backend;
    const uint64_t before = be.memory().available_bytes;
    void* a = be.alloc(600000);
    const std::vector<float> ones(150000, 1.0f);
    be.upload(a, ones.data(), 600000);
    be.release(a);
    EXPECT_EQ(be.memory().available_bytes, before);  // kept, but available
    void* b = be.alloc(600000);
    EXPECT_EQ(a, b);
    std::vector<float> back(150000, -1.0f);
    be.download(back.data(), b, 600000);
    EXPECT_EQ(back, std::vector<float>(150000, 0.0f)) << "a reused block is zeroed like a new one";
    be.release(b);
    void* c = be.alloc(700000);  // 600000 kept + 700000 > 1 MiB: the kept block goes back first
    EXPECT_NE(c, nullptr);
    EXPECT_LT(be.memory().available_bytes, before - 600000);
    be.release(c);
    made.backend.reset();
    ::unsetenv("LAYERSCOPE_SIMT_DEVICE_MEMORY");
}

}  // namespace
}  // namespace ls
