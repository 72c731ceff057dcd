// Host copies of event tensors kept by a session, by a policy: all of them, chosen names, or a
// memory budget. What a snapshot holds is immutable, so views read it without locks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/session/event_plan.h"
#include "engine/util/result.h"

namespace ls {

// One event's f32 values in ggml order (ne0 fastest). Never modified once stored.
struct CapturedTensor {
    EventInfo info;
    std::shared_ptr<const std::vector<float>> values;
    size_t bytes() const { return values ? values->size() * sizeof(float) : 0; }
};
using CaptureMap = std::map<int64_t, std::shared_ptr<const CapturedTensor>>;  // by event index

struct CapturePolicy {
    enum class Kind { kAll, kNamePatterns, kMemoryBudget };
    Kind kind = Kind::kMemoryBudget;
    std::vector<std::string> patterns;  // kNamePatterns: globs over the base or dump name
    size_t budget_bytes = size_t{256} << 20;

    static CapturePolicy all() { return {Kind::kAll, {}, 0}; }
    static CapturePolicy names(std::vector<std::string> globs) { return {Kind::kNamePatterns, std::move(globs), 0}; }
    static CapturePolicy memory_budget(size_t bytes) { return {Kind::kMemoryBudget, {}, bytes}; }
};

// The capture budget a user asks for (`--capture-budget`): bytes with an optional unit ("512M",
// "4G", "1.5GiB", "300000000") or a share of `available_bytes` ("25%"); empty text gives the
// default, half of `available_bytes` (the memory available when the session starts) but at least
// 256 MiB. kUsage, naming the text, for anything else or a budget under 1 MiB.
Result<size_t> capture_budget_bytes(const std::string& text, uint64_t available_bytes);

// Names the views need whatever the budget (attention heatmaps, top-k logits, the router view, the
// logit lens): kq_soft_max-*, result_output, the layers' outputs l_out-* and the embeddings (the
// lens's positions), and the MoE router's ffn_moe_logits-*, _probs-*, _topk-*, _weights*.
bool is_pinned_capture(const EventInfo& info);

// The store. Eviction under kMemoryBudget, when a new tensor does not fit:
//   1. tensors larger than the whole budget are not kept;
//   2. unpinned tensors are evicted oldest first (lowest event index: the farthest behind the
//      cursor in a forward run) until the new one fits;
//   3. pinned tensors are never evicted; a tensor that still does not fit is not kept (a pinned one
//      included, so the budget always holds).
// The current event is the newest, so it is kept whenever it fits at all. bytes() <= budget always.
// Old snapshots may still hold evicted tensors until they are released: the budget bounds the
// store, not what callers keep alive.
class CaptureStore {
public:
    explicit CaptureStore(CapturePolicy policy = {}) : policy_(std::move(policy)) {}

    const CapturePolicy& policy() const { return policy_; }
    void set_policy(CapturePolicy policy);
    // Whether the policy wants this event's full tensor at all (before budget checks).
    bool wants(const EventInfo& info) const;
    // Stores (replacing any tensor of the same event index). Returns false when not kept.
    bool put(std::shared_ptr<const CapturedTensor> tensor);
    void clear();

    size_t bytes() const { return bytes_; }
    size_t size() const { return tensors_.size(); }
    int64_t evicted() const { return evicted_; }   // evictions since the last clear()
    int64_t rejected() const { return rejected_; } // tensors not kept for the budget
    // The current contents, immutable; a new map is built only after a change.
    std::shared_ptr<const CaptureMap> view();

private:
    void erase(int64_t index);

    CapturePolicy policy_;
    CaptureMap tensors_;
    size_t bytes_ = 0;
    int64_t evicted_ = 0, rejected_ = 0;
    std::shared_ptr<const CaptureMap> view_;
};

}  // namespace ls
