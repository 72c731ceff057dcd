// Benchmark (not a test): exact mode's AVX-512 prompt matmul on the TinyLlama-1.1B shapes (Q4_K
// weights, 64 columns), one thread, against the fused multiply-add peak measured in the same
// process, so that a slow moment of a shared machine shows in both; then exact decode's kernels of
// each format on rows held in L2 (their compute, apart from memory; the AVX-512 kernels, then the
// AVX2 ones exact mode takes on processors without AVX-512). Prints figures; run it by
// hand: build/tests/bench_exact_matmul [rounds].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/quantize.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/common/ggml_type.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/vec_dot_avx2.h"
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

// One column of K normal values in every form a decode kernel takes: f32 (exact mode), Q8_K and
// Q8_0 (llama mode's K-quant and Q8_0 kernels).
struct DecodeColumn {
    AlignedVector<float> x;
    std::vector<block_q8_K> xk;
    std::vector<block_q8_0> x8;
    DecodeColumn(int64_t K, std::mt19937& rng, std::normal_distribution<float>& normal)
        : x(K), xk(K / kQK_K), x8(K / kQK8_0) {
        for (float& v : x) v = normal(rng);
        quantize_row_q8_K_ref(x.data(), xk.data(), K);
        quantize_row_q8_0_ref(x.data(), x8.data(), K);
    }
};

// 96 rows of 4096 of one format, held in L2, and one column in every form a decode kernel takes.
struct DecodeRows {
    int64_t N, K;
    const char* w;
    uint64_t row_bytes;
    const float* x;
    const block_q8_K* xk;
    const block_q8_0* x8;
    float* y;
};

// A decode kernel's rate over such rows (billions of weights a second), `rounds` times on a line
// after its label and format; run(rows) decodes all the rows once.
template <class Run>
void print_l2_decode_rates(const char* label, GgmlType type, std::mt19937& rng, std::normal_distribution<float>& normal,
                           int rounds, Run run) {
    constexpr int64_t N = 96, K = 4096;
    uint64_t row_bytes = 0;
    ggml_row_bytes(type, K, &row_bytes);
    std::vector<float> wf(N * K);
    for (float& v : wf) v = normal(rng) * 0.02f;
    std::vector<char> w(row_bytes * N);
    quantize_rows(type, wf.data(), w.data(), N, K);
    const DecodeColumn col(K, rng, normal);
    AlignedVector<float> y(N);
    const DecodeRows rows{N, K, w.data(), row_bytes, col.x.data(), col.xk.data(), col.x8.data(), y.data()};
    std::printf("  %-10s %-5s", label, ggml_type_name(type));
    for (int round = 0; round < rounds; ++round) {
        constexpr int kRepeats = 2000;
        const double t0 = seconds();
        for (int i = 0; i < kRepeats; ++i) run(rows);
        std::printf(" %6.2f", static_cast<double>(N) * K * kRepeats / (seconds() - t0) / 1e9);
    }
    std::printf("\n");
}

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
    // Decode: one column against rows that stay in L2, so that what the kernels cost shows apart
    // from the memory they stream in a real model (there, 8e9 weights a token of an 8B model).
    constexpr GgmlType kFormats[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0};
    // "AVX-512 BW": Q5_K's and Q6_K's kernels for processors without VBMI and GFNI (the AVX-512
    // line's own where this one has them not).
    std::printf("exact decode, one thread, 96 rows of 4096 in L2 (billions of weights per second; AVX-512, then AVX2 kernels)\n");
    enum class Isa { kAvx512, kAvx512Bw, kAvx2 };
    for (Isa isa : {Isa::kAvx512, Isa::kAvx512Bw, Isa::kAvx2})
        for (GgmlType type : kFormats) {
            if (isa == Isa::kAvx512Bw && type != GgmlType::Q5_K && type != GgmlType::Q6_K) continue;
            const char* name = isa == Isa::kAvx512 ? "AVX-512" : isa == Isa::kAvx512Bw ? "AVX-512 BW" : "AVX2";
            print_l2_decode_rates(name, type, rng, normal, rounds, [&](const DecodeRows& d) {
                if (isa == Isa::kAvx512) exact_decode_rows_avx512(type, d.K, d.w, d.row_bytes, d.N, d.x, d.y);
                else if (isa == Isa::kAvx512Bw) exact_decode_rows_avx512_bw(type, d.K, d.w, d.row_bytes, d.N, d.x, d.y);
                else exact_decode_rows_avx2(type, d.K, d.w, d.row_bytes, d.N, d.x, d.y);
            });
        }
    // Llama mode's decode kernels on the same rows (ggml's integer sums against the Q8_K or Q8_0
    // activation), for comparison.
    std::printf("llama mode decode, one thread, 96 rows of 4096 in L2 (billions of weights per second)\n");
    for (GgmlType type : kFormats)
        print_l2_decode_rates("", type, rng, normal, rounds, [&](const DecodeRows& d) {
            if (type == GgmlType::Q8_0) dot_q8_0_family_avx2_rows(type, d.K, d.w, d.row_bytes, d.N, d.x8, d.y);
            else if (type == GgmlType::Q4_K)
                for (int64_t r = 0; r < d.N; ++r)
                    d.y[r] = dot_q4_K_avx512(d.K, reinterpret_cast<const block_q4_K*>(d.w + r * d.row_bytes), d.xk);
            else dot_k_quant_avx2_run(type, d.K, d.w, d.row_bytes, d.N, d.xk, d.y);
        });
    // Decode streaming from memory: 1 GiB of rows (far beyond every cache) of a model's two row
    // lengths, mapped from a file as a model's weights are, on two threads; exact mode's kernels
    // against llama mode's (which compute as llama.cpp's), alternating in the same process so that
    // the machine's memory speed of the moment weighs on both alike.
    std::printf("decode from a mapped file in the page cache, two threads, 1 GiB of rows of K (GB/s: exact, llama mode)\n");
    for (int64_t K : {4096, 14336})
    for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
        constexpr int64_t kSeedRows = 64;
        uint64_t row_bytes = 0;
        ggml_row_bytes(type, K, &row_bytes);
        const int64_t N = (int64_t{1} << 30) / static_cast<int64_t>(row_bytes) / 12 * 12;
        std::vector<float> wf(kSeedRows * K);
        for (float& v : wf) v = normal(rng) * 0.02f;
        // The rows in a file read through a mapping of its page-cache pages, as a model's weights are.
        const size_t bytes = row_bytes * N;
        std::vector<char> seed(row_bytes * kSeedRows);
        quantize_rows(type, wf.data(), seed.data(), kSeedRows, K);
        char path[] = "/tmp/layerscope-bench-XXXXXX";
        const int fd = mkstemp(path);
        if (fd < 0) {
            std::perror("bench_exact_matmul: a temporary file in /tmp");
            return 1;
        }
        unlink(path);
        for (size_t done = 0; done < bytes;) {
            const ssize_t n = write(fd, seed.data(), std::min(seed.size(), bytes - done));
            if (n <= 0) {
                std::perror("bench_exact_matmul: writing the temporary file");
                return 1;
            }
            done += static_cast<size_t>(n);
        }
        void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (map == MAP_FAILED) {
            std::perror("bench_exact_matmul: mapping the temporary file");
            return 1;
        }
        const std::span<const char> w(static_cast<const char*>(map), bytes);
        const DecodeColumn col(K, rng, normal);
        AlignedVector<float> y(N);
        auto run = [&](bool exact) {
            // A thread's rows in one call, as the CPU backend's decode hands them.
            auto part = [&](int64_t r0, int64_t r1) {
                const char* wr = w.data() + r0 * row_bytes;
                const int rows = static_cast<int>(r1 - r0);
                if (exact) exact_decode_rows_avx512(type, K, wr, row_bytes, rows, col.x.data(), y.data() + r0);
                else if (type == GgmlType::Q8_0) dot_q8_0_family_avx2_rows(type, K, wr, row_bytes, rows, col.x8.data(), y.data() + r0);
                else dot_k_quant_avx2_run(type, K, wr, row_bytes, rows, col.xk.data(), y.data() + r0);
            };
            const double t0 = seconds();
            std::thread other(part, N / 2, N);
            part(0, N / 2);
            other.join();
            return static_cast<double>(row_bytes) * N / (seconds() - t0) / 1e9;
        };
        std::printf("  %-5s %5lld", ggml_type_name(type), static_cast<long long>(K));
        run(false);  // the mapping's first touch: page faults, not decoding
        for (int round = 0; round < rounds; ++round) {
            const double e = run(true), l = run(false);
            std::printf("  %5.1f %5.1f (%.2fx)", e, l, e / l);
        }
        std::printf("\n");
        munmap(map, bytes);
    }
    return 0;
}
#else
int main() {
    std::printf("not an x86-64 build: nothing to benchmark\n");
    return 0;
}
#endif
