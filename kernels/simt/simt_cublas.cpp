// The emulator's stand-in for cuBLAS: handles, streams and GEMM with the real library's
// column-major semantics and argument checks, computed on the CPU. A matrix passed the wrong way
// (row-major data as column-major, a transposed operand, a wrong leading dimension) gives here
// the status or the wrong numbers it gives on a GPU; reading outside a device allocation, which
// a GPU may or may not survive, fails with CUBLAS_STATUS_EXECUTION_FAILED and says where.
#include "kernels/simt/simt_cublas.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/simt/simt_internal.h"

struct cublasContext {
    cudaStream_t stream = nullptr;
};

namespace {

cublasStatus_t fail(cublasStatus_t status, const std::string& message) {
    std::fprintf(stderr, "layerscope simt: %s\n", message.c_str());
    return status;
}

const char* op_name(cublasOperation_t op) {
    switch (op) {
        case CUBLAS_OP_N: return "CUBLAS_OP_N";
        case CUBLAS_OP_T: return "CUBLAS_OP_T";
        case CUBLAS_OP_C: return "CUBLAS_OP_C";
        default: return "an unknown cublasOperation_t";
    }
}

size_t type_bytes(cudaDataType type) { return type == CUDA_R_32F ? 4 : 2; }

float load(const void* base, cudaDataType type, int64_t i) {
    switch (type) {
        case CUDA_R_32F: return static_cast<const float*>(base)[i];
        case CUDA_R_16F: return ls::fp16_to_fp32(static_cast<const uint16_t*>(base)[i]);
        default: return ls::bf16_to_fp32(static_cast<const uint16_t*>(base)[i]);
    }
}

void store(void* base, cudaDataType type, int64_t i, float v) {
    if (type == CUDA_R_32F) static_cast<float*>(base)[i] = v;
    else if (type == CUDA_R_16F) static_cast<uint16_t*>(base)[i] = ls::fp32_to_fp16(v);
    else static_cast<uint16_t*>(base)[i] = ls::fp32_to_bf16(v);
}

// A column-major matrix as the call passes it: `rows` x `cols` stored with leading dimension ld.
struct Operand {
    const char* name;  // "A", "B", "C"
    const void* data;
    cudaDataType type;
    int rows, cols, ld;
};

// The device memory the operand spans must be a device allocation, wholly.
bool check_memory(const Operand& o, const char* call) {
    if (o.rows == 0 || o.cols == 0) return true;
    const int64_t need = (static_cast<int64_t>(o.cols - 1) * o.ld + o.rows) * static_cast<int64_t>(type_bytes(o.type));
    const int64_t have = ls::simt::detail::device_bytes_from(o.data);
    if (have < 0) {
        fail(CUBLAS_STATUS_EXECUTION_FAILED, std::string(call) + ": " + o.name +
                                                 " is not device memory\nHINT: pass memory from cudaMalloc");
        return false;
    }
    if (have < need) {
        fail(CUBLAS_STATUS_EXECUTION_FAILED,
             std::string(call) + ": " + o.name + " (" + std::to_string(o.rows) + " x " + std::to_string(o.cols) +
                 ", ld " + std::to_string(o.ld) + ") spans " + std::to_string(need) + " bytes, past the end of its " +
                 "device allocation (" + std::to_string(have) + " bytes left)\nHINT: check the leading dimension " +
                 "and the transpose flags: cuBLAS matrices are column-major");
        return false;
    }
    return true;
}

struct Gemm {
    const char* call;
    cublasHandle_t handle;
    cublasOperation_t transa, transb;
    int m, n, k;
    float alpha, beta;
    const void* A;
    cudaDataType Atype;
    int lda;
    const void* B;
    cudaDataType Btype;
    int ldb;
    void* C;
    cudaDataType Ctype;
    int ldc;
};

// The checks and the arithmetic of every GEMM flavour: C = alpha op(A) op(B) + beta C, op(A) m x k,
// op(B) k x n, C m x n, all column-major. Argument errors are those of the real library, in its order.
cublasStatus_t gemm(const Gemm& g) {
    const std::string call = g.call;
    if (g.handle == nullptr) return fail(CUBLAS_STATUS_NOT_INITIALIZED, call + ": null handle\nHINT: call cublasCreate first");
    for (cublasOperation_t op : {g.transa, g.transb})
        if (op != CUBLAS_OP_N && op != CUBLAS_OP_T && op != CUBLAS_OP_C)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call + ": invalid transpose flag " + std::to_string(static_cast<int>(op)));
    if (g.m < 0 || g.n < 0 || g.k < 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call + ": negative size (m " + std::to_string(g.m) + ", n " +
                                                     std::to_string(g.n) + ", k " + std::to_string(g.k) + ")");
    const bool ta = g.transa != CUBLAS_OP_N, tb = g.transb != CUBLAS_OP_N;
    // As stored: A is m x k (or k x m when transposed), B is k x n (or n x k).
    const Operand a{"A", g.A, g.Atype, ta ? g.k : g.m, ta ? g.m : g.k, g.lda};
    const Operand b{"B", g.B, g.Btype, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb};
    const Operand c{"C", g.C, g.Ctype, g.m, g.n, g.ldc};
    for (const Operand* o : {&a, &b, &c})
        if (o->ld < std::max(1, o->rows))
            return fail(CUBLAS_STATUS_INVALID_VALUE,
                        call + ": ld" + static_cast<char>(o->name[0] - 'A' + 'a') + " = " + std::to_string(o->ld) +
                            " < max(1, " + std::to_string(o->rows) + "), the rows of " + o->name + " as stored (" +
                            (o->name[0] == 'A' ? op_name(g.transa) : o->name[0] == 'B' ? op_name(g.transb) : "m") +
                            ")\nHINT: cuBLAS is column-major: a row-major W {K, N} is the K x N matrix with ld K, "
                            "used as op T");
    if (g.m == 0 || g.n == 0) return CUBLAS_STATUS_SUCCESS;
    if (!check_memory(c, g.call)) return CUBLAS_STATUS_EXECUTION_FAILED;
    const bool reads_ab = g.k > 0 && g.alpha != 0.0f;
    if (reads_ab && !(check_memory(a, g.call) && check_memory(b, g.call))) return CUBLAS_STATUS_EXECUTION_FAILED;
    // Column by column of C, each dot product summed in order of l in f32.
    std::vector<float> a_row(static_cast<size_t>(g.k)), b_col(static_cast<size_t>(g.k));
    for (int j = 0; j < g.n; ++j) {
        if (reads_ab)
            for (int l = 0; l < g.k; ++l)
                b_col[l] = load(g.B, g.Btype, tb ? j + static_cast<int64_t>(l) * g.ldb : l + static_cast<int64_t>(j) * g.ldb);
        for (int i = 0; i < g.m; ++i) {
            float acc = 0.0f;
            if (reads_ab) {
                for (int l = 0; l < g.k; ++l)
                    a_row[l] = load(g.A, g.Atype, ta ? l + static_cast<int64_t>(i) * g.lda : i + static_cast<int64_t>(l) * g.lda);
                for (int l = 0; l < g.k; ++l) acc += a_row[l] * b_col[l];
            }
            const int64_t ci = i + static_cast<int64_t>(j) * g.ldc;
            // beta == 0: C is not read, so NaN garbage in it does not leak through (as in BLAS).
            const float v = g.beta == 0.0f ? g.alpha * acc : g.alpha * acc + g.beta * load(g.C, g.Ctype, ci);
            store(g.C, g.Ctype, ci, v);
        }
    }
    return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
    if (handle == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: null handle pointer");
    *handle = new cublasContext{};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
    if (handle == nullptr) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy: null handle");
    delete handle;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
    if (handle == nullptr) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream: null handle");
    handle->stream = stream;
    return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
        default: return "CUBLAS_STATUS_UNKNOWN";
    }
}

const char* cublasGetStatusString(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
        default: return "an internal operation failed";
    }
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                           const float* alpha, const float* A, int lda, const float* B, int ldb, const float* beta, float* C,
                           int ldc) {
    if (alpha == nullptr || beta == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm: null alpha or beta");
    return gemm({"cublasSgemm", handle, transa, transb, m, n, k, *alpha, *beta, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, C,
                 CUDA_R_32F, ldc});
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                            const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                            int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t) {
    // The f32-compute combinations: A and B f32, f16 or bf16 alike; C f32 or the inputs' type.
    const bool f32_compute = computeType == CUBLAS_COMPUTE_32F || computeType == CUBLAS_COMPUTE_32F_PEDANTIC ||
                             computeType == CUBLAS_COMPUTE_32F_FAST_16F || computeType == CUBLAS_COMPUTE_32F_FAST_16BF ||
                             computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
    const bool ab_ok = Atype == Btype && (Atype == CUDA_R_32F || Atype == CUDA_R_16F || Atype == CUDA_R_16BF);
    if (!f32_compute || !ab_ok || (Ctype != CUDA_R_32F && Ctype != Atype))
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasGemmEx: this combination of types is not emulated "
                                                 "(f32 compute, A and B f32/f16/bf16 alike, C f32 or theirs)");
    if (alpha == nullptr || beta == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGemmEx: null alpha or beta");
    return gemm({"cublasGemmEx", handle, transa, transb, m, n, k, *static_cast<const float*>(alpha),
                 *static_cast<const float*>(beta), A, Atype, lda, B, Btype, ldb, C, Ctype, ldc});
}

}  // extern "C"
