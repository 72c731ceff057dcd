// Bit-exact conversions between f32 and the 16-bit float formats (IEEE half, bfloat16), shared by
// host and device code. Plain integer bit math, so nvcc and g++ give the same bits for every input.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/common/hd.h"

namespace ls {

LS_HD inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
#endif
}

LS_HD inline float f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
#endif
}

// Exact widening. A signaling NaN comes back quiet (payload kept), as the F16C instruction and
// ggml's scalar fallback both do.
LS_HD inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    int32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    if (exp == 0x1f) {
        const uint32_t quiet = mant != 0 ? 0x00400000u : 0u;
        return f32_from_bits(sign | 0x7f800000u | (mant << 13) | quiet);
    }
    if (exp == 0) {
        if (mant == 0) return f32_from_bits(sign);
        // Subnormal half: every one of them is a normal f32, so shift the leading 1 into place.
        exp = 1;
        while ((mant & 0x400u) == 0) {
            mant <<= 1;
            --exp;
        }
        mant &= 0x3ffu;
    }
    return f32_from_bits(sign | (static_cast<uint32_t>(exp + 112) << 23) | (mant << 13));
}

// Round to nearest, ties to even; overflow gives inf; every NaN becomes sign|0x7e00, which is what
// ggml's scalar conversion (the one its quantizers use) produces.
LS_HD inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u;
    // 65520 is halfway between the largest half (65504) and 2^16; the tie goes to the even side, inf.
    if (ax >= 0x477ff000u) return sign | 0x7c00u;
    if (ax < 0x38800000u) {
        // Result is a subnormal half (or zero): round |f| / 2^-24 to an integer.
        if (ax <= 0x33000000u) return sign;  // <= 2^-25: rounds to zero (the tie is even)
        const uint32_t e = ax >> 23;
        const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;  // 14..24
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return sign | static_cast<uint16_t>(h);
    }
    // Normal half: rebias the exponent; a mantissa carry correctly bumps the exponent.
    uint32_t h = (ax - 0x38000000u) >> 13;
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
}

LS_HD inline float bf16_to_fp32(uint16_t b) { return f32_from_bits(static_cast<uint32_t>(b) << 16); }

// ggml's rounding: to nearest, ties to even; NaN keeps its top bits and is forced quiet.
// Subnormals are rounded like any other value (not flushed).
LS_HD inline uint16_t fp32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64u);
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace ls
