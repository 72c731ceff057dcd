// CUDA backend: summary statistics of an f32 tensor (min, max, sum, sum of squares, NaN and Inf
// counts) by block reduction. Included by .cu sources and by tests of the emulated kernels.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/histogram.h"
#include "kernels/simt/simt.h"

namespace ls::cuda {

// min/max/sum/sumsq cover the finite values only; with none, min is +inf and max is -inf.
struct TensorStats {
    float min;
    float max;
    double sum;
    double sumsq;
    unsigned long long nan_count;
    unsigned long long inf_count;
};

// Device bytes of the scratch space cuda_tensor_stats needs.
size_t cuda_tensor_stats_workspace_bytes();

// Reduces dev_x (n floats) into *dev_out (device memory), asynchronously on `stream`;
// dev_workspace holds cuda_tensor_stats_workspace_bytes() bytes of device memory.
cudaError_t cuda_tensor_stats(const float* dev_x, int64_t n, void* dev_workspace, TensorStats* dev_out,
                              cudaStream_t stream);

// Adds the histogram of dev_x's finite values to dev_hist (kHistogramBinCount counters, device
// memory), binned as histogram_bin_of(v, min, max, scale) bins them with the min and max of the
// statistics cuda_tensor_stats left in *dev_stats (earlier on `stream`) and their RMS as the scale,
// as the host derives them from a copy; nothing is counted when no value is finite. The statistics
// and the histogram can then be read back in one copy. Asynchronous on `stream`.
cudaError_t cuda_tensor_histogram_from_stats(const float* dev_x, int64_t n, const TensorStats* dev_stats,
                                             unsigned long long* dev_hist, cudaStream_t stream);

}  // namespace ls::cuda
