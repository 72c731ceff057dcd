// The CPU backend: the reference implementation of every op, multithreaded over rows and heads.
// In llama mode it converts operands exactly where ggml's CPU backend does.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/fp16.h"
#include "kernels/common/gelu.h"
#include "kernels/common/host_memory.h"
#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/exact_order.h"
#include "kernels/cpu/delta_net.h"
#include "kernels/cpu/ggml_order.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/thread_pool.h"
#include "kernels/cpu/vec_dot.h"
#include "kernels/cpu/vec_dot_avx2.h"
#include "kernels/cpu/vec_dot_avx512.h"
#include "kernels/cpu/vec_dot_x86.h"
#include "kernels/host_ops.h"

namespace ls {
namespace {

float round_f16(float x) { return fp16_to_fp32(fp32_to_fp16(x)); }

// round_f16 of n values (F16C's conversions where the processor has them: the same rounding).
void round_f16_row(const float* x, float* y, int64_t n) {
    int64_t i = 0;
#if defined(LS_HAVE_VEC_DOT_AVX2)
    if (avx2_kernels_usable()) i = round_f16_row_avx2(x, y, n);
#endif
    for (; i < n; ++i) y[i] = round_f16(x[i]);
}

// n floats in 64-byte pieces of a fixed size, which the compiler inlines: a deep cache's rows are
// copied a few hundred bytes at a time, where a call to memmove per row cost more than the copy.
inline void copy_floats(float* dst, const float* src, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) std::memcpy(dst + i, src + i, 64);
    for (; i < n; ++i) dst[i] = src[i];
}

// Exact mode's f32 dot product, in the order of exact_order.h.
float dot_f32(const float* a, const float* b, int64_t n) {
#if defined(LS_HAVE_VEC_DOT_AVX2)
    if (avx512_kernels_usable()) return dot_f32_exact_avx512(a, b, n);
    if (avx2_kernels_usable()) return dot_f32_exact_avx2(a, b, n);
#endif
    return exact_dot_f32(a, b, n);
}

// YaRN: the dims where interpolation gives way to extrapolation (as ggml computes them).
float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * std::log(n_ctx_orig / (n_rot * 2 * static_cast<float>(M_PI))) / (2 * std::log(base));
}

void require_contiguous(std::initializer_list<const Tensor*> tensors) {
    for (const Tensor* t : tensors)
        if (!t->contiguous()) throw std::invalid_argument("the mixture-of-experts ops take contiguous tensors");
}

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(int n_threads) : pool_(n_threads) {}

    std::string name() const override { return "CPU (" + std::to_string(pool_.size()) + " threads)"; }
    BackendKind kind() const override { return BackendKind::kCpu; }

    bool supports(Op op, MathMode mode, GgmlType type) const override {
        switch (op) {
            case Op::kGetRows: return can_dequantize(type);
            case Op::kMulMat: case Op::kMulMatId: {
                if (mode == MathMode::kExact) return can_dequantize(type);
                GgmlType act;
                return vec_dot_activation_type(type, &act);
            }
            case Op::kCpy: return type == GgmlType::F32 || type == GgmlType::I32;
            case Op::kRmsNorm: case Op::kMul: case Op::kAdd: case Op::kRope: case Op::kSwiglu: case Op::kSoftMax:
            case Op::kSetRows: case Op::kCont: return true;
            // The mixture-of-experts ops: kernels/host_ops.h's functions, on host memory here.
            case Op::kArgsort: case Op::kDiv: case Op::kSigmoid: case Op::kClamp: case Op::kSumRows:
            case Op::kScale: case Op::kGeglu: case Op::kTanh: case Op::kSwigluOai: case Op::kAddId: return true;
            case Op::kSilu: case Op::kSoftplus: case Op::kSsmConv: case Op::kGatedDeltaNet: return true;
            // ggml's flash-attention kernel is reproduced for llama mode only.
            case Op::kFlashAttnExt: return mode == MathMode::kLlama;
            default: return false;
        }
    }

    BackendMemory memory() const override {
        const HostMemory host = available_host_memory();
        return {host.known, host.available_bytes, "RAM (" + host.source + ")", false};
    }
    void* alloc(size_t bytes) override {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
        if (!p) throw std::bad_alloc();
        std::memset(p, 0, bytes);
        return p;
    }
    void release(void* ptr) override { std::free(ptr); }
    bool reads_host_weights() const override { return true; }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void download(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void copy(const Tensor& src, Tensor& dst) override {
        const char* s = static_cast<const char*>(src.data);
        char* d = static_cast<char*>(dst.data);
        for (int64_t i3 = 0; i3 < src.ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < src.ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < src.ne[1]; ++i1) {
                    const char* sr = s + i1 * src.nb[1] + i2 * src.nb[2] + i3 * src.nb[3];
                    char* dr = d + i1 * dst.nb[1] + i2 * dst.nb[2] + i3 * dst.nb[3];
                    if (src.nb[0] == 4 && dst.nb[0] == 4) {
                        std::memcpy(dr, sr, static_cast<size_t>(src.ne[0]) * 4);
                        continue;
                    }
                    for (int64_t i0 = 0; i0 < src.ne[0]; ++i0) std::memcpy(dr + i0 * dst.nb[0], sr + i0 * src.nb[0], 4);
                }
    }
    Tensor weight(GgmlType type, const int64_t ne[4], const void* host_data) override {
        Tensor t = make_tensor(const_cast<void*>(host_data), ne[0], ne[1], ne[2], ne[3], type);
        return t;
    }

    void get_rows(const Tensor& table, const Tensor& id_tensor, Tensor& y) override {
        const uint64_t row_bytes = table.nb[1];
        const char* base = static_cast<const char*>(table.data);
        const int32_t* ids = id_tensor.i32();
        pool_.parallel_for(id_tensor.ne[0], 1, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t)
                dequantize_row(table.type, base + static_cast<uint64_t>(ids[t]) * row_bytes, y.f32() + t * table.ne[0],
                               table.ne[0]);
        });
    }

    void rms_norm(const Tensor& x, float eps, Tensor& y) override {
        const int64_t n = x.ne[0];
        pool_.parallel_for(x.n_rows(), 16, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const float* xr = x.f32() + r * n;
                float* yr = y.f32() + r * n;
                double sum = 0.0;  // ggml sums the f32 squares in double
                for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(xr[i] * xr[i]);
                const float mean = static_cast<float>(sum / n);
                const float scale = 1.0f / std::sqrt(mean + eps);
                for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
            }
        });
    }

    // Element by element, so the rows go to the threads (a prompt's rows; a decode's one row stays
    // on the caller).
    void mul_row(const Tensor& x, const Tensor& w, Tensor& y) override {
        const int64_t n = x.ne[0];
        const float* wr = w.f32();
        pool_.parallel_for(x.n_rows(), 8, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r)
                for (int64_t i = 0; i < n; ++i) y.f32()[r * n + i] = x.f32()[r * n + i] * wr[i];
        });
    }

    void add(const Tensor& a, const Tensor& b, Tensor& y) override {
        const int64_t n = a.ne[0];
        const bool broadcast = b.n_rows() == 1 && a.n_rows() > 1;
        pool_.parallel_for(a.n_rows(), 8, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) {
                const float* br = b.f32() + (broadcast ? 0 : r * n);
                for (int64_t i = 0; i < n; ++i) y.f32()[r * n + i] = a.f32()[r * n + i] + br[i];
            }
        });
    }

    void matmul(const Tensor& w, const Tensor& x, Tensor& y, MathMode mode) override {
        const int64_t K = w.ne[0], N = w.ne[1], T = x.ne[1];
        const uint64_t w_row_bytes = w.row_bytes();
        const char* wbase = static_cast<const char*>(w.data);
        if (mode == MathMode::kExact) {
            matmul_exact(w, x, y);
            return;
        }
        if (w.type == GgmlType::F32 || w.type == GgmlType::F16) {
            // llama mode: F16 weights see f16 activations; both sum in ggml's order.
            const float* xs = x.f32();
            if (w.type == GgmlType::F16) {
                act_f32_.resize(static_cast<size_t>(K * T));
                round_f16_row(x.f32(), act_f32_.data(), K * T);
                xs = act_f32_.data();
            }
            // tinyBLAS takes matmuls of >= 2 columns whose k fits its vector width and whose rows
            // come in fours; vec_dot the rest.
            const bool tinyblas = T >= 2 && K % tinyblas_k() == 0 && N % 4 == 0;
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                thread_local std::vector<float> row;
                row.resize(K);
                for (int64_t r = b; r < e; ++r) {
                    const float* wr = reinterpret_cast<const float*>(wbase + r * w_row_bytes);
                    if (w.type != GgmlType::F32) {
                        dequantize_row(w.type, wbase + r * w_row_bytes, row.data(), K);
                        wr = row.data();
                    }
                    for (int64_t t = 0; t < T; ++t) {
                        const float* xt = xs + t * K;
                        float v;
                        if (tinyblas) v = dot_tinyblas(wr, xt, K);
                        else if (w.type == GgmlType::F16) v = dot_f16(wr, xt, K);
                        else v = vec_dot_f32(wr, xt, K);
                        y.f32()[t * N + r] = v;
                    }
                }
            });
            return;
        }
        // Quantized weights in llama mode: each activation column is converted to the weight's
        // dot type first (Q8_0, Q8_1, Q8_K), as ggml does.
        GgmlType act_type;
        if (!vec_dot_activation_type(w.type, &act_type))
            throw std::runtime_error(std::string("matmul: no llama-mode dot product for ") + ggml_type_name(w.type));
        uint64_t act_row_bytes = 0;
        ggml_row_bytes(act_type, K, &act_row_bytes);
        act_scratch_.resize(act_row_bytes * T);
        pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t)
                quantize_activation_row(act_type, x.f32() + t * K, act_scratch_.data() + t * act_row_bytes, K);
        });
        // ggml's x86 kernels sum in their own lane order; types without one use the scalar order.
#if defined(LS_HAVE_VEC_DOT_AVX2)
        // Prompts of the 32-quant formats (tinyBLAS's form): each weight row unpacked once for all
        // the columns (same bits).
        if ((w.type == GgmlType::Q4_0 || w.type == GgmlType::Q5_0 || w.type == GgmlType::Q8_0 ||
             w.type == GgmlType::IQ4_NL) && T >= 2 && avx2_) {
            const auto* act = reinterpret_cast<const block_q8_0*>(act_scratch_.data());
            const auto act_stride = static_cast<int64_t>(act_row_bytes / sizeof(block_q8_0));
            act_d_.resize(static_cast<size_t>((T + 3) / 4 * 4 * act_stride));
            q8_0_scales_in_fours(act, act_stride, K / 32, static_cast<int>(T), act_d_.data());
            const int64_t columns = l2_columns(act_row_bytes, 4);
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                for (int64_t t0 = 0; t0 < T; t0 += columns)
                    for (int64_t r = b; r < e; r += 2) {
                        const int rows = static_cast<int>(std::min<int64_t>(2, e - r));
                        dot_q8_0_family_avx2_columns(w.type, K, wbase + r * w_row_bytes, w_row_bytes, rows, act + t0 * act_stride,
                                                     act_stride, act_d_.data() + t0 * act_stride,
                                                     static_cast<int>(std::min(columns, T - t0)), &y.f32()[t0 * N + r], N);
                    }
            });
            return;
        }
        // Decoding the 32-quant formats: the rows of a range in one call (same bits as one by one).
        // (MXFP4 has no tinyBLAS form, so its prompts take vec_dot per column below, as in ggml.)
        if ((w.type == GgmlType::Q4_0 || w.type == GgmlType::Q5_0 || w.type == GgmlType::Q8_0 ||
             w.type == GgmlType::IQ4_NL || w.type == GgmlType::MXFP4) && T == 1 && avx2_ && K % 32 == 0) {
            const auto* act = reinterpret_cast<const block_q8_0*>(act_scratch_.data());
            if (w.type == GgmlType::MXFP4) {  // the activation laid out once for the pairwise kernel
                mxfp4_act_.resize(mxfp4_activation_bytes(K));
                mxfp4_prepare_activation(K, act, mxfp4_act_.data());
                pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                    dot_mxfp4_avx2_rows(K, wbase + b * w_row_bytes, w_row_bytes, e - b, mxfp4_act_.data(), act, &y.f32()[b]);
                });
                return;
            }
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                dot_q8_0_family_avx2_rows(w.type, K, wbase + b * w_row_bytes, w_row_bytes, e - b, act, &y.f32()[b]);
            });
            return;
        }
        if (w.type == GgmlType::IQ4_XS && T == 1 && avx2_) {  // decoding: the rows of a range in one call
            const auto* act = reinterpret_cast<const block_q8_K*>(act_scratch_.data());
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                dot_iq4_xs_avx2_rows(K, wbase + b * w_row_bytes, w_row_bytes, e - b, act, &y.f32()[b]);
            });
            return;
        }
        if (T == 1 && k_quant_run_takes(w.type, K)) {  // decoding K-quants: the rows of a range in one call
            const auto* act = reinterpret_cast<const block_q8_K*>(act_scratch_.data());
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                dot_k_quant_avx2_run(w.type, K, wbase + b * w_row_bytes, w_row_bytes, e - b, act, &y.f32()[b]);
            });
            return;
        }
        if (w.type == GgmlType::IQ4_XS && T >= 2 && avx2_) {
            const auto* act = reinterpret_cast<const block_q8_K*>(act_scratch_.data());
            const auto act_stride = static_cast<int64_t>(act_row_bytes / sizeof(block_q8_K));
            const int64_t columns = l2_columns(act_row_bytes, 4);
            if (iq_panel_takes(w.type, K, N, T)) {  // ggml's IQ panel gemm, its own float steps
                pool_.parallel_for(N, 8, [&](int64_t b, int64_t e) {
                    for (int64_t t0 = 0; t0 < T; t0 += columns)
                        dot_iq4_xs_panel_avx2_columns(K, wbase + b * w_row_bytes, w_row_bytes, static_cast<int>(e - b),
                                                      act + t0 * act_stride, act_stride,
                                                      static_cast<int>(std::min(columns, T - t0)), &y.f32()[t0 * N + b], N);
                });
                return;
            }
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                for (int64_t t0 = 0; t0 < T; t0 += columns)
                    for (int64_t r = b; r < e; ++r)
                        dot_iq4_xs_avx2_columns(K, reinterpret_cast<const block_iq4_xs*>(wbase + r * w_row_bytes),
                                                act + t0 * act_stride, act_stride, static_cast<int>(std::min(columns, T - t0)),
                                                &y.f32()[t0 * N + r], N);
            });
            return;
        }
        // Q4_K prompts: each weight row's blocks are unpacked once for all the columns (same bits).
        if (w.type == GgmlType::Q4_K && T >= 2 && (avx512_ || avx2_)) {
            const auto* act = reinterpret_cast<const block_q8_K*>(act_scratch_.data());
            const auto act_stride = static_cast<int64_t>(act_row_bytes / sizeof(block_q8_K));
            if (avx512_) {
                q8_K_columns_.resize(static_cast<size_t>((T + 3) / 4 * act_stride));
                q8_K_column_blocks(act, act_stride, T, act_stride, q8_K_columns_.data());
            }
            constexpr int64_t kRows = 8;  // AVX-512: weight rows per pass over the columns
            if (avx512_) {
                pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; r += kRows) {
                        const auto* wr = reinterpret_cast<const block_q4_K*>(wbase + r * w_row_bytes);
                        dot_q4_K_avx512_rows(K, wr, w_row_bytes, static_cast<int>(std::min(kRows, e - r)), act, act_stride,
                                             q8_K_columns_.data(), static_cast<int>(T), &y.f32()[r], N);
                    }
                });
                return;
            }
            // AVX2: each row unpacked once per block of columns (l2_columns).
            const int64_t columns = l2_columns(act_row_bytes, 4);
            pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
                for (int64_t t0 = 0; t0 < T; t0 += columns)
                    for (int64_t r = b; r < e; ++r)
                        dot_q4_K_avx2_rows(K, reinterpret_cast<const block_q4_K*>(wbase + r * w_row_bytes), act + t0 * act_stride,
                                           act_stride, static_cast<int>(std::min(columns, T - t0)), &y.f32()[t0 * N + r], N);
            });
            return;
        }
#endif
        const bool panel = iq_panel_takes(w.type, K, N, T);
        const int64_t columns = l2_columns(act_row_bytes, 1);
        pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
            for (int64_t t0 = 0; t0 < T; t0 += columns) {
                for (int64_t r = b; r < e; ++r) {
                    for (int64_t t = t0; t < std::min(T, t0 + columns); ++t) {
                        const void* wr = wbase + r * w_row_bytes;
                        const void* at = act_scratch_.data() + t * act_row_bytes;
                        float* out = &y.f32()[t * N + r];
                        if ((panel && dot_iq_panel(w.type, K, wr, at, out)) ||
                            (T >= 2 && dot_q0_tinyblas(w.type, K, wr, at, out)) || vec_dot_row_x86(w.type, K, wr, at, out))
                            continue;
                        vec_dot_row(w.type, K, wr, at, out);
                    }
                }
            }
        });
    }

    void rope(Tensor& x, const Tensor& pos_tensor, const Tensor& freq_factors, const RopeParams& p, MathMode mode) override {
        const int32_t* pos = pos_tensor.i32();
        const float* ff = freq_factors.data ? freq_factors.f32() : nullptr;
        const int64_t head_dim = x.ne[0], n_head = x.ne[1], T = x.ne[2];
        const int n_dims = p.n_rot;
        const float theta_scale = std::pow(p.freq_base, -2.0f / n_dims);
        float corr_dims[2] = {0, 0};
        if (p.ext_factor != 0.0f) {
            float start = std::floor(yarn_corr_dim(n_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
            float end = std::ceil(yarn_corr_dim(n_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
            corr_dims[0] = std::max(0.0f, start);
            corr_dims[1] = std::min(static_cast<float>(n_dims - 1), end);
        }
        pool_.parallel_for(T, 1, [&](int64_t b, int64_t e) {
            std::vector<float> cache(n_dims);
            for (int64_t t = b; t < e; ++t) {
                // cos/sin per pair, theta advanced by repeated multiplication as ggml does.
                float theta_extrap = static_cast<float>(pos[t]);
                for (int i0 = 0; i0 < n_dims; i0 += 2) {
                    const float extrap = ff ? theta_extrap / ff[i0 / 2] : theta_extrap;
                    float theta = p.freq_scale * extrap;
                    float mscale = p.attn_factor;
                    if (p.ext_factor != 0.0f) {
                        float y = (i0 / 2 - corr_dims[0]) / std::max(0.001f, corr_dims[1] - corr_dims[0]);
                        float ramp_mix = (1 - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
                        // ggml's build fuses the first product (as in the rotation below).
                        theta = mode == MathMode::kLlama ? std::fma(theta, 1 - ramp_mix, extrap * ramp_mix)
                                                         : theta * (1 - ramp_mix) + extrap * ramp_mix;
                        mscale *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
                    }
                    cache[i0] = std::cos(theta) * mscale;
                    cache[i0 + 1] = std::sin(theta) * mscale;
                    theta_extrap *= theta_scale;
                }
                for (int64_t h = 0; h < n_head; ++h) {
                    float* v = x.f32() + (t * n_head + h) * head_dim;
                    for (int i0 = 0; i0 < n_dims; i0 += 2) {
                        const float c = cache[i0], s = cache[i0 + 1];
                        const int a = p.mode == RopeMode::kNorm ? i0 : i0 / 2;
                        const int bi = p.mode == RopeMode::kNorm ? i0 + 1 : i0 / 2 + n_dims / 2;
                        const float x0 = v[a], x1 = v[bi];
                        if (mode == MathMode::kLlama) {
                            // GCC fuses the first product of each expression in ggml's build.
                            v[a] = std::fma(x0, c, -(x1 * s));
                            v[bi] = std::fma(x0, s, x1 * c);
                        } else {
                            v[a] = x0 * c - x1 * s;
                            v[bi] = x0 * s + x1 * c;
                        }
                    }
                }
            }
        });
    }

    void swiglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) override {
        const int64_t n = gate.ne[0];
        pool_.parallel_for(gate.n_rows(), 1, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const float* g = gate.f32() + r * n;
                const float* u = up.f32() + r * n;
                float* out = y.f32() + r * n;
                if (mode == MathMode::kLlama) {
#if defined(LS_HAVE_VEC_DOT_AVX2)
                    if (isa_ == LlamaIsa::kAvx2 && avx2_) swiglu_row_avx2_vec(g, u, out, n);
                    else if (isa_ == LlamaIsa::kAvx2) ggml_order::swiglu_row_avx2(g, u, out, n);
                    else if (avx512_) swiglu_row_avx512(g, u, out, n);
#else
                    if (isa_ == LlamaIsa::kAvx2) ggml_order::swiglu_row_avx2(g, u, out, n);
#endif
                    else ggml_order::swiglu_row(g, u, out, n);
                } else {
#if defined(LS_HAVE_VEC_DOT_AVX2)
                    if (avx512_) {
                        swiglu_exact_avx512(g, u, out, n);
                        continue;
                    }
                    if (avx2_) {
                        swiglu_exact_avx2(g, u, out, n);
                        continue;
                    }
#endif
                    for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + ggml_order::v_expf(0.0f - g[i])) * u[i];
                }
            }
        });
    }

    void geglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) override {
        // llama mode reads GELU from a table of every f16 input, as ggml's CPU build does (the same
        // values as gelu_tanh_llama, without a tanh per value).
        static const std::vector<float> table = [] {
            std::vector<float> t(65536);
            for (uint32_t h = 0; h < 65536; ++h) t[h] = gelu_tanh_llama(fp16_to_fp32(static_cast<uint16_t>(h)));
            return t;
        }();
        const int64_t n = gate.n_elements();
        pool_.parallel_for(n, 4096, [&](int64_t b, int64_t e) {
            const float* g = gate.f32();
            const float* u = up.f32();
            float* out = y.f32();
            for (int64_t i = b; i < e; ++i) {
                if (mode != MathMode::kLlama) out[i] = gelu_tanh(g[i]) * u[i];
                else if (g[i] <= -10.0f) out[i] = 0.0f;
                else if (g[i] >= 10.0f) out[i] = g[i] * u[i];
                else out[i] = table[fp32_to_fp16(g[i])] * u[i];
            }
        });
    }

    void store_kv(const Tensor& k, const Tensor& v, Tensor& cache_k, Tensor& cache_v, int64_t first,
                  MathMode mode) override {
        auto store = [&](const Tensor& src, Tensor& cache) {
            const int64_t cell = src.ne[0] * src.ne[1];
            float* dst = cache.f32() + first * cell;
            for (int64_t i = 0; i < src.n_elements(); ++i)
                dst[i] = mode == MathMode::kLlama ? round_f16(src.f32()[i]) : src.f32()[i];
        };
        store(k, cache_k);
        store(v, cache_v);
    }

    void attn_scores(const Tensor& q, const Tensor& cache_k, int64_t n_kv, Tensor& kq, MathMode mode) override {
        const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
        const int64_t n_head_kv = cache_k.ne[1];
        const int64_t group = n_head / n_head_kv;
        const bool tinyblas = T >= 2 && hd % tinyblas_k() == 0;
#if defined(LS_HAVE_VEC_DOT_AVX2)
        constexpr int64_t kQueries = 24;
        const int64_t n_blocks = (T + kQueries - 1) / kQueries;
        const bool rows512 = avx512_ && (mode == MathMode::kExact || (isa_ == LlamaIsa::kAvx512 && hd % 64 == 0));
        if (T == 1 && avx2_ && (mode == MathMode::kExact || (isa_ == LlamaIsa::kAvx2 && hd % 32 == 0) || rows512)) {
            // A decode call: each kv head's cached keys read once for the `group` query heads that
            // share them (read per head, a deep cache came from L3 eight times), in chunks copied
            // together (16 KiB, in L1 while every head's dots run over them; the cache's rows are
            // n_head_kv * head_dim floats apart and would share L1 sets). Each dot is computed
            // whole, in its mode's order (dot_f16's blocks of 32, or exact mode's sixteen lanes).
            const int64_t chunk = std::max<int64_t>(8, 4096 / hd);
            const int64_t n_chunks = (n_kv + chunk - 1) / chunk;
            std::vector<float> qv(static_cast<size_t>(n_head * hd));
            if (mode == MathMode::kLlama) round_f16_row(q.f32(), qv.data(), n_head * hd);
            else std::copy(q.f32(), q.f32() + n_head * hd, qv.begin());
            pool_.parallel_for(n_head_kv * n_chunks, 1, [&](int64_t b, int64_t e) {
                thread_local std::vector<float> rows;
                rows.resize(static_cast<size_t>(chunk * hd));
                for (int64_t x = b; x < e; ++x) {
                    const int64_t g = x % n_head_kv, j0 = x / n_head_kv * chunk, nj = std::min(chunk, n_kv - j0);
                    const float* k0 = cache_k.f32() + (j0 * n_head_kv + g) * hd;
                    for (int64_t j = 0; j < nj; ++j) {
                        const float* ahead = k0 + std::min(j + 8, n_kv - 1 - j0) * n_head_kv * hd;
                        for (int64_t c = 0; c < hd; c += 16) __builtin_prefetch(ahead + c);
                        copy_floats(rows.data() + j * hd, k0 + j * n_head_kv * hd, hd);
                    }
                    float* out = kq.f32() + g * group * n_kv + j0;
                    if (mode == MathMode::kExact) {
                        (avx512_ ? exact_dots_avx512 : exact_dots_avx2)(rows.data(), hd, nj, qv.data() + g * group * hd, hd, group,
                                                                        hd, out, n_kv);
                        continue;
                    }
                    for (int64_t i = 0; i < group; ++i)
                        (isa_ == LlamaIsa::kAvx2 ? dot_blocks8_rows_avx2 : dot_blocks16_rows_avx512)(
                            rows.data(), hd, nj, qv.data() + (g * group + i) * hd, hd, out + i * n_kv);
                }
            });
            return;
        }
        if (mode == MathMode::kExact && avx2_ && !avx512_) {  // blocks of queries against every cached key
            pool_.parallel_for(n_head * n_blocks, 1, [&](int64_t b, int64_t e) {
                for (int64_t x = b; x < e; ++x) {
                    const int64_t h = x / n_blocks, t0 = x % n_blocks * kQueries, nt = std::min(kQueries, T - t0);
                    exact_dots_avx2(cache_k.f32() + h / group * hd, n_head_kv * hd, n_kv, q.f32() + (t0 * n_head + h) * hd,
                                    n_head * hd, nt, hd, kq.f32() + (h * T + t0) * n_kv, n_kv);
                }
            });
            return;
        }
        // A prompt's scores on AVX-512, in tiles of 4 keys x 4 queries whose lanes are summed
        // sixteen outputs at a time: exact mode's dots, or tinyBLAS's (queries rounded to f16).
        const bool tiles512 = T >= 2 && avx512_ && (mode == MathMode::kExact || (tinyblas && isa_ != LlamaIsa::kAvx2));
        if (tiles512 || (mode == MathMode::kLlama && tinyblas && isa_ == LlamaIsa::kAvx2 && avx2_)) {
            // A prompt's scores as tinyBLAS's tiles: blocks of queries (rounded to f16, as ggml
            // converts them for the f16 cache) against every cached key.
            pool_.parallel_for(n_head * n_blocks, 1, [&](int64_t b, int64_t e) {
                std::vector<float> qv(kQueries * hd);
                for (int64_t x = b; x < e; ++x) {
                    const int64_t h = x / n_blocks, t0 = x % n_blocks * kQueries, nt = std::min(kQueries, T - t0);
                    const float* keys = cache_k.f32() + h / group * hd;
                    float* out = kq.f32() + (h * T + t0) * n_kv;
                    if (mode == MathMode::kExact) {
                        exact_dots_avx512(keys, n_head_kv * hd, n_kv, q.f32() + (t0 * n_head + h) * hd, n_head * hd, nt, hd, out, n_kv);
                        continue;
                    }
                    for (int64_t t = 0; t < nt; ++t) round_f16_row(q.f32() + ((t0 + t) * n_head + h) * hd, qv.data() + t * hd, hd);
                    if (tiles512) tinyblas16_avx512(keys, n_head_kv * hd, n_kv, qv.data(), hd, nt, hd, out, n_kv);
                    else tinyblas8_avx2(keys, n_head_kv * hd, n_kv, qv.data(), hd, nt, hd, out, n_kv);
                }
            });
            return;
        }
#endif
        pool_.parallel_for(n_head * T, 1, [&](int64_t b, int64_t e) {
            std::vector<float> qv(hd);
            for (int64_t ht = b; ht < e; ++ht) {
                const int64_t h = ht / T, t = ht % T, g = h / group;
                const float* qs = q.f32() + (t * n_head + h) * hd;
                float* out = kq.f32() + (h * T + t) * n_kv;
                if (mode == MathMode::kExact) {
                    dot_f32_rows(cache_k.f32() + g * hd, n_head_kv * hd, n_kv, qs, hd, out);
                    continue;
                }
                // The f16 cache makes ggml convert Q to f16 before the dot product.
                round_f16_row(qs, qv.data(), hd);
#if defined(LS_HAVE_VEC_DOT_AVX2)
                if (!tinyblas && isa_ == LlamaIsa::kAvx2 && avx2_ && hd % 32 == 0) {  // dot_f16's order, no leftovers
                    dot_blocks8_rows_avx2(cache_k.f32() + g * hd, n_head_kv * hd, n_kv, qv.data(), hd, out);
                    continue;
                }
#endif
                for (int64_t j = 0; j < n_kv; ++j) {
                    const float* kr = cache_k.f32() + (j * n_head_kv + g) * hd;
                    out[j] = tinyblas ? dot_tinyblas(kr, qv.data(), hd) : dot_f16(kr, qv.data(), hd);
                }
            }
        });
    }

    void softmax_masked(const Tensor& kq, float scale, const Tensor& pos_tensor, const AttnMask& mask, Tensor& p,
                        MathMode mode) override {
        const int32_t* pos = pos_tensor.i32();
        const int64_t n_kv = kq.ne[0], T = kq.ne[1];
        pool_.parallel_for(kq.n_rows(), 4, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
                const int64_t t = r % T;
                const float* in = kq.f32() + r * n_kv;
                float* out = p.f32() + r * n_kv;
                float max = -INFINITY;
#if defined(LS_HAVE_VEC_DOT_AVX2)
                if (avx2_) {  // the visible cells are one range [lo, hi)
                    const int64_t hi = mask.causal ? std::clamp<int64_t>(pos[t] + 1, 0, n_kv) : n_kv;
                    const int64_t lo = mask.n_swa > 0 ? std::clamp<int64_t>(pos[t] - mask.n_swa + 1, 0, hi) : 0;
                    std::fill(out, out + lo, -INFINITY);
                    max = scale_and_max_avx2(in + lo, scale, out + lo, hi - lo, max);
                    std::fill(out + hi, out + n_kv, -INFINITY);
                } else
#endif
                    for (int64_t j = 0; j < n_kv; ++j) {
                        const bool visible = mask.visible(j, pos[t]);
                        out[j] = visible ? in[j] * scale : -INFINITY;
                        max = std::max(max, out[j]);
                    }
                const bool llama = mode == MathMode::kLlama;
                // A sink joins the maximum before the exponentials and the sum after them (libm's
                // expf, added in double, as ggml's soft_max; exact mode: ggml_order::v_expf).
                const float sink = mask.sinks ? mask.sinks[r / T] : 0.0f;
                if (mask.sinks) max = max > sink ? max : sink;
                double sum = exp_and_sum(out, n_kv, max, llama && isa_ == LlamaIsa::kAvx2, llama && mask.whole_row);
                if (mask.sinks) sum += static_cast<double>(llama ? std::exp(sink - max) : ggml_order::v_expf(sink - max));
                const float inv = static_cast<float>(1.0 / sum);
                for (int64_t j = 0; j < n_kv; ++j) out[j] *= inv;
            }
        });
    }

    // x[j] = exp(x[j] - max), returning their sum as ggml_vec_soft_max_f32 forms it: the
    // exponentials 16 at a time (reduced in f32), the blocks in double (exact mode does the same on
    // every processor); ggml's AVX2 build (`avx2_lanes`): 8 at a time with its own expf, the lanes
    // summed as hsum8. With `ggml_tail` the last n % lanes values are ggml's scalar tail: libm's
    // expf, each added to the sum in double (without it they form one partial block, as the
    // cells ggml pads attention rows with contribute nothing).
    double exp_and_sum(float* x, int64_t n, float max, bool avx2_lanes, bool ggml_tail) const {
        const int lanes = avx2_lanes ? 8 : 16;
        const int64_t n_blocks = ggml_tail ? n - n % lanes : n;
        double sum = 0.0;
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (lanes == 16 && avx512_) {
            sum = exp_row_avx512(x, n_blocks, max);
        } else if (avx2_) {
            const int64_t whole = n_blocks / lanes * lanes;  // a partial block (no ggml tail) is the scalar loop's
            sum = exp_blocks(x + whole, n_blocks - whole, max, lanes, exp_blocks_avx2(x, whole, max, lanes, 0.0));
        } else
#endif
            sum = exp_blocks(x, n_blocks, max, lanes);
        for (int64_t j = n_blocks; j < n; ++j) {
            x[j] = std::exp(x[j] - max);
            sum += static_cast<double>(x[j]);
        }
        return sum;
    }

    static double exp_blocks(float* x, int64_t n, float max, int lanes, double sum = 0.0) {
        for (int64_t j0 = 0; j0 < n; j0 += lanes) {
            float block[16] = {};
            for (int l = 0; l < lanes && j0 + l < n; ++l) {
                const int64_t j = j0 + l;
                x[j] = lanes == 8 ? ggml_order::v_expf_avx2(x[j] - max) : ggml_order::v_expf(x[j] - max);
                block[l] = x[j];
            }
            sum += lanes == 8 ? ggml_order::hsum8(block) : ggml_order::reduce_add16(block);
        }
        return sum;
    }

    void attn_values(const Tensor& p, const Tensor& cache_v, int64_t n_kv, Tensor& kqv, MathMode mode) override {
        const int64_t hd = kqv.ne[0], T = kqv.ne[1], n_head = kqv.ne[2];
        const int64_t n_head_kv = cache_v.ne[1];
        const int64_t group = n_head / n_head_kv;
#if defined(LS_HAVE_VEC_DOT_AVX2)
        // A decode call (llama mode on an AVX2 or AVX-512 build, or exact mode): each column of V
        // dotted with the probabilities in the mode's order (dot_f16's, or exact mode's sixteen lanes), straight
        // from the cache's rows, not from V transposed anew every token; in llama mode the padded
        // cells, zero, add nothing. Each kv head's V is read once for the `group` heads that share
        // it: sixteen of its columns at a time copied together (n_kv x 16 floats, in L2 while every
        // head of the group runs over them), the rows fetched a few ahead (each cell's sixteen values
        // are one cache line, n_head_kv * head_dim floats from the next).
        // On AVX-512 (exact mode, or ggml's AVX-512 build) the sixteen columns' lanes stay in registers.
        const bool columns512 = avx512_ && hd % 16 == 0 && (mode == MathMode::kExact || isa_ == LlamaIsa::kAvx512);
        if (T == 1 && avx2_ && hd % 8 == 0 && (mode == MathMode::kExact || isa_ == LlamaIsa::kAvx2 || columns512)) {
            constexpr int64_t kCols = 16;
            const int64_t n_col_blocks = (hd + kCols - 1) / kCols;
            pool_.parallel_for(n_head_kv * n_col_blocks, 1, [&](int64_t b, int64_t e) {
                thread_local std::vector<float> pv, cols;  // reused: fresh buffers of this size are new pages every call
                pv.resize(static_cast<size_t>(n_kv));
                cols.resize(static_cast<size_t>(n_kv * kCols));
                for (int64_t x = b; x < e; ++x) {
                    const int64_t g = x / n_col_blocks, d0 = x % n_col_blocks * kCols, w = std::min(kCols, hd - d0);
                    const float* v0 = cache_v.f32() + g * hd + d0;
                    for (int64_t j = 0; j < n_kv; ++j) {
                        __builtin_prefetch(v0 + std::min(j + 24, n_kv - 1) * n_head_kv * hd);
                        copy_floats(cols.data() + j * w, v0 + j * n_head_kv * hd, w);
                    }
                    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
                        float* o = kqv.f32() + h * hd + d0;
                        if (mode == MathMode::kExact) {
                            if (columns512) exact_columns_avx512(cols.data(), w, p.f32() + h * n_kv, n_kv, o);
                            else exact_columns_avx2(cols.data(), w, w, p.f32() + h * n_kv, n_kv, o);
                            continue;
                        }
                        round_f16_row(p.f32() + h * n_kv, pv.data(), n_kv);
                        if (columns512) dot_blocks16_columns_avx512(cols.data(), w, pv.data(), n_kv, o);
                        else dot_blocks8_columns_avx2(cols.data(), w, w, pv.data(), n_kv, o);
                    }
                }
            });
            return;
        }
#endif
        // ggml reads V transposed ({n_kv, head_dim} per kv head) and sums over the padded cells
        // (multiples of 16 for tinyBLAS, 128 for vec_dot), the extra cells being zero.
        const bool tinyblas = T >= 2;
        const int64_t n_pad = tinyblas ? (n_kv + 15) / 16 * 16 : (n_kv + 127) / 128 * 128;
        // The transpose in tiles of 16 cells on every thread: a tile's 16 cache rows stay in L1
        // while each of its head_dim output rows gets 16 contiguous values; the padding is zero.
        v_t_.resize(static_cast<size_t>(n_head_kv * hd * n_pad));
        constexpr int64_t kCells = 16;
        const int64_t n_tiles = n_pad / 16;
        pool_.parallel_for(n_head_kv * n_tiles, 1, [&](int64_t b, int64_t e) {
            for (int64_t gt = b; gt < e; ++gt) {
                const int64_t g = gt / n_tiles, j0 = gt % n_tiles * kCells, j1 = std::min(j0 + kCells, n_kv);
                for (int64_t d = 0; d < hd; ++d) {
                    float* row = v_t_.data() + (g * hd + d) * n_pad;
                    for (int64_t j = j0; j < j1; ++j) row[j] = cache_v.f32()[(j * n_head_kv + g) * hd + d];
                    for (int64_t j = std::max(j0, n_kv); j < j0 + kCells; ++j) row[j] = 0.0f;
                }
            }
        });
#if defined(LS_HAVE_VEC_DOT_AVX2)
        constexpr int64_t kRows = 12;
        const int64_t n_blocks = (T + kRows - 1) / kRows;
        // The cells past the last nonzero probability of a block's rows (a causal prompt's later
        // cells) add exact zeros to every sum. With V finite (0 * inf is NaN) they are left out,
        // which keeps the bits: the running sums start at +0 and never become -0, so adding +-0
        // changes none of them. `used` counts the cells up to the last nonzero, in sixteens.
        const bool v_finite = T >= 2 && all_finite(cache_v.f32(), n_kv * n_head_kv * hd);  // a decode call cuts nothing
        auto used = [&](const float* rows, int64_t stride, int64_t nt, int64_t n) {
            int64_t last = 0;
            for (int64_t t = 0; t < nt; ++t) {
                int64_t j = n;
                while (j > last && rows[t * stride + j - 1] == 0.0f) --j;
                last = std::max(last, j);
            }
            return v_finite ? (last + 15) / 16 * 16 : n;
        };
        if (mode == MathMode::kExact && avx2_) {  // V's transposed rows against blocks of probability rows
            pool_.parallel_for(n_head * n_blocks, 1, [&](int64_t b, int64_t e) {
                for (int64_t x = b; x < e; ++x) {
                    const int64_t h = x / n_blocks, t0 = x % n_blocks * kRows, nt = std::min(kRows, T - t0);
                    const float* rows = p.f32() + (h * T + t0) * n_kv;
                    // Cut only at a multiple of 16 before the leftovers (which come after the lanes' sum).
                    const int64_t k = std::min(used(rows, n_kv, nt, n_kv), n_kv);
                    (avx512_ ? exact_dots_avx512 : exact_dots_avx2)(v_t_.data() + h / group * hd * n_pad, n_pad, hd, rows, n_kv,
                                                                    nt, k <= n_kv - n_kv % 16 ? k : n_kv,
                                                                    kqv.f32() + (h * T + t0) * hd, hd);
                }
            });
            return;
        }
        const bool tiles512 = mode == MathMode::kLlama && tinyblas && isa_ != LlamaIsa::kAvx2 && avx512_;
        if (tiles512 || (mode == MathMode::kLlama && tinyblas && isa_ == LlamaIsa::kAvx2 && avx2_)) {
            // tinyBLAS's tiles: V's transposed rows against blocks of probability rows (rounded to
            // f16, zero over the padding).
            pool_.parallel_for(n_head * n_blocks, 1, [&](int64_t b, int64_t e) {
                std::vector<float> pv(kRows * n_pad, 0.0f);
                for (int64_t x = b; x < e; ++x) {
                    const int64_t h = x / n_blocks, t0 = x % n_blocks * kRows, nt = std::min(kRows, T - t0);
                    for (int64_t t = 0; t < nt; ++t) round_f16_row(p.f32() + (h * T + t0 + t) * n_kv, pv.data() + t * n_pad, n_kv);
                    (tiles512 ? tinyblas16_avx512 : tinyblas8_avx2)(v_t_.data() + h / group * hd * n_pad, n_pad, hd, pv.data(),
                                                                   n_pad, nt, used(pv.data(), n_pad, nt, n_pad),
                                                                   kqv.f32() + (h * T + t0) * hd, hd);
                }
            });
            return;
        }
#endif
        pool_.parallel_for(n_head * T, 1, [&](int64_t b, int64_t e) {
            std::vector<float> pv(n_pad, 0.0f);
            for (int64_t ht = b; ht < e; ++ht) {
                const int64_t h = ht / T, t = ht % T, g = h / group;
                const float* ps = p.f32() + (h * T + t) * n_kv;
                // ggml multiplies the f16 V cache with the probabilities converted to f16.
                if (mode == MathMode::kLlama) round_f16_row(ps, pv.data(), n_kv);
                else std::copy(ps, ps + n_kv, pv.begin());
                float* out = kqv.f32() + (h * T + t) * hd;
                if (mode == MathMode::kExact) {
                    dot_f32_rows(v_t_.data() + g * hd * n_pad, n_pad, hd, pv.data(), n_kv, out);
                    continue;
                }
                for (int64_t d = 0; d < hd; ++d) {
                    const float* vr = v_t_.data() + (g * hd + d) * n_pad;
                    if (tinyblas) out[d] = dot_tinyblas(vr, pv.data(), n_pad);
                    else out[d] = dot_f16(vr, pv.data(), n_pad);
                }
            }
        });
    }

    // ggml's CPU flash attention has three paths, chosen per call as ggml chooses them:
    //  - one row at a time (attn_flash_cells): Q rounded to f16, each visible cell's score an f16 dot
    //    product, the online softmax cell by cell, V accumulated in f16;
    //  - prompts of 64 rows or more (ggml_flash_attn_tiled; attn_flash_tiled): Q in f32, scores and V in tiles of
    //    kFaTileKv cells, f32 FMA chains;
    //  - a decode call's single row over 512 cells or more: the cells split in one chunk per thread
    //    of the llama.cpp run (set_llama_threads), each as the first path, the chunks merged.
    void attn_flash(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, int64_t n_kv, float scale,
                    const Tensor& pos_tensor, const AttnMask& mask, Tensor& out) override {
        const int64_t hd_v = cache_v.ne[0], n_head = q.ne[1], T = q.ne[2];
        if (mask.softcap != 0.0f) scale /= mask.softcap;  // ggml: s = cap * tanhf(s * scale / cap)
        if (ggml_flash_attn_tiled(T, hd_v, isa_)) return attn_flash_tiled(q, cache_k, cache_v, n_kv, scale, pos_tensor, mask, out);
        const int nth = llama_threads_ > 0 ? llama_threads_ : static_cast<int>(pool_.size());
        const int64_t cells = std::max(n_kv, mask.ggml_cells);
        if (T == 1 && cells >= 512 && nth > 1) {
            const int64_t chunk = (cells + nth - 1) / nth;
            pool_.parallel_for(n_head, 1, [&](int64_t b, int64_t e) {
                FlashPartial part(hd_v), merged(hd_v);
                for (int64_t h = b; h < e; ++h) {
                    merged.reset();
                    for (int64_t c0 = 0; c0 < n_kv; c0 += chunk) {
                        attn_flash_cells(q, cache_k, cache_v, c0, std::min(n_kv, c0 + chunk), scale, pos_tensor, mask, h, 0, part);
                        if (part.S == 0.0f) continue;
                        // ggml_flash_attn_ext_reduce_partials (its a * b + c * d contracted to fma(a, b, c * d))
                        const float m_new = std::fmax(merged.M, part.M);
                        const float s_old = std::exp(merged.M - m_new), s_new = std::exp(part.M - m_new);
                        for (int64_t d = 0; d < hd_v; ++d) merged.acc[d] = std::fma(merged.acc[d], s_old, part.acc[d] * s_new);
                        merged.S = std::fma(merged.S, s_old, part.S * s_new);
                        merged.M = m_new;
                    }
                    const float inv = merged.S != 0.0f ? 1.0f / merged.S : 1.0f;
                    float* o = out.f32() + h * hd_v;
                    for (int64_t d = 0; d < hd_v; ++d) o[d] = merged.acc[d] * inv;
                }
            });
            return;
        }
        pool_.parallel_for(n_head * T, 1, [&](int64_t b, int64_t e) {
            FlashPartial part(hd_v);
            for (int64_t ht = b; ht < e; ++ht) {
                const int64_t h = ht % n_head, t = ht / n_head;
                attn_flash_cells(q, cache_k, cache_v, 0, n_kv, scale, pos_tensor, mask, h, t, part);
                const float inv = part.S == 0.0f ? 0.0f : 1.0f / part.S;
                float* o = out.f32() + (t * n_head + h) * hd_v;
                for (int64_t d = 0; d < hd_v; ++d) o[d] = part.acc[d] * inv;
            }
        });
    }

    void merge_heads(const Tensor& x, Tensor& y) override {
        const int64_t hd = x.ne[0], T = x.ne[1], n_head = x.ne[2];
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < n_head; ++h)
                std::memcpy(y.f32() + (t * n_head + h) * hd, x.f32() + (h * T + t) * hd, hd * sizeof(float));
    }

    // The mixture-of-experts ops: host_ops.h's functions on the tensors' own memory, split over
    // the threads by whole slices, rows or ranges of values (the same bits as one call).
    void binary(Op op, const Tensor& a, const Tensor& b, Tensor& y) override {
        require_contiguous({&a, &b, &y});
        if (a.ne[3] != 1 || b.ne[3] != 1) {
            host_binary(op, a.f32(), a.ne, b.f32(), b.ne, y.f32());
            return;
        }
        // One slice of a (ne[2] == 1) at a time; b's slice is a's modulo b.ne[2].
        const int64_t a_slice = a.ne[0] * a.ne[1], b_slice = b.ne[0] * b.ne[1];
        const int64_t a_ne[4] = {a.ne[0], a.ne[1], 1, 1}, b_ne[4] = {b.ne[0], b.ne[1], 1, 1};
        pool_.parallel_for(a.ne[2], 1, [&](int64_t lo, int64_t hi) {
            for (int64_t i2 = lo; i2 < hi; ++i2)
                host_binary(op, a.f32() + i2 * a_slice, a_ne, b.f32() + (i2 % b.ne[2]) * b_slice, b_ne,
                            y.f32() + i2 * a_slice);
        });
    }
    void unary(Op op, const Tensor& x, Tensor& y, float p0, float p1) override {
        require_contiguous({&x, &y});
        pool_.parallel_for(x.n_elements(), 4096, [&](int64_t lo, int64_t hi) {
            host_unary(op, x.f32() + lo, hi - lo, y.f32() + lo, p0, p1);
        });
    }
    // qwen35's Gated DeltaNet ops: host_ops.h's functions, split over channels or value heads.
    // llama mode takes the vector width of the llama.cpp build it reproduces.
    int llama_lanes(MathMode mode) const {
        return mode == MathMode::kExact ? 0 : isa_ == LlamaIsa::kAvx2 ? 8 : 16;
    }
    void silu(const Tensor& x, Tensor& y, MathMode mode) override {
        require_contiguous({&x, &y});
        const int64_t n = x.ne[0];
        const int lanes = llama_lanes(mode);
        pool_.parallel_for(x.n_rows(), 4, [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) delta_net::silu(x.f32() + r * n, n, y.f32() + r * n, lanes);
        });
    }
    void ssm_conv(const Tensor& x, const Tensor& w, Tensor& y) override {
        require_contiguous({&x, &w, &y});
        pool_.parallel_for(w.ne[1], 64, [&](int64_t c0, int64_t c1) {
            delta_net::ssm_conv(x.f32(), w.f32(), w.ne[0], w.ne[1], y.ne[1], y.f32(), c0, c1);
        });
    }
    void gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                         Tensor& state, Tensor& out, MathMode mode) override {
        require_contiguous({&q, &k, &v, &g, &beta, &state, &out});
        const int lanes = llama_lanes(mode);
#if defined(LS_HAVE_VEC_DOT_AVX2)
        const int64_t S = v.ne[0], H_k = q.ne[1], H_v = v.ne[1], T = v.ne[2];
        if (lanes == 8 && avx2_ && S % 32 == 0) {  // the same bits on AVX2 instructions
            const float scale = 1.0f / std::sqrt(static_cast<float>(S));
            pool_.parallel_for(H_v, 1, [&](int64_t h0, int64_t h1) {
                std::vector<float> delta(static_cast<size_t>(S));
                for (int64_t h = h0; h < h1; ++h)
                    for (int64_t t = 0; t < T; ++t)
                        delta_net_step_avx2(state.f32() + h * S * S, q.f32() + (t * H_k + h % H_k) * S,
                                            k.f32() + (t * H_k + h % H_k) * S, v.f32() + (t * H_v + h) * S,
                                            std::exp(g.f32()[t * H_v + h]), beta.f32()[t * H_v + h], scale, S,
                                            delta.data(), out.f32() + (t * H_v + h) * S);
            });
            return;
        }
#endif
        pool_.parallel_for(v.ne[1], 1, [&](int64_t h0, int64_t h1) {
            delta_net::gated_delta_net(q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(), state.f32(), out.f32(), v.ne[0], q.ne[1],
                                 v.ne[1], v.ne[2], lanes, h0, h1);
        });
    }
    void gated_delta_net_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                                 Tensor& state, Tensor& out, int64_t chunk, bool in_chunk_decay) override {
        require_contiguous({&q, &k, &v, &g, &beta, &state, &out});
        pool_.parallel_for(v.ne[1], 1, [&](int64_t h0, int64_t h1) {
            delta_net::gated_delta_net_chunked(q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(), state.f32(), out.f32(), v.ne[0],
                                               q.ne[1], v.ne[1], v.ne[2], chunk, h0, h1, in_chunk_decay);
        });
    }
    void swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& y, float alpha, float limit, MathMode mode) override {
        require_contiguous({&gate, &up, &y});
        pool_.parallel_for(gate.n_elements(), 4096, [&](int64_t lo, int64_t hi) {
            host_swiglu_oai(gate.f32() + lo, up.f32() + lo, hi - lo, y.f32() + lo, alpha, limit, mode == MathMode::kLlama);
        });
    }
    void add_id(const Tensor& a, const Tensor& table, const Tensor& ids, Tensor& y) override {
        require_contiguous({&a, &table, &ids, &y});
        host_add_id(a.f32(), a.ne[0], a.ne[1], a.ne[2], table.f32(), table.ne[1], ids.i32(), y.f32());
    }
    void sum_rows(const Tensor& x, Tensor& y) override {
        require_contiguous({&x, &y});
        pool_.parallel_for(x.n_rows(), 64, [&](int64_t lo, int64_t hi) {
            host_sum_rows(x.f32() + lo * x.ne[0], x.ne[0], hi - lo, y.f32() + lo);
        });
    }
    void argsort_desc(const Tensor& x, Tensor& idx, bool ggml_ties) override {
        require_contiguous({&x, &idx});
        pool_.parallel_for(x.n_rows(), 4, [&](int64_t lo, int64_t hi) {
            host_argsort_desc(x.f32() + lo * x.ne[0], x.ne[0], hi - lo, idx.i32() + lo * x.ne[0], ggml_ties);
        });
    }

    // MUL_MAT_ID as ggml's CPU backend runs it: the columns grouped by expert, each activation
    // column converted once, and every (row, column) a single-column dot product's bits (vec_dot's,
    // or the IQ panel form's for an IQ4_XS expert's 8 or more columns; exact mode: the dequantized
    // row against the f32 column), while each expert row is read once for all the columns routed to
    // it. The MXFP4, IQ4_XS and IQ4_NL experts take the decode kernels (a run of rows against one
    // column, several rows at a time), with the same bits.
    void matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, Tensor& y, MathMode mode) override {
        const int64_t K = w.ne[0], N = w.ne[1], E = w.ne[2], n_used = ids.ne[0], T = ids.ne[1], xs = x.ne[1];
        // The columns routed to each expert: output column t * n_used + s, which reads activation
        // column t * xs + s % xs.
        struct Routed {
            int64_t out, in;
        };
        std::vector<std::vector<Routed>> by_expert(static_cast<size_t>(E));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t s = 0; s < n_used; ++s) {
                const int32_t e = ids.i32()[t * n_used + s];
                if (e < 0 || e >= E)
                    throw std::out_of_range("MUL_MAT_ID: expert id " + std::to_string(e) + " is outside [0, " + std::to_string(E) + ")");
                by_expert[e].push_back({t * n_used + s, t * xs + s % xs});
            }
        std::vector<int64_t> active;
        for (int64_t e = 0; e < E; ++e)
            if (!by_expert[e].empty()) active.push_back(e);
        const int64_t n_x = xs * T;
        const bool f32_dots = mode == MathMode::kExact || w.type == GgmlType::F32 || w.type == GgmlType::F16;
        GgmlType act_type = GgmlType::F32;
        uint64_t act_row_bytes = 0;
        if (mode == MathMode::kLlama && w.type == GgmlType::F16) {
            act_f32_.resize(static_cast<size_t>(K * n_x));
            for (int64_t i = 0; i < K * n_x; ++i) act_f32_[i] = round_f16(x.f32()[i]);
        } else if (!f32_dots) {
            if (!vec_dot_activation_type(w.type, &act_type))
                throw std::runtime_error(std::string("matmul_id: no llama-mode dot product for ") + ggml_type_name(w.type));
            ggml_row_bytes(act_type, K, &act_row_bytes);
            act_scratch_.resize(act_row_bytes * n_x);
            pool_.parallel_for(n_x, 1, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i)
                    quantize_activation_row(act_type, x.f32() + i * K, act_scratch_.data() + i * act_row_bytes, K);
            });
        }
        const float* xs_f32 = mode == MathMode::kLlama && w.type == GgmlType::F16 ? act_f32_.data() : x.f32();
        const uint64_t row_bytes = w.nb[1];
        // Every expert's rows in runs of kRun (one expert each), each run against all the expert's
        // columns while it is in L1.
        constexpr int64_t kRun = 16;
        // fn(rows, r, run, columns): a run of `run` rows from row r of one expert, and its columns.
        auto for_each_run = [&](const auto& fn) {
            pool_.parallel_for(static_cast<int64_t>(active.size()) * N, kRun, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e;) {
                    const int64_t expert = active[i / N], r = i % N, run = std::min({e - i, N - r, kRun});
                    fn(static_cast<const char*>(w.data) + expert * w.nb[2] + r * row_bytes, r, run, by_expert[expert]);
                    i += run;
                }
            });
        };
#if defined(LS_HAVE_VEC_DOT_AVX2)
        // MXFP4 experts (gpt-oss): each activation column laid out once for the pairwise decoding
        // kernel (vec_dot's bits).
        if (mode == MathMode::kLlama && w.type == GgmlType::MXFP4 && avx2_ && K % 32 == 0) {
            const auto* act = reinterpret_cast<const block_q8_0*>(act_scratch_.data());
            const int64_t act_blocks = static_cast<int64_t>(act_row_bytes / sizeof(block_q8_0));
            const uint64_t laid_bytes = mxfp4_activation_bytes(K);
            mxfp4_act_.resize(laid_bytes * n_x);
            pool_.parallel_for(n_x, 1, [&](int64_t b, int64_t e) {
                for (int64_t i = b; i < e; ++i) mxfp4_prepare_activation(K, act + i * act_blocks, mxfp4_act_.data() + i * laid_bytes);
            });
            for_each_run([&](const char* rows, int64_t r, int64_t run, const std::vector<Routed>& cols) {
                for (const Routed& c : cols)
                    dot_mxfp4_avx2_rows(K, rows, row_bytes, run, mxfp4_act_.data() + c.in * laid_bytes, act + c.in * act_blocks,
                                        y.f32() + c.out * N + r);
            });
            return;
        }
#endif
        // ggml's CPU backend: every (row, column) a single-column dot product (vec_dot, or the IQ
        // panel form for an IQ4_XS expert's 8 or more columns; exact mode: the dequantized row
        // against the f32 column); IQ4_XS and IQ4_NL decoding by the rows kernels, as below.
        for_each_run([&](const char* rows, int64_t r0, int64_t run, const std::vector<Routed>& cols) {
            thread_local std::vector<float> row;
            row.resize(K);
            const bool panel = mode == MathMode::kLlama && iq_panel_takes(w.type, K, N, static_cast<int64_t>(cols.size()));
#if defined(LS_HAVE_VEC_DOT_AVX2)
            // IQ4_XS and IQ4_NL experts outside the panel form (decoding): the run's rows against
            // each column by the decode kernels, four rows at a time (vec_dot's bits).
            if (mode == MathMode::kLlama && !panel && k_quant_run_takes(w.type, K)) {  // K-quant experts, decoding
                for (const Routed& c : cols)
                    dot_k_quant_avx2_run(w.type, K, rows, row_bytes, run,
                                         reinterpret_cast<const block_q8_K*>(act_scratch_.data() + c.in * act_row_bytes),
                                         y.f32() + c.out * N + r0);
                return;
            }
            if (mode == MathMode::kLlama && !panel && avx2_ &&
                (w.type == GgmlType::IQ4_XS || (w.type == GgmlType::IQ4_NL && K % 32 == 0))) {
                for (const Routed& c : cols) {
                    const uint8_t* act = act_scratch_.data() + c.in * act_row_bytes;
                    float* out = y.f32() + c.out * N + r0;
                    if (w.type == GgmlType::IQ4_XS)
                        dot_iq4_xs_avx2_rows(K, rows, row_bytes, run, reinterpret_cast<const block_q8_K*>(act), out);
                    else
                        dot_q8_0_family_avx2_rows(w.type, K, rows, row_bytes, run, reinterpret_cast<const block_q8_0*>(act), out);
                }
                return;
            }
#endif
            for (int64_t i = 0; i < run; ++i) {
                const char* wr = rows + i * row_bytes;
                const float* wf = reinterpret_cast<const float*>(wr);
                if (f32_dots && w.type != GgmlType::F32) {
                    dequantize_row(w.type, wr, row.data(), K);
                    wf = row.data();
                }
                for (const Routed& c : cols) {
                    float* out = y.f32() + c.out * N + r0 + i;
                    const uint8_t* act = act_scratch_.data() + c.in * act_row_bytes;
                    if (panel && dot_iq_panel(w.type, K, wr, act, out)) continue;
                    if (mode == MathMode::kExact) *out = dot_f32(wf, x.f32() + c.in * K, K);
                    else if (w.type == GgmlType::F16) *out = dot_f16(wf, xs_f32 + c.in * K, K);
                    else if (w.type == GgmlType::F32) *out = vec_dot_f32(wf, x.f32() + c.in * K, K);
                    else if (!vec_dot_row_x86(w.type, K, wr, act, out)) vec_dot_row(w.type, K, wr, act, out);
                }
            }
        });
    }

    void stats(const Tensor& x, TensorStats* out) override {
        *out = tensor_stats(x.f32(), x.n_elements(), [this](int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
            pool_.parallel_for(n, 1, fn);
        });
    }

    void set_llama_isa(LlamaIsa isa) override { isa_ = isa; }
    void set_llama_threads(int n) override { llama_threads_ = n; }

private:
    // ggml's tile of cells for flash attention (GGML_FA_TILE_KV).
    static constexpr int64_t kFaTileKv = 64;

    // One row's online softmax over some cells: the running maximum, sum and V accumulator.
    struct FlashPartial {
        explicit FlashPartial(int64_t hd_v) : acc(static_cast<size_t>(hd_v)) {}
        void reset() {
            M = -INFINITY;
            S = 0.0f;
            std::fill(acc.begin(), acc.end(), 0.0f);
        }
        float M = -INFINITY, S = 0.0f;
        std::vector<float> acc;
        std::vector<float> q16;  // scratch: Q rounded to f16
    };

    // ggml_compute_forward_flash_attn_ext_f16_one_chunk for head h, row t over cells [c0, c1):
    // masked cells skipped, Q rounded to f16 for the dot products, V accumulated in f16 (native f16
    // arithmetic in the avx512-fp16 build).
    void attn_flash_cells(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, int64_t c0, int64_t c1,
                          float scale, const Tensor& pos_tensor, const AttnMask& mask, int64_t h, int64_t t,
                          FlashPartial& part) const {
        const int64_t hd = q.ne[0], n_head = q.ne[1], hd_v = cache_v.ne[0], n_head_kv = cache_k.ne[1];
        const int64_t g = h / (n_head / n_head_kv);
        const int32_t p = pos_tensor.i32()[t];
        const float* qs = q.f32() + (t * n_head + h) * hd;
        part.q16.resize(static_cast<size_t>(hd));
        for (int64_t d = 0; d < hd; ++d) part.q16[d] = round_f16(qs[d]);
        part.reset();
        float& M = part.M;
        float& S = part.S;
        float* acc = part.acc.data();
        for (int64_t j = c0; j < c1; ++j) {
            if (!mask.visible(j, p)) continue;
            float s = dot_f16(cache_k.f32() + (j * n_head_kv + g) * hd, part.q16.data(), hd) * scale;
            if (mask.softcap != 0.0f) s = mask.softcap * tanhf(s);
            const float m_old = M;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                M = s;
                ms = std::exp(m_old - M);
                if (isa_ == LlamaIsa::kAvx512Fp16) ggml_order::vec_scale_f16(acc, hd_v, ms);
                else ggml_order::vec_scale_f16_f32acc(acc, hd_v, ms);
            } else {
                vs = std::exp(s - M);
            }
            const float* vrow = cache_v.f32() + (j * n_head_kv + g) * hd_v;
            if (isa_ == LlamaIsa::kAvx512Fp16) ggml_order::vec_mad_f16(acc, vrow, hd_v, vs);
            else ggml_order::vec_mad_f16_f32acc(acc, vrow, hd_v, vs);
            S = std::fma(S, ms, vs);
        }
        // The head's sink, in the first chunk only, on the accumulator widened to f32.
        if (mask.sinks && c0 == 0) add_sink(mask.sinks[h], M, S, acc, hd_v, true, false);
    }

    // ggml_flash_attn_ext_add_sinks' step after the cells: the sink s rescales the accumulator
    // when it is the new maximum (`move_max`: M becomes s, as the one-chunk path keeps it), else
    // adds e^(s - M) to the sum; S * ms + vs is one FMA in ggml's tiled path (`fused`), two
    // roundings in its one-chunk path (GCC contracts the one and not the other).
    static void add_sink(float s, float& M, float& S, float* acc, int64_t hd_v, bool move_max, bool fused) {
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            ms = std::exp(M - s);
            if (move_max) M = s;
            for (int64_t d = 0; d < hd_v; ++d) acc[d] *= ms;
        } else {
            vs = std::exp(s - M);
        }
        S = fused ? std::fma(S, ms, vs) : S * ms + vs;
    }

    // ggml_compute_forward_flash_attn_ext_tiled, one row at a time (its rows do not mix): per tile
    // of kFaTileKv cells, each score an FMA chain over the head dims (f32 Q, the f16 cache widened),
    // scaled, capped, masked; the tile's maximum rescales the accumulator (libm expf), the tile's
    // exponentials and their sum as ggml_vec_soft_max_f32 forms them, and V added by FMA chains
    // over the tile's cells in f32.
    void attn_flash_tiled(const Tensor& q, const Tensor& cache_k, const Tensor& cache_v, int64_t n_kv, float scale,
                          const Tensor& pos_tensor, const AttnMask& mask, Tensor& out) {
        const int32_t* pos = pos_tensor.i32();
        const int64_t hd = q.ne[0], n_head = q.ne[1], T = q.ne[2];
        const int64_t hd_v = cache_v.ne[0], n_head_kv = cache_k.ne[1];
        const int64_t group = n_head / n_head_kv;
        const bool avx2_lanes = isa_ == LlamaIsa::kAvx2;
        pool_.parallel_for(n_head * T, 1, [&](int64_t b, int64_t e) {
            std::vector<float> acc(static_cast<size_t>(hd_v));
            float kq[kFaTileKv];
            for (int64_t ht = b; ht < e; ++ht) {
                const int64_t h = ht % n_head, t = ht / n_head, g = h / group;
                const float* qs = q.f32() + (t * n_head + h) * hd;
                float M = -INFINITY, S = 0.0f;
                std::fill(acc.begin(), acc.end(), 0.0f);
                for (int64_t c0 = 0; c0 < n_kv; c0 += kFaTileKv) {
                    float tile_max = -INFINITY;
                    for (int64_t c = 0; c < kFaTileKv; ++c) {
                        const int64_t j = c0 + c;
                        if (j >= n_kv || !mask.visible(j, pos[t])) {
                            kq[c] = -INFINITY;
                            continue;
                        }
                        const float* kr = cache_k.f32() + (j * n_head_kv + g) * hd;
                        float s = 0.0f;
                        for (int64_t d = 0; d < hd; ++d) s = std::fma(qs[d], kr[d], s);
                        s *= scale;
                        if (mask.softcap != 0.0f) s = tanhf(s) * mask.softcap;
                        kq[c] = s;
                        tile_max = std::max(tile_max, s);
                    }
                    if (tile_max == -INFINITY) continue;  // every cell masked for this row
                    const float m_new = std::fmax(M, tile_max);
                    if (m_new > M) {
                        const float ms = std::exp(M - m_new);
                        for (float& a : acc) a *= ms;
                        S *= ms;
                    }
                    M = m_new;
                    S = static_cast<float>(static_cast<double>(S) + exp_and_sum(kq, kFaTileKv, M, avx2_lanes, false));
                    for (int64_t c = 0; c < kFaTileKv; ++c) {
                        if (kq[c] == 0.0f) continue;  // masked (exp(-inf)): adds nothing
                        const float* vr = cache_v.f32() + ((c0 + c) * n_head_kv + g) * hd_v;
                        for (int64_t d = 0; d < hd_v; ++d) acc[d] = std::fma(kq[c], vr[d], acc[d]);
                    }
                }
                if (mask.sinks) add_sink(mask.sinks[h], M, S, acc.data(), hd_v, false, true);
                const float inv = S == 0.0f ? 0.0f : 1.0f / S;
                float* o = out.f32() + (t * n_head + h) * hd_v;
                for (int64_t d = 0; d < hd_v; ++d) o[d] = acc[d] * inv;
            }
        });
    }

    // Exact mode: weights dequantized as dequantize_row does, f32 dot products in the order of
    // exact_order.h. With AVX-512 (an output's sixteen lanes in one register) or AVX2 (in two),
    // decode keeps six Q4_K or Q8_0 rows' chains in flight (Q5_K and Q6_K four; AVX2: four);
    // prompts, and AVX-512 decodes of other formats, take sixteen rows at a time, each chunk of them decoded once for all the
    // columns; the results are the same bits as the portable loop below.
    static constexpr int64_t kExactColumns = 96;

    void matmul_exact(const Tensor& w, const Tensor& x, Tensor& y) {
        const int64_t K = w.ne[0], N = w.ne[1], T = x.ne[1];
        const uint64_t row_bytes = w.row_bytes();
        const char* wbase = static_cast<const char*>(w.data);
#if defined(LS_HAVE_VEC_DOT_AVX2)
        const bool fused_decode = T == 1 && (avx512_ ? exact_decode_avx512_has(w.type, K) : exact_decode_avx2_has(w.type, K));
        if (avx512_ || (avx2_ && (T >= 2 || fused_decode))) {
            const int64_t R = fused_decode ? (avx512_ ? kExactDecodeRows512 : 4) : avx512_ ? kExactMatmulRows512 : kExactMatmulRows;
            pool_.parallel_for((N + R - 1) / R, 1, [&](int64_t b, int64_t e) {
                if (fused_decode && avx512_) {
                    // A share's rows in one call: the kernel keeps as many rows in flight as suits
                    // its format (Q5_K and Q6_K four) and fetches each group's successor while it computes.
                    const int64_t r0 = R * b, r1 = std::min(N, R * e);
                    exact_decode_rows_avx512(w.type, K, wbase + r0 * row_bytes, row_bytes, static_cast<int>(r1 - r0),
                                             x.f32(), y.f32() + r0);
                    return;
                }
                for (int64_t q = b; q < e; ++q) {
                    const int64_t r = R * q;
                    const int rows = static_cast<int>(std::min<int64_t>(R, N - r));
                    const void* wr = wbase + r * row_bytes;
                    float* yr = y.f32() + r;
                    if (fused_decode)
                        exact_decode_rows_avx2(w.type, K, wr, row_bytes, rows, x.f32(), yr);
                    else
                        // A long prompt in blocks of columns: a block's inputs and running lanes
                        // stay in L2 while the rows' chunks are decoded for it.
                        for (int64_t t0 = 0; t0 < T; t0 += kExactColumns) {
                            const int64_t cols = std::min(kExactColumns, T - t0);
                            if (avx512_)
                                matmul_exact_avx512(w.type, wr, row_bytes, rows, K, x.f32() + t0 * K, cols, yr + t0 * N, N);
                            else
                                matmul_exact_avx2(w.type, wr, row_bytes, rows, K, x.f32() + t0 * K, cols, yr + t0 * N, N);
                        }
                }
            });
            return;
        }
#endif
        pool_.parallel_for(N, 4, [&](int64_t b, int64_t e) {
            thread_local std::vector<float> row;
            row.resize(K);
            for (int64_t r = b; r < e; ++r) {
                const float* wr = reinterpret_cast<const float*>(wbase + r * row_bytes);
                if (w.type != GgmlType::F32) {
                    dequantize_row(w.type, wbase + r * row_bytes, row.data(), K);
                    wr = row.data();
                }
                for (int64_t t = 0; t < T; ++t) y.f32()[t * N + r] = dot_f32(wr, x.f32() + t * K, K);
            }
        });
    }

    static bool all_finite(const float* x, int64_t n) {
        bool finite = true;
        for (int64_t i = 0; i < n; ++i) finite &= std::isfinite(x[i]);
        return finite;
    }

    // How many activation columns of a prompt's matmul form one block (a multiple of `multiple`):
    // a block stays in L2 while every weight row of a thread's range meets it, where a long
    // prompt's columns (megabytes) would stream from memory once per weight row.
    static int64_t l2_columns(uint64_t column_bytes, int64_t multiple) {
        constexpr int64_t kBlockBytes = int64_t{192} << 10;
        return std::max<int64_t>(multiple, kBlockBytes / static_cast<int64_t>(column_bytes) / multiple * multiple);
    }

    // Exact dots of `count` rows (a_stride apart) with one b, several rows at a time where the
    // processor allows: out[i] = dot_f32(a + i * a_stride, b, n), the same bits.
    void dot_f32_rows(const float* a, int64_t a_stride, int64_t count, const float* b, int64_t n, float* out) const {
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (avx512_) {
            dot_f32_exact_avx512_rows(a, a_stride, static_cast<int>(count), b, n, out);
            return;
        }
#endif
        for (int64_t i = 0; i < count; ++i) out[i] = dot_f32(a + i * a_stride, b, n);
    }

    // ggml's f16 dot product and tinyBLAS dot in the order of the llama.cpp build reproduced.
    float dot_f16(const float* a, const float* b, int64_t n) const {
        if (isa_ == LlamaIsa::kAvx512Fp16) return ggml_order::vec_dot_f16(a, b, n);
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (isa_ == LlamaIsa::kAvx2 && avx2_) {  // vec_dot_f16_f32acc's order on AVX2 instructions
            const int64_t np = n & ~int64_t(31);
            double sum = dot_blocks8_avx2(a, b, np);
            for (int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
            return static_cast<float>(sum);
        }
#endif
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (isa_ == LlamaIsa::kAvx512 && avx512_) {  // vec_dot_f16_f32acc's 16-lane order
            const int64_t np = n & ~int64_t(63);
            double sum = dot_blocks16_avx512(a, b, np);
            for (int64_t i = np; i < n; ++i) sum += static_cast<double>(a[i] * b[i]);
            return static_cast<float>(sum);
        }
#endif
        return ggml_order::vec_dot_f16_f32acc(a, b, n, isa_ == LlamaIsa::kAvx512);
    }
    float dot_tinyblas(const float* a, const float* b, int64_t k) const {
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (isa_ == LlamaIsa::kAvx2 && avx2_) return dot_tinyblas8_avx2(a, b, k);
        if (isa_ != LlamaIsa::kAvx2 && avx512_) return dot_tinyblas16_avx512(a, b, k);
#endif
        return isa_ == LlamaIsa::kAvx2 ? ggml_order::dot_tinyblas8(a, b, k) : ggml_order::dot_tinyblas(a, b, k);
    }
    // ggml_vec_dot_f32 in the order of the llama.cpp build reproduced.
    float vec_dot_f32(const float* a, const float* b, int64_t n) const {
        if (isa_ == LlamaIsa::kAvx2) return ggml_order::vec_dot_f32_avx2(a, b, n);
#if defined(LS_HAVE_VEC_DOT_AVX2)
        if (avx512_) {  // the blocked part on AVX-512, the leftovers multiplied and added separately
            const int64_t np = n & ~int64_t(63);
            float sum = dot_blocks16_avx512(a, b, np);
            for (int64_t i = np; i < n; ++i) sum = sum + a[i] * b[i];
            return sum;
        }
#endif
        return ggml_order::vec_dot_f32(a, b, n);
    }
    int64_t tinyblas_k() const { return isa_ == LlamaIsa::kAvx2 ? 8 : 16; }
#if defined(LS_HAVE_VEC_DOT_AVX2)
    // Whether dot_k_quant_avx2_run takes rows of this type against one column (vec_dot_row_x86's
    // kernel for them: Q4_K's AVX-512 one where the processor has it).
    bool k_quant_run_takes(GgmlType type, int64_t K) const {
        return avx2_ && K > 0 && K % kQK_K == 0 &&
               (type == GgmlType::Q5_K || type == GgmlType::Q6_K || (type == GgmlType::Q4_K && !avx512_));
    }
#endif

    LlamaIsa isa_ = host_llama_isa();
    int llama_threads_ = 0;  // the llama.cpp run's threads (0: ours)
#if defined(LS_HAVE_VEC_DOT_AVX2)
    std::vector<float> act_d_;  // Q8_0 activations' block scales as f32 (prompt kernels)
    bool avx2_ = avx2_kernels_usable();
    bool avx512_ = avx512_kernels_usable();
#endif
    ThreadPool pool_;
    std::vector<uint8_t> act_scratch_;  // activations converted for llama-mode matmuls
    AlignedVector<uint8_t> mxfp4_act_;  // Q8_0 activations laid out for the MXFP4 decoding kernel
#if defined(LS_HAVE_VEC_DOT_AVX2)
    std::vector<Q8KColumnBlock> q8_K_columns_;  // their scales and bsums, four columns a block
#endif
    std::vector<float> act_f32_;        // f16-rounded activations for F16 weights
    std::vector<float> v_t_;            // V transposed and padded, for llama-mode attention
};

}  // namespace

// Built twice on x86-64 (with and without FMA instructions); backend.cpp chooses.
#ifndef LS_CPU_BACKEND_FACTORY
#define LS_CPU_BACKEND_FACTORY make_cpu_backend_generic
#endif
std::unique_ptr<Backend> LS_CPU_BACKEND_FACTORY(int n_threads) { return std::make_unique<CpuBackend>(n_threads); }

}  // namespace ls
