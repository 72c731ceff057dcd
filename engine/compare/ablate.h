// Which tensors make one format of a model answer differently from another: the base file run with
// one tensor (or one layer's tensors) taken from the other file at a time, each run's final
// distributions against the base's own run (KL, as llama-perplexity --kl-divergence measures a
// quantized model against its source).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "engine/compare/output_kl.h"
#include "engine/forward/forward.h"

namespace ls {

struct AblationUnit {
    std::string label;                 // the tensor's name, or "layer N"
    std::vector<std::string> tensors;  // what is taken from the donor
};

// The units of two files of one model (check_same_model): every tensor whose type or bytes differ,
// one at a time; or, `by_layer`, those of each layer together (tensors outside the layers one at a
// time). File order.
std::vector<AblationUnit> ablation_units(const Model& base, const Model& donor, bool by_layer);

// The final logits of every position of one evaluation of `tokens`, row after row.
struct FinalLogits {
    int64_t n_logits = 0;  // per row
    std::vector<float> values;
    bool cancelled = false;  // abandoned: no values
    int64_t rows() const { return n_logits > 0 ? static_cast<int64_t>(values.size()) / n_logits : 0; }
};
// Runs `tokens` through `model` on a backend opened for it (all_logits set); `cancel`, when it
// becomes true, abandons the evaluation (`cancelled`, no values).
Result<FinalLogits> run_final_logits(const Model& model, const std::string& backend, int n_threads, ForwardOptions options,
                                     const std::vector<int32_t>& tokens, const std::atomic<bool>* cancel = nullptr);
// Row by row (the positions 0..rows-1); both must have the same shape.
std::vector<PositionKl> compare_final_logits(const FinalLogits& reference, const FinalLogits& ours);

struct AblationRun {
    AblationUnit unit;
    KlStats kl;      // against the reference run (the base's; restoring, the donor's)
    double seconds = 0;
};
struct Ablation {
    KlStats all;                   // the two files' own runs: the whole difference
    std::vector<AblationRun> runs;  // in the units' order; fewer when cancelled
    bool cancelled = false;
    double seconds = 0;            // every run, the two whole ones included
};
struct AblationOptions {
    ForwardOptions forward;
    std::string backend = "auto";
    int n_threads = 0;
    std::vector<int32_t> tokens;
    // false: the base is the reference (F16 with one tensor quantized at a time); true: the donor
    // is (the quantized file with one tensor restored from F16 at a time).
    bool restore = false;
    const std::atomic<bool>* cancel = nullptr;
    // After each run: how many of the units are done, and the latest.
    std::function<void(size_t done, size_t total, const AblationRun& run)> progress;
};
// `base` with each unit taken from `donor` in turn (Model::with_tensors_from), each run's KL
// against the reference file's own run. Stops early, `cancelled` set, when `cancel` becomes true.
Result<Ablation> ablate(const Model& base, const Model& donor, const std::vector<AblationUnit>& units,
                        const AblationOptions& options);

}  // namespace ls
