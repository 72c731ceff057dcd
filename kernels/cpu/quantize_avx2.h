// The K-quant quantizers' expensive part on AVX2, with the scalar code's bits.
#pragma once

#include <cstdint>

namespace ls {

// Q4_K / Q5_K's scale and min search over one 256-value super-block: for each 32-value sub-block j,
// ggml's make_qkx2_quants with the weights av_x + |x| (av_x the sub-block's RMS), candidate
// scales (rmin + rdelta * is + nmax) / (max - min) for is = 0..nstep. The eight sub-blocks run in
// the eight lanes, each lane doing the scalar code's operations in its order (no FMA), so
// scales[j], mins[j] (the min negated, >= 0) and L[32 j + i] (quants in [0, nmax]) are its bits.
// Needs AVX2 (avx2_kernels_usable()).
void scale_min_search_avx2(const float* x, int nmax, float rmin, float rdelta, int nstep, float scales[8], float mins[8],
                           uint8_t L[256]);

}  // namespace ls
