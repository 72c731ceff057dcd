// Quantizers that reproduce ggml's reference C code byte for byte. Compiled with -ffp-contract=off:
// ggml's own build of these functions has no FMA, and every float expression below keeps ggml's
// operand order, because any regrouping changes which blocks round differently.
#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quantize_avx2.h"
#include "kernels/cpu/vec_dot_avx2.h"

namespace ls {

namespace {

constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: adding 1.5*2^23 leaves round-half-even(f) in the low mantissa bits.
// Valid for |f| <= 2^22, as in ggml.
int nearest_int(float f) {
    const float biased = f + 12582912.f;
    int32_t bits;
    std::memcpy(&bits, &biased, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

// Least-squares scale for signed quants in [-nmax, nmax-1] (ggml's make_qx_quants with no
// importance weights); writes L[i] + nmax.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L, int rmse_type) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    auto weight = [rmse_type](float v) -> float {
        return rmse_type == 1 ? v * v : rmse_type == 2 ? 1 : rmse_type == 3 ? std::fabs(v) : std::sqrt(std::fabs(v));
    };
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            const int l = nearest_int(iscale * x[i]);
            L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
        const float w = weight(x[i]);
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = weight(x[i]);
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Scale and min for unsigned quants in [0, nmax] with a search over candidate scales
// (ggml's make_qkx2_quants). Returns the scale; *the_min receives -min (>= 0).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                       uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<uint8_t>(l);
            const float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

// Signed quants in [-nmax, nmax-1] with x^2 weights refined one element at a time (ggml's
// make_q3_quants); writes L[i] + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L, bool do_rmse) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0;
        float suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            L[i] = static_cast<int8_t>(l);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                const float w = x[i] * x[i];
                float slx = sumlx - w * x[i] * L[i];
                if (slx > 0) {
                    float sl2 = suml2 - w * L[i] * L[i];
                    int new_l = nearest_int(x[i] * sl2 / slx);
                    new_l = std::max(-nmax, std::min(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx += w * x[i] * new_l;
                        sl2 += w * new_l * new_l;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = static_cast<int8_t>(new_l);
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (n_changed == 0) break;
        }
        for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<int8_t>(l + nmax);
    }
    return 1 / iscale;
}

// Packs 2-bit quants as Q2_K and Q3_K store them: byte l of each 32-byte run holds elements
// l, l+32, l+64, l+96 of its 128-element half.
template <typename Quant>
void pack_2bit(const Quant* L, uint8_t* qs) {
    for (int j = 0; j < kQK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                                 (L[j + l + 96] << 6));
        }
    }
}

// The 6-bit scale/min packing shared by Q4_K and Q5_K (inverse of get_scale_min_k4).
void pack_scale_min_k4(uint8_t* scales, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        scales[j] = ls;
        scales[j + 4] = lm;
    } else {
        scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
}

// Q4_K / Q5_K's per-32 scales and mins (mins negated) by make_qkx2_quants with ggml's weights; L
// receives the quants in [0, nmax]. quantize_avx2.h has the same search eight sub-blocks at a time.
void scale_min_search(const float* x, int nmax, float rmin, float rdelta, int nstep, float* scales, float* mins,
                      uint8_t* L) {
    float weights[32];
    uint8_t Laux[32];
    for (int j = 0; j < kQK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    }
}

using ScaleMinSearch = void (*)(const float*, int, float, float, int, float*, float*, uint8_t*);

// Shared by Q4_K and Q5_K: per-32 scales/mins by `search`, their 6-bit codes, then the final quants
// against the rounded scales. L receives quants in [0, nmax].
template <typename Block>
void quantize_superblock_scale_min(const float* x, Block* y, uint8_t* L, int nmax, float rmin, int nstep,
                                   ScaleMinSearch search) {
    float mins[kQK_K / 32];
    float scales[kQK_K / 32];
    search(x, nmax, rmin, 0.1f, nstep, scales, mins, L);
    float max_scale = 0;  // scales are positive once the min is taken out
    float max_min = 0;
    for (int j = 0; j < kQK_K / 32; ++j) {
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < kQK_K / 32; ++j) {
        // ggml stores the int in a uint8_t before clamping; keep that truncation.
        uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
        uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
        ls = std::min<uint8_t>(63, ls);
        lm = std::min<uint8_t>(63, lm);
        pack_scale_min_k4(y->scales, j, ls, lm);
    }
    y->d = fp32_to_fp16(max_scale / 63.f);
    y->dmin = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < kQK_K / 32; ++j) {
        uint8_t sc, m;
        get_scale_min_k4(j, y->scales, &sc, &m);
        const float d = fp16_to_fp32(y->d) * sc;
        if (d == 0) continue;
        const float dm = fp16_to_fp32(y->dmin) * m;
        for (int ii = 0; ii < 32; ++ii) {
            const int l = nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(nmax, l)));
        }
    }
}

}  // namespace

void quantize_row_q4_0_ref(const float* x, block_q4_0* y, int64_t n) {
    const int64_t nb = n / kQK4_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_0) {
        float amax = 0;  // the signed value of largest magnitude maps to -8
        float max = 0;
        for (int j = 0; j < kQK4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK4_0 / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[kQK4_0 / 2 + j] * id;
            const uint8_t xi0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x0 + 8.5f)));
            const uint8_t xi1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x1 + 8.5f)));
            y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float* x, block_q4_1* y, int64_t n) {
    const int64_t nb = n / kQK4_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK4_1) {
        float min = 3.402823466e+38f;
        float max = -3.402823466e+38f;
        for (int j = 0; j < kQK4_1; ++j) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        for (int j = 0; j < kQK4_1 / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[kQK4_1 / 2 + j] - min) * id;
            const uint8_t xi0 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x0 + 0.5f)));
            const uint8_t xi1 = static_cast<uint8_t>(std::min<int8_t>(15, static_cast<int8_t>(x1 + 0.5f)));
            y[i].qs[j] = static_cast<uint8_t>(xi0 | (xi1 << 4));
        }
    }
}

void quantize_row_q5_0_ref(const float* x, block_q5_0* y, int64_t n) {
    const int64_t nb = n / kQK5_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_0) {
        float amax = 0;
        float max = 0;
        for (int j = 0; j < kQK5_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -16;
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < kQK5_0 / 2; ++j) {
            const float x0 = x[j] * id;
            const float x1 = x[kQK5_0 / 2 + j] * id;
            const uint8_t xi0 = static_cast<uint8_t>(std::min<int8_t>(31, static_cast<int8_t>(x0 + 16.5f)));
            const uint8_t xi1 = static_cast<uint8_t>(std::min<int8_t>(31, static_cast<int8_t>(x1 + 16.5f)));
            y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << j;
            qh |= ((xi1 & 0x10u) >> 4) << (j + kQK5_0 / 2);
        }
        for (int b = 0; b < 4; ++b) y[i].qh[b] = static_cast<uint8_t>(qh >> (8 * b));
    }
}

void quantize_row_q5_1_ref(const float* x, block_q5_1* y, int64_t n) {
    const int64_t nb = n / kQK5_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK5_1) {
        float min = 3.402823466e+38f;
        float max = -3.402823466e+38f;
        for (int j = 0; j < kQK5_1; ++j) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        y[i].m = fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < kQK5_1 / 2; ++j) {
            const float x0 = (x[j] - min) * id;
            const float x1 = (x[kQK5_1 / 2 + j] - min) * id;
            const uint8_t xi0 = static_cast<uint8_t>(x0 + 0.5f);
            const uint8_t xi1 = static_cast<uint8_t>(x1 + 0.5f);
            y[i].qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << j;
            qh |= ((xi1 & 0x10u) >> 4) << (j + kQK5_1 / 2);
        }
        for (int b = 0; b < 4; ++b) y[i].qh[b] = static_cast<uint8_t>(qh >> (8 * b));
    }
}

void quantize_row_q8_0_ref(const float* x, block_q8_0* y, int64_t n) {
    const int64_t nb = n / kQK8_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        float amax = 0;
        for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
    }
}

void quantize_row_q8_1_ref(const float* x, block_q8_1* y, int64_t n) {
    const int64_t nb = n / kQK8_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
        float amax = 0;
        for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d != 0 ? 1.0f / d : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK8_1; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = fp32_to_fp16(sum * d);
    }
}

void quantize_activation_q8_0(const float* x, block_q8_0* y, int64_t n) {
    const int64_t nb = n / kQK8_0;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_0) {
        float amax = 0;
        for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = fp32_to_fp16(d);
        for (int j = 0; j < kQK8_0; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
    }
}

void quantize_activation_q8_1(const float* x, block_q8_1* y, int64_t n) {
    const int64_t nb = n / kQK8_1;
    for (int64_t i = 0; i < nb; ++i, x += kQK8_1) {
        float amax = 0;
        for (int j = 0; j < kQK8_1; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        y[i].d = fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < kQK8_1; ++j) {
            y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
            sum += y[i].qs[j];
        }
        y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
    }
}

void quantize_row_q2_K_ref(const float* x, block_q2_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    uint8_t L[kQK_K];
    uint8_t Laux[16];
    float weights[16];
    float mins[kQK_K / 16];
    float scales[kQK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0;
        float max_min = 0;
        for (int j = 0; j < kQK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < kQK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < kQK_K / 16; ++j)
                y[i].scales[j] = static_cast<uint8_t>(y[i].scales[j] | (nearest_int(iscale * mins[j]) << 4));
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * (y[i].scales[j] & 0xF);
            if (d == 0) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = static_cast<uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void quantize_row_q3_K_ref(const float* x, block_q3_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    int8_t L[kQK_K];
    float scales[kQK_K / 16];
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0;  // signed scale of largest magnitude
        float amax = 0;
        for (int j = 0; j < kQK_K / 16; ++j) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j, true);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, 12);
        if (max_scale != 0) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < kQK_K / 16; ++j) {
                // ggml keeps the rounded value in an int8_t before clamping.
                int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
                if (j < 8) {
                    y[i].scales[j] = static_cast<uint8_t>(l & 0xF);
                } else {
                    y[i].scales[j - 8] = static_cast<uint8_t>(y[i].scales[j - 8] | ((l & 0xF) << 4));
                }
                l = static_cast<int8_t>(l >> 4);
                y[i].scales[j % 4 + 8] = static_cast<uint8_t>(y[i].scales[j % 4 + 8] | (l << (2 * (j / 4))));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * (q3_K_scale(y[i].scales, j) - 32);
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-4, std::min(3, l));
                L[16 * j + ii] = static_cast<int8_t>(l + 4);
            }
        }
        // High bit of element j goes to bit j/32 of hmask[j % 32].
        std::memset(y[i].hmask, 0, kQK_K / 8);
        for (int j = 0; j < kQK_K; ++j) {
            if (L[j] > 3) {
                y[i].hmask[j % 32] = static_cast<uint8_t>(y[i].hmask[j % 32] | (1 << (j / 32)));
                L[j] = static_cast<int8_t>(L[j] - 4);
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

namespace {

void q4_K_rows(const float* x, block_q4_K* y, int64_t n, ScaleMinSearch search) {
    const int64_t nb = n / kQK_K;
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        quantize_superblock_scale_min(x, &y[i], L, 15, -1.f, 20, search);
        uint8_t* q = y[i].qs;
        for (int j = 0; j < kQK_K; j += 64) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
            q += 32;
        }
    }
}

void q5_K_rows(const float* x, block_q5_K* y, int64_t n, ScaleMinSearch search) {
    const int64_t nb = n / kQK_K;
    uint8_t L[kQK_K];
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        quantize_superblock_scale_min(x, &y[i], L, 31, -0.5f, 15, search);
        uint8_t* qh = y[i].qh;
        uint8_t* ql = y[i].qs;
        std::memset(qh, 0, kQK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int n0 = 0; n0 < kQK_K; n0 += 64) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[n0 + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= m1;
                }
                int l2 = L[n0 + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= m2;
                }
                ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<uint8_t>(m1 << 2);
            m2 = static_cast<uint8_t>(m2 << 2);
            ql += 32;
        }
    }
}

// The search eight sub-blocks at a time where the processor has AVX2 (the same bits).
ScaleMinSearch fastest_scale_min_search() {
#if LS_HAVE_VEC_DOT_AVX2
    if (avx2_kernels_usable()) return scale_min_search_avx2;
#endif
    return scale_min_search;
}

}  // namespace

void quantize_row_q4_K_ref(const float* x, block_q4_K* y, int64_t n) { q4_K_rows(x, y, n, scale_min_search); }
void quantize_row_q5_K_ref(const float* x, block_q5_K* y, int64_t n) { q5_K_rows(x, y, n, scale_min_search); }
void quantize_row_q4_K(const float* x, block_q4_K* y, int64_t n) { q4_K_rows(x, y, n, fastest_scale_min_search()); }
void quantize_row_q5_K(const float* x, block_q5_K* y, int64_t n) { q5_K_rows(x, y, n, fastest_scale_min_search()); }

void quantize_row_q6_K_ref(const float* x, block_q6_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    int8_t L[kQK_K];
    float scales[kQK_K / 16];
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int ib = 0; ib < kQK_K / 16; ++ib) {
            const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y[i], 0, sizeof(block_q6_K));
            y[i].d = fp32_to_fp16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < kQK_K / 16; ++ib)
            y[i].scales[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < kQK_K / 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (d == 0) continue;
            for (int ii = 0; ii < 16; ++ii) {
                int l = nearest_int(x[16 * j + ii] / d);
                l = std::max(-32, std::min(31, l));
                L[16 * j + ii] = static_cast<int8_t>(l + 32);
            }
        }
        uint8_t* ql = y[i].ql;
        uint8_t* qh = y[i].qh;
        for (int j = 0; j < kQK_K; j += 128) {
            for (int l = 0; l < 32; ++l) {
                const uint8_t q1 = L[j + l + 0] & 0xF;
                const uint8_t q2 = L[j + l + 32] & 0xF;
                const uint8_t q3 = L[j + l + 64] & 0xF;
                const uint8_t q4 = L[j + l + 96] & 0xF;
                ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                             ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
            }
            ql += 64;
            qh += 32;
        }
    }
}

namespace {

// ggml's best_index_mxfp4: the code whose level * d lies nearest x; the first one on a tie (so
// never code 8, the negative zero, and NaN gives code 0).
uint8_t nearest_mxfp4_code(float x, float d) {
    uint8_t best = 0;
    float best_err = std::fabs(mxfp4_value(0) * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(mxfp4_value(i) * d - x);
        if (err < best_err) {
            best = static_cast<uint8_t>(i);
            best_err = err;
        }
    }
    return best;
}

// ggml's `(uint8_t) f` as its x86 build compiles it: cvttss2si to a 32-bit int (0x80000000 when f
// is out of range or NaN), then the low byte. C leaves the conversion undefined outside [0, 255].
uint8_t float_to_u8_x86(float f) {
    const int32_t i = f > -2147483648.0f && f < 2147483648.0f ? static_cast<int32_t>(f) : INT32_MIN;
    return static_cast<uint8_t>(static_cast<uint32_t>(i) & 0xFF);
}

}  // namespace

void quantize_row_mxfp4_ref(const float* x, block_mxfp4* y, int64_t n) {
    const int64_t nb = n / kQK_MXFP4;
    for (int64_t i = 0; i < nb; ++i, x += kQK_MXFP4) {
        float amax = 0.0f;  // NaNs never win the comparison
        for (int j = 0; j < kQK_MXFP4; ++j)
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
        const uint8_t e = amax > 0.0f ? float_to_u8_x86(std::floor(std::log2(amax)) - 2 + 127) : 0;
        const float d = e8m0_to_fp32_half(e);
        y[i].e = e;
        for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
            const uint8_t lo = nearest_mxfp4_code(x[j], d);
            const uint8_t hi = nearest_mxfp4_code(x[kQK_MXFP4 / 2 + j], d);
            y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
        }
    }
}

uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;  // zero, negative or NaN
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    const int exp = static_cast<int>((bits >> 23) & 0xFF) - 127 + 7;
    if (exp <= 0) {  // subnormal: man * 2^-9, the mantissa rounded half up and kept in 1..7
        const int man = std::min(static_cast<int>(x * 512.0f + 0.5f), 7);
        return static_cast<uint8_t>(man < 1 ? 0 : man);
    }
    if (exp >= 15) return 0x7E;
    int man = static_cast<int>((bits >> 20) & 7) + static_cast<int>((bits >> 19) & 1);  // rounded half up
    int e = exp;
    if (man > 7) {
        man = 0;
        if (++e >= 15) return 0x7E;
    }
    return static_cast<uint8_t>((e << 3) | man);
}

void quantize_row_nvfp4_ref(const float* x, block_nvfp4* y, int64_t n) {
    for (int64_t i = 0; i < n / kQK_NVFP4; ++i)
        for (int s = 0; s < kQK_NVFP4 / kQK_NVFP4_SUB; ++s) {
            const float* xs = x + i * kQK_NVFP4 + s * kQK_NVFP4_SUB;
            float amax = 0.0f;  // NaNs never win the comparison
            for (int j = 0; j < kQK_NVFP4_SUB; ++j)
                if (amax < std::fabs(xs[j])) amax = std::fabs(xs[j]);
            y[i].d[s] = fp32_to_ue4m3(amax / 6.0f);
            const float d = ue4m3_to_fp32_half(y[i].d[s]);
            for (int j = 0; j < kQK_NVFP4_SUB / 2; ++j) {
                const uint8_t lo = nearest_mxfp4_code(xs[j], d);
                const uint8_t hi = nearest_mxfp4_code(xs[kQK_NVFP4_SUB / 2 + j], d);
                y[i].qs[s * (kQK_NVFP4_SUB / 2) + j] = static_cast<uint8_t>(lo | (hi << 4));
            }
        }
}

void quantize_row_q8_K_ref(const float* x, block_q8_K* y, int64_t n) {
    const int64_t nb = n / kQK_K;
    for (int64_t i = 0; i < nb; ++i, x += kQK_K) {
        float max = 0;  // signed value of largest magnitude: d comes out negative when it is > 0
        float amax = 0;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0) {
            // ggml leaves bsums untouched here; zeros keep our output deterministic.
            std::memset(&y[i], 0, sizeof(block_q8_K));
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < kQK_K; ++j) y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
        for (int j = 0; j < kQK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = static_cast<int16_t>(sum);
        }
        y[i].d = 1 / iscale;
    }
}

void fp32_to_fp16_row(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void fp32_to_bf16_row(const float* x, uint16_t* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

namespace {

template <typename Block, void (*Quantize)(const float*, Block*, int64_t)>
void quantize_packed(const float* src, void* dst, int64_t n_rows, int64_t n_per_row) {
    // Blocks never straddle rows, so one call over all rows equals row by row.
    Quantize(src, static_cast<Block*>(dst), n_rows * n_per_row);
}

using RowsQuantizer = void (*)(const float*, void*, int64_t, int64_t);

void copy_f32(const float* src, void* dst, int64_t n_rows, int64_t n_per_row) {
    std::memcpy(dst, src, static_cast<size_t>(n_rows * n_per_row) * sizeof(float));
}

RowsQuantizer rows_quantizer(GgmlType type) {
    switch (type) {
        case GgmlType::F32: return copy_f32;
        case GgmlType::F16: return quantize_packed<uint16_t, fp32_to_fp16_row>;
        case GgmlType::BF16: return quantize_packed<uint16_t, fp32_to_bf16_row>;
        case GgmlType::Q4_0: return quantize_packed<block_q4_0, quantize_row_q4_0_ref>;
        case GgmlType::Q4_1: return quantize_packed<block_q4_1, quantize_row_q4_1_ref>;
        case GgmlType::Q5_0: return quantize_packed<block_q5_0, quantize_row_q5_0_ref>;
        case GgmlType::Q5_1: return quantize_packed<block_q5_1, quantize_row_q5_1_ref>;
        case GgmlType::Q8_0: return quantize_packed<block_q8_0, quantize_row_q8_0_ref>;
        case GgmlType::Q2_K: return quantize_packed<block_q2_K, quantize_row_q2_K_ref>;
        case GgmlType::Q3_K: return quantize_packed<block_q3_K, quantize_row_q3_K_ref>;
        case GgmlType::Q4_K: return quantize_packed<block_q4_K, quantize_row_q4_K>;
        case GgmlType::Q5_K: return quantize_packed<block_q5_K, quantize_row_q5_K>;
        case GgmlType::Q6_K: return quantize_packed<block_q6_K, quantize_row_q6_K_ref>;
        case GgmlType::Q8_K: return quantize_packed<block_q8_K, quantize_row_q8_K_ref>;
        case GgmlType::MXFP4: return quantize_packed<block_mxfp4, quantize_row_mxfp4_ref>;
        case GgmlType::NVFP4: return quantize_packed<block_nvfp4, quantize_row_nvfp4_ref>;
        default: return nullptr;
    }
}

}  // namespace

bool can_quantize(GgmlType type) { return rows_quantizer(type) != nullptr; }

bool quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows, int64_t n_per_row) {
    const RowsQuantizer quantize = rows_quantizer(type);
    uint64_t row_bytes = 0;
    if (quantize == nullptr || n_rows < 0 || !ggml_row_bytes(type, n_per_row, &row_bytes)) return false;
    quantize(src, dst, n_rows, n_per_row);
    return true;
}

}  // namespace ls
