// The CUDA dequantization and tensor-stats kernels, run on the CPU through the SIMT emulator, against
// the CPU backend at real model sizes, under the forward and random schedules.
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/stats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>

namespace {

using ls::GgmlType;
using ls::simt::Schedule;

const GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
                              GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
                              GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,   GgmlType::IQ4_NL,
                              GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0, GgmlType::MXFP4, GgmlType::NVFP4};

template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&ptr, count * sizeof(T)), cudaSuccess); }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// Weight-like rows of `type`: quantized from Gaussian values where a quantizer exists (unless
// `random_bytes`), otherwise random bytes (every bit pattern must decode the same on both sides, NaN
// scales included).
std::vector<uint8_t> make_rows(GgmlType type, int64_t n_per_row, int64_t n_rows, uint64_t seed, bool random_bytes) {
    uint64_t row_bytes = 0;
    EXPECT_TRUE(ls::ggml_row_bytes(type, n_per_row, &row_bytes));
    std::vector<uint8_t> data(row_bytes * n_rows);
    std::mt19937_64 rng(seed);
    if (!random_bytes && (ls::can_quantize(type) || type == GgmlType::F32)) {
        std::normal_distribution<float> normal(0.0f, 0.02f);
        std::vector<float> values(static_cast<size_t>(n_per_row * n_rows));
        for (auto& v : values) v = normal(rng);
        if (type == GgmlType::F32) std::memcpy(data.data(), values.data(), data.size());
        else EXPECT_TRUE(ls::quantize_rows(type, values.data(), data.data(), n_rows, n_per_row));
    } else {
        for (auto& b : data) b = static_cast<uint8_t>(rng());
    }
    return data;
}

// Decodes on the emulated device and on the CPU; every output bit must agree.
void expect_same_as_cpu(GgmlType type, int64_t n_per_row, int64_t n_rows, size_t src_row_bytes = 0,
                        bool random_bytes = false) {
    SCOPED_TRACE(std::string(ls::ggml_type_name(type)) + " " + std::to_string(n_rows) + " rows x " +
                 std::to_string(n_per_row) + " under " + ls::simt::schedule_name(ls::simt::current_schedule()));
    uint64_t packed_row_bytes = 0;
    ASSERT_TRUE(ls::ggml_row_bytes(type, n_per_row, &packed_row_bytes));
    const size_t stride = src_row_bytes ? src_row_bytes : packed_row_bytes;
    // Padded rows: the packed data is spread out with junk between rows.
    std::vector<uint8_t> packed = make_rows(type, n_per_row, n_rows, 42 + static_cast<uint64_t>(type), random_bytes);
    std::vector<uint8_t> src(stride * n_rows, 0xcd);
    for (int64_t r = 0; r < n_rows; ++r)
        std::memcpy(src.data() + r * stride, packed.data() + r * packed_row_bytes, packed_row_bytes);

    const size_t n = static_cast<size_t>(n_per_row * n_rows);
    std::vector<float> expected(n), actual(n);
    ASSERT_TRUE(ls::dequantize_rows(type, src.data(), stride, expected.data(), n_rows, n_per_row));

    DeviceBuffer<uint8_t> d_src(src.size());
    DeviceBuffer<float> d_dst(n);
    ASSERT_EQ(cudaMemcpy(d_src.ptr, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ls::simt::reset_counters();
    const auto start = std::chrono::steady_clock::now();
    ASSERT_EQ(ls::cuda::cuda_dequantize_rows(type, d_src.ptr, src_row_bytes, d_dst.ptr, n_per_row, n_rows, nullptr),
              cudaSuccess)
        << ls::simt::last_error_message();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (n >= (1u << 22))
        std::printf("[ speed ] %s %lldx%lld: %.3f s emulated, %.1f M CUDA threads/s, %.0f M elements/s\n",
                    ls::ggml_type_name(type), static_cast<long long>(n_rows), static_cast<long long>(n_per_row),
                    seconds, ls::simt::counters().threads / seconds / 1e6, n / seconds / 1e6);
    ASSERT_EQ(cudaMemcpy(actual.data(), d_dst.ptr, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < n; ++i) {
        if (std::memcmp(&expected[i], &actual[i], sizeof(float)) != 0) {
            FAIL() << "first mismatch at row " << i / n_per_row << " col " << i % n_per_row << ": cpu " << expected[i]
                   << " cuda " << actual[i];
        }
    }
}

class CudaDequant : public ::testing::TestWithParam<Schedule> {
protected:
    void SetUp() override { ls::simt::set_schedule(GetParam(), 2024); }
    void TearDown() override { ls::simt::set_schedule(Schedule::Forward); }
};

TEST_P(CudaDequant, EveryTypeMatchesTheCpu) {
    for (GgmlType type : kAllTypes) {
        ASSERT_TRUE(ls::cuda::cuda_can_dequantize(type)) << ls::ggml_type_name(type);
        ASSERT_TRUE(ls::can_dequantize(type)) << ls::ggml_type_name(type);
        expect_same_as_cpu(type, 2048, 256);
    }
}

// Real sizes of a 1B-class model: ffn_up/gate (5632 rows of 2048) and ffn_down (2048 rows of 5632).
TEST_P(CudaDequant, ModelSizedMatricesMatchTheCpu) {
    expect_same_as_cpu(GgmlType::Q4_K, 2048, 5632);
    expect_same_as_cpu(GgmlType::Q6_K, 5632, 2048);
    expect_same_as_cpu(GgmlType::Q8_0, 2048, 5632);
    expect_same_as_cpu(GgmlType::F16, 5632, 512);
}

TEST_P(CudaDequant, PaddedSourceRowsAndOddRowCounts) {
    expect_same_as_cpu(GgmlType::Q4_K, 512, 37, 4 * 144 + 16);
    expect_same_as_cpu(GgmlType::Q5_0, 96, 1001, 3 * 22 + 2);
    expect_same_as_cpu(GgmlType::F16, 33, 3, 80);
    expect_same_as_cpu(GgmlType::MXFP4, 96, 301, 3 * 17 + 5);  // 17-byte blocks at odd addresses
}

// MXFP4 from random bytes: every exponent (the subnormal scales of e 0 and 1, the infinities of
// e 254 and 255) and every code decode to the CPU's bits.
TEST_P(CudaDequant, Mxfp4EveryExponentMatchesTheCpu) {
    expect_same_as_cpu(GgmlType::MXFP4, 2048, 64, 0, true);
}

// NVFP4 from random bytes: every UE4M3 scale byte (subnormals, 0x7F, bit 7 set) and every code,
// 128 CUDA threads to a block (64-element blocks stage 8192 floats).
TEST_P(CudaDequant, Nvfp4EveryScaleMatchesTheCpu) {
    expect_same_as_cpu(GgmlType::NVFP4, 2048, 64, 0, true);
    expect_same_as_cpu(GgmlType::NVFP4, 192, 301, 3 * 36 + 5);  // padded rows at odd addresses
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaDequant, ::testing::Values(Schedule::Forward, Schedule::Random),
                         [](const auto& info) { return std::string(ls::simt::schedule_name(info.param)); });

TEST(CudaDequantApi, RejectsUnsupportedTypesAndPartialBlocks) {
    DeviceBuffer<uint8_t> src(1024);
    DeviceBuffer<float> dst(1024);
    EXPECT_FALSE(ls::cuda::cuda_can_dequantize(GgmlType::IQ2_XXS));
    EXPECT_EQ(ls::cuda::cuda_dequantize_rows(GgmlType::IQ2_XXS, src.ptr, 0, dst.ptr, 256, 1, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(ls::cuda::cuda_dequantize_rows(GgmlType::Q4_K, src.ptr, 0, dst.ptr, 100, 1, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(ls::cuda::cuda_dequantize_rows(GgmlType::Q4_0, src.ptr, 0, dst.ptr, 32, 0, nullptr), cudaSuccess);
}

// ---- tensor stats ---------------------------------------------------------------------------

ls::cuda::TensorStats cpu_stats(const std::vector<float>& x) {
    ls::cuda::TensorStats s{std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0, 0, 0, 0};
    for (float v : x) {
        if (std::isnan(v)) ++s.nan_count;
        else if (std::isinf(v)) ++s.inf_count;
        else {
            s.min = std::min(s.min, v);
            s.max = std::max(s.max, v);
            s.sum += v;
            s.sumsq += static_cast<double>(v) * v;
        }
    }
    return s;
}

ls::cuda::TensorStats device_stats(const std::vector<float>& x) {
    DeviceBuffer<float> d_x(std::max<size_t>(x.size(), 1));
    DeviceBuffer<uint8_t> workspace(ls::cuda::cuda_tensor_stats_workspace_bytes());
    DeviceBuffer<ls::cuda::TensorStats> d_out(1);
    EXPECT_EQ(cudaMemcpy(d_x.ptr, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(ls::cuda::cuda_tensor_stats(d_x.ptr, static_cast<int64_t>(x.size()), workspace.ptr, d_out.ptr, nullptr),
              cudaSuccess)
        << ls::simt::last_error_message();
    ls::cuda::TensorStats s{};
    EXPECT_EQ(cudaMemcpy(&s, d_out.ptr, sizeof s, cudaMemcpyDeviceToHost), cudaSuccess);
    return s;
}

void expect_stats_match(const std::vector<float>& x) {
    SCOPED_TRACE(std::to_string(x.size()) + " values under " + ls::simt::schedule_name(ls::simt::current_schedule()));
    const auto want = cpu_stats(x);
    const auto got = device_stats(x);
    EXPECT_EQ(got.min, want.min);
    EXPECT_EQ(got.max, want.max);
    EXPECT_EQ(got.nan_count, want.nan_count);
    EXPECT_EQ(got.inf_count, want.inf_count);
    // Only the summation order differs; in double that is far below 1e-9 of sum(|v|), which is at
    // most sqrt(n * sumsq).
    EXPECT_NEAR(got.sum, want.sum, 1e-9 * (1.0 + std::sqrt(want.sumsq * static_cast<double>(x.size()))));
    EXPECT_NEAR(got.sumsq, want.sumsq, 1e-9 * std::max(1.0, want.sumsq));
}

class CudaStats : public CudaDequant {};

TEST_P(CudaStats, MatchesTheCpuReference) {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.5f, 3.0f);
    for (size_t n : {size_t{1}, size_t{31}, size_t{256}, size_t{1000}, size_t{256 * 1024 + 7}, size_t{5632} * 2048}) {
        std::vector<float> x(n);
        for (auto& v : x) v = normal(rng);
        for (size_t i = 3; i < n; i += 9973) x[i] = std::numeric_limits<float>::quiet_NaN();
        for (size_t i = 5; i < n; i += 30011) x[i] = (i % 2 ? -1.0f : 1.0f) * std::numeric_limits<float>::infinity();
        expect_stats_match(x);
    }
}

TEST_P(CudaStats, EmptyAndAllNanTensors) {
    expect_stats_match({});
    const auto s = device_stats(std::vector<float>(3000, std::numeric_limits<float>::quiet_NaN()));
    EXPECT_EQ(s.nan_count, 3000u);
    EXPECT_EQ(s.min, std::numeric_limits<float>::infinity());
    EXPECT_EQ(s.max, -std::numeric_limits<float>::infinity());
}

INSTANTIATE_TEST_SUITE_P(Schedules, CudaStats, ::testing::Values(Schedule::Forward, Schedule::Random),
                         [](const auto& info) { return std::string(ls::simt::schedule_name(info.param)); });

}  // namespace
