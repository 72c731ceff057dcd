// Per-tensor agreement metrics between our values and a reference, and the alignment of a tensor
// of ours with the reference's (which may have dropped rows or padded columns).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "kernels/tensor.h"

namespace ls {

// The measures are taken over the positions where both sides are finite; NaN or Inf at the same
// position on both sides agree. With no such position (an all-NaN side) they are NaN: not measured.
struct Metrics {
    int64_t n = 0;            // values compared
    int64_t n_nonfinite = 0;  // positions where either side is NaN/Inf and they differ
    int64_t n_finite = 0;     // positions where both sides are finite: what the measures cover
    int64_t nan_ours = 0, inf_ours = 0, nan_ref = 0, inf_ref = 0;  // NaN and Inf values on each side
    double max_abs = 0, mean_abs = 0;
    double rel_l2 = 0;   // |ours - ref|_2 / |ref|_2
    double nmse = 0;     // sum (ours - ref)^2 / sum ref^2  (ggml's test-backend-ops measure)
    double cosine = 1, pearson = 1;
};

Metrics compute_metrics(const float* ours, const float* ref, int64_t n);

// Why NaN/Inf values make a comparison diverge, e.g. "reference has NaN in 4096 of 4096 values;
// no position where both are finite, nothing measured"; "" when they do not (none, or the same
// positions on both sides with finite values left to measure).
std::string nonfinite_reason(const Metrics& m);

// Our values and the reference's, paired element by element.
struct AlignedValues {
    std::vector<float> ours, ref;
    std::string note;  // how they were aligned when not one to one ("output rows 4", ...)
};

// Whether a tensor of ours pairs with the reference's element for element as both are stored: the
// same shape, or a reshape of it (the flash-attention node); `note` says which ("" or "reshaped").
bool pairs_one_to_one(const int64_t ours_ne[4], const int64_t ref_ne[4], std::string* note);

// Whether `ref` runs over KV cells along ne0 (the attention scores and weights kq-N and
// kq_soft_max-N), which llama.cpp pads: only such a tensor may be wider than ours.
bool kv_cells_along_ne0(const RefTensor& ref);

// Pairs a tensor of ours (host f32 data, ggml ne) with a reference tensor:
//  - same shape: one to one;
//  - the reference kept only the output rows (llama.cpp's last layer): our columns out_ids;
//  - the reference's ne0 is larger (KV cells padded to 256, kv_cells_along_ne0 tensors only): our
//    cells against its first ones.
// Returns false with `why` when the shapes cannot be paired.
bool align_with_reference(const float* ours, const int64_t ours_ne[4], const ReferenceDump& dump, const RefTensor& ref,
                          AlignedValues* out, std::string* why);

// Our full tensor against a partial reference (a text log: some printed values and the sum).
struct PartialComparison {
    Metrics metrics;          // compute_metrics over the sampled positions only
    int64_t n_samples = 0;    // reference values paired with ours
    int64_t n_total = 0;      // elements of the reference tensor
    bool has_sum = false;     // the reference gave a sum and it was compared
    double ours_sum = 0, ref_sum = 0;
    double sum_abs_err = 0;
    double sum_rel_err = 0;   // |ours_sum - ref_sum| / |ref_sum| (inf when ref_sum is 0 and they differ)
    double sum_err_l1 = 0;    // |ours_sum - ref_sum| / sum |ours|: robust when the sum cancels out
    std::string note;         // "12 of 4096 values and the sum" (+ how rows/cells were paired)
};

// Pairs the reference's samples with our values (same shape; only output rows kept: `out_ids`
// when it has one id per reference row, else the last rows, llama.cpp's default of logits for the
// last token; padded KV cells of kv_cells_along_ne0 tensors: samples beyond our cells are skipped
// and the sum takes them as 0, which they are after softmax). Returns false with `why` when the shapes cannot be paired or
// the reference has nothing to compare (a printout cut off at the end of a log).
bool compare_partial(const float* ours, const int64_t ours_ne[4], const RefTensor& ref, PartialComparison* out,
                     std::string* why, const std::vector<int32_t>& out_ids = {});

}  // namespace ls
