// Runs a model the way a reference was made (its prompt tokens; each later decode call fed the
// reference's generated token, so one divergence does not cascade into different inputs) and
// compares every event with the reference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "engine/compare/comparison.h"
#include "engine/forward/forward.h"

namespace ls {

// Host copies of our events by dump name, in execution order.
struct CapturedEvent {
    std::string name, base_name;
    Op op = Op::kNone;
    int layer = -1, decode = 0, ubatch = 0, occurrence = 1;
    int64_t ne[4] = {1, 1, 1, 1};
    std::vector<float> data;
};
struct CaptureLog {
    std::vector<CapturedEvent> events;
    std::map<std::string, size_t> by_name;
    const CapturedEvent* find(const std::string& dump_name) const {
        auto it = by_name.find(dump_name);
        return it == by_name.end() ? nullptr : &events[it->second];
    }
};

struct CompareRunOptions {
    ForwardOptions forward;
    CompareThresholds thresholds;
    std::vector<int32_t> prompt;  // empty: the reference's prompt tokens
    int n_decode = -1;            // decode calls to run; -1: as many as the reference has
    // llama mode: the llama.cpp CPU build to reproduce; unset: the reference's, from what it says
    // of its build and, when that leaves a choice, from which variant matches its first events.
    std::optional<LlamaIsa> llama_isa;
};

// What a comparison of two dumps read: the tensor pairs compared, the bytes of both sides' data
// and the wall time of the pass.
struct CompareVolume {
    int64_t tensors = 0;
    uint64_t bytes = 0;
    double seconds = 0;
};

struct CompareRunResult {
    std::vector<EventComparison> comparisons;  // one per event of ours, execution order
    ComparisonSummary summary;
    std::vector<std::pair<std::string, std::string>> unmatched;  // reference tensors left over
    // Our events. Model runs keep every event's values; dump comparisons keep only those of the
    // first divergent event (what the doctor transforms), the rest stay in the dump's file.
    CaptureLog captures;
    std::vector<int32_t> prompt;
    LlamaIsa llama_isa = LlamaIsa::kAvx2;  // llama mode: the variant the comparison ran
    std::string llama_isa_why;             // how it was chosen
    std::string noise_floor;               // which noise floor judged the events ("" none)
    CompareVolume volume;                  // dump comparisons only
};

Result<CompareRunResult> compare_with_reference(const Model& model, Backend& backend, const ReferenceDump& reference,
                                                const CompareRunOptions& options);

// Two dumps: `ours` event by event (its tensor order) against `reference`, in one pass over
// both files on `n_threads` threads (0: all cores), each tensor's metrics summed in element order
// by one thread. Tensor data is read in place from the mapped files and its pages given back once
// compared, so neither dump is held in memory.
CompareRunResult compare_dumps(const ReferenceDump& ours, const ReferenceDump& reference, const CompareThresholds& thresholds,
                               int n_threads = 0);

// For the doctor on two dumps with a model: reads from `ours` (the dump `result` compared as ours)
// the values of the events its transforms recompute the first divergent event from: the events of
// the same graph evaluation and layer before it, the embeddings and the previous layer's output.
// One layer of one evaluation at most is held in memory.
void load_doctor_inputs(CompareRunResult& result, const ReferenceDump& ours);

// For the KL of the final distributions on two dumps: reads from `ours` the values of every
// result_output event `result` compared (the logits: one row per decode call unless the dump kept
// every position's).
void load_output_logits(CompareRunResult& result, const ReferenceDump& ours);

}  // namespace ls
