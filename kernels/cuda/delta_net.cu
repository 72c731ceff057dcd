// CUDA backend: qwen35's Gated DeltaNet ops. SILU and SSM_CONV are grid-stride loops over the
// output with the CPU's arithmetic, operation for operation (built with --fmad=false); the gated
// delta rule gives each row of a head's stored state to one thread, which owns it for the whole
// ubatch, so the recurrence over tokens needs no synchronisation and sums in the CPU exact mode's
// order; its chunked form does the same per column in double, with a block's shared matrices.
#include "kernels/cuda/delta_net.h"

#include <cmath>

#include "kernels/common/v_expf.h"

namespace ls::cuda {
namespace {

constexpr int kElementThreads = 256;
constexpr int64_t kElementMaxBlocks = 1024;  // grid-stride beyond 262144 threads
constexpr int kDeltaNetRows = 32;            // rows of one head's state per block, a thread each

unsigned element_blocks(int64_t total) {
    const int64_t blocks = (total + kElementThreads - 1) / kElementThreads;
    return static_cast<unsigned>(blocks < kElementMaxBlocks ? blocks : kElementMaxBlocks);
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// A product and a sum each rounded on its own, never fused into one multiply-add: nvcc's
// __fmul_rn / __fadd_rn. The emulator's C++ build contracts nothing (ISO C++, no FMA target).
__device__ float mul_rn(float a, float b) {
#if LS_SIMT_EMULATED
    return a * b;
#else
    return __fmul_rn(a, b);
#endif
}
__device__ float add_rn(float a, float b) {
#if LS_SIMT_EMULATED
    return a + b;
#else
    return __fadd_rn(a, b);
#endif
}

__global__ void __launch_bounds__(kElementThreads) silu_kernel(const float* x, float* y, int64_t n, int llama) {
    for (int64_t i = first_index(); i < n; i += grid_stride()) {
        const float v = x[i];
        // llama mode: ggml's CUDA silu; exact mode: ggml_v_silu with the 512-bit expf, as the CPU.
        const float e = llama ? expf(-v) : ggml_v_expf16(0.0f - v);
        y[i] = v / (1.0f + e);
    }
}

// Output i = (c, t) with c fastest, so neighbouring threads write neighbouring values. The taps
// are summed from the oldest value to the newest, each product rounded first, as ggml's CPU op.
__global__ void __launch_bounds__(kElementThreads) ssm_conv_kernel(const float* x, const float* w, float* y,
                                                                   int64_t d_conv, int64_t channels, int64_t n_x,
                                                                   int64_t total) {
    for (int64_t i = first_index(); i < total; i += grid_stride()) {
        const int64_t c = i % channels, t = i / channels;
        const float* xs = x + c * n_x + t;
        const float* wc = w + c * d_conv;
        float sum = 0.0f;
        for (int64_t tap = 0; tap < d_conv; ++tap) sum = add_rn(sum, mul_rn(xs[tap], wc[tap]));
        y[i] = sum;
    }
}

// Block (blockIdx.x, h): rows j of value head h's stored state, a thread each. Row j (column j of
// S) is all that delta[j] and out[j] depend on, and only row j changes with them, so each thread
// runs the whole recurrence over the tokens on its own row. Per token it makes two passes over
// the row: decay it while summing S^T k, then add k delta[j] while summing S^T q; each sum is a
// fused multiply-add after another from i = 0, the CPU exact mode's order (ggml_vec_dot_f32 and
// ggml_vec_mad_f32 unvectorized), so only expf's rounding differs from the CPU.
__global__ void __launch_bounds__(kDeltaNetRows) gated_delta_net_kernel(const float* q, const float* k, const float* v,
                                                                        const float* g, const float* beta, float* state,
                                                                        float* out, int64_t S, int64_t H_k, int64_t H_v,
                                                                        int64_t T) {
    const int64_t h = blockIdx.y, j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= S) return;
    float* row = state + (h * S + j) * S;
    const float scale = 1.0f / sqrtf(static_cast<float>(S));
    for (int64_t t = 0; t < T; ++t) {
        const float* qt = q + (t * H_k + h % H_k) * S;
        const float* kt = k + (t * H_k + h % H_k) * S;
        const float decay = expf(g[t * H_v + h]), b = beta[t * H_v + h];
        float sk = 0.0f;  // (S^T k)[j] over the decayed state
        for (int64_t i = 0; i < S; ++i) {
            const float s = row[i] * decay;
            row[i] = s;
            sk = fmaf(s, kt[i], sk);
        }
        const float delta = (v[(t * H_v + h) * S + j] - sk) * b;
        float sq = 0.0f;  // (S^T q)[j] over the updated state
        for (int64_t i = 0; i < S; ++i) {
            const float s = fmaf(kt[i], delta, row[i]);
            row[i] = s;
            sq = fmaf(s, qt[i], sq);
        }
        out[(t * H_v + h) * S + j] = sq * scale;
    }
}

constexpr int kChunkMax = 64;     // the chunked form's largest chunk (its matrices live in shared memory)
constexpr int kChunkStateMax = 256;  // the largest S: a thread keeps its column of the state in double

// The chunked form, one block per value head and a thread per value index j (= key index i: S_k
// = S_v). Thread j keeps column j of the state in double for the whole ubatch and computes
// everything of its column; what the columns share (the chunk's cumulative decays, the solved
// triangular system, then q k^T) lives in shared memory, built by the block together. For a chunk
// of n tokens: T = (I - A)^-1 with A[t][u] = -beta_t (k_t . k_u) e^(G_t - G_u) below the diagonal
// (by substitution, row after row); v_new[t] = sum_u T[t][u] beta_u (v_u[j] - e^(G_u) (k_u . m_j));
// out[t] = e^(G_t) (q_t . m_j) + sum_(u <= t) (q_t . k_u) e^(G_t - G_u) v_new[u]; then
// m_j = m_j e^(G_last) + sum_u k_u e^(G_last - G_u) v_new[u].
__global__ void __launch_bounds__(kChunkStateMax) gated_delta_net_chunked_kernel(
    const float* q, const float* k, const float* v, const float* g, const float* beta, float* state, float* out, int64_t S,
    int64_t H_k, int64_t H_v, int64_t T, int64_t chunk, int in_chunk_decay) {
    __shared__ double G[kChunkMax];
    __shared__ double M[kChunkMax * kChunkMax];  // T (the solved system), then q k^T with its decay
    __shared__ double row[kChunkMax];
    const int64_t h = blockIdx.x, j = threadIdx.x, hk = h % H_k;
    const bool active = j < S;
    double m[kChunkStateMax];  // column j of the state: m[i] = S[i][j]
    double p[kChunkMax], v_new[kChunkMax];
    float* col = state + (h * S + j) * S;
    if (active)
        for (int64_t i = 0; i < S; ++i) m[i] = col[i];
    const double scale = 1.0 / sqrt(static_cast<double>(S));
    auto dot = [S](const float* a, const float* b) {
        double d = 0;
        for (int64_t i = 0; i < S; ++i) d += static_cast<double>(a[i]) * b[i];
        return d;
    };
    for (int64_t c0 = 0; c0 < T; c0 += chunk) {
        const int64_t n = T - c0 < chunk ? T - c0 : chunk;
        const float* K = k + (c0 * H_k + hk) * S;  // token t's k: K + t * H_k * S
        const float* Q = q + (c0 * H_k + hk) * S;
        if (j == 0) {
            double acc = 0;
            for (int64_t t = 0; t < n; ++t) G[t] = acc += g[(c0 + t) * H_v + h];
        }
        __syncthreads();
        auto decay = [&](int64_t a, int64_t b) { return in_chunk_decay ? exp(G[a] - G[b]) : 1.0; };
        auto B = [&](int64_t t) { return static_cast<double>(beta[(c0 + t) * H_v + h]); };
        for (int64_t e = j; e < n * n; e += blockDim.x) {
            const int64_t t = e / n, u = e % n;
            M[e] = u < t ? -B(t) * dot(K + t * H_k * S, K + u * H_k * S) * decay(t, u) : 0.0;
        }
        __syncthreads();
        for (int64_t t = 1; t < n; ++t) {
            for (int64_t u = j; u < t; u += blockDim.x) {
                double acc = M[t * n + u];
                for (int64_t w = u + 1; w < t; ++w) acc += M[t * n + w] * M[w * n + u];
                row[u] = acc;
            }
            __syncthreads();
            for (int64_t u = j; u < t; u += blockDim.x) M[t * n + u] = row[u];
            __syncthreads();
        }
        for (int64_t t = j; t < n; t += blockDim.x) M[t * n + t] = 1.0;
        __syncthreads();
        if (active) {
            for (int64_t u = 0; u < n; ++u) {
                double d = 0;
                for (int64_t i = 0; i < S; ++i) d += static_cast<double>(K[u * H_k * S + i]) * m[i];
                p[u] = d;
            }
            for (int64_t t = 0; t < n; ++t) {
                double x = 0;
                for (int64_t u = 0; u <= t; ++u)
                    x += M[t * n + u] * B(u) * (static_cast<double>(v[((c0 + u) * H_v + h) * S + j]) - exp(G[u]) * p[u]);
                v_new[t] = x;
            }
        }
        __syncthreads();
        for (int64_t e = j; e < n * n; e += blockDim.x) {
            const int64_t t = e / n, u = e % n;
            M[e] = u <= t ? dot(Q + t * H_k * S, K + u * H_k * S) * decay(t, u) : 0.0;
        }
        __syncthreads();
        if (active) {
            for (int64_t t = 0; t < n; ++t) {
                double o = 0;
                for (int64_t i = 0; i < S; ++i) o += static_cast<double>(Q[t * H_k * S + i]) * m[i];
                o *= exp(G[t]);
                for (int64_t u = 0; u <= t; ++u) o += M[t * n + u] * v_new[u];
                out[((c0 + t) * H_v + h) * S + j] = static_cast<float>(o * scale);
            }
            const double e_last = exp(G[n - 1]);
            for (int64_t i = 0; i < S; ++i) {
                double x = m[i] * e_last;
                for (int64_t u = 0; u < n; ++u) x += static_cast<double>(K[u * H_k * S + i]) * exp(G[n - 1] - G[u]) * v_new[u];
                m[i] = x;
            }
        }
        __syncthreads();
    }
    if (active)
        for (int64_t i = 0; i < S; ++i) col[i] = static_cast<float>(m[i]);
}

}  // namespace

cudaError_t cuda_silu(const float* dev_x, float* dev_y, int64_t n, bool llama, cudaStream_t stream) {
    if (n < 0) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    LAUNCH_STREAM(silu_kernel, element_blocks(n), kElementThreads, 0, stream, dev_x, dev_y, n, llama ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_ssm_conv(const float* dev_x, const float* dev_w, float* dev_y, int64_t d_conv, int64_t channels,
                          int64_t T, cudaStream_t stream) {
    if (d_conv < 1 || channels < 0 || T < 0) return cudaErrorInvalidValue;
    const int64_t total = channels * T;
    if (total == 0) return cudaSuccess;
    LAUNCH_STREAM(ssm_conv_kernel, element_blocks(total), kElementThreads, 0, stream, dev_x, dev_w, dev_y, d_conv,
                  channels, d_conv - 1 + T, total);
    return cudaGetLastError();
}

cudaError_t cuda_gated_delta_net(const float* dev_q, const float* dev_k, const float* dev_v, const float* dev_g,
                                 const float* dev_beta, float* dev_state, float* dev_out, int64_t S, int64_t H_k,
                                 int64_t H_v, int64_t T, cudaStream_t stream) {
    if (S < 0 || H_k < 1 || H_v < 0 || H_v > 65535 || T < 0) return cudaErrorInvalidValue;
    if (S == 0 || H_v == 0 || T == 0) return cudaSuccess;
    const int64_t row_blocks = (S + kDeltaNetRows - 1) / kDeltaNetRows;
    if (row_blocks > 0x7fffffff) return cudaErrorInvalidValue;
    LAUNCH_STREAM(gated_delta_net_kernel, dim3(static_cast<unsigned>(row_blocks), static_cast<unsigned>(H_v)),
                  kDeltaNetRows, 0, stream, dev_q, dev_k, dev_v, dev_g, dev_beta, dev_state, dev_out, S, H_k, H_v, T);
    return cudaGetLastError();
}

cudaError_t cuda_gated_delta_net_chunked(const float* dev_q, const float* dev_k, const float* dev_v, const float* dev_g,
                                         const float* dev_beta, float* dev_state, float* dev_out, int64_t S, int64_t H_k,
                                         int64_t H_v, int64_t T, int64_t chunk, bool in_chunk_decay, cudaStream_t stream) {
    if (S < 0 || S > kChunkStateMax || H_k < 1 || H_v < 0 || H_v > 0x7fffffff || T < 0 || chunk < 1 || chunk > kChunkMax)
        return cudaErrorInvalidValue;
    if (S == 0 || H_v == 0 || T == 0) return cudaSuccess;
    // A warp at least, so that the block's shared work spreads over its threads.
    const unsigned threads = static_cast<unsigned>(S < 32 ? 32 : S);
    LAUNCH_STREAM(gated_delta_net_chunked_kernel, static_cast<unsigned>(H_v), threads, 0, stream, dev_q, dev_k, dev_v,
                  dev_g, dev_beta, dev_state, dev_out, S, H_k, H_v, T, chunk, in_chunk_decay ? 1 : 0);
    return cudaGetLastError();
}

}  // namespace ls::cuda
