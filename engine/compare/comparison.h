// Comparison of a run of ours with a reference, event by event: metrics, a status, the first
// divergent event in our execution order, and the reference tensors nothing of ours matched.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "engine/compare/metrics.h"
#include "engine/compare/reference.h"

namespace ls {

// kUnusable: paired with a reference tensor that holds nothing to compare (zero elements); it is
// neither ok nor the first divergence, and a comparison that has one does not pass.
enum class CompareStatus { kOk, kWarn, kDiverged, kNoReference, kUnusable };
const char* compare_status_name(CompareStatus status);

// Where a warn or diverged event's error comes from (engine/compare/local_error.h): its own op
// (kLocal), or only its inputs (kInherited). kNotComputed: not asked (ok events, no model);
// kUnknown: asked, but the reference lacks an input (local_why says which).
enum class LocalOrigin { kNotComputed, kUnknown, kLocal, kInherited };
const char* local_origin_name(LocalOrigin origin);  // "", "unknown", "local", "inherited"

struct CompareThresholds {
    double warn_nmse = 1e-6;      // above: warn
    double diverged_nmse = 1e-4;  // above: diverged (NaN/Inf mismatches always diverge)
    int top_k = 5;                // logits: overlap of the top-k token sets
    // Judge each event against the noise a correct engine shows against this kind of reference
    // when no CPU variant reproduces it (see apply_noise_floor); off when the user set thresholds.
    bool noise_floor = true;
};

// How far above its noise floor an event may be before it is warn or diverged.
inline constexpr double kFloorWarnFactor = 10, kFloorDivergedFactor = 100;

struct EventComparison {
    int64_t event_index = -1;  // our execution order
    std::string name;          // dump name of our event
    std::string ref_name;      // the reference tensor it was paired with ("" when none)
    // The engines' own names where a naming convention gave llama.cpp's (tensor_names.h), else "".
    std::string source_name, ref_source_name;
    CompareStatus status = CompareStatus::kNoReference;
    Metrics metrics;
    bool partial = false;      // the reference has only some values (a text log)
    double sum_rel_error = 0;  // partial references: |sum ours - sum ref| / max(|sum ref|, tiny)
    std::string note;          // alignment ("output rows 4"), why unpaired, what was partial
    // Logits (result_output against llama_logits or result_output):
    int top_k_overlap = -1;    // |top-k ours ∩ top-k ref|
    int ref_top1_rank = -1;    // rank of the reference's argmax among our logits (0 = also our top-1)
    double floor_nmse = -1;    // the noise floor it was judged against (-1: none)
    // Our op run on the reference's own inputs, against the reference's output (local_error.h).
    LocalOrigin local_origin = LocalOrigin::kNotComputed;
    double local_nmse = -1;    // -1: not measured
    std::string local_why;     // kUnknown: why it could not be measured
    std::string local_weight;  // the GGUF weight the local op read: a product's, or token_embd ("" when none)
};

// Re-judges a compared event against a noise floor: warn above max(warn, 10 floor), diverged
// above max(diverged, 100 floor); NaN/Inf where the reference is finite stays diverged.
void apply_noise_floor(EventComparison& c, double floor_nmse, const CompareThresholds& thresholds);

// A tensor of ours on the host (the comparison never touches a device).
struct HostTensor {
    std::string name;  // dump name
    int64_t ne[4] = {1, 1, 1, 1};
    const float* data = nullptr;
};

// Pairs our events with the reference's tensors: by dump name; llama.cpp's unnamed nodes by op
// and source (the attention output projection -> attn_out-N, the flash-attention node ->
// kqv_out-N, the output-row GET_ROWS -> the rows of its source); llama_logits -> result_output.
class Comparator {
public:
    Comparator(const ReferenceDump& reference, CompareThresholds thresholds = {});

    EventComparison compare(int64_t event_index, const HostTensor& ours);

    // compare() in two steps, for comparing many events on several threads: pair() finds the
    // reference tensor for our dump name and marks it used (nullptr: none; one thread at a time),
    // measure() compares with it, reading only (any number of threads at once).
    const RefTensor* pair(const std::string& our_name);
    EventComparison measure(int64_t event_index, const HostTensor& ours, const RefTensor* paired) const;

    // Reference tensors (graph nodes and logits) that no compared event of ours used, with why
    // they cannot be paired when known ("a view of X", "KV-cache tensor").
    std::vector<std::pair<std::string, std::string>> unmatched() const;

    const CompareThresholds& thresholds() const { return thresholds_; }
    const ReferenceDump& reference() const { return ref_; }

private:
    CompareStatus status_of(const Metrics& m) const;
    void fill_logit_ranks(const float* ours, const float* ref, int64_t n_vocab, EventComparison* c) const;

    const ReferenceDump& ref_;
    CompareThresholds thresholds_;
    std::map<std::string, std::vector<const RefTensor*>> by_our_name_;  // our dump name -> reference tensors
    std::map<std::string, bool> used_;
};

struct ComparisonSummary {
    int ok = 0, warn = 0, diverged = 0, no_reference = 0, unusable = 0;
    int64_t first_divergent = -1;  // index into the comparisons, in execution order
    // Events whose values were measured against the reference (ok, warn or diverged).
    int compared() const { return ok + warn + diverged; }
};
ComparisonSummary summarize(const std::vector<EventComparison>& comparisons);

}  // namespace ls
