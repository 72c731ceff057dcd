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
// y = f(x) for n values: SIGMOID, SCALE (x * p0), CLAMP (to [p0, p1]).
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
// Per row of n values: the columns from the largest value to the smallest; ties keep column order,
// or with `ggml_ties` the order std::sort leaves them in with ggml's comparator (its CPU ARGSORT).
void host_argsort_desc(const float* x, int64_t n, int64_t rows, int32_t* idx, bool ggml_ties = false);

}  // namespace ls
