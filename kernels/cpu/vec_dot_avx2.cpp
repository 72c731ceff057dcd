// The quantized dot products of llama mode on AVX2 instructions: the same integer lanes and the
// same float steps as the scalar emulation in vec_dot_x86.cpp (ggml's AVX2 kernels), so the
// results are identical bit for bit, at the speed of the instructions. Only these functions are
// compiled for AVX2, FMA and F16C (a target attribute, not a flag for the file, so that the inline
// helpers they share with the rest of the program stay baseline code); vec_dot_row_x86 calls them
// only on processors that have the instructions.
#include "kernels/cpu/vec_dot_avx2.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/common/fp16.h"
#include "kernels/cpu/avx2_common.h"
#include "kernels/common/quant_blocks.h"
#include "kernels/cpu/aligned_vector.h"
#include "kernels/cpu/dequant.h"
#include "kernels/cpu/ggml_order.h"

namespace ls {

using avx2::hsum8;
using avx2::lane_sum;

bool avx2_kernels_usable() {
    // F16C is CPUID leaf 1 ECX bit 29, asked directly: clang 14 has no name for it.
    static const bool yes = [] {
        unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
        const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx >> 29 & 1);
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
    }();
    return yes;
}

// q4_K . q8_K: per super-block, lane l of the int32 sums collects bytes 4l..4l+3 of every 32-byte
// chunk of quants (maddubs pairs bytes, madd pairs those with the sub-block's scale); then
// acc = fma(d, float(lanes), acc), and four min lanes fma(-dmin * d_a, mins . bsums, acc_m).

namespace {

// A Q4_K block unpacked: quants as bytes (low nibbles of chunk j in q[2j],
// high in q[2j+1]), each sub-block's scale in all 16 int16 lanes, the mins, and d, dmin.
struct alignas(32) Q4KUnpacked {
    __m256i q[8];
    __m256i sc[8];
    __m128i mins;
    float d, dmin;
};

LS_AVX2 inline __attribute__((always_inline)) void unpack_q4_K(const block_q4_K& w, Q4KUnpacked* u) {
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    alignas(16) uint8_t packed[16];
    unpack_scales_mins_k4(w.scales, packed);
    const __m256i scales_mins = _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(packed)));
    u->mins = _mm256_extracti128_si256(scales_mins, 1);
    const __m256i scales = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scales_mins));
    for (int j = 0; j < 8; ++j)
        u->sc[j] = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * j)));
    for (int j = 0; j < 4; ++j) {
        const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w.qs + 32 * j));
        u->q[2 * j] = _mm256_and_si256(bits, low4);
        u->q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low4);
    }
    u->d = _cvtsh_ss(w.d);
    u->dmin = _cvtsh_ss(w.dmin);
}

// One block's steps for one activation row. The integer sums are exact, so how they are grouped
// does not matter; the float steps are ggml's.
LS_AVX2 inline void q4_K_block_step(const Q4KUnpacked& u, const block_q8_K& ab, __m256& acc, __m128& acc_m) {
    // Lane k: mn[2k] * (bsums 4k, 4k+1) + mn[2k+1] * (bsums 4k+2, 4k+3).
    const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
    acc_m = _mm_fmadd_ps(_mm_set1_ps(-ab.d * u.dmin), _mm_cvtepi32_ps(_mm_madd_epi16(u.mins, bsums)), acc_m);
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {  // chunk j: bytes 64 (j / 2) + 32 (j % 2) of the activations
        const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 64 * (j / 2) + 32 * (j % 2)));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(u.q[j], av), u.sc[j]));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(ab.d * u.d), _mm256_cvtepi32_ps(sumi), acc);
}

LS_AVX2 inline float q4_K_result(__m256 acc, __m128 acc_m) {
    alignas(16) float m[4];
    _mm_store_ps(m, acc_m);
    return hsum8(acc) + ((m[0] + m[2]) + (m[1] + m[3]));
}

}  // namespace

namespace {

LS_AVX2 inline __attribute__((always_inline)) float q4_K_row(int64_t n, const block_q4_K* w, const block_q8_K* a) {
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        // 32 blocks (4.6 KB) ahead, into the next rows of the tensor: 4 were too close to hide the
        // memory's latency (decode took 1.08x the time), and on a 2-core Zen 5 12 still were
        // (66-70 tok/s against 70-72 with 24 or 32 in the same rounds).
        constexpr int64_t kAhead = 32;
        _mm_prefetch(reinterpret_cast<const char*>(w + b + kAhead), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + b + kAhead) + 64, _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(w + b + kAhead) + 128, _MM_HINT_T0);
        Q4KUnpacked u;
        unpack_q4_K(w[b], &u);
        q4_K_block_step(u, a[b], acc, acc_m);
    }
    return q4_K_result(acc, acc_m);
}

}  // namespace

LS_AVX2 float dot_q4_K_avx2(int64_t n, const block_q4_K* w, const block_q8_K* a) { return q4_K_row(n, w, a); }

namespace {

// C activation rows against an unpacked weight row, block by block: the steps of q4_K_block_step
// for each, with the quants and scales read from L1 once for the C columns and the accumulators in
// registers.
template <int C>
LS_AVX2 void dot_q4_K_unpacked(int64_t nb, const Q4KUnpacked* u, const block_q8_K* a, int64_t a_stride_blocks,
                               float* out, int64_t out_stride) {
    __m256 acc[C];
    __m128 acc_m[C];
    for (int c = 0; c < C; ++c) acc[c] = _mm256_setzero_ps(), acc_m[c] = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        __m256i sumi[C];
        for (int c = 0; c < C; ++c) {
            const block_q8_K& ab = a[c * a_stride_blocks + b];
            const __m128i bsums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(ab.bsums + 8)));
            acc_m[c] = _mm_fmadd_ps(_mm_set1_ps(-ab.d * u[b].dmin), _mm_cvtepi32_ps(_mm_madd_epi16(u[b].mins, bsums)),
                                    acc_m[c]);
            sumi[c] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 8; ++j) {
            const __m256i q = _mm256_load_si256(&u[b].q[j]);
            const __m256i sc = _mm256_load_si256(&u[b].sc[j]);
            // Chunk j of the quants: bytes 64 (j / 2) + 32 (j % 2) of the activations.
            for (int c = 0; c < C; ++c) {
                const __m256i av = _mm256_loadu_si256(
                    reinterpret_cast<const __m256i*>(a[c * a_stride_blocks + b].qs + 64 * (j / 2) + 32 * (j % 2)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q, av), sc));
                // Kept a running sum: the compiler would otherwise regroup these exact integer adds
                // into a tree whose 32 live products spill to the stack.
                asm("" : "+x"(sumi[c]));
            }
        }
        for (int c = 0; c < C; ++c)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(a[c * a_stride_blocks + b].d * u[b].d), _mm256_cvtepi32_ps(sumi[c]),
                                     acc[c]);
    }
    for (int c = 0; c < C; ++c) out[c * out_stride] = q4_K_result(acc[c], acc_m[c]);
}

}  // namespace

LS_AVX2 void dot_q4_K_avx2_rows(int64_t n, const block_q4_K* w, const block_q8_K* a, int64_t a_stride_blocks,
                                int count, float* out, int64_t out_stride) {
    // The row unpacked once (n / 256 blocks of 544 bytes: L1 for the model sizes we meet).
    thread_local std::vector<Q4KUnpacked> unpacked;
    const int64_t nb = n / kQK_K;
    if (static_cast<int64_t>(unpacked.size()) < nb) unpacked.resize(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) unpack_q4_K(w[b], &unpacked[b]);
    // The next row (the rows of a weight tensor follow each other) comes from memory while this
    // one meets every column.
    for (uint64_t off = 0; off < nb * sizeof(block_q4_K); off += 64)
        _mm_prefetch(reinterpret_cast<const char*>(w + nb) + off, _MM_HINT_T0);
    for (; count >= 4; count -= 4, a += 4 * a_stride_blocks, out += 4 * out_stride)
        dot_q4_K_unpacked<4>(nb, unpacked.data(), a, a_stride_blocks, out, out_stride);
    if (count == 3) dot_q4_K_unpacked<3>(nb, unpacked.data(), a, a_stride_blocks, out, out_stride);
    if (count == 2) dot_q4_K_unpacked<2>(nb, unpacked.data(), a, a_stride_blocks, out, out_stride);
    if (count == 1) dot_q4_K_unpacked<1>(nb, unpacked.data(), a, a_stride_blocks, out, out_stride);
}

// q6_K . q8_K: the unsigned 6-bit quants (0..63) dotted as q4_K's, each 16 bytes with their own
// scale; lane l then loses 32 * (bsums . scales) of groups 2l and 2l+1 (the -32 offset of the
// quants), and acc = fma(d, float(lanes), acc).
namespace {

// Byte shuffles that spread scale 2c over bytes 0-7 and scale 2c + 1 over bytes 8-15.
struct alignas(16) ScalePairMasks {
    uint8_t m[8][16];
};
const ScalePairMasks kScalePairs = [] {
    ScalePairMasks t{};
    for (int c = 0; c < 8; ++c)
        for (int i = 0; i < 16; ++i) t.m[c][i] = static_cast<uint8_t>(2 * c + i / 8);
    return t;
}();

}  // namespace

LS_AVX2 float dot_q6_K_avx2(int64_t n, const block_q6_K* w, const block_q8_K* a) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), bits45 = _mm256_set1_epi8(0x30);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * _cvtsh_ss(w[b].d);
        const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = w[b].ql + 64 * half;
            const __m256i lo_a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
            const __m256i lo_b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * half));
            // The four 32-byte chunks of this half: low nibbles of ql[0..31] and ql[32..63], then
            // their high nibbles, each with its two bits of qh at bits 4 and 5.
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(lo_a, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(lo_b, low4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo_a, 4), low4), _mm256_and_si256(qh, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo_b, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
            };
            for (int c = 0; c < 4; ++c) {
                const int chunk = 4 * half + c;
                const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 32 * chunk));
                // scale 2 chunk in the low 128 bits, 2 chunk + 1 in the high ones (int16)
                const __m256i scales = _mm256_cvtepi8_epi16(
                    _mm_shuffle_epi8(sc8, _mm_load_si128(reinterpret_cast<const __m128i*>(kScalePairs.m[chunk]))));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], q8), scales));
            }
        }
        // lane l loses 32 * (bsums[2l] * sc[2l] + bsums[2l + 1] * sc[2l + 1]) (the -32 offset)
        const __m256i offsets = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)),
                                                  _mm256_cvtepi8_epi16(sc8));
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(offsets, 5));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc);
}

// ---- the 32-quant block formats (Q4_0, Q5_0, Q8_0, IQ4_NL, MXFP4) against Q8_0, and IQ4_XS against Q8_K

namespace {

// The eight int32 lanes of ggml's mul_sum_i8_pairs: lane l = w[4l..4l+3] . a[4l..4l+3], exact.
LS_AVX2 inline __m256i lanes_i8(__m256i w, __m256i a) {
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
}

// The 32 quants of a block as signed bytes in element order: 16 packed bytes' low nibbles, then
// their high nibbles.
LS_AVX2 inline __m256i nibbles32(const uint8_t* qs) {
    const __m256i packed = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return _mm256_and_si256(_mm256_blend_epi32(packed, _mm256_srli_epi16(packed, 4), 0xF0), _mm256_set1_epi8(0x0F));
}

// Q5_0 / Q5_1's fifth bits: byte e is 0xFF when bit e of the 32-bit qh is set (byte e / 8 of qh
// spread to the eight bytes, every other bit of byte e % 8 set, compared with all ones).
LS_AVX2 inline __m256i fifth_bits32(const uint8_t* qh_bytes) {
    uint32_t qh;
    std::memcpy(&qh, qh_bytes, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(qh)),
                                               _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                  0x0303030303030303LL));
    const __m256i others = _mm256_set1_epi64x(static_cast<long long>(0x7fbfdfeff7fbfdfeULL));
    return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

// IQ4_NL's non-linear values (MXFP4's doubled E2M1 values) for 32 nibbles: a byte shuffle through
// the 16-entry table.
struct alignas(16) NibbleTable {
    int8_t v[16];
};
template <int (*kValue)(int)>
NibbleTable nibble_table() {
    NibbleTable t{};
    for (int i = 0; i < 16; ++i) t.v[i] = static_cast<int8_t>(kValue(i));
    return t;
}
const NibbleTable kIq4nl = nibble_table<iq4nl_value>();
const NibbleTable kMxfp4 = nibble_table<mxfp4_value>();

// A one-byte scale format's 256 values (MXFP4's E8M0, NVFP4's UE4M3), looked up per block.
struct ByteScaleTable {
    float v[256];
};
template <float (*kDecode)(uint8_t)>
ByteScaleTable byte_scale_table() {
    ByteScaleTable t{};
    for (int x = 0; x < 256; ++x) t.v[x] = kDecode(static_cast<uint8_t>(x));
    return t;
}

LS_AVX2 inline __m256i lookup32(const NibbleTable& table, const uint8_t* qs) {
    const __m256i values = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table.v)));
    return _mm256_shuffle_epi8(values, nibbles32(qs));
}
LS_AVX2 inline __m256i iq4nl32(const uint8_t* qs) { return lookup32(kIq4nl, qs); }

// A block's 32 quants as signed bytes, as the emulation's unpack_* gives them.
template <GgmlType type>
LS_AVX2 inline __m256i quants(const void* blocks, int64_t b) {
    switch (type) {
        case GgmlType::Q4_0:
            return _mm256_sub_epi8(nibbles32(static_cast<const block_q4_0*>(blocks)[b].qs), _mm256_set1_epi8(8));
        case GgmlType::Q5_0: {
            const block_q5_0& q = static_cast<const block_q5_0*>(blocks)[b];
            // nibble + 16 * bit - 16: the nibble, with 0xF0 (-16) or'ed in where the bit is clear
            return _mm256_or_si256(nibbles32(q.qs), _mm256_andnot_si256(fifth_bits32(q.qh), _mm256_set1_epi8(static_cast<char>(0xF0))));
        }
        case GgmlType::Q8_0:
            return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const block_q8_0*>(blocks)[b].qs));
        case GgmlType::Q4_1: return nibbles32(static_cast<const block_q4_1*>(blocks)[b].qs);
        case GgmlType::Q5_1: {
            const block_q5_1& q = static_cast<const block_q5_1*>(blocks)[b];
            return _mm256_or_si256(nibbles32(q.qs), _mm256_and_si256(fifth_bits32(q.qh), _mm256_set1_epi8(0x10)));
        }
        case GgmlType::MXFP4: return lookup32(kMxfp4, static_cast<const block_mxfp4*>(blocks)[b].qs);
        default:  // IQ4_NL
            return iq4nl32(static_cast<const block_iq4_nl*>(blocks)[b].qs);
    }
}

template <GgmlType type>
LS_AVX2 inline float block_scale(const void* blocks, int64_t b) {
    switch (type) {
        case GgmlType::Q4_0: return _cvtsh_ss(static_cast<const block_q4_0*>(blocks)[b].d);
        case GgmlType::Q5_0: return _cvtsh_ss(static_cast<const block_q5_0*>(blocks)[b].d);
        case GgmlType::Q8_0: return _cvtsh_ss(static_cast<const block_q8_0*>(blocks)[b].d);
        case GgmlType::Q4_1: return _cvtsh_ss(static_cast<const block_q4_1*>(blocks)[b].d);
        case GgmlType::Q5_1: return _cvtsh_ss(static_cast<const block_q5_1*>(blocks)[b].d);
        case GgmlType::MXFP4: return e8m0_to_fp32_half(static_cast<const block_mxfp4*>(blocks)[b].e);
        default: return _cvtsh_ss(static_cast<const block_iq4_nl*>(blocks)[b].d);
    }
}

// The paired forms' last odd block, ggml's scalar tail: the block's integer dot, then
// sum = fma(d_a * d_w, float(isum), sum) (GCC fuses its `sumf += d * sumi`).
template <GgmlType type>
LS_AVX2 inline float paired_tail(const void* w, const block_q8_0* a, int64_t b, float sum) {
    alignas(32) int32_t l[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l),
                       lanes_i8(quants<type>(w, b), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs))));
    const int32_t isum = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
    return std::fma(_cvtsh_ss(a[b].d) * block_scale<type>(w, b), static_cast<float>(isum), sum);
}

// a_d: the activation blocks' scales as f32 when the caller converted them (else read from a).
template <GgmlType type>
LS_AVX2 float dot_q8_0_family_t(int64_t n, const void* w, const block_q8_0* a, bool paired, const float* a_d = nullptr) {
    const int64_t nb = n / 32;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t b = 0;
    // Decoding streams each weight once: Q8_0 (memory-bound) fetches a few hundred bytes ahead (no
    // effect on the sums); the formats whose unpacking bounds them leave it to the hardware.
    constexpr int64_t kAhead = 16;
    const char* bytes = static_cast<const char*>(w);
    const size_t block_bytes = type == GgmlType::Q8_0 ? sizeof(block_q8_0) : type == GgmlType::Q5_0 ? sizeof(block_q5_0)
                             : type == GgmlType::MXFP4 ? sizeof(block_mxfp4) : sizeof(block_q4_0);
    if (paired) {
        // ggml_vec_dot_iq4_nl_q8_0 and _mxfp4_q8_0: even blocks into acc[0], odd ones into acc[1], a
        // last odd block in the scalar tail.
        for (; b + 1 < nb; b += 2) {
            _mm_prefetch(bytes + (b + kAhead) * block_bytes, _MM_HINT_T0);
            for (int k = 0; k < 2; ++k) {
                const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + k].qs));
                const float d = (a_d ? a_d[b + k] : _cvtsh_ss(a[b + k].d)) * block_scale<type>(w, b + k);
                acc[k] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_i8(quants<type>(w, b + k), q8)), acc[k]);
            }
        }
        float sum = hsum8(_mm256_add_ps(acc[0], acc[1]));
        for (; b < nb; ++b) sum = paired_tail<type>(w, a, b, sum);
        return sum;
    }
    for (; b < nb; ++b) {
        if (type == GgmlType::Q8_0 && b % 2 == 0) _mm_prefetch(bytes + (b + kAhead) * block_bytes, _MM_HINT_T0);
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
        const float d = block_scale<type>(w, b) * (a_d ? a_d[b] : _cvtsh_ss(a[b].d));
        acc[0] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_i8(quants<type>(w, b), q8)), acc[0]);
    }
    return hsum8(acc[0]);
}

// One block of a (row, column): acc = fma(d, float(lanes), acc), wa the weights' magnitudes.
LS_AVX2 inline __attribute__((always_inline)) __m256 q8_0_step(__m256 acc, __m256i wa, __m256i wq, __m256i q8, __m256 d) {
    const __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(q8, wq)), _mm256_set1_epi16(1));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc);
}

template <GgmlType type, int kRows>
LS_AVX2 void dot_q8_0_family_columns_t(int64_t n, const char* w, uint64_t row_bytes, const block_q8_0* a,
                                      int64_t a_stride_blocks, const float* a_d, int count, float* out,
                                      int64_t out_stride) {
    const int64_t nb = n / 32;
    thread_local AlignedVector<int8_t> q, qa;  // the rows' quants and their magnitudes, 32 bytes a block
    thread_local AlignedVector<float> dw;      // per block: row 0's scale four times, then row 1's
    thread_local AlignedVector<float> pr;      // per block: the eight scale products of a tile
    q.resize(static_cast<size_t>(kRows * nb * 32));
    qa.resize(static_cast<size_t>(kRows * nb * 32));
    dw.resize(static_cast<size_t>(nb * 8));
    pr.resize(static_cast<size_t>(nb * 8));
    for (int r = 0; r < kRows; ++r)
        for (int64_t b = 0; b < nb; ++b) {
            const __m256i v = quants<type>(w + r * row_bytes, b);
            _mm256_store_si256(reinterpret_cast<__m256i*>(q.data() + 32 * (r * nb + b)), v);
            _mm256_store_si256(reinterpret_cast<__m256i*>(qa.data() + 32 * (r * nb + b)), _mm256_sign_epi8(v, v));
            const float d = block_scale<type>(w + r * row_bytes, b);
            for (int k = 4 * r; k < 4 * r + (kRows == 1 ? 8 : 4); ++k) dw[8 * b + k] = d;
        }
    // A tile of the rows and four columns: each unpacked weight block serves the four columns and
    // each activation block the rows; each (row, column)'s float steps are the one-column kernel's
    // (acc = fma(d_w * d_a, lanes, acc), then hsum8). The accumulators are named variables so that
    // they stay in registers.
    const int8_t* qp = q.data();
    const int8_t* qap = qa.data();
    const float* dwp = dw.data();
    for (int c0 = 0; c0 < count; c0 += 4) {
        const int m = std::min(4, count - c0);
        const block_q8_0* col[4];
        for (int j = 0; j < 4; ++j) col[j] = a + (c0 + std::min(j, m - 1)) * a_stride_blocks;
        const float* dg = a_d + (c0 / 4) * nb * 4;
        // The block's eight scale products d_w * d_a (row r, column j at 4r + j) in one multiply.
        float* prod = pr.data();
        for (int64_t b = 0; b < nb; ++b)
            _mm256_store_ps(prod + 8 * b, _mm256_mul_ps(_mm256_load_ps(dwp + 8 * b),
                                                        _mm256_broadcast_ps(reinterpret_cast<const __m128*>(dg + 4 * b))));
        __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00;
        for (int64_t b = 0; b < nb; ++b) {
            const __m256i wa0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qap + 32 * b));
            const __m256i wq0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 32 * b));
            const __m256i q0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[0][b].qs));
            const __m256i q1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[1][b].qs));
            const __m256i q2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[2][b].qs));
            const __m256i q3 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[3][b].qs));
            const float* d = prod + 8 * b;
            c00 = q8_0_step(c00, wa0, wq0, q0, _mm256_broadcast_ss(d + 0));
            c01 = q8_0_step(c01, wa0, wq0, q1, _mm256_broadcast_ss(d + 1));
            c02 = q8_0_step(c02, wa0, wq0, q2, _mm256_broadcast_ss(d + 2));
            c03 = q8_0_step(c03, wa0, wq0, q3, _mm256_broadcast_ss(d + 3));
            if constexpr (kRows == 2) {
                const __m256i wa1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qap + 32 * (nb + b)));
                const __m256i wq1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(qp + 32 * (nb + b)));
                c10 = q8_0_step(c10, wa1, wq1, q0, _mm256_broadcast_ss(d + 4));
                c11 = q8_0_step(c11, wa1, wq1, q1, _mm256_broadcast_ss(d + 5));
                c12 = q8_0_step(c12, wa1, wq1, q2, _mm256_broadcast_ss(d + 6));
                c13 = q8_0_step(c13, wa1, wq1, q3, _mm256_broadcast_ss(d + 7));
            }
        }
        const __m256 acc[2][4] = {{c00, c01, c02, c03}, {c10, c11, c12, c13}};
        for (int r = 0; r < kRows; ++r)
            for (int j = 0; j < m; ++j) out[r + (c0 + j) * out_stride] = hsum8(acc[r][j]);
    }
}

template <GgmlType type>
LS_AVX2 void dot_q8_0_family_columns_rows(int64_t n, const void* w, uint64_t row_bytes, int rows, const block_q8_0* a,
                                          int64_t a_stride_blocks, const float* a_d, int count, float* out,
                                          int64_t out_stride) {
    const char* bytes = static_cast<const char*>(w);
    if (rows == 2) return dot_q8_0_family_columns_t<type, 2>(n, bytes, row_bytes, a, a_stride_blocks, a_d, count, out, out_stride);
    dot_q8_0_family_columns_t<type, 1>(n, bytes, row_bytes, a, a_stride_blocks, a_d, count, out, out_stride);
}

// ggml_vec_dot_{q4_1,q5_1}_q8_1: acc = fma(d_w * d_a, lanes, acc), summs = fma(m_w, s_a, summs).
template <GgmlType type>
LS_AVX2 float dot_q8_1_family_t(int64_t n, const void* w, const block_q8_1* a) {
    using Block = std::conditional_t<type == GgmlType::Q4_1, block_q4_1, block_q5_1>;
    const Block* blocks = static_cast<const Block*>(w);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / 32; ++b) {
        summs = std::fma(_cvtsh_ss(blocks[b].m), _cvtsh_ss(a[b].s), summs);
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
        const float d = block_scale<type>(w, b) * _cvtsh_ss(a[b].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes_i8(quants<type>(w, b), q8)), acc);
    }
    return hsum8(acc) + summs;
}

}  // namespace

LS_AVX2 float dot_q8_1_family_avx2(GgmlType type, int64_t n, const void* w, const block_q8_1* a) {
    return type == GgmlType::Q4_1 ? dot_q8_1_family_t<GgmlType::Q4_1>(n, w, a) : dot_q8_1_family_t<GgmlType::Q5_1>(n, w, a);
}

LS_AVX2 float dot_q5_K_avx2(int64_t n, const block_q5_K* w, const block_q8_K* a) {
    const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = a[b].d * _cvtsh_ss(w[b].d);
        const float dmin = -a[b].d * _cvtsh_ss(w[b].dmin);
        alignas(16) uint8_t sm[16];  // eight scales, then eight mins
        unpack_scales_mins_k4(w[b].scales, sm);
        // min_sum = sum over j of min j * (bsums 2j + bsums 2j+1), exact in any order
        const __m128i pair_sums = _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a[b].bsums)),
                                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(a[b].bsums + 8)));
        __m128i prod = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8))), pair_sums);
        prod = _mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0x4E));
        const int32_t min_sum = _mm_cvtsi128_si32(_mm_add_epi32(prod, _mm_shuffle_epi32(prod, 0xB1)));
        summs = std::fma(dmin, static_cast<float>(min_sum), summs);  // GCC fuses `summs += dmin * int`
        const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh));
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < kQK_K / 64; ++j) {
            const __m256i q4 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * j));
            // Chunk 2j: the low nibbles with bit 2j of qh as bit 4; chunk 2j + 1: the high ones, bit 2j + 1.
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q4, low4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one), 4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q4, 4), low4),
                                               _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one), 4));
            const __m256i q8lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * j));
            const __m256i q8hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 64 * j + 32));
            // The quants are unsigned (0-31), so maddubs takes them as they are (no pair reaches
            // 32767), and the sub-block's scale multiplies the pairs as they are added: the lanes
            // of lanes_i8 times the scale, in two instructions instead of a 32-bit multiply.
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, q8lo), _mm256_set1_epi16(sm[2 * j])));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, q8hi), _mm256_set1_epi16(sm[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum8(acc) + summs;
}

LS_AVX2 void dot_iq4_xs_avx2_columns(int64_t n, const block_iq4_xs* w, const block_q8_K* a, int64_t a_stride_blocks,
                                     int count, float* out, int64_t out_stride) {
    const int64_t nb = n / kQK_K;
    thread_local AlignedVector<int8_t> q;  // the row's values, 32 bytes a sub-block
    thread_local std::vector<int16_t> ls;
    thread_local std::vector<float> dw;
    q.resize(static_cast<size_t>(n));
    ls.resize(static_cast<size_t>(n / 32));
    dw.resize(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) {
        dw[b] = _cvtsh_ss(w[b].d);
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(q.data() + kQK_K * b + 32 * ib), iq4nl32(w[b].qs + 16 * ib));
            ls[8 * b + ib] = static_cast<int16_t>(iq4_xs_scale(w[b], ib));
        }
    }
    for (int c0 = 0; c0 < count; c0 += 4) {
        const int m = std::min(4, count - c0);
        __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
        for (int64_t b = 0; b < nb; ++b)
            for (int j = 0; j < m; ++j) {
                const block_q8_K& ab = a[(c0 + j) * a_stride_blocks + b];
                __m256i sumi = _mm256_setzero_si256();
                for (int ib = 0; ib < kQK_K / 32; ++ib) {
                    const __m256i q4 = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.data() + kQK_K * b + 32 * ib));
                    const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ab.qs + 32 * ib));
                    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q4, q4), _mm256_sign_epi8(q8, q4));
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(ls[8 * b + ib])));
                }
                acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw[b] * ab.d), _mm256_cvtepi32_ps(sumi), acc[j]);
            }
        for (int j = 0; j < m; ++j) out[(c0 + j) * out_stride] = hsum8(acc[j]);
    }
}

namespace {

// ggml's IQ panel form (iqp.cpp): per (row, column) the super-block's integer dot, then one f32
// FMA. The four columns of a row keep their chains in the four lanes of a 128-bit vector (lane by
// lane the scalar FMAs); a tail of fewer than four columns repeats its last column in the spare
// lanes and drops them.
template <int kRows>
LS_AVX2 void iq4_xs_panel_columns_t(int64_t n, const char* w, uint64_t row_bytes, const block_q8_K* a,
                                    int64_t a_stride_blocks, int count, float* out, int64_t out_stride) {
    const int64_t nb = n / kQK_K, ns = n / 32;
    thread_local AlignedVector<int8_t> q, qa;  // the rows' values and their magnitudes, 32 bytes a sub-block
    thread_local AlignedVector<int16_t> ls;    // each sub-block's scale, 16 copies
    thread_local std::vector<float> dw;
    q.resize(static_cast<size_t>(kRows * n));
    qa.resize(static_cast<size_t>(kRows * n));
    ls.resize(static_cast<size_t>(kRows * ns * 16));
    dw.resize(static_cast<size_t>(kRows * nb));
    for (int r = 0; r < kRows; ++r) {
        const auto* x = reinterpret_cast<const block_iq4_xs*>(w + r * row_bytes);
        for (int64_t b = 0; b < nb; ++b) {
            dw[r * nb + b] = _cvtsh_ss(x[b].d);
            for (int ib = 0; ib < kQK_K / 32; ++ib) {
                const int64_t s = r * ns + b * (kQK_K / 32) + ib;
                const __m256i v = iq4nl32(x[b].qs + 16 * ib);
                _mm256_store_si256(reinterpret_cast<__m256i*>(q.data() + 32 * s), v);
                _mm256_store_si256(reinterpret_cast<__m256i*>(qa.data() + 32 * s), _mm256_sign_epi8(v, v));
                _mm256_store_si256(reinterpret_cast<__m256i*>(ls.data() + 16 * s),
                                   _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(x[b], ib))));
            }
        }
    }
    for (int c0 = 0; c0 < count; c0 += 4) {
        const int m = std::min(4, count - c0);
        const block_q8_K* col[4];
        for (int j = 0; j < 4; ++j) col[j] = a + (c0 + std::min(j, m - 1)) * a_stride_blocks;
        __m128 sum[kRows];
        for (int r = 0; r < kRows; ++r) sum[r] = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            __m256i acc[kRows][4];
            for (int r = 0; r < kRows; ++r)
                for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_si256();
            for (int ib = 0; ib < kQK_K / 32; ++ib) {
                __m256i wv[kRows], wa[kRows], sc[kRows];
                for (int r = 0; r < kRows; ++r) {
                    const int64_t s = r * ns + b * (kQK_K / 32) + ib;
                    wv[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(q.data() + 32 * s));
                    wa[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(qa.data() + 32 * s));
                    sc[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(ls.data() + 16 * s));
                }
                for (int j = 0; j < 4; ++j) {
                    const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(col[j][b].qs + 32 * ib));
                    for (int r = 0; r < kRows; ++r)
                        acc[r][j] = _mm256_add_epi32(
                            acc[r][j], _mm256_madd_epi16(_mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(q8, wv[r])), sc[r]));
                }
            }
            const __m128 da = _mm_setr_ps(col[0][b].d, col[1][b].d, col[2][b].d, col[3][b].d);
            for (int r = 0; r < kRows; ++r) {
                // [column 0, 1, 2, 3] totals, exact in any order
                const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[r][0], acc[r][1]), _mm256_hadd_epi32(acc[r][2], acc[r][3]));
                const __m128i t = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                sum[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(t), _mm_mul_ps(_mm_set1_ps(dw[r * nb + b]), da), sum[r]);
            }
        }
        for (int r = 0; r < kRows; ++r) {
            alignas(16) float v[4];
            _mm_store_ps(v, sum[r]);
            for (int j = 0; j < m; ++j) out[r + (c0 + j) * out_stride] = v[j];
        }
    }
}

}  // namespace

LS_AVX2 void dot_iq4_xs_panel_avx2_columns(int64_t n, const void* w, uint64_t row_bytes, int rows, const block_q8_K* a,
                                           int64_t a_stride_blocks, int count, float* out, int64_t out_stride) {
    const char* bytes = static_cast<const char*>(w);
    int r = 0;
    for (; r + 2 <= rows; r += 2)
        iq4_xs_panel_columns_t<2>(n, bytes + r * row_bytes, row_bytes, a, a_stride_blocks, count, out + r, out_stride);
    if (r < rows) iq4_xs_panel_columns_t<1>(n, bytes + r * row_bytes, row_bytes, a, a_stride_blocks, count, out + r, out_stride);
}

LS_AVX2 float dot_q8_0_family_avx2(GgmlType type, int64_t n, const void* w, const block_q8_0* a, bool paired) {
    switch (type) {
        case GgmlType::Q4_0: return dot_q8_0_family_t<GgmlType::Q4_0>(n, w, a, paired);
        case GgmlType::Q5_0: return dot_q8_0_family_t<GgmlType::Q5_0>(n, w, a, paired);
        case GgmlType::Q8_0: return dot_q8_0_family_t<GgmlType::Q8_0>(n, w, a, paired);
        case GgmlType::MXFP4: return dot_q8_0_family_t<GgmlType::MXFP4>(n, w, a, paired);
        default: return dot_q8_0_family_t<GgmlType::IQ4_NL>(n, w, a, paired);
    }
}

namespace {

// An activation row laid out once for dot_iq4_nl_four_rows, per pair of blocks (2p, 2p + 1):
// each block's first and second halves twice over ([a0..15 | a0..15], [a16..31 | a16..31]), the
// same with magnitudes, and the two scales as the kernel's scale products want them.
struct alignas(32) Iq4nlPairActivation {
    __m256i half[2][2];      // [block k][first / second half, twice over]
    __m256i half_abs[2][2];  // their magnitudes
    float d[8];              // d_a of blocks 2p, 2p, 2p + 1, 2p + 1, then the same again
};

LS_AVX2 void iq4_nl_prepare_activation(int64_t nb, const block_q8_0* a, const float* ad, Iq4nlPairActivation* out) {
    for (int64_t p = 0; p < nb / 2; ++p) {
        Iq4nlPairActivation& x = out[p];
        for (int k = 0; k < 2; ++k) {
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[2 * p + k].qs));
            x.half[k][0] = _mm256_permute2x128_si256(q8, q8, 0x00);
            x.half[k][1] = _mm256_permute2x128_si256(q8, q8, 0x11);
            for (int h = 0; h < 2; ++h) x.half_abs[k][h] = _mm256_sign_epi8(x.half[k][h], x.half[k][h]);
        }
        for (int i = 0; i < 8; i += 4) {
            x.d[i] = x.d[i + 1] = ad[2 * p];
            x.d[i + 2] = x.d[i + 3] = ad[2 * p + 1];
        }
    }
}

// Four IQ4_NL rows against one activation row, each row's float steps exactly
// ggml_vec_dot_iq4_nl_q8_0's (dot_q8_0_family_t, paired): lane l of block b is the exact integer
// w[4l..4l+3] . a[4l..4l+3], acc[b % 2] = fma(d_a * d_w, float(lane), acc[b % 2]), then
// hsum8(acc[0] + acc[1]) and the scalar tail. What is shared: two rows' 16 packed bytes are one
// register ([row r | row r + 1]), so one mask and shift unpack both; their low nibbles (elements
// 0..15) meet the activation's first half twice over and their high nibbles its second half, so
// each pair of rows keeps its accumulators as [r lanes 0-3 | r+1 lanes 0-3] and
// [r lanes 4-7 | r+1 lanes 4-7], every lane taking the same FMAs in the same order. The
// activation's magnitudes come prepared (the weights' signs moved onto the activation: the same
// pair sums, each product |w| |a| <= 127 * 127), the eight scale products of a pair of blocks in
// one multiply, arranged so that each pair of rows takes its two with one in-lane shuffle.
LS_AVX2 void dot_iq4_nl_four_rows(int64_t n, const char* w, uint64_t row_bytes, const block_q8_0* a,
                                  const Iq4nlPairActivation* act, float* out) {
    const int64_t nb = n / 32;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nl.v)));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const auto* r0 = reinterpret_cast<const block_iq4_nl*>(w);
    const auto* r1 = reinterpret_cast<const block_iq4_nl*>(w + row_bytes);
    const auto* r2 = reinterpret_cast<const block_iq4_nl*>(w + 2 * row_bytes);
    const auto* r3 = reinterpret_cast<const block_iq4_nl*>(w + 3 * row_bytes);
    // acc[pair][k][half]: rows (0, 1) or (2, 3), block parity k, lanes 0-3 or 4-7.
    __m256 acc[2][2][2];
    for (auto& p : acc)
        for (auto& k : p) k[0] = k[1] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        const Iq4nlPairActivation& x = act[b / 2];
        // The next four rows fetched while these are summed (a pair of blocks is 36 bytes of each
        // row: 144 here, three lines there); prefetches past the tensor's end do not fault.
        const char* next = w + 4 * row_bytes + (b / 2) * 192;
        _mm_prefetch(next, _MM_HINT_T0);
        _mm_prefetch(next + 64, _MM_HINT_T0);
        _mm_prefetch(next + 128, _MM_HINT_T0);
        // lanes: r0 b, r2 b, r0 b+1, r2 b+1 | r1 b, r3 b, r1 b+1, r3 b+1
        // (two short chains of inserts, not one long one)
        __m128i h02 = _mm_cvtsi32_si128(r0[b].d), h13 = _mm_cvtsi32_si128(r1[b].d);
        h02 = _mm_insert_epi16(h02, r2[b].d, 1);
        h13 = _mm_insert_epi16(h13, r3[b].d, 1);
        h02 = _mm_insert_epi16(h02, r0[b + 1].d, 2);
        h13 = _mm_insert_epi16(h13, r1[b + 1].d, 2);
        h02 = _mm_insert_epi16(h02, r2[b + 1].d, 3);
        h13 = _mm_insert_epi16(h13, r3[b + 1].d, 3);
        const __m128i h = _mm_unpacklo_epi64(h02, h13);
        const __m256 d = _mm256_mul_ps(_mm256_load_ps(x.d), _mm256_cvtph_ps(h));  // d_a * d_w, as the one-row kernel
        for (int k = 0; k < 2; ++k)
            for (int p = 0; p < 2; ++p) {
                const block_iq4_nl& u = (p == 0 ? r0 : r2)[b + k];
                const block_iq4_nl& v = (p == 0 ? r1 : r3)[b + k];
                const __m256i packed = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(v.qs), reinterpret_cast<const __m128i*>(u.qs));
                const __m256i w_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(packed, low4));
                const __m256i w_hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4));
                const __m256i lanes_lo = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(x.half_abs[k][0], _mm256_sign_epi8(w_lo, x.half[k][0])), _mm256_set1_epi16(1));
                const __m256i lanes_hi = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(x.half_abs[k][1], _mm256_sign_epi8(w_hi, x.half[k][1])), _mm256_set1_epi16(1));
                const __m256 dp = k == 0 ? (p == 0 ? _mm256_shuffle_ps(d, d, 0x00) : _mm256_shuffle_ps(d, d, 0x55))
                                         : (p == 0 ? _mm256_shuffle_ps(d, d, 0xAA) : _mm256_shuffle_ps(d, d, 0xFF));
                acc[p][k][0] = _mm256_fmadd_ps(dp, _mm256_cvtepi32_ps(lanes_lo), acc[p][k][0]);
                acc[p][k][1] = _mm256_fmadd_ps(dp, _mm256_cvtepi32_ps(lanes_hi), acc[p][k][1]);
            }
    }
    for (int p = 0; p < 2; ++p) {
        const __m256 lo = _mm256_add_ps(acc[p][0][0], acc[p][1][0]), hi = _mm256_add_ps(acc[p][0][1], acc[p][1][1]);
        for (int q = 0; q < 2; ++q) {
            const int r = 2 * p + q;
            float sum = hsum8(q == 0 ? _mm256_permute2f128_ps(lo, hi, 0x20) : _mm256_permute2f128_ps(lo, hi, 0x31));
            for (int64_t t = b; t < nb; ++t) sum = paired_tail<GgmlType::IQ4_NL>(w + r * row_bytes, a, t, sum);
            out[r] = sum;
        }
    }
}

}  // namespace

LS_AVX2 void dot_q8_0_family_avx2_rows(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int64_t count,
                                       const block_q8_0* a, float* out) {
    const char* rows = static_cast<const char*>(w);
    const bool paired = type == GgmlType::IQ4_NL || type == GgmlType::MXFP4;
    thread_local std::vector<float> a_d;  // the activation's block scales, converted once for the rows
    a_d.resize(static_cast<size_t>(n / 32));
    for (int64_t b = 0; b < n / 32; ++b) a_d[b] = _cvtsh_ss(a[b].d);
    const float* ad = a_d.data();
    switch (type) {
        case GgmlType::Q4_0:
            for (int64_t r = 0; r < count; ++r) out[r] = dot_q8_0_family_t<GgmlType::Q4_0>(n, rows + r * row_bytes, a, paired, ad);
            return;
        case GgmlType::Q5_0:
            for (int64_t r = 0; r < count; ++r) out[r] = dot_q8_0_family_t<GgmlType::Q5_0>(n, rows + r * row_bytes, a, paired, ad);
            return;
        case GgmlType::Q8_0:
            for (int64_t r = 0; r < count; ++r) out[r] = dot_q8_0_family_t<GgmlType::Q8_0>(n, rows + r * row_bytes, a, paired, ad);
            return;
        case GgmlType::MXFP4:
            for (int64_t r = 0; r < count; ++r) out[r] = dot_q8_0_family_t<GgmlType::MXFP4>(n, rows + r * row_bytes, a, paired, ad);
            return;
        default: {
            int64_t r = 0;
            if (count >= 4) {
                thread_local std::vector<Iq4nlPairActivation> act;
                act.resize(static_cast<size_t>(n / 64));
                iq4_nl_prepare_activation(n / 32, a, ad, act.data());
                for (; r + 4 <= count; r += 4) dot_iq4_nl_four_rows(n, rows + r * row_bytes, row_bytes, a, act.data(), out + r);
            }
            for (; r < count; ++r) out[r] = dot_q8_0_family_t<GgmlType::IQ4_NL>(n, rows + r * row_bytes, a, paired, ad);
            return;
        }
    }
}

// ---- MXFP4 against a prepared Q8_0 activation
// ggml_vec_dot_mxfp4_q8_0 (AVX2) sums block 2p's 8 lanes into one accumulator and block 2p + 1's
// into another, lane i holding the products of elements 4i .. 4i + 3. Here one 256-bit load takes a
// pair's 32 packed bytes: its low nibbles are both blocks' first 16 elements (lanes 0-3 of each),
// its high nibbles their last 16 (lanes 4-7), so the two accumulators live as [acc1 0-3 | acc2
// 0-3] and [acc1 4-7 | acc2 4-7], every lane taking the same FMAs in the same order. The table
// gives value + 12 (0 .. 24, unsigned for maddubs; pairs at most 2 * 24 * 127, no saturation), and
// the prepared activation subtracts 12 times each group of four's sum: the same integer lanes.

namespace {

struct alignas(32) Mxfp4PairActivation {
    int8_t lo[32], hi[32];  // blocks 2p and 2p + 1: elements 0 .. 15 of each, then 16 .. 31 of each
    int32_t c_lo[8], c_hi[8];  // 12 * the sum of each group of four of lo and hi
    float d[8];  // block 2p's scale four times, then block 2p + 1's
};
static_assert(sizeof(Mxfp4PairActivation) == 160);

int mxfp4_offset_value(int i) { return mxfp4_value(i) + 12; }
const NibbleTable kMxfp4Offset = nibble_table<mxfp4_offset_value>();

const ByteScaleTable kE8m0Half = byte_scale_table<e8m0_to_fp32_half>();

}  // namespace

size_t mxfp4_activation_bytes(int64_t n) { return static_cast<size_t>(n / 64) * sizeof(Mxfp4PairActivation); }

void mxfp4_prepare_activation(int64_t n, const block_q8_0* a, void* out) {
    auto* pairs = static_cast<Mxfp4PairActivation*>(out);
    for (int64_t p = 0; p < n / 64; ++p) {
        Mxfp4PairActivation& A = pairs[p];
        for (int k = 0; k < 2; ++k) {
            const block_q8_0& y = a[2 * p + k];
            std::memcpy(A.lo + 16 * k, y.qs, 16);
            std::memcpy(A.hi + 16 * k, y.qs + 16, 16);
            for (int g = 0; g < 4; ++g) {
                A.c_lo[4 * k + g] = 12 * (y.qs[4 * g] + y.qs[4 * g + 1] + y.qs[4 * g + 2] + y.qs[4 * g + 3]);
                A.c_hi[4 * k + g] = 12 * (y.qs[16 + 4 * g] + y.qs[17 + 4 * g] + y.qs[18 + 4 * g] + y.qs[19 + 4 * g]);
                A.d[4 * k + g] = fp16_to_fp32(y.d);
            }
        }
    }
}

LS_AVX2 void dot_mxfp4_avx2_rows(int64_t n, const void* w, uint64_t row_bytes, int64_t count, const void* prepared,
                                 const block_q8_0* a, float* out) {
    const int64_t nb = n / 32, np = nb / 2;
    const auto* act = static_cast<const Mxfp4PairActivation*>(prepared);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4Offset.v)));
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (int64_t r = 0; r < count; ++r) {
        const auto* x = reinterpret_cast<const block_mxfp4*>(static_cast<const char*>(w) + r * row_bytes);
        __m256 acc_lo = _mm256_setzero_ps(), acc_hi = _mm256_setzero_ps();
        for (int64_t p = 0; p < np; ++p) {
            const block_mxfp4* q = x + 2 * p;
            const Mxfp4PairActivation& A = act[p];
            const __m256i packed = _mm256_inserti128_si256(
                _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q[0].qs))),
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(q[1].qs)), 1);
            const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(packed, m4));
            const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(packed, 4), m4));
            const __m256i s_lo = _mm256_sub_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(lo, _mm256_load_si256(reinterpret_cast<const __m256i*>(A.lo))), ones),
                _mm256_load_si256(reinterpret_cast<const __m256i*>(A.c_lo)));
            const __m256i s_hi = _mm256_sub_epi32(
                _mm256_madd_epi16(_mm256_maddubs_epi16(hi, _mm256_load_si256(reinterpret_cast<const __m256i*>(A.hi))), ones),
                _mm256_load_si256(reinterpret_cast<const __m256i*>(A.c_hi)));
            const __m256 dw = _mm256_set_m128(_mm_broadcast_ss(&kE8m0Half.v[q[1].e]), _mm_broadcast_ss(&kE8m0Half.v[q[0].e]));
            const __m256 d = _mm256_mul_ps(_mm256_load_ps(A.d), dw);
            acc_lo = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s_lo), acc_lo);
            acc_hi = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s_hi), acc_hi);
        }
        const __m256 acc1 = _mm256_permute2f128_ps(acc_lo, acc_hi, 0x20), acc2 = _mm256_permute2f128_ps(acc_lo, acc_hi, 0x31);
        float sum = hsum8(_mm256_add_ps(acc1, acc2));
        for (int64_t b = 2 * np; b < nb; ++b) sum = paired_tail<GgmlType::MXFP4>(x, a, b, sum);
        out[r] = sum;
    }
}

void q8_0_scales_in_fours(const block_q8_0* a, int64_t a_stride_blocks, int64_t nb, int count, float* out) {
    for (int c = 0; c < (count + 3) / 4 * 4; ++c) {
        const block_q8_0* col = a + std::min(c, count - 1) * a_stride_blocks;
        for (int64_t b = 0; b < nb; ++b) out[((c / 4) * nb + b) * 4 + c % 4] = fp16_to_fp32(col[b].d);
    }
}

LS_AVX2 void dot_q8_0_family_avx2_columns(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int rows,
                                          const block_q8_0* a, int64_t a_stride_blocks, const float* a_d, int count,
                                          float* out, int64_t out_stride) {
    switch (type) {
        case GgmlType::Q4_0:
            return dot_q8_0_family_columns_rows<GgmlType::Q4_0>(n, w, row_bytes, rows, a, a_stride_blocks, a_d, count, out, out_stride);
        case GgmlType::Q5_0:
            return dot_q8_0_family_columns_rows<GgmlType::Q5_0>(n, w, row_bytes, rows, a, a_stride_blocks, a_d, count, out, out_stride);
        case GgmlType::Q8_0:
            return dot_q8_0_family_columns_rows<GgmlType::Q8_0>(n, w, row_bytes, rows, a, a_stride_blocks, a_d, count, out, out_stride);
        default:
            return dot_q8_0_family_columns_rows<GgmlType::IQ4_NL>(n, w, row_bytes, rows, a, a_stride_blocks, a_d, count, out,
                                                                  out_stride);
    }
}

namespace {

// One IQ4_XS super-block against its Q8_K block: ggml's eight int32 lanes (sub-block products times
// their scales), exact.
LS_AVX2 inline __m256i iq4_xs_lanes(const block_iq4_xs& w, const block_q8_K& a) {
    __m256i sumi = _mm256_setzero_si256();
    for (int ib = 0; ib < kQK_K / 32; ++ib) {
        const __m256i q4 = iq4nl32(w.qs + 16 * ib);
        const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * ib));
        const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q4, q4), _mm256_sign_epi8(q8, q4));
        sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16(static_cast<int16_t>(iq4_xs_scale(w, ib)))));
    }
    return sumi;
}

}  // namespace

namespace {
const ByteScaleTable kUe4m3Half = byte_scale_table<ue4m3_to_fp32_half>();
}  // namespace

// Each 16 packed bytes hold two sub-blocks: low nibbles of bytes 0-7 are the first's elements 0-7,
// their high nibbles its 8-15, bytes 8-15 the second's. Interleaving the low and high halves 64 bits
// at a time puts the 32 codes in element order, the table lookup gives the levels.
LS_AVX2 float dot_nvfp4_avx2(int64_t n, const block_nvfp4* w, const block_q8_0* a) {
    const __m256i values = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kMxfp4.v)));
    const __m128i low4 = _mm_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_NVFP4; ++b)
        for (int half = 0; half < 2; ++half) {
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * half));
            const __m128i lo = _mm_and_si128(packed, low4), hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low4);
            const __m256i codes = _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi));
            const block_q8_0& y = a[2 * b + half];
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
            const __m256i lanes = lanes_i8(_mm256_shuffle_epi8(values, codes), q8);
            const float dy = _cvtsh_ss(y.d);
            const __m256 s = _mm256_set_m128(_mm_set1_ps(kUe4m3Half.v[w[b].d[2 * half + 1]] * dy),
                                             _mm_set1_ps(kUe4m3Half.v[w[b].d[2 * half]] * dy));
            acc = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(lanes), acc);
        }
    return hsum8(acc);
}

LS_AVX2 float dot_iq4_xs_avx2(int64_t n, const block_iq4_xs* w, const block_q8_K* a) {
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(w[b].d) * a[b].d), _mm256_cvtepi32_ps(iq4_xs_lanes(w[b], a[b])), acc);
    return hsum8(acc);
}

namespace {

// A Q8_K activation row laid out once for dot_iq4_xs_avx2_rows, per 32-quant sub-block: its first
// and second halves twice over ([a0..15 | a0..15], [a16..31 | a16..31]) and their magnitudes.
struct alignas(32) Iq4xsSubActivation {
    __m256i half[2];
    __m256i half_abs[2];
};

LS_AVX2 void iq4_xs_prepare_activation(int64_t nb, const block_q8_K* a, Iq4xsSubActivation* out) {
    for (int64_t b = 0; b < nb; ++b)
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            Iq4xsSubActivation& x = out[b * (kQK_K / 32) + ib];
            const __m256i q8 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs + 32 * ib));
            x.half[0] = _mm256_permute2x128_si256(q8, q8, 0x00);
            x.half[1] = _mm256_permute2x128_si256(q8, q8, 0x11);
            for (int h = 0; h < 2; ++h) x.half_abs[h] = _mm256_sign_epi8(x.half[h], x.half[h]);
        }
}

// iq4_xs_scale of sub-blocks 0..7 as int16, row x's in the low half, row y's in the high half. A
// block's first eight bytes are d, scales_h, scales_l: sub-block ib's low four bits are nibble
// ib % 2 of scales_l[ib / 2], its high two bits are bits 2ib, 2ib + 1 of scales_h (moved to the
// top of the lane by a multiply, then down to bits 4-5).
LS_AVX2 inline __m256i iq4_xs_scales_of_two(const block_iq4_xs* x, const block_iq4_xs* y) {
    const __m256i head = _mm256_set_m128i(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(y)),
                                          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x)));
    const __m256i low_bytes = _mm256_broadcastsi128_si256(_mm_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1));
    const __m256i high_word = _mm256_broadcastsi128_si256(_mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
    const __m256i l = _mm256_shuffle_epi8(head, low_bytes);
    const __m256i nib = _mm256_and_si256(_mm256_blend_epi16(l, _mm256_srli_epi16(l, 4), 0xAA), _mm256_set1_epi16(0x0F));
    const __m256i h = _mm256_mullo_epi16(_mm256_shuffle_epi8(head, high_word),
                                         _mm256_setr_epi16(1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1,  //
                                                           1 << 14, 1 << 12, 1 << 10, 1 << 8, 1 << 6, 1 << 4, 1 << 2, 1));
    const __m256i top = _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<int16_t>(0xC000))), 10);
    return _mm256_sub_epi16(_mm256_or_si256(nib, top), _mm256_set1_epi16(32));
}

// Four IQ4_XS rows against one Q8_K row, each row's result exactly dot_iq4_xs_avx2's: the eight
// int32 lanes of a super-block (lane l: the sum over its sub-blocks of scale * w[4l..4l+3] .
// a[4l..4l+3], exact in any order), then acc = fma(d_w * d_a, float(lanes), acc) and hsum8. Two
// rows' packed bytes share a register, so their lanes are summed as [r 0-3 | r+1 0-3] and
// [r 4-7 | r+1 4-7] (as dot_iq4_nl_four_rows) and put back in order once a super-block; the
// activation's halves and magnitudes come prepared, the weights' signs moved onto the activation
// (the same pair sums); the sub-block scales of both rows of a pair sit in one register, each
// sub-block's broadcast by a byte shuffle.
LS_AVX2 void dot_iq4_xs_four_rows(int64_t n, const char* w, uint64_t row_bytes, const block_q8_K* a,
                                  const Iq4xsSubActivation* act, float* out) {
    const int64_t nb = n / kQK_K;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nl.v)));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const block_iq4_xs* rows[4];
    for (int r = 0; r < 4; ++r) rows[r] = reinterpret_cast<const block_iq4_xs*>(w + r * row_bytes);
    __m256 acc[4];
    for (__m256& x : acc) x = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        // The next four rows' super-block fetched meanwhile (136 bytes of each row: 544, nine lines).
        const char* next = w + 4 * row_bytes + b * 4 * sizeof(block_iq4_xs);
        for (int l = 0; l < 9; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T0);
        __m256i lanes[2][2];  // [pair][lanes 0-3 / 4-7 of both rows]
        __m256i sv[2];        // [pair]: the eight sub-block scales of each row, int16
        for (int p = 0; p < 2; ++p) {
            lanes[p][0] = lanes[p][1] = _mm256_setzero_si256();
            sv[p] = iq4_xs_scales_of_two(&rows[2 * p][b], &rows[2 * p + 1][b]);
        }
        for (int ib = 0; ib < kQK_K / 32; ++ib) {
            const Iq4xsSubActivation& x = act[b * (kQK_K / 32) + ib];
            const __m256i pick = _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * ib));  // int16 ib of each half
            for (int p = 0; p < 2; ++p) {
                const __m256i packed = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(rows[2 * p + 1][b].qs + 16 * ib),
                                                           reinterpret_cast<const __m128i*>(rows[2 * p][b].qs + 16 * ib));
                const __m256i w_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(packed, low4));
                const __m256i w_hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4));
                const __m256i s = _mm256_shuffle_epi8(sv[p], pick);
                lanes[p][0] = _mm256_add_epi32(lanes[p][0],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(x.half_abs[0], _mm256_sign_epi8(w_lo, x.half[0])), s));
                lanes[p][1] = _mm256_add_epi32(lanes[p][1],
                    _mm256_madd_epi16(_mm256_maddubs_epi16(x.half_abs[1], _mm256_sign_epi8(w_hi, x.half[1])), s));
            }
        }
        for (int p = 0; p < 2; ++p)
            for (int q = 0; q < 2; ++q) {
                const int r = 2 * p + q;
                const __m256i l = q == 0 ? _mm256_permute2x128_si256(lanes[p][0], lanes[p][1], 0x20)
                                         : _mm256_permute2x128_si256(lanes[p][0], lanes[p][1], 0x31);
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(_cvtsh_ss(rows[r][b].d) * a[b].d), _mm256_cvtepi32_ps(l), acc[r]);
            }
    }
    for (int r = 0; r < 4; ++r) out[r] = hsum8(acc[r]);
}

}  // namespace

LS_AVX2 void dot_iq4_xs_avx2_rows(int64_t n, const void* w, uint64_t row_bytes, int64_t count, const block_q8_K* a,
                                  float* out) {
    const char* rows = static_cast<const char*>(w);
    int64_t r = 0;
    if (count >= 4) {
        thread_local std::vector<Iq4xsSubActivation> act;
        act.resize(static_cast<size_t>(n / 32));
        iq4_xs_prepare_activation(n / kQK_K, a, act.data());
        for (; r + 4 <= count; r += 4) dot_iq4_xs_four_rows(n, rows + r * row_bytes, row_bytes, a, act.data(), out + r);
    }
    for (; r < count; ++r) out[r] = dot_iq4_xs_avx2(n, reinterpret_cast<const block_iq4_xs*>(rows + r * row_bytes), a);
}

LS_AVX2 float dot_iq4_xs_panel_avx2(int64_t n, const block_iq4_xs* w, const block_q8_K* a) {
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const __m256i lanes = iq4_xs_lanes(w[b], a[b]);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        const int32_t s = _mm_cvtsi128_si32(_mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1)));  // exact in any order
        sum = std::fma(static_cast<float>(s), _cvtsh_ss(w[b].d) * a[b].d, sum);
    }
    return sum;
}

}  // namespace ls

namespace ls {

// quantize_row_q8_K_ref eight values at a time. The largest magnitude is found with MAXPS, which
// keeps its second operand when either is NaN, so NaNs are skipped as the scalar `ax > amax` skips
// them; its sign comes from the first value of that magnitude, as in the scalar loop. The rounding
// adds 1.5 * 2^23 and keeps the low mantissa bits like nearest_int, and each int32 keeps its low
// byte like the scalar cast, so every byte is the same for any input.
LS_AVX2 void quantize_row_q8_K_avx2(const float* x, block_q8_K* y, int64_t n) {
    const __m256 sign_bit = _mm256_set1_ps(-0.f);
    for (int64_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j)), m);
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, m);
        float amax = 0;
        for (float v : lanes) amax = std::max(amax, v);
        if (amax == 0) {
            std::memset(&y[i], 0, sizeof(block_q8_K));
            continue;
        }
        const __m256 target = _mm256_set1_ps(amax);
        float max = 0;
        for (int j = 0; j < kQK_K; j += 8) {
            const int hits = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + j)), target, _CMP_EQ_OQ));
            if (hits != 0) {
                max = x[j + __builtin_ctz(static_cast<unsigned>(hits))];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 vscale = _mm256_set1_ps(iscale);
        const __m256 magic = _mm256_set1_ps(12582912.f);
        const __m256i mantissa = _mm256_set1_epi32(0x007fffff);
        const __m256i bias = _mm256_set1_epi32(0x00400000);
        const __m256i top = _mm256_set1_epi32(127);
        // Byte 0 of each int32 lane, to the low 4 bytes of each 128-bit half.
        const __m256i low_bytes = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                                   0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
        for (int j = 0; j < kQK_K; j += 8) {
            const __m256 biased = _mm256_add_ps(_mm256_mul_ps(vscale, _mm256_loadu_ps(x + j)), magic);
            __m256i q = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(biased), mantissa), bias);
            q = _mm256_min_epi32(q, top);
            const __m256i b = _mm256_shuffle_epi8(q, low_bytes);
            const uint32_t lo = static_cast<uint32_t>(_mm256_extract_epi32(b, 0));
            const uint32_t hi = static_cast<uint32_t>(_mm256_extract_epi32(b, 4));
            const uint64_t bytes = lo | (static_cast<uint64_t>(hi) << 32);
            std::memcpy(y[i].qs + j, &bytes, 8);
        }
        const __m256i ones = _mm256_set1_epi16(1);
        for (int j = 0; j < kQK_K / 16; j += 2) {  // two sums of 16 bytes
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[i].qs + 16 * j));
            const __m256i lo16 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v));
            const __m256i hi16 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1));
            // Pairs to int32, then the eight int32 of each 16-byte group summed.
            const __m256i s = _mm256_hadd_epi32(_mm256_madd_epi16(lo16, ones), _mm256_madd_epi16(hi16, ones));
            alignas(32) int32_t p[8];
            _mm256_store_si256(reinterpret_cast<__m256i*>(p), s);
            // hadd lanes: p[0..1] lo's low half, p[2..3] hi's low half, p[4..5] lo's high, p[6..7] hi's high.
            y[i].bsums[j] = static_cast<int16_t>(p[0] + p[1] + p[4] + p[5]);
            y[i].bsums[j + 1] = static_cast<int16_t>(p[2] + p[3] + p[6] + p[7]);
        }
        y[i].d = 1 / iscale;
    }
}

// Decoding: `count` K-quant rows against one activation, each row's bits dot_*_avx2's. The rows
// run in one call (the kernel chosen once, not per row; Q4_K's inlined), its prefetch running on
// into the next rows.
LS_AVX2 bool dot_k_quant_avx2_run(GgmlType type, int64_t n, const void* w, uint64_t row_bytes, int64_t count,
                                  const block_q8_K* a, float* out) {
    if (n <= 0 || n % kQK_K != 0) return false;
    const char* rows = static_cast<const char*>(w);
    switch (type) {
        case GgmlType::Q4_K:
            for (int64_t r = 0; r < count; ++r)
                out[r] = q4_K_row(n, reinterpret_cast<const block_q4_K*>(rows + r * row_bytes), a);
            return true;
        case GgmlType::Q5_K:
            for (int64_t r = 0; r < count; ++r)
                out[r] = dot_q5_K_avx2(n, reinterpret_cast<const block_q5_K*>(rows + r * row_bytes), a);
            return true;
        case GgmlType::Q6_K:
            for (int64_t r = 0; r < count; ++r)
                out[r] = dot_q6_K_avx2(n, reinterpret_cast<const block_q6_K*>(rows + r * row_bytes), a);
            return true;
        default:
            return false;
    }
}

}  // namespace ls
