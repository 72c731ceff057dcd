// Scalar dot products matching ggml's *_generic vec_dot bit for bit. Compiled with -ffp-contract=off:
// the fused multiply-adds GCC forms in ggml's build are written out as std::fma, and nothing else
// may be fused. Each K-quant kernel first unpacks a super-block to int8, then runs one shared
// integer accumulation, which is the part to vectorize later.
#include "kernels/cpu/vec_dot.h"

#include <cmath>

#include "kernels/cpu/quantize.h"
#if LS_HAVE_VEC_DOT_AVX2
#include "kernels/cpu/vec_dot_avx2.h"
#endif

namespace ls {

namespace {

// ggml's generic K-quant kernels accumulate in 8 integer lanes: lane l collects the elements at
// positions 8k + l, each group of `group` elements weighted by its own scale. Integer sums are
// exact, so only this grouping (not the order) matters for the float step that follows.
template <int kGroup>
void accumulate_lanes(const int8_t* q8, const int8_t* a, const int* scales, int32_t lanes[8]) {
    for (int l = 0; l < 8; ++l) lanes[l] = 0;
    for (int g = 0; g < kQK_K / kGroup; ++g) {
        const int scale = scales[g];
        for (int k = 0; k < kGroup; k += 8) {
            const int base = g * kGroup + k;
            for (int l = 0; l < 8; ++l) lanes[l] += scale * (q8[base + l] * a[base + l]);
        }
    }
}

// Sum of bsums weighted by the per-32 mins (Q4_K, Q5_K).
int min_sum_k4(const block_q8_K& a, const uint8_t mins[8]) {
    int sum = 0;
    for (int j = 0; j < kQK_K / 16; ++j) sum += a.bsums[j] * mins[j / 2];
    return sum;
}

void unpack_scales_mins_k4(const uint8_t* packed, int scales[8], uint8_t mins[8]) {
    for (int j = 0; j < 8; ++j) {
        uint8_t sc;
        get_scale_min_k4(j, packed, &sc, &mins[j]);
        scales[j] = sc;
    }
}

}  // namespace

float vec_dot_q4_0_q8_0(int64_t n, const block_q4_0* w, const block_q8_0* a) {
    const int64_t nb = n / kQK8_0;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < kQK8_0 / 2; ++j) {
            isum += ((w[b].qs[j] & 0x0F) - 8) * a[b].qs[j];
            isum += ((w[b].qs[j] >> 4) - 8) * a[b].qs[j + kQK8_0 / 2];
        }
        sum = std::fma(static_cast<float>(isum) * fp16_to_fp32(w[b].d), fp16_to_fp32(a[b].d), sum);
    }
    return sum;
}

float vec_dot_q4_1_q8_1(int64_t n, const block_q4_1* w, const block_q8_1* a) {
    const int64_t nb = n / kQK8_1;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < kQK8_1 / 2; ++j) {
            isum += (w[b].qs[j] & 0x0F) * a[b].qs[j];
            isum += (w[b].qs[j] >> 4) * a[b].qs[j + kQK8_1 / 2];
        }
        const float scale = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
        const float offset = fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
        sum += std::fma(scale, static_cast<float>(isum), offset);
    }
    return sum;
}

float vec_dot_q5_0_q8_0(int64_t n, const block_q5_0* w, const block_q8_0* a) {
    const int64_t nb = n / kQK8_0;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        const uint32_t qh = load_u32_le(w[b].qh);
        int isum = 0;
        for (int j = 0; j < kQK8_0 / 2; ++j) {
            const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            isum += (((w[b].qs[j] & 0x0F) | h0) - 16) * a[b].qs[j];
            isum += (((w[b].qs[j] >> 4) | h1) - 16) * a[b].qs[j + kQK8_0 / 2];
        }
        sum = std::fma(fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d), static_cast<float>(isum), sum);
    }
    return sum;
}

float vec_dot_q5_1_q8_1(int64_t n, const block_q5_1* w, const block_q8_1* a) {
    const int64_t nb = n / kQK8_1;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        const uint32_t qh = load_u32_le(w[b].qh);
        int isum = 0;
        for (int j = 0; j < kQK8_1 / 2; ++j) {
            const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10);
            const int h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
            isum += ((w[b].qs[j] & 0x0F) | h0) * a[b].qs[j];
            isum += ((w[b].qs[j] >> 4) | h1) * a[b].qs[j + kQK8_1 / 2];
        }
        const float scale = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
        const float offset = fp16_to_fp32(w[b].m) * fp16_to_fp32(a[b].s);
        sum += std::fma(scale, static_cast<float>(isum), offset);
    }
    return sum;
}

float vec_dot_q8_0_q8_0(int64_t n, const block_q8_0* w, const block_q8_0* a) {
    const int64_t nb = n / kQK8_0;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        int isum = 0;
        for (int j = 0; j < kQK8_0; ++j) isum += w[b].qs[j] * a[b].qs[j];
        sum = std::fma(static_cast<float>(isum), fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d), sum);
    }
    return sum;
}

float vec_dot_q2_K_q8_K(int64_t n, const block_q2_K* w, const block_q8_K* a) {
    const int64_t nb = n / kQK_K;
    float sum = 0;
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* sc = w[b].scales;
        int min_sum = 0;
        for (int j = 0; j < 16; ++j) min_sum += a[b].bsums[j] * (sc[j] >> 4);
        const float dall = a[b].d * fp16_to_fp32(w[b].d);
        const float dmin = a[b].d * fp16_to_fp32(w[b].dmin);
        int isum = 0;
        int is = 0;
        const uint8_t* q2 = w[b].qs;
        const int8_t* q8 = a[b].qs;
        for (int half = 0; half < kQK_K / 128; ++half) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const int scale = sc[is++] & 0xF;
                    int group = 0;
                    for (int l = 16 * part; l < 16 * part + 16; ++l) group += q8[l] * ((q2[l] >> shift) & 3);
                    isum += scale * group;
                }
                q8 += 32;
            }
            q2 += 32;
        }
        sum += std::fma(dall, static_cast<float>(isum), -(dmin * static_cast<float>(min_sum)));
    }
    return sum;
}

float vec_dot_q3_K_q8_K(int64_t n, const block_q3_K* w, const block_q8_K* a) {
    const int64_t nb = n / kQK_K;
    float lanes_f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int8_t aux8[kQK_K];
    int scales[16];
    int32_t lanes[8];
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* q3 = w[b].qs;
        int8_t* out = aux8;
        uint8_t m = 1;
        for (int half = 0; half < kQK_K; half += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int l = 0; l < 32; ++l)
                    out[l] = static_cast<int8_t>(((q3[l] >> shift) & 3) - ((w[b].hmask[l] & m) ? 0 : 4));
                out += 32;
                m = static_cast<uint8_t>(m << 1);
            }
            q3 += 32;
        }
        for (int j = 0; j < 16; ++j) scales[j] = q3_K_scale(w[b].scales, j) - 32;
        accumulate_lanes<16>(a[b].qs, aux8, scales, lanes);
        const float d = fp16_to_fp32(w[b].d) * a[b].d;
        for (int l = 0; l < 8; ++l) lanes_f[l] = std::fma(d, static_cast<float>(lanes[l]), lanes_f[l]);
    }
    float sum = 0;
    for (int l = 0; l < 8; ++l) sum += lanes_f[l];
    return sum;
}

float vec_dot_q4_K_q8_K(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    const int64_t nb = n / kQK_K;
    float lanes_f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float sum = 0;
    int8_t aux8[kQK_K];
    int scales[8];
    uint8_t mins[8];
    int32_t lanes[8];
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* q4 = w[b].qs;
        for (int j = 0; j < kQK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l) aux8[64 * j + l] = static_cast<int8_t>(q4[l] & 0xF);
            for (int l = 0; l < 32; ++l) aux8[64 * j + 32 + l] = static_cast<int8_t>(q4[l] >> 4);
            q4 += 32;
        }
        unpack_scales_mins_k4(w[b].scales, scales, mins);
        const int min_sum = min_sum_k4(a[b], mins);
        accumulate_lanes<32>(a[b].qs, aux8, scales, lanes);
        const float d = fp16_to_fp32(w[b].d) * a[b].d;
        for (int l = 0; l < 8; ++l) lanes_f[l] = std::fma(d, static_cast<float>(lanes[l]), lanes_f[l]);
        const float dmin = fp16_to_fp32(w[b].dmin) * a[b].d;
        sum = std::fma(-dmin, static_cast<float>(min_sum), sum);
    }
    for (int l = 0; l < 8; ++l) sum += lanes_f[l];
    return sum;
}

float vec_dot_q5_K_q8_K(int64_t n, const block_q5_K* w, const block_q8_K* a) {
    const int64_t nb = n / kQK_K;
    float lanes_f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float sum = 0;
    int8_t aux8[kQK_K];
    int scales[8];
    uint8_t mins[8];
    int32_t lanes[8];
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* q4 = w[b].qs;
        const uint8_t* hm = w[b].qh;
        uint8_t m = 1;
        for (int j = 0; j < kQK_K / 64; ++j) {
            for (int l = 0; l < 32; ++l)
                aux8[64 * j + l] = static_cast<int8_t>((q4[l] & 0xF) + ((hm[l] & m) ? 16 : 0));
            m = static_cast<uint8_t>(m << 1);
            for (int l = 0; l < 32; ++l)
                aux8[64 * j + 32 + l] = static_cast<int8_t>((q4[l] >> 4) + ((hm[l] & m) ? 16 : 0));
            m = static_cast<uint8_t>(m << 1);
            q4 += 32;
        }
        unpack_scales_mins_k4(w[b].scales, scales, mins);
        const int min_sum = min_sum_k4(a[b], mins);
        accumulate_lanes<32>(a[b].qs, aux8, scales, lanes);
        const float d = fp16_to_fp32(w[b].d) * a[b].d;
        for (int l = 0; l < 8; ++l) lanes_f[l] = std::fma(d, static_cast<float>(lanes[l]), lanes_f[l]);
        const float dmin = fp16_to_fp32(w[b].dmin) * a[b].d;
        sum = std::fma(-dmin, static_cast<float>(min_sum), sum);
    }
    for (int l = 0; l < 8; ++l) sum += lanes_f[l];
    return sum;
}

float vec_dot_q6_K_q8_K(int64_t n, const block_q6_K* w, const block_q8_K* a) {
    const int64_t nb = n / kQK_K;
    float lanes_f[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int8_t aux8[kQK_K];
    int scales[16];
    int32_t lanes[8];
    for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* ql = w[b].ql;
        const uint8_t* qh = w[b].qh;
        for (int half = 0; half < kQK_K; half += 128) {
            int8_t* out = aux8 + half;
            for (int l = 0; l < 32; ++l) {
                out[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                out[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                out[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                out[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            ql += 64;
            qh += 32;
        }
        for (int j = 0; j < 16; ++j) scales[j] = w[b].scales[j];
        accumulate_lanes<16>(a[b].qs, aux8, scales, lanes);
        const float d = fp16_to_fp32(w[b].d) * a[b].d;
        for (int l = 0; l < 8; ++l) lanes_f[l] = std::fma(d, static_cast<float>(lanes[l]), lanes_f[l]);
    }
    float sum = 0;
    for (int l = 0; l < 8; ++l) sum += lanes_f[l];
    return sum;
}

float vec_dot_f16(int64_t n, const uint16_t* w, const uint16_t* a) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(w[i]) * fp16_to_fp32(a[i]));
    return static_cast<float>(sum);
}

float vec_dot_bf16(int64_t n, const uint16_t* w, const uint16_t* a) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i]) * bf16_to_fp32(a[i]));
    return static_cast<float>(sum);
}

float vec_dot_f32(int64_t n, const float* w, const float* a) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i] * a[i]);
    return static_cast<float>(sum);
}

bool vec_dot_activation_type(GgmlType weight_type, GgmlType* activation_type) {
    switch (weight_type) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
        case GgmlType::MXFP4:
        case GgmlType::NVFP4: *activation_type = GgmlType::Q8_0; return true;
        case GgmlType::Q4_1:
        case GgmlType::Q5_1: *activation_type = GgmlType::Q8_1; return true;
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K:
        case GgmlType::IQ4_XS:
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0: *activation_type = GgmlType::Q8_K; return true;
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::BF16: *activation_type = weight_type; return true;
        default: return false;
    }
}

bool quantize_activation_row(GgmlType activation_type, const float* x, void* y, int64_t n) {
    uint64_t row_bytes = 0;
    if (!ggml_row_bytes(activation_type, n, &row_bytes)) return false;
    switch (activation_type) {
        case GgmlType::Q8_0: quantize_activation_q8_0(x, static_cast<block_q8_0*>(y), n); return true;
        case GgmlType::Q8_1: quantize_activation_q8_1(x, static_cast<block_q8_1*>(y), n); return true;
        case GgmlType::Q8_K:
#if LS_HAVE_VEC_DOT_AVX2
            if (avx2_kernels_usable()) {  // the same bytes, eight values at a time
                quantize_row_q8_K_avx2(x, static_cast<block_q8_K*>(y), n);
                return true;
            }
#endif
            quantize_row_q8_K_ref(x, static_cast<block_q8_K*>(y), n);
            return true;
        case GgmlType::F16: fp32_to_fp16_row(x, static_cast<uint16_t*>(y), n); return true;
        case GgmlType::BF16: fp32_to_bf16_row(x, static_cast<uint16_t*>(y), n); return true;
        case GgmlType::F32:
            for (int64_t i = 0; i < n; ++i) static_cast<float*>(y)[i] = x[i];
            return true;
        default: return false;
    }
}

bool vec_dot_row(GgmlType weight_type, int64_t n, const void* w, const void* act, float* out) {
    uint64_t row_bytes = 0;
    if (!ggml_row_bytes(weight_type, n, &row_bytes)) return false;
    switch (weight_type) {
        case GgmlType::Q4_0:
            *out = vec_dot_q4_0_q8_0(n, static_cast<const block_q4_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q4_1:
            *out = vec_dot_q4_1_q8_1(n, static_cast<const block_q4_1*>(w), static_cast<const block_q8_1*>(act));
            return true;
        case GgmlType::Q5_0:
            *out = vec_dot_q5_0_q8_0(n, static_cast<const block_q5_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q5_1:
            *out = vec_dot_q5_1_q8_1(n, static_cast<const block_q5_1*>(w), static_cast<const block_q8_1*>(act));
            return true;
        case GgmlType::Q8_0:
            *out = vec_dot_q8_0_q8_0(n, static_cast<const block_q8_0*>(w), static_cast<const block_q8_0*>(act));
            return true;
        case GgmlType::Q2_K:
            *out = vec_dot_q2_K_q8_K(n, static_cast<const block_q2_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q3_K:
            *out = vec_dot_q3_K_q8_K(n, static_cast<const block_q3_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q4_K:
            *out = vec_dot_q4_K_q8_K(n, static_cast<const block_q4_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q5_K:
            *out = vec_dot_q5_K_q8_K(n, static_cast<const block_q5_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::Q6_K:
            *out = vec_dot_q6_K_q8_K(n, static_cast<const block_q6_K*>(w), static_cast<const block_q8_K*>(act));
            return true;
        case GgmlType::F16:
            *out = vec_dot_f16(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
            return true;
        case GgmlType::BF16:
            *out = vec_dot_bf16(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
            return true;
        case GgmlType::F32:
            *out = vec_dot_f32(n, static_cast<const float*>(w), static_cast<const float*>(act));
            return true;
        default: return false;
    }
}

}  // namespace ls
