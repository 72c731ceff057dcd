// The mixture-of-experts ops on the host (see host_ops.h), and the Backend defaults that run them
// on downloaded copies of a backend's tensors.
#include "kernels/host_ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/common/gelu.h"
#include "kernels/cpu/delta_net.h"
#include "kernels/cpu/ggml_order.h"

namespace ls {

void host_binary(Op op, const float* a, const int64_t a_ne[4], const float* b, const int64_t b_ne[4], float* y) {
    if (op != Op::kAdd && op != Op::kMul && op != Op::kDiv)
        throw std::invalid_argument(std::string("host_binary: ") + op_name(op) + " is not ADD, MUL or DIV");
    for (int64_t i3 = 0; i3 < a_ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < a_ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < a_ne[1]; ++i1) {
                const int64_t row = (i3 * a_ne[2] + i2) * a_ne[1] + i1;
                const int64_t b_row = ((i3 % b_ne[3]) * b_ne[2] + i2 % b_ne[2]) * b_ne[1] + i1 % b_ne[1];
                const float* ar = a + row * a_ne[0];
                const float* br = b + b_row * b_ne[0];
                float* yr = y + row * a_ne[0];
                for (int64_t i0 = 0; i0 < a_ne[0]; ++i0) {
                    const float u = ar[i0], v = br[i0 % b_ne[0]];
                    yr[i0] = op == Op::kAdd ? u + v : op == Op::kMul ? u * v : u / v;
                }
            }
}

void host_unary(Op op, const float* x, int64_t n, float* y, float p0, float p1) {
    switch (op) {
        case Op::kSigmoid:
            for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
            return;
        case Op::kScale:
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] * p0;
            return;
        case Op::kClamp:
            for (int64_t i = 0; i < n; ++i) y[i] = std::max(std::min(x[i], p1), p0);
            return;
        case Op::kTanh:
            for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
            return;
        case Op::kSoftplus:
            for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 20.0f ? x[i] : std::log(1.0f + std::exp(x[i]));
            return;
        default:
            throw std::invalid_argument(std::string("host_unary: ") + op_name(op) +
                                        " is not SIGMOID, SCALE, CLAMP, TANH or SOFTPLUS");
    }
}

void host_geglu(const float* gate, const float* up, int64_t n, float* y, bool llama) {
    for (int64_t i = 0; i < n; ++i) y[i] = (llama ? gelu_tanh_llama(gate[i]) : gelu_tanh(gate[i])) * up[i];
}

void host_swiglu_oai(const float* gate, const float* up, int64_t n, float* y, float alpha, float limit, bool llama) {
    for (int64_t i = 0; i < n; ++i) {
        const float x = std::min(gate[i], limit);
        const float u = std::clamp(up[i], -limit, limit);
        const float e = llama ? std::exp(alpha * (-x)) : ggml_order::v_expf(alpha * (-x));
        y[i] = x / (1.0f + e) * (u + 1.0f);
    }
}

void host_add_id(const float* a, int64_t n, int64_t S, int64_t T, const float* table, int64_t n_rows, const int32_t* ids,
                 float* y) {
    for (int64_t c = 0; c < S * T; ++c) {
        const int32_t id = ids[c];
        if (id < 0 || id >= n_rows)
            throw std::out_of_range("ADD_ID: id " + std::to_string(id) + " outside the table's " + std::to_string(n_rows) +
                                    " rows");
        for (int64_t i = 0; i < n; ++i) y[c * n + i] = a[c * n + i] + table[id * n + i];
    }
}

void host_silu(const float* x, int64_t n, float* y, int lanes) { delta_net::silu(x, n, y, lanes); }

void host_ssm_conv(const float* x, const float* w, int64_t d_conv, int64_t channels, int64_t T, float* y, int64_t c0,
                   int64_t c1) {
    delta_net::ssm_conv(x, w, d_conv, channels, T, y, c0, c1);
}

void host_gated_delta_net(const float* q, const float* k, const float* v, const float* g, const float* beta, float* state,
                          float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int lanes, int64_t h0, int64_t h1) {
    delta_net::gated_delta_net(q, k, v, g, beta, state, out, S, H_k, H_v, T, lanes, h0, h1);
}

void host_gated_delta_net_chunked(const float* q, const float* k, const float* v, const float* g, const float* beta,
                                  float* state, float* out, int64_t S, int64_t H_k, int64_t H_v, int64_t T, int64_t chunk,
                                  int64_t h0, int64_t h1, bool in_chunk_decay) {
    delta_net::gated_delta_net_chunked(q, k, v, g, beta, state, out, S, H_k, H_v, T, chunk, h0, h1, in_chunk_decay);
}

void host_sum_rows(const float* x, int64_t n, int64_t rows, float* y) {
    for (int64_t r = 0; r < rows; ++r) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[r * n + i]);
        y[r] = static_cast<float>(sum);
    }
}

void host_argsort_desc(const float* x, int64_t n, int64_t rows, int32_t* idx, bool ggml_ties) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* v = x + r * n;
        int32_t* out = idx + r * n;
        std::iota(out, out + n, 0);
        const auto desc = [v](int32_t a, int32_t b) { return v[a] > v[b]; };
        if (ggml_ties) std::sort(out, out + n, desc);
        else std::stable_sort(out, out + n, desc);
    }
}

// ---- Backend defaults: download, compute on the host, upload.

namespace {

std::vector<float> fetch(Backend& be, const Tensor& t) {
    if (!t.contiguous()) throw std::invalid_argument("the mixture-of-experts ops take contiguous tensors");
    std::vector<float> v(static_cast<size_t>(t.n_elements()));
    be.download(v.data(), t.data, v.size() * sizeof(float));
    return v;
}

}  // namespace

void Backend::binary(Op op, const Tensor& a, const Tensor& b, Tensor& y) {
    const std::vector<float> ha = fetch(*this, a), hb = fetch(*this, b);
    std::vector<float> hy(ha.size());
    host_binary(op, ha.data(), a.ne, hb.data(), b.ne, hy.data());
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::unary(Op op, const Tensor& x, Tensor& y, float p0, float p1) {
    const std::vector<float> hx = fetch(*this, x);
    std::vector<float> hy(hx.size());
    host_unary(op, hx.data(), x.n_elements(), hy.data(), p0, p1);
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::geglu(const Tensor& gate, const Tensor& up, Tensor& y, MathMode mode) {
    const std::vector<float> hg = fetch(*this, gate), hu = fetch(*this, up);
    std::vector<float> hy(hg.size());
    host_geglu(hg.data(), hu.data(), gate.n_elements(), hy.data(), mode == MathMode::kLlama);
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::swiglu_oai(const Tensor& gate, const Tensor& up, Tensor& y, float alpha, float limit, MathMode mode) {
    const std::vector<float> hg = fetch(*this, gate), hu = fetch(*this, up);
    std::vector<float> hy(hg.size());
    host_swiglu_oai(hg.data(), hu.data(), gate.n_elements(), hy.data(), alpha, limit, mode == MathMode::kLlama);
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::add_id(const Tensor& a, const Tensor& table, const Tensor& ids, Tensor& y) {
    const std::vector<float> ha = fetch(*this, a), ht = fetch(*this, table);
    std::vector<int32_t> hid(static_cast<size_t>(ids.n_elements()));
    download(hid.data(), ids.data, hid.size() * sizeof(int32_t));
    std::vector<float> hy(ha.size());
    host_add_id(ha.data(), a.ne[0], a.ne[1], a.ne[2], ht.data(), table.ne[1], hid.data(), hy.data());
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::silu(const Tensor& x, Tensor& y, MathMode mode) {
    const std::vector<float> hx = fetch(*this, x);
    std::vector<float> hy(hx.size());
    host_silu(hx.data(), x.n_elements(), hy.data(), mode == MathMode::kLlama ? 8 : 0);
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::ssm_conv(const Tensor& x, const Tensor& w, Tensor& y) {
    const std::vector<float> hx = fetch(*this, x), hw = fetch(*this, w);
    std::vector<float> hy(static_cast<size_t>(y.n_elements()));
    host_ssm_conv(hx.data(), hw.data(), w.ne[0], w.ne[1], y.ne[1], hy.data(), 0, w.ne[1]);
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::gated_delta_net(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g, const Tensor& beta,
                              Tensor& state, Tensor& out, MathMode mode) {
    const std::vector<float> hq = fetch(*this, q), hk = fetch(*this, k), hv = fetch(*this, v), hg = fetch(*this, g),
                             hb = fetch(*this, beta);
    std::vector<float> hs = fetch(*this, state), ho(static_cast<size_t>(out.n_elements()));
    const int64_t H_v = v.ne[1];
    host_gated_delta_net(hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), hs.data(), ho.data(), v.ne[0], q.ne[1],
                         H_v, v.ne[2], mode == MathMode::kLlama ? 8 : 0, 0, H_v);
    upload(state.data, hs.data(), hs.size() * sizeof(float));
    upload(out.data, ho.data(), ho.size() * sizeof(float));
}

void Backend::gated_delta_net_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                      const Tensor& beta, Tensor& state, Tensor& out, int64_t chunk, bool in_chunk_decay) {
    const std::vector<float> hq = fetch(*this, q), hk = fetch(*this, k), hv = fetch(*this, v), hg = fetch(*this, g),
                             hb = fetch(*this, beta);
    std::vector<float> hs = fetch(*this, state), ho(static_cast<size_t>(out.n_elements()));
    const int64_t H_v = v.ne[1];
    host_gated_delta_net_chunked(hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), hs.data(), ho.data(), v.ne[0],
                                 q.ne[1], H_v, v.ne[2], chunk, 0, H_v, in_chunk_decay);
    upload(state.data, hs.data(), hs.size() * sizeof(float));
    upload(out.data, ho.data(), ho.size() * sizeof(float));
}

void Backend::sum_rows(const Tensor& x, Tensor& y) {
    const std::vector<float> hx = fetch(*this, x);
    std::vector<float> hy(static_cast<size_t>(x.n_rows()));
    host_sum_rows(hx.data(), x.ne[0], x.n_rows(), hy.data());
    upload(y.data, hy.data(), hy.size() * sizeof(float));
}

void Backend::argsort_desc(const Tensor& x, Tensor& idx, bool /*ggml_ties*/) {
    const std::vector<float> hx = fetch(*this, x);
    std::vector<int32_t> hi(hx.size());
    host_argsort_desc(hx.data(), x.ne[0], x.n_rows(), hi.data());
    upload(idx.data, hi.data(), hi.size() * sizeof(int32_t));
}

void Backend::matmul_id(const Tensor& w, const Tensor& x, const Tensor& ids, Tensor& y, MathMode mode) {
    const int64_t n_used = ids.ne[0], T = ids.ne[1], n_expert = w.ne[2];
    std::vector<int32_t> hid(static_cast<size_t>(n_used * T));
    download(hid.data(), ids.data, hid.size() * sizeof(int32_t));
    Tensor we = w;
    we.ne[2] = 1;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t s = 0; s < n_used; ++s) {
            const int32_t e = hid[t * n_used + s];
            if (e < 0 || e >= n_expert)
                throw std::out_of_range("MUL_MAT_ID: expert id " + std::to_string(e) + " is outside [0, " +
                                        std::to_string(n_expert) + ")");
            we.data = static_cast<char*>(w.data) + static_cast<uint64_t>(e) * w.nb[2];
            const Tensor xc = make_tensor(static_cast<char*>(x.data) + (t * x.ne[1] + s % x.ne[1]) * x.nb[1], x.ne[0]);
            Tensor yc = make_tensor(static_cast<char*>(y.data) + (t * n_used + s) * y.nb[1], y.ne[0]);
            matmul(we, xc, yc, mode);
        }
}

}  // namespace ls
