// The order of exact mode's f32 dot products. Every exact-mode kernel (the portable code, the AVX2
// and AVX-512 kernels, tiled prompt matmuls) sums in it, so results do not depend on the kernel,
// the batch size or the thread count:
//  - product i is fused (fma) into lane i % 16 of one accumulator, in order of i;
//  - the lanes are folded in half (lane l + lane l + 8, the halves of a 512-bit register) and the
//    eight sums added ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7));
//  - the n % 16 leftover products are fused into that sum in order.
// Sixteen lanes are one AVX-512 register (two AVX2 registers): a row's 16 consecutive weights meet
// 16 consecutive activations, so the fast kernels read both straight from memory. One accumulator
// per output gives long dependency chains; the fast kernels hide them by running several outputs
// (rows, columns) at once, never by splitting an output's sum.
#pragma once

#include <cmath>
#include <cstdint>

namespace ls {

constexpr int kExactLanes = 16;

inline float exact_lane_sum(const float* l) {
    float h[8];
    for (int i = 0; i < 8; ++i) h[i] = l[i] + l[i + 8];
    return ((h[0] + h[1]) + (h[2] + h[3])) + ((h[4] + h[5]) + (h[6] + h[7]));
}

// The portable exact dot product (a library fma where the processor has none).
inline float exact_dot_f32(const float* a, const float* b, int64_t n) {
    float lanes[kExactLanes] = {};
    int64_t i = 0;
    for (; i + kExactLanes <= n; i += kExactLanes)
        for (int l = 0; l < kExactLanes; ++l) lanes[l] = std::fma(a[i + l], b[i + l], lanes[l]);
    float sum = exact_lane_sum(lanes);
    for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

}  // namespace ls
