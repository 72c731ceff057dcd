// Benchmark (not a test): exact mode's AVX-512 prompt matmul on the TinyLlama-1.1B shapes (Q4_K
// weights, 64 columns), one thread, against the fused multiply-add peak measured in the same
// process, so that a slow moment of a shared machine shows in both. Prints figures; run it by hand:
// build/tests/bench_exact_matmul [rounds].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/quantize.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/vec_dot_avx512.h"

using namespace ls;

namespace {

double seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Sixteen independent chains of 512-bit fused multiply-adds: the core's peak, per ns.
__attribute__((target("avx512f"), noinline)) double fma_peak_per_ns() {
    __m512 a[16];
    for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-3f);
    const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
    constexpr long kIterations = 20000000;
    const double t0 = seconds();
    for (long k = 0; k < kIterations; ++k) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
    }
    const double t = seconds() - t0;
    alignas(64) float lanes[16];
    float sink = 0;
    for (int i = 0; i < 16; ++i) {
        _mm512_store_ps(lanes, a[i]);
        sink += lanes[0];
    }
    if (sink == 12345.0f) std::puts("");  // keeps the chains
    return kIterations * 16 / t / 1e9;
}

struct Matrix {
    int64_t N, K;
    std::vector<block_q4_K> w;
    AlignedVector<float> x, y;
};

}  // namespace

int main(int argc, char** argv) {
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
    if (!avx512_kernels_usable()) {
        std::printf("this processor lacks AVX-512 F/BW/DQ/VL: nothing to benchmark\n");
        return 0;
    }
    constexpr int64_t T = 64;
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<Matrix> mats;
    for (auto [N, K] : {std::pair<int64_t, int64_t>{5632, 2048}, {2048, 5632}, {2048, 2048}}) {
        Matrix m{N, K, std::vector<block_q4_K>(N * K / kQK_K), AlignedVector<float>(T * K), AlignedVector<float>(T * N)};
        std::vector<float> wf(N * K);
        for (float& v : wf) v = normal(rng) * 0.02f;
        quantize_rows(GgmlType::Q4_K, wf.data(), m.w.data(), N, K);
        for (float& v : m.x) v = normal(rng);
        mats.push_back(std::move(m));
    }
    std::printf("exact prompt matmul, Q4_K, %lld columns, one thread (fused multiply-adds of 16 lanes per ns)\n",
                static_cast<long long>(T));
    for (int round = 0; round < rounds; ++round) {
        const double peak = fma_peak_per_ns();
        double fmas = 0, time = 0;
        for (Matrix& m : mats) {
            const uint64_t row_bytes = m.K / kQK_K * sizeof(block_q4_K);
            const char* w = reinterpret_cast<const char*>(m.w.data());
            const double t0 = seconds();
            for (int64_t r = 0; r < m.N; r += kExactMatmulRows512)
                matmul_exact_avx512(GgmlType::Q4_K, w + r * row_bytes, row_bytes, kExactMatmulRows512, m.K, m.x.data(), T,
                                    m.y.data() + r, m.N);
            const double t = seconds() - t0;
            const double n = static_cast<double>(m.N) * m.K * T / 16;
            fmas += n, time += t;
            std::printf("  %lldx%lld %.2f", static_cast<long long>(m.N), static_cast<long long>(m.K), n / t / 1e9);
        }
        std::printf("  | all %.2f, peak %.2f: %.1f%% of the peak\n", fmas / time / 1e9, peak, 100 * fmas / time / 1e9 / peak);
    }
    return 0;
}
#else
int main() {
    std::printf("not an x86-64 build: nothing to benchmark\n");
    return 0;
}
#endif
