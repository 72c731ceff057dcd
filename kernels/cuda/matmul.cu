// CUDA backend: y = W x. Decode (a few columns): one warp per weight row decodes the row's quant
// blocks with the decoders shared with the CPU backend and dots them with every column, then sums
// its lanes with shuffles. Prompt batches: the weight is decoded to f32 tiles on the device and
// multiplied with cuBLAS in f32. MUL_MAT_ID runs the mat-vec arithmetic for every (slot, token)
// column with the expert it names: one column per block row in decode, and for prompts the columns
// grouped by expert on the device, each weight row decoded once for up to 8 of its expert's columns.
//
// Both math modes compute in f32 from the exactly decoded weights. The CPU's llama mode quantizes
// the activations to the weight's dot type first (Q8_0, Q8_1, Q8_K); that rounding is not
// reproduced here: its effect (NMSE 3e-6 to 6e-5 against the exact result) is well inside the
// llama-mode tolerance, so a llama-mode run on this backend matches the CPU's exact mode instead.
#include "kernels/cuda/matmul.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/common/quant_blocks.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dequant.h"

namespace ls::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kLanesPerRow = 32;  // a warp per row
constexpr int kBlockThreads = 128;
constexpr int kRowsPerBlock = kBlockThreads / kLanesPerRow;
static_assert(kWarp % kLanesPerRow == 0, "a row's lanes lie in one warp");
constexpr size_t kMaxTileBytes = size_t{64} << 20;

// y[t * N + r] = dot(row r of W, column t of x) for t < T <= kMatvecMaxColumns. Lane l of a row
// decodes quant blocks l, l + kLanesPerRow, ... of the row into registers (local memory for the
// 256-element super-blocks) and keeps one partial sum per column; a butterfly of shuffles adds
// the row's lanes.
template <class Block, void (*Decode)(const Block*, float*), int kElems>
__global__ void __launch_bounds__(kBlockThreads)
    matvec_kernel(const uint8_t* w, size_t row_bytes, const float* x, float* y, int64_t K, int64_t N, int T) {
    const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
    // Lanes past the last row stay for the shuffles (every lane of the warp takes part) with no blocks.
    const int64_t n_blocks = r < N ? K / kElems : 0;
    const Block* row = reinterpret_cast<const Block*>(w + (r < N ? r : 0) * row_bytes);
    float acc[kMatvecMaxColumns];
    for (int t = 0; t < kMatvecMaxColumns; ++t) acc[t] = 0.0f;
    float v[kElems];
    for (int64_t b = lane; b < n_blocks; b += kLanesPerRow) {
        Decode(row + b, v);
        const float* xb = x + b * kElems;
        for (int t = 0; t < T; ++t) {
            float s = 0.0f;
            for (int i = 0; i < kElems; ++i) s += v[i] * xb[t * K + i];
            acc[t] += s;
        }
    }
    for (int t = 0; t < T; ++t) {
        float s = acc[t];
#pragma unroll
        for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
            s += __shfl_xor_sync(0xffffffffu, s, offset, kLanesPerRow);
        if (lane == 0 && r < N) y[t * N + r] = s;
    }
}

template <class Block, void (*Decode)(const Block*, float*), int kElems>
cudaError_t launch_matvec(const void* w, size_t row_bytes, const float* x, float* y, int64_t K, int64_t N, int T,
                          cudaStream_t stream) {
    if (K % kElems != 0 || T < 1 || T > kMatvecMaxColumns) return cudaErrorInvalidValue;
    const int64_t grid = (N + kRowsPerBlock - 1) / kRowsPerBlock;
    if (grid > 0x7fffffff) return cudaErrorInvalidValue;
    LAUNCH_STREAM((matvec_kernel<Block, Decode, kElems>), static_cast<unsigned>(grid), kBlockThreads, 0, stream,
                  static_cast<const uint8_t*>(w), row_bytes, x, y, K, N, T);
    return cudaGetLastError();
}

// MUL_MAT_ID: the mat-vec kernel's arithmetic for one column per (slot, token), the column's
// expert read from ids on the device. Columns beyond the grid's height go round again.
template <class Block, void (*Decode)(const Block*, float*), int kElems>
__global__ void __launch_bounds__(kBlockThreads)
    matvec_id_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, int64_t n_expert, const float* x,
                     int64_t x_cols, const int32_t* ids, int64_t n_used, float* y, int64_t K, int64_t N,
                     int64_t n_columns, int* error) {
    const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
    float v[kElems];
    for (int64_t c = blockIdx.y; c < n_columns; c += gridDim.y) {
        const int32_t e = ids[c];
        float* yc = y + c * N;
        if (e < 0 || e >= n_expert) {  // the same for the whole block: no lane is left in a shuffle
            if (lane == 0 && r < N) yc[r] = NAN;
            if (threadIdx.x == 0 && blockIdx.x == 0 && atomicCAS(&error[0], 0, 1) == 0) {
                error[1] = e;
                error[2] = static_cast<int>(c);
            }
            continue;
        }
        const int64_t s = c % n_used, t = c / n_used;
        const float* xc = x + (t * x_cols + s % x_cols) * K;
        const int64_t n_blocks = r < N ? K / kElems : 0;
        const Block* row = reinterpret_cast<const Block*>(w + e * expert_bytes + (r < N ? r : 0) * row_bytes);
        float acc = 0.0f;
        for (int64_t b = lane; b < n_blocks; b += kLanesPerRow) {
            Decode(row + b, v);
            const float* xb = xc + b * kElems;
            float sum = 0.0f;
            for (int i = 0; i < kElems; ++i) sum += v[i] * xb[i];
            acc += sum;
        }
#pragma unroll
        for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
            acc += __shfl_xor_sync(0xffffffffu, acc, offset, kLanesPerRow);
        if (lane == 0 && r < N) yc[r] = acc;
    }
}

// Prompt batches: the columns grouped by expert. group_columns_kernel (one thread: a stable
// counting sort of a few thousand ids) lists the columns expert by expert in `order` and cuts each
// expert's run into work items of at most kGroupColumns; columns whose id is out of range form the
// last items (expert -1), and the first of them is recorded in `error`.
constexpr int kGroupColumns = 8;

struct GroupWork {
    int32_t expert, first, count;  // first: index into order
};

// The grouping's scratch, in ints: the number of work items, then per expert (and one for the
// out-of-range ids) where its columns go, the columns in expert order, and the work items.
int64_t group_max_work(int64_t n_columns, int64_t n_expert) {
    return (n_columns + kGroupColumns - 1) / kGroupColumns + n_expert + 1;
}
int64_t group_scratch_ints(int64_t n_columns, int64_t n_expert) {
    return 1 + (n_expert + 1) + n_columns + 3 * group_max_work(n_columns, n_expert);
}

__global__ void group_columns_kernel(const int32_t* ids, int64_t n_columns, int64_t n_expert, int32_t* scratch, int* error) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int32_t* next = scratch + 1;
    int32_t* order = next + n_expert + 1;
    auto* work = reinterpret_cast<GroupWork*>(order + n_columns);
    for (int64_t e = 0; e <= n_expert; ++e) next[e] = 0;
    for (int64_t c = 0; c < n_columns; ++c) {
        const int32_t e = ids[c];
        const bool bad = e < 0 || e >= n_expert;
        ++next[bad ? n_expert : e];
        if (bad && atomicCAS(&error[0], 0, 1) == 0) {
            error[1] = e;
            error[2] = static_cast<int>(c);
        }
    }
    int32_t first = 0, n_work = 0;
    for (int64_t e = 0; e <= n_expert; ++e) {
        const int32_t count = next[e];
        for (int32_t i = 0; i < count; i += kGroupColumns)
            work[n_work++] = {e < n_expert ? static_cast<int32_t>(e) : -1, first + i, count - i < kGroupColumns ? count - i : kGroupColumns};
        next[e] = first;
        first += count;
    }
    for (int64_t c = 0; c < n_columns; ++c) {
        const int32_t e = ids[c];
        order[next[e < 0 || e >= n_expert ? n_expert : e]++] = static_cast<int32_t>(c);
    }
    scratch[0] = n_work;
}

// The mat-vec kernel's arithmetic for each column of a work item (so the bits of one column at a
// time), each weight row's blocks decoded once for all of them; out-of-range columns get NaN.
template <class Block, void (*Decode)(const Block*, float*), int kElems>
__global__ void __launch_bounds__(kBlockThreads)
    matvec_id_grouped_kernel(const uint8_t* w, size_t row_bytes, size_t expert_bytes, int64_t n_expert, const float* x,
                             int64_t x_cols, int64_t n_used, float* y, int64_t K, int64_t N, int64_t n_columns,
                             const int32_t* scratch) {
    const int lane = static_cast<int>(threadIdx.x) % kLanesPerRow;
    const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kLanesPerRow;
    const int32_t n_work = scratch[0];
    const int32_t* order = scratch + 1 + n_expert + 1;
    const auto* work = reinterpret_cast<const GroupWork*>(order + n_columns);
    float v[kElems];
    for (int32_t wi = static_cast<int32_t>(blockIdx.y); wi < n_work; wi += static_cast<int32_t>(gridDim.y)) {
        const GroupWork g = work[wi];
        int64_t column[kGroupColumns];
        const float* xc[kGroupColumns];
        for (int i = 0; i < g.count; ++i) {
            const int64_t c = order[g.first + i], s = c % n_used, t = c / n_used;
            column[i] = c;
            xc[i] = x + (t * x_cols + s % x_cols) * K;
        }
        if (g.expert < 0) {  // the same for the whole block: no lane is left in a shuffle
            if (lane == 0 && r < N)
                for (int i = 0; i < g.count; ++i) y[column[i] * N + r] = NAN;
            continue;
        }
        const int64_t n_blocks = r < N ? K / kElems : 0;
        const Block* row = reinterpret_cast<const Block*>(w + g.expert * expert_bytes + (r < N ? r : 0) * row_bytes);
        float acc[kGroupColumns];
        for (int i = 0; i < kGroupColumns; ++i) acc[i] = 0.0f;
        for (int64_t b = lane; b < n_blocks; b += kLanesPerRow) {
            Decode(row + b, v);
            for (int i = 0; i < g.count; ++i) {
                const float* xb = xc[i] + b * kElems;
                float sum = 0.0f;
                for (int k = 0; k < kElems; ++k) sum += v[k] * xb[k];
                acc[i] += sum;
            }
        }
        for (int i = 0; i < g.count; ++i) {
            float s = acc[i];
#pragma unroll
            for (int offset = kLanesPerRow / 2; offset > 0; offset /= 2)
                s += __shfl_xor_sync(0xffffffffu, s, offset, kLanesPerRow);
            if (lane == 0 && r < N) y[column[i] * N + r] = s;
        }
    }
}

struct MatvecIdArgs {
    const void* w;
    size_t row_bytes, expert_bytes;
    int64_t n_expert;
    const float* x;
    int64_t x_cols;
    const int32_t* ids;
    int64_t n_used;
    float* y;
    int64_t K, N, T;
    int* error;
    int32_t* group_scratch;  // group_scratch_ints(n_used * T, n_expert) ints, for T >= 2
};

template <class Block, void (*Decode)(const Block*, float*), int kElems>
cudaError_t launch_matvec_id(const MatvecIdArgs& a, cudaStream_t stream) {
    if (a.K % kElems != 0 || a.n_used < 1 || a.x_cols < 1 || a.T < 0) return cudaErrorInvalidValue;
    const int64_t n_columns = a.n_used * a.T;
    if (a.N == 0 || n_columns == 0) return cudaSuccess;
    const int64_t grid = (a.N + kRowsPerBlock - 1) / kRowsPerBlock;
    if (grid > 0x7fffffff) return cudaErrorInvalidValue;
    if (a.T >= 2 && a.group_scratch != nullptr) {
        LAUNCH_STREAM(group_columns_kernel, 1, 1, 0, stream, a.ids, n_columns, a.n_expert, a.group_scratch, a.error);
        if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
        const unsigned work_height = static_cast<unsigned>(std::min<int64_t>(group_max_work(n_columns, a.n_expert), 65535));
        LAUNCH_STREAM((matvec_id_grouped_kernel<Block, Decode, kElems>), dim3(static_cast<unsigned>(grid), work_height),
                      kBlockThreads, 0, stream, static_cast<const uint8_t*>(a.w), a.row_bytes, a.expert_bytes, a.n_expert,
                      a.x, a.x_cols, a.n_used, a.y, a.K, a.N, n_columns, a.group_scratch);
        return cudaGetLastError();
    }
    const unsigned height = static_cast<unsigned>(std::min<int64_t>(n_columns, 65535));
    LAUNCH_STREAM((matvec_id_kernel<Block, Decode, kElems>), dim3(static_cast<unsigned>(grid), height), kBlockThreads,
                  0, stream, static_cast<const uint8_t*>(a.w), a.row_bytes, a.expert_bytes, a.n_expert, a.x, a.x_cols,
                  a.ids, a.n_used, a.y, a.K, a.N, n_columns, a.error);
    return cudaGetLastError();
}

using MatvecIdLauncher = cudaError_t (*)(const MatvecIdArgs&, cudaStream_t);

MatvecIdLauncher matvec_id_launcher(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return launch_matvec_id<float, dequantize_block_f32, 1>;
        case GgmlType::F16: return launch_matvec_id<uint16_t, dequantize_block_f16, 1>;
        case GgmlType::BF16: return launch_matvec_id<uint16_t, dequantize_block_bf16, 1>;
        case GgmlType::Q4_0: return launch_matvec_id<block_q4_0, dequantize_block_q4_0, kQK4_0>;
        case GgmlType::Q4_1: return launch_matvec_id<block_q4_1, dequantize_block_q4_1, kQK4_1>;
        case GgmlType::Q5_0: return launch_matvec_id<block_q5_0, dequantize_block_q5_0, kQK5_0>;
        case GgmlType::Q5_1: return launch_matvec_id<block_q5_1, dequantize_block_q5_1, kQK5_1>;
        case GgmlType::Q8_0: return launch_matvec_id<block_q8_0, dequantize_block_q8_0, kQK8_0>;
        case GgmlType::Q2_K: return launch_matvec_id<block_q2_K, dequantize_block_q2_K, kQK_K>;
        case GgmlType::Q3_K: return launch_matvec_id<block_q3_K, dequantize_block_q3_K, kQK_K>;
        case GgmlType::Q4_K: return launch_matvec_id<block_q4_K, dequantize_block_q4_K, kQK_K>;
        case GgmlType::Q5_K: return launch_matvec_id<block_q5_K, dequantize_block_q5_K, kQK_K>;
        case GgmlType::Q6_K: return launch_matvec_id<block_q6_K, dequantize_block_q6_K, kQK_K>;
        case GgmlType::IQ4_NL: return launch_matvec_id<block_iq4_nl, dequantize_block_iq4_nl, kQK4_NL>;
        case GgmlType::IQ4_XS: return launch_matvec_id<block_iq4_xs, dequantize_block_iq4_xs, kQK_K>;
        case GgmlType::MXFP4: return launch_matvec_id<block_mxfp4, dequantize_block_mxfp4, kQK_MXFP4>;
        case GgmlType::NVFP4: return launch_matvec_id<block_nvfp4, dequantize_block_nvfp4, kQK_NVFP4>;
        case GgmlType::TQ1_0: return launch_matvec_id<block_tq1_0, dequantize_block_tq1_0, kQK_K>;
        case GgmlType::TQ2_0: return launch_matvec_id<block_tq2_0, dequantize_block_tq2_0, kQK_K>;
        default: return nullptr;
    }
}

using MatvecLauncher = cudaError_t (*)(const void*, size_t, const float*, float*, int64_t, int64_t, int, cudaStream_t);

MatvecLauncher matvec_launcher(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return launch_matvec<float, dequantize_block_f32, 1>;
        case GgmlType::F16: return launch_matvec<uint16_t, dequantize_block_f16, 1>;
        case GgmlType::BF16: return launch_matvec<uint16_t, dequantize_block_bf16, 1>;
        case GgmlType::Q4_0: return launch_matvec<block_q4_0, dequantize_block_q4_0, kQK4_0>;
        case GgmlType::Q4_1: return launch_matvec<block_q4_1, dequantize_block_q4_1, kQK4_1>;
        case GgmlType::Q5_0: return launch_matvec<block_q5_0, dequantize_block_q5_0, kQK5_0>;
        case GgmlType::Q5_1: return launch_matvec<block_q5_1, dequantize_block_q5_1, kQK5_1>;
        case GgmlType::Q8_0: return launch_matvec<block_q8_0, dequantize_block_q8_0, kQK8_0>;
        case GgmlType::Q2_K: return launch_matvec<block_q2_K, dequantize_block_q2_K, kQK_K>;
        case GgmlType::Q3_K: return launch_matvec<block_q3_K, dequantize_block_q3_K, kQK_K>;
        case GgmlType::Q4_K: return launch_matvec<block_q4_K, dequantize_block_q4_K, kQK_K>;
        case GgmlType::Q5_K: return launch_matvec<block_q5_K, dequantize_block_q5_K, kQK_K>;
        case GgmlType::Q6_K: return launch_matvec<block_q6_K, dequantize_block_q6_K, kQK_K>;
        case GgmlType::IQ4_NL: return launch_matvec<block_iq4_nl, dequantize_block_iq4_nl, kQK4_NL>;
        case GgmlType::IQ4_XS: return launch_matvec<block_iq4_xs, dequantize_block_iq4_xs, kQK_K>;
        case GgmlType::MXFP4: return launch_matvec<block_mxfp4, dequantize_block_mxfp4, kQK_MXFP4>;
        case GgmlType::NVFP4: return launch_matvec<block_nvfp4, dequantize_block_nvfp4, kQK_NVFP4>;
        case GgmlType::TQ1_0: return launch_matvec<block_tq1_0, dequantize_block_tq1_0, kQK_K>;
        case GgmlType::TQ2_0: return launch_matvec<block_tq2_0, dequantize_block_tq2_0, kQK_K>;
        default: return nullptr;
    }
}

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

}  // namespace

bool cuda_can_matmul(GgmlType type) {
    return matvec_launcher(type) != nullptr && matvec_id_launcher(type) != nullptr && cuda_can_dequantize(type);
}

bool weight_gemm_call(int64_t n_rows, int64_t T, int64_t K, int64_t ldw, int64_t ldx, int64_t ldy, GemmCall* call,
                      std::string* why) {
    // Column-major: C (m x n, ldc) = op(A) (m x k) * op(B) (k x n).
    //   C = y: n_rows x T, ldc = ldy.     op(B) = x: K x T as stored, CUBLAS_OP_N, ldb = ldx.
    //   op(A) = W (n_rows x K) = A^T where A is W's memory, K x n_rows: CUBLAS_OP_T, lda = ldw.
    const struct {
        const char* name;
        int64_t value, rows;
        const char* rows_are;
    } lds[] = {{"lda", ldw, K, "K, the length of a weight row"},
               {"ldb", ldx, K, "K, the length of an activation column"},
               {"ldc", ldy, n_rows, "N, the length of an output column"}};
    for (const auto& ld : lds)
        if (ld.value < std::max<int64_t>(1, ld.rows)) {
            *why = std::string(ld.name) + " = " + std::to_string(ld.value) + " is less than " + ld.rows_are + " (" +
                   std::to_string(ld.rows) + ")";
            return false;
        }
    for (int64_t v : {n_rows, T, K, ldw, ldx, ldy})
        if (!fits_int(v)) {
            *why = "a size or leading dimension (" + std::to_string(v) + ") does not fit cuBLAS's int";
            return false;
        }
    *call = GemmCall{CUBLAS_OP_T,         CUBLAS_OP_N,         static_cast<int>(n_rows), static_cast<int>(T),
                     static_cast<int>(K), static_cast<int>(ldw), static_cast<int>(ldx), static_cast<int>(ldy)};
    return true;
}

cublasStatus_t run_gemm_f32(cublasHandle_t handle, const GemmCall& c, const float* A, const float* B, float* C) {
    const float alpha = 1.0f, beta = 0.0f;
    count_device_launch();
    // f32 compute on f32 operands: no tensor-core down-conversion, so exact mode stays exact.
    return cublasGemmEx(handle, c.transa, c.transb, c.m, c.n, c.k, &alpha, A, CUDA_R_32F, c.lda, B, CUDA_R_32F, c.ldb,
                        &beta, C, CUDA_R_32F, c.ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

void cuda_matmul(cublasHandle_t handle, MatmulScratch& scratch, GgmlType type, const void* w, size_t w_row_bytes,
                 const float* x, float* y, int64_t K, int64_t N, int64_t T, cudaStream_t stream) {
    if (N == 0 || T == 0) return;
    if (T <= kMatvecMaxColumns) {
        const MatvecLauncher launcher = matvec_launcher(type);
        if (launcher == nullptr)
            throw std::runtime_error(std::string("matmul: no CUDA kernel for ") + ggml_type_name(type) + " weights");
        LS_CUDA_CHECK(launcher(w, w_row_bytes, x, y, K, N, static_cast<int>(T), stream));
        return;
    }
    LS_CUBLAS_CHECK(cublasSetStream(handle, stream));
    std::string why;
    GemmCall call{};
    // F32 weights whose rows are whole floats apart go to cuBLAS as they are.
    if (type == GgmlType::F32 && w_row_bytes % sizeof(float) == 0) {
        if (!weight_gemm_call(N, T, K, static_cast<int64_t>(w_row_bytes / sizeof(float)), K, N, &call, &why))
            throw std::runtime_error("matmul: " + why);
        LS_CUBLAS_CHECK(run_gemm_f32(handle, call, static_cast<const float*>(w), x, y));
        return;
    }
    const size_t row_f32_bytes = static_cast<size_t>(K) * sizeof(float);
    const int64_t tile_rows = std::clamp<int64_t>(static_cast<int64_t>(kMaxTileBytes / std::max<size_t>(row_f32_bytes, 1)), 1, N);
    const size_t tile_bytes = static_cast<size_t>(tile_rows) * row_f32_bytes;
    if (scratch.bytes < tile_bytes) {
        LS_CUDA_CHECK(cudaFree(scratch.data));
        scratch = {};
        LS_CUDA_CHECK(cudaMalloc(&scratch.data, tile_bytes));
        scratch.bytes = tile_bytes;
    }
    for (int64_t r0 = 0; r0 < N; r0 += tile_rows) {
        const int64_t rows = std::min(tile_rows, N - r0);
        LS_CUDA_CHECK(cuda_dequantize_rows(type, static_cast<const uint8_t*>(w) + r0 * w_row_bytes, w_row_bytes,
                                                  scratch.data, K, rows, stream));
        // The tile is rows x K packed; its outputs are rows r0.. of every column of y.
        if (!weight_gemm_call(rows, T, K, K, K, N, &call, &why)) throw std::runtime_error("matmul: " + why);
        LS_CUBLAS_CHECK(run_gemm_f32(handle, call, scratch.data, x, y + r0));
    }
}

cudaError_t cuda_matmul_id(GgmlType type, const void* w, size_t w_row_bytes, size_t w_expert_bytes, int64_t n_expert,
                           const float* x, int64_t x_cols, const int32_t* ids, int64_t n_used, float* y, int64_t K,
                           int64_t N, int64_t T, int* dev_error, MatmulIdScratch& scratch, cudaStream_t stream) {
    const MatvecIdLauncher launcher = matvec_id_launcher(type);
    if (launcher == nullptr || dev_error == nullptr) return cudaErrorInvalidValue;
    int32_t* group = nullptr;
    if (T >= 2) {
        const size_t bytes = static_cast<size_t>(group_scratch_ints(n_used * T, n_expert)) * sizeof(int32_t);
        if (scratch.bytes < bytes) {
            if (cudaError_t e = cudaFree(scratch.data); e != cudaSuccess) return e;
            scratch = {};
            if (cudaError_t e = cudaMalloc(reinterpret_cast<void**>(&scratch.data), bytes); e != cudaSuccess) return e;
            scratch.bytes = bytes;
        }
        group = scratch.data;
    }
    return launcher({w, w_row_bytes, w_expert_bytes, n_expert, x, x_cols, ids, n_used, y, K, N, T, dev_error, group}, stream);
}

}  // namespace ls::cuda
