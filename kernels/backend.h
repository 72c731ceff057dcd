// The backend interface: memory and the ops of a transformer forward pass. The CPU backend is the
// reference; the CUDA backend implements the same ops. A backend says what it supports
// (supports(op, mode, type)) instead of crashing, and one factory makes every kind.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/common/histogram.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"

namespace ls {

// exact: f32 math on dequantized weights. llama: what ggml's CPU backend does, operand
// conversions included (f16 KV cache, activations quantized to the weight's dot type).
enum class MathMode { kExact, kLlama };

const char* math_mode_name(MathMode mode);
bool math_mode_from_name(const std::string& name, MathMode* out);

// The llama.cpp CPU build whose arithmetic llama mode reproduces. ggml's x86 code paths sum in
// different orders: AVX2+FMA+F16C (8 lanes, 256-bit expf), AVX-512F (16 lanes), and AVX-512 with
// AVX512-FP16, whose f16 dot products (F16 weights and attention in decode, flash attention)
// accumulate in half precision. Quantized dot products are the same AVX2 code in all three.
enum class LlamaIsa { kAvx2, kAvx512, kAvx512Fp16 };
const char* llama_isa_name(LlamaIsa isa);  // "avx2", "avx512", "avx512-fp16"
bool llama_isa_from_name(const std::string& name, LlamaIsa* out);
// The variant a llama.cpp built natively on this machine would run.
LlamaIsa host_llama_isa();

enum class RopeMode { kNorm, kNeox };  // NORM: pairs (2i, 2i+1); NEOX: pairs (i, i + n_rot/2)

struct RopeParams {
    RopeMode mode = RopeMode::kNorm;
    int n_rot = 0;               // rotated dims per head (the first n_rot)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;     // 1/factor for linear and YaRN scaling
    int n_ctx_orig = 0;          // YaRN: original context
    float ext_factor = 0.0f;     // YaRN: 1 when enabled
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
};

// Summary statistics of a tensor, computed where the data lives.
inline constexpr int kHistogramBins = kHistogramBinCount;
struct TensorStats {
    int64_t count = 0;
    int64_t nan_count = 0;
    int64_t inf_count = 0;
    float min = 0, max = 0;   // over finite values
    double mean = 0, rms = 0; // over finite values
    // Histogram over [min, max] on an axis linear within +-hist_scale (the bulk) and logarithmic
    // beyond (the outliers), so both show (kernels/common/histogram.h). hist_scale is the rms of
    // the finite values.
    float hist_scale = 1;
    int64_t hist[kHistogramBins] = {};
};

// Runs fn over [0, n_chunks) split into disjoint ranges, possibly in parallel.
using ParallelChunks = std::function<void(int64_t n_chunks, const std::function<void(int64_t, int64_t)>& fn)>;

// The statistics of n host values, as every backend computes them (the CPU backend's stats()).
// The moments are summed in eight lanes within chunks of kStatsChunk values and the chunks in
// order, so running the chunks in parallel gives the same bits as running them in turn.
inline constexpr int64_t kStatsChunk = 16384;
TensorStats tensor_stats(const float* values, int64_t n, const ParallelChunks& parallel = {});
// The same statistics from the plain loops only, never the SIMD ones (which must equal them bit
// for bit; tests compare the two).
TensorStats tensor_stats_scalar(const float* values, int64_t n);

// Value at the lower edge of histogram bin k (k = kHistogramBins gives the upper edge).
float histogram_bin_edge(const TensorStats& s, int k);
// Bin of value v for the stats' histogram range, clamped to [0, kHistogramBins).
int histogram_bin(const TensorStats& s, float v);

// Which KV cells a token attends to: cell j is visible to the token in cell p when j <= p (the
// causal mask; off with the no-causal-mask fault) and, with a sliding window (gemma's local
// layers), p - j < n_swa (llama.cpp's LLAMA_SWA_TYPE_STANDARD). Built from a bool where only the
// causal mask matters. `softcap` (flash attention only; gemma2): each visible score s becomes
// cap * tanh(s * (scale / cap)), as ggml's flash-attention kernel caps it.
struct AttnMask {
    bool causal = true;
    int64_t n_swa = 0;    // 0: no window
    float softcap = 0.0f;  // 0: none
    // The cells llama.cpp's KV view spans (its n_kv: the used cells rounded up to 256, within its
    // cache), past the n_kv given; ggml's flash attention splits a decode call's cells by it.
    // 0: the n_kv given.
    int64_t ggml_cells = 0;
    // The row is all ggml's softmax sees (no cells padded to 256 behind it: the MoE router's
    // probabilities): its last n % lanes values take libm's expf one at a time, as ggml's tail.
    bool whole_row = false;
    // gpt-oss's attention sinks: f32 {n_head} on the backend, one logit per head that joins every
    // row's softmax denominator (and its maximum) without a value (ggml_soft_max_add_sinks,
    // ggml_flash_attn_ext_add_sinks). nullptr: none.
    const float* sinks = nullptr;
    AttnMask(bool causal_mask = true, int64_t window = 0, float cap = 0.0f)  // NOLINT: from bool on purpose
        : causal(causal_mask), n_swa(window), softcap(cap) {}
    bool visible(int64_t j, int64_t p) const { return (!causal || j <= p) && (n_swa <= 0 || p - j < n_swa); }
};

// Whether ggml's CPU flash attention takes its tiled path for a call of T query rows and V rows of
// hd_v: prompts of GGML_FA_TILE_Q (64) rows or more whose V rows are whole f32 vectors of the build
// (8 lanes on AVX2, 16 on AVX-512).
inline bool ggml_flash_attn_tiled(int64_t T, int64_t hd_v, LlamaIsa isa) {
    return T >= 64 && hd_v % (isa == LlamaIsa::kAvx2 ? 8 : 16) == 0;
}

// Which implementation runs the ops. cuda-emulated runs the CUDA kernels' sources on the CPU
// through the SIMT emulator (every build has it); auto is CUDA when a device is usable, else CPU.
enum class BackendKind { kCpu, kCuda, kCudaEmulated, kAuto };
const char* backend_kind_name(BackendKind kind);  // "cpu", "cuda", "cuda-emulated", "auto"
bool backend_kind_from_name(const std::string& name, BackendKind* out);

struct BackendMemory {
    bool known = false;
    uint64_t available_bytes = 0;
    std::string where;            // "RAM (MemAvailable)", "CUDA device memory (NVIDIA H100)"
    bool weights_copied = false;  // weight() uploads a copy rather than using the mapped file in place
};

// What a backend has asked of a device since it was made: kernel launches (a cuBLAS call and a
// memset count as one each), waits of the host for the device (a synchronize(), a download(), which
// waits for the ops queued before it, and an upload too large to be queued), and copies from the
// device to the host. bench reports them per decoded token; the CPU backend, which has no device,
// none.
struct DeviceCounters {
    int64_t launches = 0;
    int64_t syncs = 0;
    int64_t d2h_copies = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;      // "CPU (8 threads)", "CUDA: NVIDIA H100"
    virtual BackendKind kind() const = 0;
    // Whether `op` runs here in `mode`. `type` is the weight type for the ops that read weights
    // (GET_ROWS on a table, MUL_MAT on a weight matrix; F16 for attention's products with the KV
    // cache) and F32 otherwise.
    virtual bool supports(Op op, MathMode mode, GgmlType type = GgmlType::F32) const = 0;
    // Which llama.cpp CPU build llama mode reproduces from now on (the CPU backend's; others
    // ignore it).
    virtual void set_llama_isa(LlamaIsa) {}
    // How many threads the llama.cpp run llama mode reproduces had (its flash attention splits a
    // decode call's cells into one chunk per thread); 0: the backend's own.
    virtual void set_llama_threads(int) {}

    // Where alloc() takes its memory and how much of it is left, for the checks that refuse a
    // run up front. The default knows nothing (no check is made): a backend that allocates almost
    // nothing, or one that cannot tell.
    virtual BackendMemory memory() const { return {}; }
    // Device memory. alloc'ed memory is zeroed.
    virtual void* alloc(size_t bytes) = 0;
    virtual void release(void* ptr) = 0;
    virtual void upload(void* dst, const void* host_src, size_t bytes) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes) = 0;
    // dst = src element by element (same ne, any byte strides on either side; f32 or i32): the
    // device-to-device copy, and the way a view is made contiguous (ggml's CPY / CONT).
    virtual void copy(const Tensor& src, Tensor& dst) = 0;
    // A weight from host bytes (the mapped file); the CPU backend uses them in place.
    virtual Tensor weight(GgmlType type, const int64_t ne[4], const void* host_data) = 0;
    // Whether the ops read weight()'s host bytes in place, every call (the CPU backend; not a
    // dry run's null backend, which reads nothing, nor one that uploads a copy): make_forward then
    // moves the file into memory of the process's own (MappedFile::keep_in_memory).
    virtual bool reads_host_weights() const { return false; }

    // y[:, t] = table row ids[t], dequantized to f32. ids: I32 {n} on the device.
    virtual void get_rows(const Tensor& table, const Tensor& ids, Tensor& y) = 0;
    // y[:, t] = x[:, t] / sqrt(mean(x[:, t]^2) + eps)
    virtual void rms_norm(const Tensor& x, float eps, Tensor& y) = 0;
    // y = x * w, w (one row) broadcast over the rows of x.
    virtual void mul_row(const Tensor& x, const Tensor& w, Tensor& y) = 0;
    // y = a + b (same shape, or b one row broadcast over the rows of a).
    virtual void add(const Tensor& a, const Tensor& b, Tensor& y) = 0;
    // y[r, t] = dot(w row r, x[:, t]): w {K, N} (any weight type), x {K, T} f32, y {N, T} f32.
    virtual void matmul(const Tensor& w, const Tensor& x, Tensor& y, MathMode mode) = 0;
    // Rotates the first n_rot dims of every head in place: x {head_dim, n_head, T}; pos: I32 {T}.
    // freq_factors: f32 {n_rot/2} (Llama 3's rope_freqs, LongRoPE's factors), pair i's angle
    // divided by factor i before YaRN's interpolation as ggml's ROPE does; data == nullptr: none.
    virtual void rope(Tensor& x, const Tensor& pos, const Tensor& freq_factors, const RopeParams& p, MathMode mode) = 0;
    // y = silu(gate) * up, silu(g) = g / (1 + e^-g); exact mode takes e^-g from ggml's 512-bit
    // vectorized expf (ggml_order::v_expf) for every value, on the CPU and on CUDA.
    virtual void swiglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) = 0;
    // y = gelu(gate) * up with GELU's tanh form (kernels/common/gelu.h): llama mode as ggml's CPU
    // build computes it (gelu_tanh_llama: f16 in, f16 out), exact mode gelu_tanh in f32. Backends
    // without it refuse models that need it (supports(kGeglu) false).
    virtual void geglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode);
    // gpt-oss's experts' activation (ggml_swiglu_oai): y = x sigmoid(alpha x) (u + 1), x = min(gate,
    // limit), u = clamp(up, -limit, limit). llama mode takes libm's expf as ggml's CPU op, exact mode
    // ggml_order::v_expf (host_swiglu_oai defines the result).
    virtual void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& y, float alpha, float limit, MathMode mode);

    // Attention over a KV cache. cache_k {head_dim_k, n_head_kv, n_ctx}, cache_v {head_dim_v,
    // n_head_kv, n_ctx}; cells [0, n_kv) are filled.
    // Writes k {head_dim_k, n_head_kv, T} and v into cells [first, first + T) (rounded to f16 in
    // llama mode, as ggml's f16 cache).
    virtual void store_kv(const Tensor& k, const Tensor& v, Tensor& cache_k, Tensor& cache_v, int64_t first,
                          MathMode mode) = 0;
    // kq {n_kv, T, n_head} = K^T q per head (GQA: head h reads kv head h / (n_head / n_head_kv)).
    virtual void attn_scores(const Tensor& q, const Tensor& cache_k, int64_t n_kv, Tensor& kq, MathMode mode) = 0;
    // p = softmax(kq * scale + mask) over ne0 (row r of kq is head r / T's; with mask.sinks, that
    // head's sink s joins the maximum and the sum as e^(s - max)), with the mask: cell j is visible to token t when
    // mask.visible(j, pos[t]) (pos: I32 {T}, the tokens' cells). On the CPU both modes take
    // the exponentials from ggml_order::v_expf (ggml's AVX2 build: its 256-bit expf) and sum them
    // 16 (8) at a time, the blocks in double.
    virtual void softmax_masked(const Tensor& kq, float scale, const Tensor& pos, const AttnMask& mask, Tensor& p,
                                MathMode mode) = 0;
    // kqv {head_dim_v, T, n_head} = V p per head.
    virtual void attn_values(const Tensor& p, const Tensor& cache_v, int64_t n_kv, Tensor& kqv, MathMode mode) = 0;
    // Flash attention as ggml's CPU kernel computes it (llama mode; rows of a prompt of 64 tokens or
    // more: f32 Q, tiles of 64 cells, V accumulated in f32; otherwise f16 Q, the online softmax
    // cell by cell, V accumulated in f16): out {head_dim_v, n_head, T} = softmax(q K^T * scale + mask) V.
    virtual void attn_flash(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, int64_t n_kv, float scale,
                            const Tensor& pos, const AttnMask& mask, Tensor& out) = 0;
    // y {head_dim * n_head, T} from x {head_dim, T, n_head} (ggml: permute(0, 2, 1, 3) + cont).
    virtual void merge_heads(const Tensor& x, Tensor& y) = 0;

    // ---- the mixture-of-experts ops (deepseek2's router and experts)
    // y = a op b for op ADD, MUL or DIV, with ggml's broadcasting: each b.ne[d] divides a.ne[d]
    // (b's index along d is a's modulo b.ne[d]). All three contiguous f32.
    virtual void binary(Op op, const Tensor& a, const Tensor& b, Tensor& y);
    // y = f(x) for op SIGMOID (1 / (1 + exp(-x))), SCALE (x * p0), CLAMP (x limited to [p0, p1]),
    // TANH (tanhf(x), as ggml) or SOFTPLUS (host_unary).
    virtual void unary(Op op, const Tensor& x, Tensor& y, float p0 = 0, float p1 = 0);
    // y {1, rows} = the sum of each row of x, in double as ggml sums it.
    virtual void sum_rows(const Tensor& x, Tensor& y);
    // idx (I32, x's shape): per row, the columns of x from the largest value to the smallest
    // (ggml's ARGSORT descending); equal values keep their column order, or with `ggml_ties` (the
    // CPU backend in llama mode) the order ggml's CPU std::sort leaves them in (rows over 16 values
    // with ties: the masked experts of grouped routing). Other backends keep column order.
    virtual void argsort_desc(const Tensor& x, Tensor& idx, bool ggml_ties = false);
    // MUL_MAT_ID: y[:, s, t] = w[expert ids[s, t]] x[:, s % x.ne[1], t]. w {K, N, n_expert} (any
    // weight type), x {K, 1 or n_used, T}, ids I32 {n_used, T}, y {N, n_used, T}. Each column is
    // one mat-vec product, as ggml's CPU backend computes it; this default runs them with matmul()
    // after reading the ids back, so it holds on every backend that has matmul.
    virtual void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, Tensor& y, MathMode mode);
    // ADD_ID: y[:, s, t] = a[:, s, t] + table[:, ids[s, t]] (the chosen experts' biases). a and y {n,
    // n_used, T}, table {n, n_expert}, ids I32 {n_used, T}; all contiguous.
    virtual void add_id(const Tensor& a, const Tensor& table, const Tensor& ids, Tensor& y);

    // ---- qwen35's Gated DeltaNet ops (the defaults run host_ops.h's functions on downloaded copies)
    // SILU: y = x / (1 + e^-x) over contiguous f32 (host_silu; llama mode as ggml's CPU build of
    // the reference computes it, exact mode with ggml's 512-bit expf).
    virtual void silu(const Tensor& x, Tensor& y, MathMode mode);
    // SSM_CONV: y {channels, T} = each channel's d_conv taps w {d_conv, channels} run over its row
    // of x {d_conv - 1 + T, channels} (host_ssm_conv). All contiguous f32.
    virtual void ssm_conv(const Tensor& x, const Tensor& w, Tensor& y);
    // GATED_DELTA_NET: out {S, H_v, T} from q, k {S, H_k, T}, v {S, H_v, T}, the decay g and beta
    // {H_v, T}, token by token, updating state {S, S, H_v} in place (host_gated_delta_net). All
    // contiguous f32.
    virtual void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                 Tensor& state, Tensor& out, MathMode mode);
    // The same rule in its chunked form (chunks of `chunk` tokens, in double; equal up to rounding):
    // an engine's choice for prompts where llama.cpp's CPU runs the recurrent form. `in_chunk_decay`
    // false leaves the decay between a chunk's tokens out (the delta-chunk-decay fault).
    virtual void gated_delta_net_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                         const Tensor& beta, Tensor& state, Tensor& out, int64_t chunk,
                                         bool in_chunk_decay = true);

    // Statistics and the histogram of an f32 tensor, computed where it lives.
    virtual void stats(const Tensor& x, TensorStats* out) = 0;

    // Waits until every op queued so far is done; an error of an op queued earlier surfaces here.
    // Ops on a GPU are queued and run later: a run syncs only where it needs data (a download, a
    // capture's statistics; "run mode"), or after every event ("step mode": each op's own time and
    // error). Backends that run ops as they are called have nothing to wait for.
    virtual void synchronize() {}

    virtual DeviceCounters device_counters() const { return {}; }
};

struct BackendOptions {
    int n_threads = 0;  // CPU threads (0 = all cores); the emulator's worker threads too
};

// A backend of `kind`, or none with the reason (`note`). For kAuto, `note` says why the CPU was
// chosen when it was ("CPU: cudaGetDeviceCount failed: ...").
struct MadeBackend {
    std::unique_ptr<Backend> backend;
    std::string note;
};
MadeBackend make_backend(BackendKind kind, const BackendOptions& options = {});

// The CPU backend with `n_threads` worker threads (0 = all cores).
std::unique_ptr<Backend> make_cpu_backend(int n_threads = 0);

// "MUL_MAT (q4_K, f16), RMS_NORM, ..." : the ops and weight types this backend runs in `mode`.
std::string describe_support(const Backend& backend, MathMode mode);

}  // namespace ls
