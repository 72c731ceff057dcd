// CUDA backend: attention over the KV cache. Scores give each cell a warp (lanes split the head
// dims, a shuffle reduction sums them); softmax gives each row a block (max and sum by warp
// shuffles, then across warps in shared memory); values give each output element a thread that
// walks the cells, the probabilities staged in shared memory; flash attention scores a tile of
// cells by warps, then every thread folds the tile into the online softmax cell by cell in order,
// as ggml's CPU kernel does, each thread owning its slice of the f16 accumulator. Fixed reduction
// orders and no atomics: a result does not depend on the thread schedule.
#include "kernels/cuda/attention.h"

#include <cmath>

#include "kernels/common/fp16.h"

namespace ls::cuda {
namespace {

constexpr int kStoreThreads = 256;
constexpr int kScoresThreads = 128;
constexpr int kScoresCells = 32;  // cells per block: 8 per warp
constexpr int kSoftmaxMaxThreads = 256;
constexpr int kValuesThreads = 128;
constexpr int kValuesChunk = 256;  // probabilities staged in shared memory at a time
constexpr int kFlashThreads = 128;
constexpr int kFlashTile = 32;               // cells scored per step
constexpr size_t kMaxShared = 48 * 1024;     // what a launch gets without opting in
constexpr int64_t kMaxGridY = 65535;

__device__ inline float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

__device__ inline float load_k(const float* k, int64_t i) { return k[i]; }
__device__ inline float load_k(const uint16_t* k, int64_t i) { return fp16_to_fp32(k[i]); }

// The sum over the warp, in every lane (the butterfly adds the same pairs in every lane).
__device__ inline float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// The block's maximum (kMax) or sum of v, in every thread. blockDim.x is a multiple of 32 and
// `partial` holds blockDim.x / 32 floats of shared memory.
template <bool kMax>
__device__ float block_reduce(float v, float* partial) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, offset);
        v = kMax ? fmaxf(v, other) : v + other;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < n_warps; ++w) v = kMax ? fmaxf(v, partial[w]) : v + partial[w];
    __syncthreads();  // partial is free for the next reduction
    return v;
}

__global__ void __launch_bounds__(kStoreThreads) store_cells_kernel(const float* src, float* dst, int64_t n,
                                                                    int to_f16) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = to_f16 ? round_f16(src[i]) : src[i];
}

// Block (h * T + t, chunk of kScoresCells cells). q is staged in shared memory when it fits.
template <class KType>
__global__ void __launch_bounds__(kScoresThreads)
    attn_scores_kernel(const float* q, const KType* k, float* kq, int64_t hd, int64_t n_head, int64_t group,
                       int64_t n_head_kv, int64_t T, int64_t n_kv, int llama, int staged) {
    DYNAMIC_SHARED(float, qs);  // hd floats when staged
    const int64_t pair = blockIdx.x;
    const int64_t h = pair / T, t = pair % T, g = h / group;
    const float* qrow = q + (t * n_head + h) * hd;
    if (staged) {
        for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) qs[d] = llama ? round_f16(qrow[d]) : qrow[d];
        __syncthreads();
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    const int64_t first = static_cast<int64_t>(blockIdx.y) * kScoresCells;
    for (int c = warp; c < kScoresCells; c += n_warps) {
        const int64_t j = first + c;
        if (j >= n_kv) break;  // the whole warp leaves together
        const KType* krow = k + (j * n_head_kv + g) * hd;
        float sum = 0.0f;
        for (int64_t d = lane; d < hd; d += 32) {
            const float qd = staged ? qs[d] : (llama ? round_f16(qrow[d]) : qrow[d]);
            sum += load_k(krow, d) * qd;
        }
        sum = warp_sum(sum);
        if (lane == 0) kq[pair * n_kv + j] = sum;
    }
}

// The unmasked cells [first, visible) of the token in cell `last`: j <= last when causal, and
// last - j < n_swa with a sliding window (n_swa > 0).
__device__ inline void visible_cells(int64_t last, int64_t n_kv, int causal, int64_t n_swa, int64_t* first,
                                     int64_t* visible) {
    *first = 0, *visible = n_kv;
    if (causal) *visible = last < 0 ? 0 : (last + 1 < n_kv ? last + 1 : n_kv);
    if (n_swa > 0 && last - n_swa + 1 > 0) *first = last - n_swa + 1 < *visible ? last - n_swa + 1 : *visible;
}

// One block per row of kq; blockDim.x a multiple of 32, at most kSoftmaxMaxThreads.
__global__ void __launch_bounds__(kSoftmaxMaxThreads)
    softmax_masked_kernel(const float* kq, const int32_t* pos, float* p, int64_t n_kv, int64_t T, float scale,
                          int causal, int64_t n_swa, const float* sinks) {
    DYNAMIC_SHARED(float, partial);  // one float per warp
    const int64_t row = blockIdx.x;
    int64_t first = 0, visible = n_kv;  // cells [first, visible) are not masked
    visible_cells(pos ? pos[row % T] : 0, n_kv, causal, n_swa, &first, &visible);
    const float* in = kq + row * n_kv;
    float* out = p + row * n_kv;
    float mx = -INFINITY;
    for (int64_t j = first + threadIdx.x; j < visible; j += blockDim.x) mx = fmaxf(mx, in[j] * scale);
    mx = block_reduce<true>(mx, partial);
    const float sink = sinks ? sinks[row / T] : 0.0f;  // the head's sink joins the maximum and the sum
    if (sinks) mx = fmaxf(mx, sink);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n_kv; j += blockDim.x) {
        const float e = j >= first && j < visible ? expf(in[j] * scale - mx) : 0.0f;
        out[j] = e;
        sum += e;
    }
    sum = block_reduce<false>(sum, partial);
    if (sinks) sum += expf(sink - mx);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t j = threadIdx.x; j < n_kv; j += blockDim.x) out[j] *= inv;  // this thread's own cells
}

// Block (h * T + t, chunk of blockDim.x head dims): each thread sums one output over the cells.
__global__ void __launch_bounds__(kValuesThreads)
    attn_values_kernel(const float* p, const float* v, float* kqv, int64_t hd_v, int64_t T, int64_t group,
                       int64_t n_head_kv, int64_t n_kv, int llama) {
    DYNAMIC_SHARED(float, ps);  // kValuesChunk floats
    const int64_t pair = blockIdx.x;
    const int64_t g = (pair / T) / group;
    const int64_t d = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
    const float* prow = p + pair * n_kv;
    const int64_t cell_stride = n_head_kv * hd_v;
    float acc = 0.0f;
    for (int64_t j0 = 0; j0 < n_kv; j0 += kValuesChunk) {
        const int count = static_cast<int>(n_kv - j0 < kValuesChunk ? n_kv - j0 : kValuesChunk);
        __syncthreads();  // every thread is done with the previous chunk
        for (int c = threadIdx.x; c < count; c += blockDim.x) ps[c] = llama ? round_f16(prow[j0 + c]) : prow[j0 + c];
        __syncthreads();
        if (d < hd_v) {
            const float* vcol = v + j0 * cell_stride + g * hd_v + d;
            for (int c = 0; c < count; ++c) acc += ps[c] * vcol[c * cell_stride];
        }
    }
    if (d < hd_v) kqv[pair * hd_v + d] = acc;
}

// One block per (t * n_head + h), the row of out.
__global__ void __launch_bounds__(kFlashThreads)
    attn_flash_kernel(const float* q, const float* k, const float* v, const int32_t* pos, float* out, int64_t hd_k,
                      int64_t hd_v, int64_t n_head, int64_t group, int64_t n_head_kv, int64_t n_kv, float scale,
                      int causal, int64_t n_swa, float softcap, int f32_path, const float* sinks) {
    DYNAMIC_SHARED(float, smem);
    float* qs = smem;              // hd_k: q rounded to f16 (f32_path: as it is)
    float* s = qs + hd_k;          // kFlashTile: the tile's scaled scores
    float* acc = s + kFlashTile;   // hd_v: the f16 (f32) accumulator; element d belongs to thread d % blockDim.x
    const int64_t pair = blockIdx.x;
    const int64_t h = pair % n_head, t = pair / n_head, g = h / group;
    for (int64_t d = threadIdx.x; d < hd_k; d += blockDim.x)
        qs[d] = f32_path ? q[pair * hd_k + d] : round_f16(q[pair * hd_k + d]);
    for (int64_t d = threadIdx.x; d < hd_v; d += blockDim.x) acc[d] = 0.0f;
    int64_t first = 0, visible = n_kv;  // masked cells (outside [first, visible)) are skipped
    visible_cells(pos ? pos[t] : 0, n_kv, causal, n_swa, &first, &visible);
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;
    float M = -INFINITY, S = 0.0f;  // the same in every thread
    for (int64_t j0 = first; j0 < visible; j0 += kFlashTile) {
        const int count = static_cast<int>(visible - j0 < kFlashTile ? visible - j0 : kFlashTile);
        for (int c = warp; c < count; c += n_warps) {
            const float* krow = k + ((j0 + c) * n_head_kv + g) * hd_k;
            float sum = 0.0f;
            for (int64_t d = lane; d < hd_k; d += 32) sum += krow[d] * qs[d];
            sum = warp_sum(sum);
            if (lane == 0) s[c] = softcap != 0.0f ? softcap * tanhf(sum * scale) : sum * scale;
        }
        __syncthreads();
        for (int c = 0; c < count; ++c) {
            const float sc = s[c];
            const float* vrow = v + ((j0 + c) * n_head_kv + g) * hd_v;
            float ms = 1.0f, vs = 1.0f;
            if (sc > M) {
                ms = expf(M - sc);
                M = sc;
                for (int64_t d = threadIdx.x; d < hd_v; d += blockDim.x)
                    acc[d] = f32_path ? acc[d] * ms : round_f16(acc[d] * ms);
            } else {
                vs = expf(sc - M);
            }
            for (int64_t d = threadIdx.x; d < hd_v; d += blockDim.x)
                acc[d] = f32_path ? fmaf(vrow[d], vs, acc[d]) : round_f16(fmaf(vrow[d], vs, acc[d]));
            S = fmaf(S, ms, vs);
        }
        __syncthreads();  // the next tile rewrites s
    }
    if (sinks) {  // the head's sink: the accumulator (in f32) rescaled when it is the new maximum
        const float sk = sinks[h];
        float ms = 1.0f, vs = 1.0f;
        if (sk > M) {
            ms = expf(M - sk);
            for (int64_t d = threadIdx.x; d < hd_v; d += blockDim.x) acc[d] *= ms;
        } else {
            vs = expf(sk - M);
        }
        S = f32_path ? fmaf(S, ms, vs) : S * ms + vs;  // one FMA in ggml's tiled kernel, two roundings in its one-chunk path
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int64_t d = threadIdx.x; d < hd_v; d += blockDim.x) out[pair * hd_v + d] = acc[d] * inv;
}

bool valid(const AttnDims& d) {
    return d.hd_k >= 0 && d.hd_v >= 0 && d.n_head >= 0 && d.n_head_kv > 0 && d.T >= 0 && d.n_kv >= 0 &&
           d.n_head % d.n_head_kv == 0;
}

bool fits_grid_x(int64_t n) { return n <= 0x7fffffff; }

}  // namespace

cudaError_t cuda_store_cells(const float* dev_src, float* dev_dst, int64_t n, bool to_f16, cudaStream_t stream) {
    if (n < 0 || dev_src == nullptr || dev_dst == nullptr) return cudaErrorInvalidValue;
    if (n == 0) return cudaSuccess;
    const int64_t grid = (n + kStoreThreads - 1) / kStoreThreads;
    if (!fits_grid_x(grid)) return cudaErrorInvalidValue;
    LAUNCH_STREAM(store_cells_kernel, static_cast<unsigned>(grid), kStoreThreads, 0, stream, dev_src, dev_dst, n,
                  to_f16 ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_attn_scores(const float* dev_q, const void* dev_k, bool k_is_f16, float* dev_kq, const AttnDims& d,
                             bool llama, cudaStream_t stream) {
    if (!valid(d) || dev_q == nullptr || dev_k == nullptr || dev_kq == nullptr) return cudaErrorInvalidValue;
    if (d.n_head == 0 || d.T == 0 || d.n_kv == 0) return cudaSuccess;
    const int64_t pairs = d.n_head * d.T, chunks = (d.n_kv + kScoresCells - 1) / kScoresCells;
    if (!fits_grid_x(pairs) || chunks > kMaxGridY) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>(chunks));
    const size_t q_bytes = static_cast<size_t>(d.hd_k) * sizeof(float);
    const bool staged = q_bytes <= kMaxShared;  // else every warp reads q from global memory
    const size_t smem = staged ? q_bytes : 0;
    const int64_t group = d.n_head / d.n_head_kv;
    if (k_is_f16)
        LAUNCH_STREAM((attn_scores_kernel<uint16_t>), grid, kScoresThreads, smem, stream, dev_q,
                      static_cast<const uint16_t*>(dev_k), dev_kq, d.hd_k, d.n_head, group, d.n_head_kv, d.T, d.n_kv,
                      llama ? 1 : 0, staged ? 1 : 0);
    else
        LAUNCH_STREAM((attn_scores_kernel<float>), grid, kScoresThreads, smem, stream, dev_q,
                      static_cast<const float*>(dev_k), dev_kq, d.hd_k, d.n_head, group, d.n_head_kv, d.T, d.n_kv,
                      llama ? 1 : 0, staged ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_softmax_masked(const float* dev_kq, const int32_t* dev_pos, float* dev_p, int64_t n_kv, int64_t T,
                                int64_t rows, float scale, bool causal, int64_t n_swa, const float* dev_sinks,
                                cudaStream_t stream) {
    const bool needs_pos = causal || n_swa > 0;
    if (n_kv < 0 || T <= 0 || rows < 0 || dev_kq == nullptr || dev_p == nullptr || (needs_pos && dev_pos == nullptr))
        return cudaErrorInvalidValue;
    if (rows == 0 || n_kv == 0) return cudaSuccess;
    if (!fits_grid_x(rows)) return cudaErrorInvalidValue;
    // Short rows get fewer threads: a warp per 32 cells, up to kSoftmaxMaxThreads.
    const int64_t warps = (n_kv + 31) / 32;
    const int threads = static_cast<int>(warps * 32 < kSoftmaxMaxThreads ? warps * 32 : kSoftmaxMaxThreads);
    LAUNCH_STREAM(softmax_masked_kernel, static_cast<unsigned>(rows), threads, (threads / 32) * sizeof(float), stream,
                  dev_kq, needs_pos ? dev_pos : nullptr, dev_p, n_kv, T, scale, causal ? 1 : 0, n_swa, dev_sinks);
    return cudaGetLastError();
}

cudaError_t cuda_attn_values(const float* dev_p, const float* dev_v, float* dev_kqv, const AttnDims& d, bool llama,
                             cudaStream_t stream) {
    if (!valid(d) || dev_p == nullptr || dev_v == nullptr || dev_kqv == nullptr) return cudaErrorInvalidValue;
    if (d.n_head == 0 || d.T == 0 || d.hd_v == 0) return cudaSuccess;
    const int64_t pairs = d.n_head * d.T;
    const int64_t warps = (d.hd_v + 31) / 32;
    const int threads = static_cast<int>(warps * 32 < kValuesThreads ? warps * 32 : kValuesThreads);
    const int64_t chunks = (d.hd_v + threads - 1) / threads;
    if (!fits_grid_x(pairs) || chunks > kMaxGridY) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(pairs), static_cast<unsigned>(chunks));
    LAUNCH_STREAM(attn_values_kernel, grid, threads, kValuesChunk * sizeof(float), stream, dev_p, dev_v, dev_kqv,
                  d.hd_v, d.T, d.n_head / d.n_head_kv, d.n_head_kv, d.n_kv, llama ? 1 : 0);
    return cudaGetLastError();
}

cudaError_t cuda_attn_flash(const float* dev_q, const float* dev_k, const float* dev_v, const int32_t* dev_pos,
                            float* dev_out, const AttnDims& d, float scale, bool causal, int64_t n_swa, float softcap,
                            bool f32_path, const float* dev_sinks, cudaStream_t stream) {
    const bool needs_pos = causal || n_swa > 0;
    if (!valid(d) || dev_q == nullptr || dev_k == nullptr || dev_v == nullptr || dev_out == nullptr ||
        (needs_pos && dev_pos == nullptr))
        return cudaErrorInvalidValue;
    if (d.n_head == 0 || d.T == 0 || d.hd_v == 0) return cudaSuccess;
    const int64_t pairs = d.n_head * d.T;
    const size_t smem = static_cast<size_t>(d.hd_k + kFlashTile + d.hd_v) * sizeof(float);
    if (!fits_grid_x(pairs) || smem > kMaxShared) return cudaErrorInvalidValue;
    LAUNCH_STREAM(attn_flash_kernel, static_cast<unsigned>(pairs), kFlashThreads, smem, stream, dev_q, dev_k, dev_v,
                  needs_pos ? dev_pos : nullptr, dev_out, d.hd_k, d.hd_v, d.n_head, d.n_head / d.n_head_kv, d.n_head_kv,
                  d.n_kv, softcap != 0.0f ? scale / softcap : scale, causal ? 1 : 0, n_swa, softcap, f32_path ? 1 : 0,
                  dev_sinks);
    return cudaGetLastError();
}

}  // namespace ls::cuda
