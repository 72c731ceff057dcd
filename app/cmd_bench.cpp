// `layerscope bench`: how fast a model runs here: prompt and generation tokens/s (after --depth
// cached tokens), the time spent in each op class and in attention, what capturing costs (runs without capture alternate with the captured ones), and
// the peak resident memory. One untimed run first maps the weights in; then the medians of
// --repetitions timed runs are reported, so one slow run on a busy machine does not decide.
#include <fmt/format.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "engine/capture/host_buffers.h"
#include "engine/forward/forward.h"

namespace ls::app {
namespace {

using Clock = std::chrono::steady_clock;

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope bench: %s\n", e.message.c_str());
    return exit_code_for(e);
}

enum class Capture { kNone, kStats, kAll };

// Times the ops (the time up to an event is its op's) and captures as the session would: stats on
// the backend for every event, or stats and a host copy of every tensor in a buffer from the pool.
class BenchSink final : public EventSink {
public:
    BenchSink(Capture capture, bool sync_each_event, std::shared_ptr<HostBufferPool> buffers)
        : capture_(capture), sync_(sync_each_event), buffers_(std::move(buffers)) {}
    void start() { last_ = Clock::now(); }
    void on_event(const Event& e) override {
        if (sync_) e.backend->synchronize();  // step mode: the op's own time, on a GPU too
        const Clock::time_point now = Clock::now();
        const double op_s = std::chrono::duration<double>(now - last_).count();
        op_seconds_[e.op] += op_s;
        // Attention over the cache: the scores and their softmax, the weighted values, their
        // output (kq-L, kq_soft_max-L, kqv-L, kqv_out-L, ...), whichever ops compute them.
        if (e.name.compare(0, 2, "kq") == 0) attention_seconds_ += op_s;
        if (capture_ != Capture::kNone) {
            TensorStats s;
            e.backend->stats(e.tensor, &s);
        }
        const Clock::time_point stats_done = Clock::now();
        if (capture_ == Capture::kAll) {
            kept_.push_back(buffers_->take(static_cast<size_t>(e.tensor.n_elements())));
            e.backend->download(kept_.back()->data(), e.tensor.data, kept_.back()->size() * sizeof(float));
        }
        last_ = Clock::now();  // capturing is not the next op's time
        stats_seconds_ += std::chrono::duration<double>(stats_done - now).count();
        copy_seconds_ += std::chrono::duration<double>(last_ - stats_done).count();
    }
    const std::map<Op, double>& op_seconds() const { return op_seconds_; }
    double attention_seconds() const { return attention_seconds_; }
    double stats_seconds() const { return stats_seconds_; }
    double copy_seconds() const { return copy_seconds_; }

private:
    Capture capture_;
    bool sync_;
    std::shared_ptr<HostBufferPool> buffers_;
    Clock::time_point last_;
    std::map<Op, double> op_seconds_;
    double attention_seconds_ = 0;
    double stats_seconds_ = 0, copy_seconds_ = 0;  // time in on_event spent capturing
    std::vector<std::shared_ptr<std::vector<float>>> kept_;  // full captures, held as a session holds them
};

struct Timing {
    double prompt_s = 0, gen_s = 0;
    std::map<Op, double> op_seconds;
    double attention_s = 0;          // of the op time, attention's (its products over the cache included)
    double stats_s = 0, copy_s = 0;  // of the total, the time spent computing statistics and copying
    DeviceCounters decode;           // what the decode calls asked of the device, all n_gen of them
};

// `depth` tokens first, untimed and uncaptured; then the prompt and n_gen decode calls, timed.
Result<Timing> time_run(ForwardPass& forward, const Backend& backend, const std::vector<int32_t>& depth,
                        const std::vector<int32_t>& prompt, int n_gen, Capture capture, bool sync_each_event,
                        const std::shared_ptr<HostBufferPool>& buffers) {
    forward.reset();
    if (!depth.empty())
        if (Status s = forward.eval(depth, nullptr); !s) return s.error();
    BenchSink sink(capture, sync_each_event, buffers);
    Timing t;
    sink.start();
    Clock::time_point t0 = Clock::now();
    if (Status s = forward.eval(prompt, &sink); !s) return s.error();
    t.prompt_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const DeviceCounters before = backend.device_counters();
    t0 = Clock::now();
    for (int i = 0; i < n_gen; ++i) {
        sink.start();
        // The same token each time: speed does not depend on which.
        if (Status s = forward.eval({prompt.back()}, &sink); !s) return s.error();
    }
    t.gen_s = std::chrono::duration<double>(Clock::now() - t0).count();
    const DeviceCounters after = backend.device_counters();
    t.decode = {after.launches - before.launches, after.syncs - before.syncs, after.d2h_copies - before.d2h_copies};
    t.op_seconds = sink.op_seconds();
    t.attention_s = sink.attention_seconds();
    t.stats_s = sink.stats_seconds();
    t.copy_s = sink.copy_seconds();
    return t;
}

}  // namespace

int run_bench(const BenchOptions& o) {
    MathMode mode;
    if (!math_mode_from_name(o.mode, &mode)) return fail(make_error(ErrorCode::kUsage, "--mode must be exact or llama"));
    const Capture capture = o.capture == "all" ? Capture::kAll : o.capture == "stats" ? Capture::kStats : Capture::kNone;
    const bool step_mode = o.sync == "event";
    const Clock::time_point open_start = Clock::now();
    auto model = Model::open(o.model_path);
    if (!model) return fail(model.error());
    const double open_s = std::chrono::duration<double>(Clock::now() - open_start).count();
    const ModelConfig& c = model.value()->config();

    ForwardOptions fo;
    fo.mode = mode;
    fo.n_ctx = (static_cast<int64_t>(o.depth) + o.prompt_tokens + o.gen + 255) / 256 * 256;
    auto chosen = open_backend_for(*model.value(), o.backend, o.threads, fo);
    if (!chosen) return fail(chosen.error());
    const Clock::time_point weights_start = Clock::now();
    auto forward = make_forward(*model.value(), *chosen.value().backend, fo);
    if (!forward) return fail(forward.error());
    // Where the weights are read from (make_forward moves them into memory for the CPU), and the
    // time that and the graph's setup took.
    const double weights_s = std::chrono::duration<double>(Clock::now() - weights_start).count();
    const std::string weights =
        chosen.value().backend->memory().weights_copied ? "copied to the backend" : model.value()->file().residency();

    // Token ids spread over the vocabulary, the same every run.
    const int64_t n_vocab = static_cast<int64_t>(forward.value()->last_logits().size());
    std::vector<int32_t> prompt(static_cast<size_t>(o.prompt_tokens));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + (i * 7919) % (n_vocab - 1));
    std::vector<int32_t> depth(static_cast<size_t>(o.depth));
    for (size_t i = 0; i < depth.size(); ++i) depth[i] = static_cast<int32_t>(1 + (i * 104729) % (n_vocab - 1));

    // Warm-up: where the backend reads the weights in place (the CPU), every weight page mapped in
    // (read a byte a page: a mixture of experts' warm-up run reaches only the experts its tokens
    // are routed to); every buffer touched before timing. As in a session, the host copies of one
    // run go back to a pool when released and the next run's copies reuse that memory.
    if (!chosen.value().backend->memory().weights_copied) {
        uint8_t touched = 0;
        for (const GgufTensorInfo& t : model.value()->tensors())
            for (uint64_t i = 0; i < t.n_bytes; i += 4096) touched ^= t.data[i];
        [[maybe_unused]] static volatile uint8_t sink;
        sink = touched;
    }
    const std::shared_ptr<HostBufferPool> buffers = HostBufferPool::create();
    const Backend& backend = *chosen.value().backend;
    if (auto warm = time_run(*forward.value(), backend, depth, prompt, std::min(o.gen, 1), Capture::kNone, false, buffers);
        !warm)
        return fail(warm.error());
    std::vector<Timing> runs, bare_runs;
    for (int r = 0; r < o.repetitions; ++r) {
        auto timed = time_run(*forward.value(), backend, depth, prompt, o.gen, capture, step_mode, buffers);
        if (!timed) return fail(timed.error());
        runs.push_back(timed.value());
        if (capture != Capture::kNone) {
            auto bare = time_run(*forward.value(), backend, depth, prompt, o.gen, Capture::kNone, step_mode, buffers);
            if (!bare) return fail(bare.error());
            bare_runs.push_back(bare.value());
        }
    }
    const auto median = [](std::vector<Timing> v, auto key) {
        std::sort(v.begin(), v.end(), [&](const Timing& a, const Timing& b) { return key(a) < key(b); });
        return v[v.size() / 2];
    };
    const auto prompt_key = [](const Timing& t) { return t.prompt_s; };
    const auto gen_key = [](const Timing& t) { return t.gen_s; };
    const auto total_key = [](const Timing& t) { return t.prompt_s + t.gen_s; };
    Timing t = median(runs, total_key);  // its op times are reported
    t.prompt_s = median(runs, prompt_key).prompt_s;
    t.gen_s = median(runs, gen_key).gen_s;
    double overhead = 1.0;
    if (capture != Capture::kNone) overhead = total_key(median(runs, total_key)) / total_key(median(bare_runs, total_key));
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    const int64_t peak_rss = static_cast<int64_t>(usage.ru_maxrss) * 1024;
    const double prompt_tps = o.prompt_tokens / t.prompt_s, gen_tps = o.gen > 0 ? o.gen / t.gen_s : 0.0;
    double op_total = 0;
    for (const auto& [op, s] : t.op_seconds) op_total += s;

    if (o.json) {
        nlohmann::json j;
        j["model"] = o.model_path;
        j["backend"] = chosen.value().backend->name();
        j["mode"] = math_mode_name(mode);
        if (mode == MathMode::kLlama) j["llama_isa"] = llama_isa_name(fo.llama_isa);
        j["prompt_tokens"] = o.prompt_tokens;
        j["gen_tokens"] = o.gen;
        j["depth"] = o.depth;
        j["repetitions"] = o.repetitions;
        j["capture"] = o.capture;
        j["sync"] = o.sync;
        j["prompt_tps"] = prompt_tps;
        j["gen_tps"] = gen_tps;
        j["capture_overhead"] = overhead;
        j["capture_stats_seconds"] = t.stats_s;
        j["capture_copy_seconds"] = t.copy_s;
        j["peak_rss_bytes"] = peak_rss;
        j["open_seconds"] = open_s;
        j["weights"] = weights;
        j["weights_seconds"] = weights_s;
        j["attention_seconds"] = t.attention_s;
        // Per decoded token, the decode calls of the reported run (the same in every run).
        const double n = std::max(o.gen, 1);
        j["launches_per_token"] = static_cast<double>(t.decode.launches) / n;
        j["syncs_per_token"] = static_cast<double>(t.decode.syncs) / n;
        j["d2h_copies_per_token"] = static_cast<double>(t.decode.d2h_copies) / n;
        j["op_seconds"] = nlohmann::json::object();
        for (const auto& [op, s] : t.op_seconds) j["op_seconds"][op_name(op)] = s;
        std::printf("%s\n", j.dump(2).c_str());
        return kExitOk;
    }
    std::printf("model:    %s (%s, %lld layers, n_embd %lld)\n", o.model_path.c_str(), c.arch_name.c_str(),
                static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd));
    std::printf("backend:  %s%s, mode %s%s\n", chosen.value().backend->name().c_str(),
                chosen.value().note.empty() ? "" : (" (" + chosen.value().note + ")").c_str(), math_mode_name(mode),
                mode == MathMode::kLlama ? (std::string(", llama.cpp build ") + llama_isa_name(fo.llama_isa)).c_str() : "");
    std::printf("open:     %.2f ms (metadata, tensor index, vocabulary)\n", 1000 * open_s);
    std::printf("weights:  %s (%.2f s with the graph's setup)\n", weights.c_str(), weights_s);
    std::printf("runs:     %d timed after a warm-up, medians; %s\n", o.repetitions,
                step_mode ? "step mode (the backend synced after every event)"
                          : "run mode (the backend synced only where data is read)");
    if (o.depth > 0) std::printf("depth:    %d tokens in the cache before the timed prompt (untimed)\n", o.depth);
    std::printf("prompt:   %d tokens  %.2f tok/s\n", o.prompt_tokens, prompt_tps);
    if (o.gen > 0) {
        std::printf("generate: %d tokens  %.2f tok/s  (%.2f ms/token)\n", o.gen, gen_tps, 1000 * t.gen_s / o.gen);
        if (chosen.value().backend->kind() != BackendKind::kCpu)
            std::printf("device:   a decoded token: %.1f launches, %.1f syncs, %.1f copies to the host\n",
                        static_cast<double>(t.decode.launches) / o.gen, static_cast<double>(t.decode.syncs) / o.gen,
                        static_cast<double>(t.decode.d2h_copies) / o.gen);
    }
    std::printf("capture:  %s", o.capture.c_str());
    if (capture != Capture::kNone)
        std::printf(", %.3fx the time without (statistics %.3f s, copies %.3f s of %.3f s)", overhead, t.stats_s, t.copy_s,
                    total_key(median(runs, total_key)));
    std::printf("\npeak RSS: %.1f MiB\nops (share of the time between events):\n", peak_rss / 1048576.0);
    for (const auto& [op, s] : t.op_seconds)
        std::printf("  %-16s %9.3f s  %5.1f%%\n", op_name(op), s, op_total > 0 ? 100 * s / op_total : 0.0);
    std::printf("attention (kq..kqv_out events, of the ops above): %.3f s  %.1f%%; the rest (weights' matmuls and "
                "the other ops) %.3f s\n", t.attention_s, op_total > 0 ? 100 * t.attention_s / op_total : 0.0,
                op_total - t.attention_s);
    return kExitOk;
}

}  // namespace ls::app
