// The capture store and its eviction rule.
#include "engine/session/capture_store.h"

#include "engine/session/breakpoint.h"

namespace ls {

bool is_pinned_capture(const EventInfo& info) {
    return glob_match("kq_soft_max-*", info.base_name) || info.base_name == "result_output" ||
           glob_match("ffn_moe_logits-*", info.base_name) || glob_match("ffn_moe_probs-*", info.base_name) ||
           glob_match("ffn_moe_topk-*", info.base_name) || glob_match("ffn_moe_weights*", info.base_name);
}

void CaptureStore::set_policy(CapturePolicy policy) {
    policy_ = std::move(policy);
    clear();
}

bool CaptureStore::wants(const EventInfo& info) const {
    switch (policy_.kind) {
        case CapturePolicy::Kind::kAll:
        case CapturePolicy::Kind::kMemoryBudget:
            return true;
        case CapturePolicy::Kind::kNamePatterns:
            for (const std::string& p : policy_.patterns)
                if (glob_match(p, info.base_name) || glob_match(p, info.name)) return true;
            return false;
    }
    return false;
}

void CaptureStore::erase(int64_t index) {
    auto it = tensors_.find(index);
    if (it == tensors_.end()) return;
    bytes_ -= it->second->bytes();
    tensors_.erase(it);
    view_.reset();
}

bool CaptureStore::put(std::shared_ptr<const CapturedTensor> tensor) {
    const int64_t index = tensor->info.index;
    erase(index);
    const size_t need = tensor->bytes();
    if (policy_.kind == CapturePolicy::Kind::kMemoryBudget) {
        if (need > policy_.budget_bytes) {
            ++rejected_;
            return false;
        }
        // Oldest unpinned first: the map is ordered by event index.
        for (auto it = tensors_.begin(); it != tensors_.end() && bytes_ + need > policy_.budget_bytes;) {
            if (is_pinned_capture(it->second->info)) {
                ++it;
                continue;
            }
            bytes_ -= it->second->bytes();
            it = tensors_.erase(it);
            ++evicted_;
        }
        if (bytes_ + need > policy_.budget_bytes) {
            ++rejected_;
            view_.reset();
            return false;
        }
    }
    bytes_ += need;
    tensors_.emplace(index, std::move(tensor));
    view_.reset();
    return true;
}

void CaptureStore::clear() {
    tensors_.clear();
    bytes_ = 0;
    evicted_ = rejected_ = 0;
    view_.reset();
}

std::shared_ptr<const CaptureMap> CaptureStore::view() {
    if (!view_) view_ = std::make_shared<const CaptureMap>(tensors_);
    return view_;
}

}  // namespace ls
