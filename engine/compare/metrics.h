// Per-tensor agreement metrics between our values and a reference, and the alignment of a tensor
// of ours with the reference's (which may have dropped rows or padded columns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compare/reference.h"
#include "tensor.h"

namespace ls {

struct Metrics {
    int64_t n = 0;            // values compared
    int64_t n_nonfinite = 0;  // positions where either side is NaN/Inf and they differ
    double max_abs = 0, mean_abs = 0;
    double rel_l2 = 0;   // |ours - ref|_2 / |ref|_2
    double nmse = 0;     // sum (ours - ref)^2 / sum ref^2  (ggml's test-backend-ops measure)
    double cosine = 1, pearson = 1;
};

Metrics compute_metrics(const float* ours, const float* ref, int64_t n);

// Our values and the reference's, paired element by element.
struct AlignedValues {
    std::vector<float> ours, ref;
    std::string note;  // how they were aligned when not one to one ("output rows 4", ...)
};

// Pairs a tensor of ours (host f32 data, ggml ne) with a reference tensor:
//  - same shape: one to one;
//  - the reference kept only the output rows (llama.cpp's last layer): our columns out_ids;
//  - the reference's ne0 is larger (KV cells padded to 256): our cells against its first ones.
// Returns false with `why` when the shapes cannot be paired.
bool align_with_reference(const float* ours, const int64_t ours_ne[4], const ReferenceDump& dump, const RefTensor& ref,
                          AlignedValues* out, std::string* why);

}  // namespace ls
