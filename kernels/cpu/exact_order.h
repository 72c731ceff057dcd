// The order of exact mode's f32 dot products. Every exact-mode kernel (the portable code, the AVX2
// kernels, tiled prompt matmuls) sums in it, so results do not depend on the kernel, the batch size
// or the thread count:
//  - product i is fused (fma) into lane i % 8 of one accumulator, in order of i;
//  - the lanes are added ((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7));
//  - the n % 8 leftover products are fused into that sum in order.
// One accumulator per output gives long dependency chains; the fast kernels hide them by running
// several outputs (rows, columns) at once, never by splitting an output's sum.
#pragma once

#include <cmath>
#include <cstdint>

namespace ls {

inline float exact_lane_sum(const float* l) {
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

// The portable exact dot product (a library fma where the processor has none).
inline float exact_dot_f32(const float* a, const float* b, int64_t n) {
    float lanes[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) lanes[l] = std::fma(a[i + l], b[i + l], lanes[l]);
    float sum = exact_lane_sum(lanes);
    for (; i < n; ++i) sum = std::fma(a[i], b[i], sum);
    return sum;
}

}  // namespace ls
