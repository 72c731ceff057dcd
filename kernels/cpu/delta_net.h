// qwen35's Gated DeltaNet ops as ggml's CPU backend computes them (see kernels/host_ops.h, whose
// host_silu, host_ssm_conv and host_gated_delta_net are these): inline, so that the CPU backend's
// FMA build runs them with its own instructions. `lanes` picks llama mode's vector width (8: an
// AVX2 build, 16: AVX-512) or exact mode (0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/ggml_order.h"

namespace ls::delta_net {
#if defined(__FMA__)
inline namespace with_fma {
#else
inline namespace without_fma {
#endif

// ggml_vec_silu_f32: groups of `lanes` with ggml's vectorized expf, libm's expf for the rest (exact
// mode: ggml's 512-bit expf for every value).
inline void silu(const float* x, int64_t n, float* y, int lanes) {
    int64_t i = 0;
    if (lanes == 8)
        for (; i + 7 < n; i += 8)
            for (int l = 0; l < 8; ++l) y[i + l] = ggml_order::v_silu_avx2(x[i + l]);
    if (lanes == 16)
        for (; i + 15 < n; i += 16)
            for (int l = 0; l < 16; ++l) y[i + l] = ggml_order::v_silu(x[i + l]);
    if (lanes == 0)
        for (; i < n; ++i) y[i] = ggml_order::v_silu(x[i]);
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));  // ggml_silu_f32
}

// ggml_compute_forward_ssm_conv_f32 for channels [c0, c1): each product rounded, then added.
inline void ssm_conv(const float* x, const float* w, int64_t d_conv, int64_t channels, int64_t T, float* y, int64_t c0,
                     int64_t c1) {
    const int64_t n_x = d_conv - 1 + T;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t c = c0; c < c1; ++c) {
            const float* xs = x + c * n_x + t;
            const float* wc = w + c * d_conv;
            float sum = 0.0f;
            for (int64_t i = 0; i < d_conv; ++i) sum = sum + xs[i] * wc[i];
            y[t * channels + c] = sum;
        }
}

// ggml_vec_dot_f32 as a build of `lanes` sums it (0: one fused multiply-add after another).
inline float dot(const float* a, const float* b, int64_t n, int lanes) {
    if (lanes == 8) return ggml_order::vec_dot_f32_avx2(a, b, n);
    if (lanes == 16) return ggml_order::vec_dot_f32(a, b, n);
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

// ggml_vec_mad_f32: y += x v, fused in the vector blocks (4 vectors of `lanes`), the leftovers
// multiplied and added (0: fused throughout).
inline void mad(float* y, const float* x, int64_t n, float v, int lanes) {
    const int64_t np = lanes == 0 ? n : n & ~int64_t(4 * lanes - 1);
    for (int64_t i = 0; i < np; ++i) y[i] = std::fma(x[i], v, y[i]);
    for (int64_t i = np; i < n; ++i) y[i] = y[i] + x[i] * v;
}

// ggml_compute_forward_gated_delta_net_one_chunk for value heads [h0, h1).
inline void gated_delta_net(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                            float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int lanes, int64_t h0, int64_t h1) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(S));
    std::vector<float> delta(static_cast<size_t>(S));
    for (int64_t h = h0; h < h1; ++h) {
        float* s = state + h * S * S;
        for (int64_t t = 0; t < T; ++t) {
            const float* qt = q + (t * H_k + h % H_k) * S;
            const float* kt = k + (t * H_k + h % H_k) * S;
            const float* vt = v + (t * H_v + h) * S;
            const float decay = std::exp(g[t * H_v + h]), b = beta[t * H_v + h];
            for (int64_t i = 0; i < S * S; ++i) s[i] *= decay;
            for (int64_t j = 0; j < S; ++j) delta[j] = (vt[j] - dot(s + j * S, kt, S, lanes)) * b;
            for (int64_t j = 0; j < S; ++j) mad(s + j * S, kt, S, delta[j], lanes);
            float* ot = out + (t * H_v + h) * S;
            for (int64_t j = 0; j < S; ++j) ot[j] = dot(s + j * S, qt, S, lanes) * scale;
        }
    }
}

// The chunked form of the same rule (the WY form of Hugging Face's chunk_gated_delta_rule): the
// ubatch in chunks of `chunk` tokens, within a chunk the triangular system solved once instead of
// token by token, in double. Agrees with gated_delta_net up to rounding; `in_chunk_decay` false
// leaves the decay between a chunk's tokens out of its masks (the delta-chunk-decay fault).
inline void gated_delta_net_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                    float* state, float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int64_t chunk,
                                    int64_t h0, int64_t h1, bool in_chunk_decay = true) {
    const double scale = 1.0 / std::sqrt(static_cast<double>(S));
    std::vector<double> m(static_cast<size_t>(S * S));  // the state, m[i * S + j] = S[i][j] (i: key, j: value)
    std::vector<double> G, A, U, W, V_new, QK;
    for (int64_t h = h0; h < h1; ++h) {
        float* s = state + h * S * S;
        for (int64_t i = 0; i < S; ++i)
            for (int64_t j = 0; j < S; ++j) m[i * S + j] = s[j * S + i];
        for (int64_t c0 = 0; c0 < T; c0 += chunk) {
            const int64_t n = std::min(chunk, T - c0);
            auto K = [&](int64_t t) { return k + ((c0 + t) * H_k + h % H_k) * S; };
            auto Q = [&](int64_t t) { return q + ((c0 + t) * H_k + h % H_k) * S; };
            auto Vt = [&](int64_t t) { return v + ((c0 + t) * H_v + h) * S; };
            auto B = [&](int64_t t) { return static_cast<double>(beta[(c0 + t) * H_v + h]); };
            G.assign(static_cast<size_t>(n), 0.0);
            for (int64_t t = 0; t < n; ++t) G[t] = (t ? G[t - 1] : 0.0) + g[(c0 + t) * H_v + h];
            auto decay = [&](int64_t a, int64_t b) { return in_chunk_decay ? std::exp(G[a] - G[b]) : 1.0; };
            auto dot = [&](const float* a, const float* b) {
                double d = 0;
                for (int64_t i = 0; i < S; ++i) d += static_cast<double>(a[i]) * b[i];
                return d;
            };
            // (I - A)^-1 with A[t][u] = -beta_t (k_t . k_u) decay(t, u) below the diagonal, by
            // substitution row by row (each row from the rows above it), then U = T (beta v) and
            // W = T (beta e^G k).
            A.assign(static_cast<size_t>(n * n), 0.0);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t u = 0; u < t; ++u) A[t * n + u] = -B(t) * dot(K(t), K(u)) * decay(t, u);
            std::vector<double> row(static_cast<size_t>(n));
            for (int64_t t = 1; t < n; ++t) {
                for (int64_t u = 0; u < t; ++u) {
                    double acc = A[t * n + u];
                    for (int64_t w = u + 1; w < t; ++w) acc += A[t * n + w] * A[w * n + u];
                    row[u] = acc;
                }
                for (int64_t u = 0; u < t; ++u) A[t * n + u] = row[u];
            }
            for (int64_t t = 0; t < n; ++t) A[t * n + t] = 1.0;
            U.assign(static_cast<size_t>(n * S), 0.0), W.assign(static_cast<size_t>(n * S), 0.0);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t u = 0; u <= t; ++u) {
                    const double a = A[t * n + u] * B(u), e = std::exp(G[u]);
                    for (int64_t j = 0; j < S; ++j) U[t * S + j] += a * Vt(u)[j];
                    for (int64_t i = 0; i < S; ++i) W[t * S + i] += a * e * K(u)[i];
                }
            // The chunk's new values against the state it starts from, its outputs, its new state.
            V_new.assign(static_cast<size_t>(n * S), 0.0);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t j = 0; j < S; ++j) {
                    double d = U[t * S + j];
                    for (int64_t i = 0; i < S; ++i) d -= W[t * S + i] * m[i * S + j];
                    V_new[t * S + j] = d;
                }
            QK.assign(static_cast<size_t>(n * n), 0.0);
            for (int64_t t = 0; t < n; ++t)
                for (int64_t u = 0; u <= t; ++u) QK[t * n + u] = dot(Q(t), K(u)) * decay(t, u);
            for (int64_t t = 0; t < n; ++t) {
                float* ot = out + ((c0 + t) * H_v + h) * S;
                const double e = std::exp(G[t]);
                for (int64_t j = 0; j < S; ++j) {
                    double o = 0;
                    for (int64_t i = 0; i < S; ++i) o += Q(t)[i] * e * m[i * S + j];
                    for (int64_t u = 0; u <= t; ++u) o += QK[t * n + u] * V_new[u * S + j];
                    ot[j] = static_cast<float>(o * scale);
                }
            }
            const double e_last = std::exp(G[n - 1]);
            for (int64_t i = 0; i < S; ++i)
                for (int64_t j = 0; j < S; ++j) {
                    double x = m[i * S + j] * e_last;
                    for (int64_t u = 0; u < n; ++u) x += K(u)[i] * std::exp(G[n - 1] - G[u]) * V_new[u * S + j];
                    m[i * S + j] = x;
                }
        }
        for (int64_t i = 0; i < S; ++i)
            for (int64_t j = 0; j < S; ++j) s[j * S + i] = static_cast<float>(m[i * S + j]);
    }
}

}  // inline namespace
}  // namespace ls::delta_net
