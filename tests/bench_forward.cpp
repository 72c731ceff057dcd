// Benchmark (not a test): prompt and decode speed of the CPU backend on the fixture models, in
// both math modes. Prints figures; run it by hand: build/tests/bench_forward [threads].
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine/forward/forward.h"
#include "tests/test_support.h"

using namespace ls;

int main(int argc, char** argv) {
    const int threads = argc > 1 ? std::atoi(argv[1]) : 0;
    if (!test::have_fixtures()) {
        std::printf("../shared/fixtures not found: nothing to benchmark\n");
        return 0;
    }
    auto backend = make_cpu_backend(threads);
    std::printf("%s\n%-28s %-6s %12s %12s\n", backend->name().c_str(), "model", "mode", "prompt tok/s", "decode ms/tok");
    for (const char* m : {"stories260K", "llama-gqa-mini-F16", "llama-gqa-mini-Q4_K_M", "qwen2-mini-F16", "qwen2-mini-Q8_0"}) {
        auto model = Model::open(test::fixture_path(std::string("models/") + m + ".gguf"));
        if (!model) continue;
        for (MathMode mode : {MathMode::kExact, MathMode::kLlama}) {
            ForwardOptions fo;
            fo.mode = mode;
            fo.n_ctx = 256;
            auto f = make_forward(*model.value(), *backend, fo);
            if (!f) continue;
            std::vector<int32_t> prompt(64);
            for (int i = 0; i < 64; ++i) prompt[i] = 1 + (i * 37) % 200;
            auto t0 = std::chrono::steady_clock::now();
            (void)f.value()->eval(prompt, nullptr);
            auto t1 = std::chrono::steady_clock::now();
            const int n_decode = 32;
            for (int i = 0; i < n_decode; ++i) (void)f.value()->eval({5 + i}, nullptr);
            auto t2 = std::chrono::steady_clock::now();
            const double prompt_s = std::chrono::duration<double>(t1 - t0).count();
            const double decode_ms = std::chrono::duration<double, std::milli>(t2 - t1).count() / n_decode;
            std::printf("%-28s %-6s %12.1f %12.2f\n", m, math_mode_name(mode), 64 / prompt_s, decode_ms);
        }
    }
    return 0;
}
