// The CUDA matmul on the SIMT emulator: the cuBLAS stand-in's column-major semantics and argument
// checks against hand-computed products, the one function that maps y = W x onto cuBLAS, the
// classic mistakes of that mapping (each must be caught), and both matmul paths against a plain
// double-precision product under the forward and random schedules.
#include "kernels/cuda/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/quantize.h"

namespace {

using ls::GgmlType;
using ls::cuda::GemmCall;
using ls::simt::Schedule;

template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    explicit DeviceBuffer(const std::vector<T>& host) {
        EXPECT_EQ(cudaMalloc(&ptr, host.size() * sizeof(T)), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    std::vector<T> download(size_t n) const {
        std::vector<T> v(n);
        EXPECT_EQ(cudaMemcpy(v.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return v;
    }
};

struct Handle {
    cublasHandle_t h = nullptr;
    Handle() { EXPECT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS); }
    ~Handle() { cublasDestroy(h); }
};

std::vector<float> randn(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
}

double nmse(const std::vector<float>& out, const std::vector<double>& ref) {
    double err = 0, norm = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
        err += (out[i] - ref[i]) * (out[i] - ref[i]);
        norm += ref[i] * ref[i];
    }
    return err / norm;
}

// y[t * N + r] = sum_k w[r * K + k] x[t * K + k], in double.
std::vector<double> plain_product(const std::vector<float>& w, const std::vector<float>& x, int64_t K, int64_t N, int64_t T) {
    std::vector<double> y(static_cast<size_t>(N * T));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t r = 0; r < N; ++r) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(w[r * K + k]) * x[t * K + k];
            y[t * N + r] = acc;
        }
    return y;
}

// ---- the stand-in is column-major cuBLAS

TEST(CublasStandIn, ColumnMajorProducts) {
    Handle handle;
    // A: 2 x 3 column-major with lda 3 (a padding row of 99s): [[1 2 3] [4 5 6]].
    DeviceBuffer<float> a({1, 4, 99, 2, 5, 99, 3, 6, 99});
    // B: 3 x 2 column-major, ldb 3: [[1 0] [0 1] [2 -1]].
    DeviceBuffer<float> b({1, 0, 2, 0, 1, -1});
    DeviceBuffer<float> c(std::vector<float>(4, NAN));  // NaN: beta = 0 must not read C
    const float one = 1, zero = 0;
    // A B = [[7 -1] [16 -1]], column-major.
    ASSERT_EQ(cublasSgemm(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, a.ptr, 3, b.ptr, 3, &zero, c.ptr, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(c.download(4), (std::vector<float>{7, 16, -1, -1}));
    // op(A) = A^T (3 x 2; A stored k x m = 2 x 3, lda 3) times the first two rows of B read with
    // ldb 3, the 2 x 2 identity: A^T = [[1 4] [2 5] [3 6]].
    DeviceBuffer<float> c3(std::vector<float>(6, 0));
    ASSERT_EQ(cublasSgemm(handle.h, CUBLAS_OP_T, CUBLAS_OP_N, 3, 2, 2, &one, a.ptr, 3, b.ptr, 3, &zero, c3.ptr, 3),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(c3.download(6), (std::vector<float>{1, 2, 3, 4, 5, 6}));
    // op(B) = B^T with B stored n x k = 2 x 3: pass A itself (ldb 3), so the product is
    // A A^T = [[14 32] [32 77]], and beta = 2 adds twice C's ones.
    DeviceBuffer<float> c2(std::vector<float>(4, 1));
    const float two = 2;
    ASSERT_EQ(cublasSgemm(handle.h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a.ptr, 3, a.ptr, 3, &two, c2.ptr, 2),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(c2.download(4), (std::vector<float>{16, 34, 34, 79}));
    // cublasGemmEx with f16 inputs computes the same (these values are exact in f16).
    std::vector<uint16_t> a16, b16;
    for (float v : {1, 4, 99, 2, 5, 99, 3, 6, 99}) a16.push_back(ls::fp32_to_fp16(v));
    for (float v : {1, 0, 2, 0, 1, -1}) b16.push_back(ls::fp32_to_fp16(v));
    DeviceBuffer<uint16_t> da16(a16), db16(b16);
    ASSERT_EQ(cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 3, &one, da16.ptr, CUDA_R_16F, 3, db16.ptr, CUDA_R_16F,
                           3, &zero, c.ptr, CUDA_R_32F, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(c.download(4), (std::vector<float>{7, 16, -1, -1}));
}

TEST(CublasStandIn, ArgumentChecksOfTheRealLibrary) {
    Handle handle;
    DeviceBuffer<float> a(std::vector<float>(64, 1)), b(std::vector<float>(64, 1)), c(std::vector<float>(64, 0));
    const float one = 1, zero = 0;
    auto sgemm = [&](cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
        return cublasSgemm(handle.h, ta, tb, m, n, k, &one, a.ptr, lda, b.ptr, ldb, &zero, c.ptr, ldc);
    };
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, 4, 3, 4), CUBLAS_STATUS_SUCCESS);
    // lda >= rows of A as stored: m for N, k for T.
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, 3, 3, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(sgemm(CUBLAS_OP_T, CUBLAS_OP_N, 4, 2, 3, 3, 3, 4), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(sgemm(CUBLAS_OP_T, CUBLAS_OP_N, 4, 2, 3, 2, 3, 4), CUBLAS_STATUS_INVALID_VALUE);
    // ldb >= k for N, n for T; ldc >= m.
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, 4, 2, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_T, 4, 2, 3, 4, 2, 4), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, 4, 3, 3), CUBLAS_STATUS_INVALID_VALUE);
    // ld >= 1 even for empty matrices; negative sizes; no handle.
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 0, 2, 3, 0, 3, 1), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, -1, 2, 3, 4, 3, 4), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasSgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, &one, a.ptr, 4, b.ptr, 3, &zero, c.ptr, 4),
              CUBLAS_STATUS_NOT_INITIALIZED);
    // A host matrix, or one that runs past its allocation, fails the execution.
    std::vector<float> host(64, 1);
    EXPECT_EQ(cublasSgemm(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, &one, host.data(), 4, b.ptr, 3, &zero, c.ptr, 4),
              CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_EQ(sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, 8, 8, 9), CUBLAS_STATUS_EXECUTION_FAILED);
    // Type combinations the stand-in does not model are refused, not guessed.
    EXPECT_EQ(cublasGemmEx(handle.h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 2, 3, &one, a.ptr, CUDA_R_32F, 4, b.ptr, CUDA_R_16F, 3,
                           &zero, c.ptr, CUDA_R_32F, 4, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_NOT_SUPPORTED);
}

// ---- the row-major to column-major mapping, and its classic mistakes

TEST(WeightGemmCall, MapsRowMajorWeightsOntoColumnMajorCublas) {
    GemmCall call{};
    std::string why;
    ASSERT_TRUE(ls::cuda::weight_gemm_call(5632, 16, 2048, 2048, 2048, 5632, &call, &why)) << why;
    EXPECT_EQ(call.transa, CUBLAS_OP_T);
    EXPECT_EQ(call.transb, CUBLAS_OP_N);
    EXPECT_EQ(call.m, 5632);
    EXPECT_EQ(call.n, 16);
    EXPECT_EQ(call.k, 2048);
    EXPECT_EQ(call.lda, 2048);
    EXPECT_EQ(call.ldb, 2048);
    EXPECT_EQ(call.ldc, 5632);
    // Each leading dimension below its rows is refused by name.
    EXPECT_FALSE(ls::cuda::weight_gemm_call(5632, 16, 2048, 2047, 2048, 5632, &call, &why));
    EXPECT_NE(why.find("lda = 2047"), std::string::npos) << why;
    EXPECT_FALSE(ls::cuda::weight_gemm_call(5632, 16, 2048, 2048, 16, 5632, &call, &why));
    EXPECT_NE(why.find("ldb = 16"), std::string::npos) << why;
    EXPECT_FALSE(ls::cuda::weight_gemm_call(5632, 16, 2048, 2048, 2048, 2048, &call, &why));
    EXPECT_NE(why.find("ldc = 2048"), std::string::npos) << why;
    EXPECT_FALSE(ls::cuda::weight_gemm_call(int64_t{1} << 31, 16, 2048, 2048, 2048, int64_t{1} << 31, &call, &why));
}

// Runs y = W x through cuBLAS with `call` (possibly mutated), W {K, N} and x {K, T} random.
// Returns whether the mistake was detected: a failed status, or numbers off the plain product.
struct GemmRun {
    cublasStatus_t status;
    double error;  // NMSE against the plain product (when the call succeeded)
    bool detected() const { return status != CUBLAS_STATUS_SUCCESS || !(error < 1e-6); }
};
GemmRun run_mapping(int64_t K, int64_t N, int64_t T, void (*mutate)(GemmCall&, int64_t K, int64_t N, int64_t T)) {
    const std::vector<float> w = randn(static_cast<size_t>(K * N), 1), x = randn(static_cast<size_t>(K * T), 2);
    DeviceBuffer<float> dw(w), dx(x), dy(std::vector<float>(static_cast<size_t>(N * T), 0));
    GemmCall call{};
    std::string why;
    EXPECT_TRUE(ls::cuda::weight_gemm_call(N, T, K, K, K, N, &call, &why)) << why;
    if (mutate) mutate(call, K, N, T);
    Handle handle;
    const cublasStatus_t status = ls::cuda::run_gemm_f32(handle.h, call, dw.ptr, dx.ptr, dy.ptr);
    if (status != CUBLAS_STATUS_SUCCESS) return {status, 0};
    return {status, nmse(dy.download(static_cast<size_t>(N * T)), plain_product(w, x, K, N, T))};
}

TEST(WeightGemmCall, TheRightCallMatchesThePlainProduct) {
    for (auto [K, N, T] : {std::tuple<int64_t, int64_t, int64_t>{64, 24, 16}, {48, 48, 48}, {32, 96, 9}}) {
        const GemmRun run = run_mapping(K, N, T, nullptr);
        EXPECT_EQ(run.status, CUBLAS_STATUS_SUCCESS);
        EXPECT_LT(run.error, 1e-12) << K << "x" << N << "x" << T;
    }
}

TEST(WeightGemmCall, ATransposedActivationOperandIsCaught) {
    auto transposed_b = [](GemmCall& c, int64_t, int64_t, int64_t) { c.transb = CUBLAS_OP_T; };
    // Square activations: every argument check passes and all reads stay in bounds, as on a GPU;
    // the numbers are wrong.
    const GemmRun square = run_mapping(48, 48, 48, transposed_b);
    EXPECT_EQ(square.status, CUBLAS_STATUS_SUCCESS);
    EXPECT_GT(square.error, 0.5);
    // K > T: op(B) reads x as a T-row matrix with ld K, past the end of x.
    EXPECT_TRUE(run_mapping(64, 24, 16, transposed_b).detected());
    // The weight not transposed (row-major data read as column-major), lda K: wrong numbers where
    // the sizes let it through the checks (square W), past the end of W where N < K, and
    // INVALID_VALUE where lda < m.
    auto weight_as_stored = [](GemmCall& c, int64_t, int64_t, int64_t) { c.transa = CUBLAS_OP_N; };
    const GemmRun square_w = run_mapping(48, 48, 16, weight_as_stored);
    EXPECT_EQ(square_w.status, CUBLAS_STATUS_SUCCESS);
    EXPECT_GT(square_w.error, 0.5);
    EXPECT_EQ(run_mapping(64, 24, 16, weight_as_stored).status, CUBLAS_STATUS_EXECUTION_FAILED);
    EXPECT_EQ(run_mapping(32, 96, 9, weight_as_stored).status, CUBLAS_STATUS_INVALID_VALUE);
}

TEST(WeightGemmCall, AWrongLeadingDimensionIsCaught) {
    // lda = N (the weight's row count) instead of K: refused where N < K ...
    auto lda_rows = [](GemmCall& c, int64_t, int64_t N, int64_t) { c.lda = static_cast<int>(N); };
    EXPECT_EQ(run_mapping(64, 24, 16, lda_rows).status, CUBLAS_STATUS_INVALID_VALUE);
    // ... and, where N > K, rows read from the wrong places (and past the end of W).
    EXPECT_TRUE(run_mapping(32, 96, 9, lda_rows).detected());
    // An off-by-one lda passes the argument checks but reaches past the end of W, which a GPU
    // reads silently and the emulator refuses.
    auto lda_plus_one = [](GemmCall& c, int64_t, int64_t, int64_t) { c.lda += 1; };
    EXPECT_EQ(run_mapping(64, 24, 16, lda_plus_one).status, CUBLAS_STATUS_EXECUTION_FAILED);
    // ldc = T: refused (ldc < m).
    auto ldc_cols = [](GemmCall& c, int64_t, int64_t, int64_t T) { c.ldc = static_cast<int>(T); };
    EXPECT_EQ(run_mapping(64, 24, 16, ldc_cols).status, CUBLAS_STATUS_INVALID_VALUE);
}

// A failing cuBLAS call surfaces as an error naming the status, the statement, the file and the line.
TEST(CudaMatmul, ACublasFailureNamesTheCallAndWhere) {
    Handle handle;
    ls::cuda::MatmulScratch scratch;
    const int64_t K = 64, N = 8, T = ls::cuda::kMatvecMaxColumns + 1;
    DeviceBuffer<float> w(randn(static_cast<size_t>(K * N), 5)), y(std::vector<float>(static_cast<size_t>(N * T), 0));
    const std::vector<float> host_x = randn(static_cast<size_t>(K * T), 6);  // not device memory
    try {
        ls::cuda::cuda_matmul(handle.h, scratch, GgmlType::F32, w.ptr, K * sizeof(float), host_x.data(), y.ptr, K, N, T,
                              nullptr);
        ADD_FAILURE() << "a host activation pointer was accepted";
    } catch (const std::runtime_error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("CUBLAS_STATUS_EXECUTION_FAILED in run_gemm_f32("), std::string::npos) << what;
        EXPECT_NE(what.find("matmul.cu:"), std::string::npos) << what;
    }
    cudaFree(scratch.data);
}

// ---- both matmul paths, every schedule that matters

class MatmulSchedules : public testing::TestWithParam<Schedule> {
protected:
    void SetUp() override { ls::simt::set_schedule(GetParam(), 7); }
    void TearDown() override { ls::simt::set_schedule(Schedule::Forward); }
};

TEST_P(MatmulSchedules, BothPathsMatchThePlainProduct) {
    const GgmlType types[] = {GgmlType::F32, GgmlType::F16, GgmlType::Q4_0, GgmlType::Q4_K, GgmlType::Q6_K};
    Handle handle;
    ls::cuda::MatmulScratch scratch;
    for (GgmlType type : types)
        for (int64_t T : {int64_t{1}, int64_t{3}, ls::cuda::kMatvecMaxColumns, ls::cuda::kMatvecMaxColumns + 1, int64_t{20}}) {
            const int64_t K = 512, N = 37;
            SCOPED_TRACE(std::string(ls::ggml_type_name(type)) + " T=" + std::to_string(T));
            const std::vector<float> src = randn(static_cast<size_t>(K * N), 3);
            uint64_t row_bytes = 0;
            ASSERT_TRUE(ls::ggml_row_bytes(type, K, &row_bytes));
            std::vector<uint8_t> wq(row_bytes * N);
            if (type == GgmlType::F32) std::memcpy(wq.data(), src.data(), wq.size());
            else if (type == GgmlType::F16) ls::fp32_to_fp16_row(src.data(), reinterpret_cast<uint16_t*>(wq.data()), K * N);
            else ASSERT_TRUE(ls::quantize_rows(type, src.data(), wq.data(), N, K));
            std::vector<float> w(static_cast<size_t>(K * N));
            ASSERT_TRUE(ls::dequantize_rows(type, wq.data(), 0, w.data(), N, K));
            const std::vector<float> x = randn(static_cast<size_t>(K * T), 4);
            DeviceBuffer<uint8_t> dw(wq);
            DeviceBuffer<float> dx(x), dy(std::vector<float>(static_cast<size_t>(N * T), NAN));
            ls::cuda::cuda_matmul(handle.h, scratch, type, dw.ptr, row_bytes, dx.ptr, dy.ptr, K, N, T, nullptr);
            EXPECT_LT(nmse(dy.download(static_cast<size_t>(N * T)), plain_product(w, x, K, N, T)), 1e-12);
        }
    cudaFree(scratch.data);
}

INSTANTIATE_TEST_SUITE_P(Cuda, MatmulSchedules, testing::Values(Schedule::Forward, Schedule::Random),
                         [](const testing::TestParamInfo<Schedule>& info) { return ls::simt::schedule_name(info.param); });

}  // namespace
