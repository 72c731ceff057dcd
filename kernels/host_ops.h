// The mixture-of-experts ops (ADD/MUL/DIV with broadcasting, SIGMOID, SCALE, CLAMP, SUM_ROWS,
// ARGSORT descending) computed on the host, as ggml's CPU backend computes them. They define the
// ops' results: the Backend defaults run them on downloaded copies, and a backend with its own
// kernels is tested against them (tests/test_backend_ops.cpp).
#pragma once

#include <cstdint>

#include "kernels/ops.h"

namespace ls {

// y = a op b (ADD, MUL, DIV); b's index along each axis is a's modulo b_ne. Contiguous f32.
void host_binary(Op op, const float* a, const int64_t a_ne[4], const float* b, const int64_t b_ne[4], float* y);
// y = f(x) for n values: SIGMOID, SCALE (x * p0), CLAMP (to [p0, p1]), TANH, SOFTPLUS (ggml's:
// log(1 + e^x) with libm's expf and logf, x itself above 20).
void host_unary(Op op, const float* x, int64_t n, float* y, float p0, float p1);
// y[r] = the sum of row r's n values, accumulated in double.
// GEGLU (Backend::geglu): y = gelu(gate) * up over n values, GELU as llama mode or exact mode has it.
void host_geglu(const float* gate, const float* up, int64_t n, float* y, bool llama);
// SWIGLU_OAI (Backend::swiglu_oai): y = x / (1 + e^(-alpha x)) * (u + 1), x = min(gate, limit), u =
// clamp(up, -limit, limit) over n values; e^ libm's expf as ggml's CPU op (`llama`), else ggml's
// vectorized expf (what exact mode takes on every backend).
void host_swiglu_oai(const float* gate, const float* up, int64_t n, float* y, float alpha, float limit, bool llama);
// ADD_ID (Backend::add_id): y[:, s, t] = a[:, s, t] + table[:, ids[s, t]]; a and y {n, S, T}, ids {S, T}.
// Ids outside [0, n_rows) throw.
void host_add_id(const float* a, int64_t n, int64_t S, int64_t T, const float* table, int64_t n_rows, const int32_t* ids,
                 float* y);
void host_sum_rows(const float* x, int64_t n, int64_t rows, float* y);
// SILU (Backend::silu): y = x / (1 + e^-x) over n values. `lanes` 8 or 16: ggml_vec_silu_f32 of an
// AVX2 or AVX-512 build (groups of `lanes` values with ggml's vectorized expf, libm's expf for the
// rest); 0 (exact mode): ggml's 512-bit expf for every value.
void host_silu(const float* x, int64_t n, float* y, int lanes);
// SSM_CONV (Backend::ssm_conv): y[c, t] = sum over i < d_conv of x[t + i, c] w[i, c], in order, each
// product rounded before it is added (ggml's CPU op). x {d_conv - 1 + T, channels} (each channel's
// row: its conv state, then the ubatch's values), w {d_conv, channels}, y {channels, T}; channels
// [c0, c1) only.
void host_ssm_conv(const float* x, const float* w, int64_t d_conv, int64_t channels, int64_t T, float* y, int64_t c0,
                   int64_t c1);
// GATED_DELTA_NET (Backend::gated_delta_net) for value heads [h0, h1), token by token as ggml's
// CPU op: per head the state S (S x S, stored transposed: state[j S + i] = S[i][j]) decays by
// e^g, then delta = (v - S^T k) beta, S += k delta^T, out = S^T q / sqrt(S). Value head h reads q/k
// head h % H_k. q, k {S, H_k, T}; v, out {S, H_v, T}; g, beta {H_v, T}; state {S, S, H_v}, updated
// in place. `lanes` 8 or 16: ggml_vec_dot_f32 / ggml_vec_mad_f32 of an AVX2 or AVX-512 build; 0
// (exact mode): one fused multiply-add after another.
void host_gated_delta_net(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                          float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int lanes, int64_t h0, int64_t h1);
// The chunked form of GATED_DELTA_NET (Backend::gated_delta_net_chunked): the same result up to
// rounding, chunks of `chunk` tokens solved at once (delta_net::gated_delta_net_chunked).
void host_gated_delta_net_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                  float* state, float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int64_t chunk,
                                  int64_t h0, int64_t h1, bool in_chunk_decay);
// Per row of n values: the columns from the largest value to the smallest; ties keep column order,
// or with `ggml_ties` the order std::sort leaves them in with ggml's comparator (its CPU ARGSORT).
void host_argsort_desc(const float* x, int64_t n, int64_t rows, int32_t* idx, bool ggml_ties = false);

}  // namespace ls
