// The CUDA backend: device memory, copies, and every op of a llama or qwen2 forward pass: GET_ROWS
// and MUL_MAT on every weight format, CPY, RMS_NORM, MUL, ADD, ROPE, SWIGLU, the head merge of CONT,
// attention over the KV cache, statistics with the histogram. It answers supports() per op, so
// a forward pass refuses by name what it cannot run. Built twice from this one source: by nvcc into
// the CUDA module, and as C++ against the SIMT emulator (the cuda-emulated backend).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/host_memory.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/delta_net.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/rope.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/moe.h"
#include "kernels/cuda/stats.h"
#include "kernels/simt/simt.h"

namespace ls {
namespace {

constexpr int kCopyThreads = 256;

// dst = src for 4-byte elements (f32, i32) with any byte strides on either side.
__global__ void __launch_bounds__(kCopyThreads) copy_kernel(const char* src, char* dst, int64_t ne0, int64_t ne1,
                                                            int64_t ne2, int64_t n, uint64_t s0, uint64_t s1,
                                                            uint64_t s2, uint64_t s3, uint64_t d0, uint64_t d1,
                                                            uint64_t d2, uint64_t d3) {
    const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t i0 = i % ne0, i1 = (i / ne0) % ne1, i2 = (i / (ne0 * ne1)) % ne2, i3 = i / (ne0 * ne1 * ne2);
    const uint32_t v = *reinterpret_cast<const uint32_t*>(src + i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3);
    *reinterpret_cast<uint32_t*>(dst + i0 * d0 + i1 * d1 + i2 * d2 + i3 * d3) = v;
}

class CudaBackend final : public Backend {
public:
    CudaBackend(std::string name, BackendKind kind) : name_(std::move(name)), kind_(kind) {
        // Every op is queued on this stream; it syncs with the default stream's copies.
        LS_CUDA_CHECK(cudaStreamCreate(&stream_));
        LS_CUDA_CHECK(cudaMalloc(&stats_workspace_, cuda::cuda_tensor_stats_workspace_bytes()));
        LS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_summary_), sizeof(Summary)));
        LS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_id_error_), kIdErrorInts * sizeof(int)));
        LS_CUDA_CHECK(cudaMemset(dev_id_error_, 0, kIdErrorInts * sizeof(int)));
    }
    ~CudaBackend() override {
        cudaFree(stats_workspace_);
        cudaFree(dev_summary_);
        cudaFree(dev_id_error_);
        cudaFree(matmul_scratch_.data);
        cudaFree(matmul_id_scratch_.data);
        if (staging_) cudaFreeHost(staging_);
        for (const auto& [p, size] : live_) cudaFree(p);
        for (const auto& [size, p] : cached_) cudaFree(p);
        if (cublas_) cublasDestroy(cublas_);
        cudaStreamDestroy(stream_);
    }

    std::string name() const override { return name_; }
    BackendKind kind() const override { return kind_; }

    bool supports(Op op, MathMode mode, GgmlType type) const override {
        switch (op) {
            case Op::kGetRows: return cuda::cuda_can_dequantize(type);
            case Op::kCpy: return type == GgmlType::F32 || type == GgmlType::I32;
            case Op::kRmsNorm: case Op::kMul: case Op::kAdd: case Op::kRope: case Op::kSwiglu: case Op::kCont: return true;
            case Op::kSetRows: case Op::kSoftMax: return true;
            // Both math modes: see kernels/cuda/matmul.cu. (MUL_MAT, F16) also stands for attention's
            // products with the f16 KV cache (engine/forward/graph.cpp), which attention.cu runs.
            case Op::kMulMat: case Op::kMulMatId: return cuda::cuda_can_matmul(type);
            // The kernel computes what ggml's CPU flash attention computes, which is llama mode's.
            case Op::kFlashAttnExt: return mode == MathMode::kLlama;
            case Op::kArgsort: case Op::kDiv: case Op::kSigmoid: case Op::kClamp: case Op::kSumRows:
            case Op::kScale: case Op::kGeglu: case Op::kTanh: case Op::kSwigluOai: case Op::kAddId: return true;
            case Op::kSilu: case Op::kSoftplus: case Op::kSsmConv: case Op::kGatedDeltaNet: return true;
            default: return false;
        }
    }

    BackendMemory memory() const override {
#if LS_SIMT_EMULATED
        // The emulator's device memory is the host's, unless it is given a size.
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess && total_bytes > 0)
            return {true, free_bytes + cached_bytes_, "emulated CUDA device memory (LAYERSCOPE_SIMT_DEVICE_MEMORY)", true};
        const HostMemory host = available_host_memory();
        return {host.known, host.available_bytes, "RAM (" + host.source + ")", true};
#else
        size_t free_bytes = 0, total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return {};
        return {true, free_bytes + cached_bytes_, "CUDA device memory (" + name_ + ")", true};
#endif
    }
    // Device memory is an arena: a released block is kept and handed out again for the same size,
    // so a session recreated on the same model (another fault, another reference) reuses its
    // memory instead of freeing and allocating it again; when the device is full, the kept blocks
    // are given back and the allocation is tried once more.
    void* alloc(size_t bytes) override {
        const size_t size = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
        void* p = nullptr;
        if (auto it = cached_.find(size); it != cached_.end()) {
            p = it->second;
            cached_.erase(it);
            cached_bytes_ -= size;
        } else {
            if (cudaMalloc(&p, size) != cudaSuccess) {
                (void)cudaGetLastError();  // handled: the kept blocks go back and it is tried once more
                trim();
                LS_CUDA_CHECK(cudaMalloc(&p, size));
            }
        }
        live_[p] = size;
        LS_CUDA_CHECK(cudaMemset(p, 0, bytes));
        return p;
    }
    void release(void* ptr) override {
        auto it = live_.find(ptr);
        if (it == live_.end()) return;
#if LS_SIMT_EMULATED
        // A kernel that still reads a released block reads NaNs in the tests, not stale values.
        cudaMemset(ptr, 0xff, it->second);
#endif
        cached_.emplace(it->second, ptr);
        cached_bytes_ += it->second;
        live_.erase(it);
    }
    void trim() {
        ++counters_.syncs;
        LS_CUDA_CHECK(cudaDeviceSynchronize());
        for (const auto& [size, p] : cached_) cudaFree(p);
        cached_.clear();
        cached_bytes_ = 0;
    }
    // A small upload (a ubatch's token ids and positions) is queued on the stream from pinned
    // staging memory, so the host does not wait for the device: the bytes are copied to the
    // staging buffer first (the caller may reuse its own at once), and that part of the buffer is
    // not written again until the stream has been waited for (a download or a synchronize). One
    // that does not fit in what is left waits first; a large one (a weight) is a blocking copy.
    void upload(void* dst, const void* src, size_t bytes) override {
        if (bytes == 0) return;
        if (bytes > kStagingBytes) {
            ++counters_.syncs;
            LS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
            staging_used_ = 0;
            return;
        }
        if (!staging_) LS_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&staging_), kStagingBytes));
        if (staging_used_ + bytes > kStagingBytes) synchronize();
        std::memcpy(staging_ + staging_used_, src, bytes);
        LS_CUDA_CHECK(cudaMemcpyAsync(dst, staging_ + staging_used_, bytes, cudaMemcpyHostToDevice, stream_));
        staging_used_ += (bytes + 255) / 256 * 256;
    }
    void download(void* dst, const void* src, size_t bytes) override {
        ++counters_.syncs;
        ++counters_.d2h_copies;
        LS_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
        staging_used_ = 0;  // the copy waited for the stream
        check_expert_ids();
    }
    void copy(const Tensor& src, Tensor& dst) override {
        const int64_t n = src.n_elements();
        if (n == 0) return;
        const int64_t grid = (n + kCopyThreads - 1) / kCopyThreads;
        LAUNCH_STREAM(copy_kernel, static_cast<unsigned>(grid), kCopyThreads, 0, stream_, static_cast<const char*>(src.data),
               static_cast<char*>(dst.data), src.ne[0], src.ne[1], src.ne[2], n, src.nb[0], src.nb[1], src.nb[2],
               src.nb[3], dst.nb[0], dst.nb[1], dst.nb[2], dst.nb[3]);
        LS_CUDA_CHECK(cudaGetLastError());
    }
    Tensor weight(GgmlType type, const int64_t ne[4], const void* host_data) override {
        Tensor t = make_tensor(nullptr, ne[0], ne[1], ne[2], ne[3], type);
        t.data = alloc(t.n_bytes());
        upload(t.data, host_data, t.n_bytes());
        return t;
    }

    void get_rows(const Tensor& table, const Tensor& ids, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_get_rows(table.type, table.data, table.nb[1], ids.i32(), ids.ne[0], y.f32(),
                                          table.ne[0], stream_));
    }

    // The element-wise ops and RMS_NORM (kernels/cuda/elementwise.cu), ROPE (kernels/cuda/rope.cu):
    // the CPU backend's arithmetic in each math mode, on packed f32 tensors as the CPU takes them.
    void rms_norm(const Tensor& x, float eps, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_rms_norm(x.f32(), y.f32(), x.ne[0], x.n_rows(), eps, stream_));
    }
    void mul_row(const Tensor& x, const Tensor& w, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_mul_row(x.f32(), w.f32(), y.f32(), x.ne[0], x.n_rows(), stream_));
    }
    void add(const Tensor& a, const Tensor& b, Tensor& y) override {
        const bool b_one_row = b.n_rows() == 1 && a.n_rows() > 1;
        LS_CUDA_CHECK(cuda::cuda_add(a.f32(), b.f32(), y.f32(), a.ne[0], a.n_rows(), b_one_row, stream_));
    }
    void rope(Tensor& x, const Tensor& pos, const Tensor& freq_factors, const RopeParams& p, MathMode mode) override {
        const cuda::RopeArgs args =
            cuda::cuda_rope_args(p.mode == RopeMode::kNeox, mode == MathMode::kLlama, p.n_rot, p.freq_base, p.freq_scale,
                                 p.n_ctx_orig, p.ext_factor, p.attn_factor, p.beta_fast, p.beta_slow);
        const float* ff = freq_factors.data ? freq_factors.f32() : nullptr;
        LS_CUDA_CHECK(cuda::cuda_rope(x.f32(), pos.i32(), ff, x.ne[1], x.ne[2], static_cast<int64_t>(x.nb[1] / sizeof(float)),
                                      static_cast<int64_t>(x.nb[2] / sizeof(float)), args, stream_));
    }
    void swiglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) override {
        // llama mode: ggml's CPU swiglu of the llama.cpp build being reproduced (8 or 16 lanes).
        const int lanes = mode == MathMode::kExact ? 0 : (llama_isa_ == LlamaIsa::kAvx2 ? 8 : 16);
        LS_CUDA_CHECK(cuda::cuda_swiglu(gate.f32(), up.f32(), y.f32(), gate.ne[0], gate.n_rows(), lanes, stream_));
    }
    void merge_heads(const Tensor& x, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_merge_heads(x.f32(), y.f32(), x.ne[0], x.ne[1], x.ne[2], stream_));
    }
    void set_llama_isa(LlamaIsa isa) override { llama_isa_ = isa; }

    // y {N, T} = w {K, N} x {K, T}; f32 in both math modes (kernels/cuda/matmul.cu says why).
    void matmul(const Tensor& w, const Tensor& x, Tensor& y, MathMode) override {
        if (!cublas_ && x.ne[1] > cuda::kMatvecMaxColumns) {
            LS_CUBLAS_CHECK(cublasCreate(&cublas_));
        }
        cuda::cuda_matmul(cublas_, matmul_scratch_, w.type, w.data, w.nb[1], x.f32(), y.f32(), w.ne[0], w.ne[1], x.ne[1],
                          stream_);
    }

    // The mixture-of-experts ops (kernels/cuda/moe.cu), on contiguous tensors as the forward pass
    // makes them.
    void binary(Op op, const Tensor& a, const Tensor& b, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_binary(op, a.f32(), a.ne, b.f32(), b.ne, y.f32(), stream_));
    }
    void geglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) override {
        LS_CUDA_CHECK(cuda::cuda_geglu(gate.f32(), up.f32(), y.f32(), gate.n_elements(), mode == MathMode::kLlama, stream_));
    }
    void unary(Op op, const Tensor& x, Tensor& y, float p0, float p1) override {
        LS_CUDA_CHECK(cuda::cuda_unary(op, x.f32(), y.f32(), x.n_elements(), p0, p1, stream_));
    }
    void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& y, float alpha, float limit, MathMode mode) override {
        LS_CUDA_CHECK(cuda::cuda_swiglu_oai(gate.f32(), up.f32(), y.f32(), gate.n_elements(), alpha, limit,
                                            mode == MathMode::kLlama, stream_));
    }
    // An id out of range is dropped here (its columns keep a's values); MUL_MAT_ID with the same
    // ids reports it (check_expert_ids).
    void add_id(const Tensor& a, const Tensor& table, const Tensor& ids, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_add_id(a.f32(), a.ne[0], a.ne[1] * a.ne[2], table.f32(), table.ne[1], ids.i32(), y.f32(),
                                        stream_));
    }
    // qwen35's Gated DeltaNet ops (kernels/cuda/delta_net.cu), on contiguous tensors. The delta
    // rule sums in the CPU exact mode's order in both math modes.
    void silu(const Tensor& x, Tensor& y, MathMode mode) override {
        LS_CUDA_CHECK(cuda::cuda_silu(x.f32(), y.f32(), x.n_elements(), mode == MathMode::kLlama, stream_));
    }
    void ssm_conv(const Tensor& x, const Tensor& w, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_ssm_conv(x.f32(), w.f32(), y.f32(), w.ne[0], w.ne[1], y.ne[1], stream_));
    }
    void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         Tensor& state, Tensor& out, MathMode) override {
        LS_CUDA_CHECK(cuda::cuda_gated_delta_net(q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(), state.f32(), out.f32(),
                                                 v.ne[0], q.ne[1], v.ne[1], v.ne[2], stream_));
    }
    void gated_delta_net_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                 Tensor& state, Tensor& out, int64_t chunk, bool in_chunk_decay) override {
        const int64_t S = v.ne[0];
        if (S > 256 || chunk > 64) {  // beyond the kernel's column in double and its shared matrices: on the host
            Backend::gated_delta_net_chunked(q, k, v, g, beta, state, out, chunk, in_chunk_decay);
            return;
        }
        LS_CUDA_CHECK(cuda::cuda_gated_delta_net_chunked(q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(), state.f32(),
                                                         out.f32(), S, q.ne[1], v.ne[1], v.ne[2], chunk, in_chunk_decay,
                                                         stream_));
    }
    void sum_rows(const Tensor& x, Tensor& y) override {
        LS_CUDA_CHECK(cuda::cuda_sum_rows(x.f32(), y.f32(), x.ne[0], x.n_rows(), stream_));
    }
    void argsort_desc(const Tensor& x, Tensor& idx, bool /*ggml_ties: column order here*/) override {
        LS_CUDA_CHECK(cuda::cuda_argsort_desc(x.f32(), idx.i32(), x.ne[0], x.n_rows(), stream_));
    }
    // The expert ids stay on the device; an id out of range is reported at the next download or
    // synchronize (check_expert_ids).
    void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, Tensor& y, MathMode) override {
        LS_CUDA_CHECK(cuda::cuda_matmul_id(w.type, w.data, w.nb[1], w.nb[2], w.ne[2], x.f32(), x.ne[1], ids.i32(),
                                           ids.ne[0], y.f32(), w.ne[0], w.ne[1], ids.ne[1], dev_id_error_, matmul_id_scratch_,
                                           stream_));
        expert_ids_unchecked_ = true;
        n_expert_checked_ = w.ne[2];
    }

    void synchronize() override {
        ++counters_.syncs;
        LS_CUDA_CHECK(cudaStreamSynchronize(stream_));
        staging_used_ = 0;
        check_expert_ids();
    }
    DeviceCounters device_counters() const override {
        DeviceCounters c = counters_;
        c.launches = device_launches().load(std::memory_order_relaxed) - launches_at_start_;
        return c;
    }

    // The statistics, then the histogram binned by them, on the device one after the other, read
    // back in one copy.
    void stats(const Tensor& x, TensorStats* out) override {
        const int64_t n = x.n_elements();
        count_device_launch();
        LS_CUDA_CHECK(cudaMemsetAsync(dev_summary_->hist, 0, sizeof dev_summary_->hist, stream_));
        LS_CUDA_CHECK(cuda::cuda_tensor_stats(x.f32(), n, stats_workspace_, &dev_summary_->stats, stream_));
        LS_CUDA_CHECK(cuda::cuda_tensor_histogram_from_stats(x.f32(), n, &dev_summary_->stats, dev_summary_->hist, stream_));
        Summary summary;
        download(&summary, dev_summary_, sizeof summary);
        const cuda::TensorStats& s = summary.stats;
        *out = TensorStats{};
        out->count = n;
        out->nan_count = static_cast<int64_t>(s.nan_count);
        out->inf_count = static_cast<int64_t>(s.inf_count);
        const int64_t finite = n - out->nan_count - out->inf_count;
        if (finite == 0) return;
        out->min = s.min, out->max = s.max;
        out->mean = s.sum / static_cast<double>(finite);
        out->rms = histogram_rms(s.sumsq, static_cast<double>(finite));
        out->hist_scale = histogram_scale(out->rms);  // what the device binned by
        for (int b = 0; b < kHistogramBins; ++b) out->hist[b] = static_cast<int64_t>(summary.hist[b]);
    }

    // Attention over the KV cache (kernels/cuda/attention.cu); every tensor contiguous, as the
    // forward pass makes them.
    void store_kv(const Tensor& k, const Tensor& v, Tensor& cache_k, Tensor& cache_v, int64_t first,
                  MathMode mode) override {
        const bool round = mode == MathMode::kLlama;  // ggml's f16 cache
        LS_CUDA_CHECK(cuda::cuda_store_cells(k.f32(), cache_k.f32() + first * k.ne[0] * k.ne[1], k.n_elements(), round,
                                             stream_));
        LS_CUDA_CHECK(cuda::cuda_store_cells(v.f32(), cache_v.f32() + first * v.ne[0] * v.ne[1], v.n_elements(), round,
                                             stream_));
    }
    void attn_scores(const Tensor& q, const Tensor& cache_k, int64_t n_kv, Tensor& kq, MathMode mode) override {
        cuda::AttnDims d;
        d.hd_k = q.ne[0], d.n_head = q.ne[1], d.T = q.ne[2], d.n_head_kv = cache_k.ne[1], d.n_kv = n_kv;
        LS_CUDA_CHECK(cuda::cuda_attn_scores(q.f32(), cache_k.data, false, kq.f32(), d, mode == MathMode::kLlama, stream_));
    }
    void softmax_masked(const Tensor& kq, float scale, const Tensor& pos, const AttnMask& mask, Tensor& p,
                        MathMode) override {
        // Both modes: f32 exponentials, f32 sums (the CPU's order differs by rounding only).
        LS_CUDA_CHECK(cuda::cuda_softmax_masked(kq.f32(), pos.i32(), p.f32(), kq.ne[0], kq.ne[1], kq.n_rows(), scale,
                                                mask.causal, mask.n_swa, mask.sinks, stream_));
    }
    void attn_values(const Tensor& p, const Tensor& cache_v, int64_t n_kv, Tensor& kqv, MathMode mode) override {
        cuda::AttnDims d;
        d.hd_v = kqv.ne[0], d.T = kqv.ne[1], d.n_head = kqv.ne[2], d.n_head_kv = cache_v.ne[1], d.n_kv = n_kv;
        LS_CUDA_CHECK(cuda::cuda_attn_values(p.f32(), cache_v.f32(), kqv.f32(), d, mode == MathMode::kLlama, stream_));
    }
    void attn_flash(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, int64_t n_kv, float scale,
                    const Tensor& pos, const AttnMask& mask, Tensor& out) override {
        cuda::AttnDims d;
        d.hd_k = q.ne[0], d.n_head = q.ne[1], d.T = q.ne[2], d.hd_v = cache_v.ne[0], d.n_head_kv = cache_k.ne[1];
        d.n_kv = n_kv;
        const bool f32_path = ggml_flash_attn_tiled(d.T, d.hd_v, llama_isa_);
        LS_CUDA_CHECK(cuda::cuda_attn_flash(q.f32(), cache_k.f32(), cache_v.f32(), pos.i32(), out.f32(), d, scale, mask.causal,
                                            mask.n_swa, mask.softcap, f32_path, mask.sinks, stream_));
    }

private:
    // Throws when a MUL_MAT_ID queued since the last check met an expert id out of range. Called
    // once the stream's work is done (after a synchronizing copy or a synchronize).
    void check_expert_ids() {
        if (!expert_ids_unchecked_) return;
        expert_ids_unchecked_ = false;
        int err[kIdErrorInts] = {};
        ++counters_.d2h_copies;  // the stream is done already: no wait of its own
        LS_CUDA_CHECK(cudaMemcpy(err, dev_id_error_, sizeof err, cudaMemcpyDeviceToHost));
        if (err[0] == 0) return;
        LS_CUDA_CHECK(cudaMemset(dev_id_error_, 0, sizeof err));
        throw std::out_of_range("MUL_MAT_ID: expert id " + std::to_string(err[1]) + " (column " + std::to_string(err[2]) +
                                ") is outside [0, " + std::to_string(n_expert_checked_) + ")");
    }

    static constexpr int kIdErrorInts = 3;  // set, the id, its column
    std::string name_;
    BackendKind kind_;
    void* stats_workspace_ = nullptr;
    struct Summary {  // what stats() reads back
        cuda::TensorStats stats;
        unsigned long long hist[kHistogramBins];
    };
    Summary* dev_summary_ = nullptr;
    int* dev_id_error_ = nullptr;         // what cuda_matmul_id found out of range
    bool expert_ids_unchecked_ = false;  // a MUL_MAT_ID was queued since dev_id_error_ was read
    int64_t n_expert_checked_ = 0;       // the last MUL_MAT_ID's expert count, for the message
    std::map<void*, size_t> live_;          // the arena's blocks in use (weights included), by address
    std::multimap<size_t, void*> cached_;   // released blocks kept for reuse, by size
    size_t cached_bytes_ = 0;
    LlamaIsa llama_isa_ = LlamaIsa::kAvx2;  // the forward pass sets the one it reproduces
    cudaStream_t stream_ = nullptr;    // where every op is queued
    static constexpr size_t kStagingBytes = size_t{1} << 20;
    unsigned char* staging_ = nullptr;  // pinned host memory the small uploads are queued from
    size_t staging_used_ = 0;           // bytes of it that queued copies may still read
    DeviceCounters counters_;          // syncs and copies; launches are the module's count
    long long launches_at_start_ = device_launches().load(std::memory_order_relaxed);
    cublasHandle_t cublas_ = nullptr;  // created by the first matmul that needs cuBLAS
    cuda::MatmulScratch matmul_scratch_;
    cuda::MatmulIdScratch matmul_id_scratch_;
};

}  // namespace

#if LS_SIMT_EMULATED
std::unique_ptr<Backend> make_cuda_emulated_backend(const BackendOptions&) {
    return std::make_unique<CudaBackend>("CUDA (emulated on the CPU)", BackendKind::kCudaEmulated);
}
#else
// The module's entry point (see kernels/cuda/loader.cpp): a backend on device 0, or null with the
// reason in msg.
extern "C" __attribute__((visibility("default"))) Backend* ls_cuda_create_backend(int, char* msg, int cap) {
    cudaDeviceProp prop{};
    cudaError_t err = cudaGetDeviceProperties(&prop, 0);
    if (err != cudaSuccess) {
        std::snprintf(msg, static_cast<size_t>(cap), "cudaGetDeviceProperties failed: %s", cudaGetErrorString(err));
        return nullptr;
    }
    try {
        return new CudaBackend(std::string("CUDA: ") + prop.name, BackendKind::kCuda);
    } catch (const std::exception& e) {
        std::snprintf(msg, static_cast<size_t>(cap), "%s", e.what());
        return nullptr;
    }
}
#endif

}  // namespace ls
