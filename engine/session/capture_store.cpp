// The capture store and its eviction rule.
#include "engine/session/capture_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "engine/session/breakpoint.h"

namespace ls {

bool is_pinned_capture(const EventInfo& info) {
    return glob_match("kq_soft_max-*", info.base_name) || info.base_name == "result_output" ||
           glob_match("l_out-*", info.base_name) || info.base_name == "embd" ||
           glob_match("ffn_moe_logits-*", info.base_name) || glob_match("ffn_moe_probs-*", info.base_name) ||
           glob_match("ffn_moe_topk-*", info.base_name) || glob_match("ffn_moe_weights*", info.base_name);
}

Result<size_t> capture_budget_bytes(const std::string& text, uint64_t available_bytes) {
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    if (text.empty()) return static_cast<size_t>(std::max<uint64_t>(available_bytes / 2, 256 * kMiB));
    auto refuse = [&](const std::string& why) {
        return make_error(ErrorCode::kUsage, fmt::format("--capture-budget {}: {}; give bytes with an optional unit (512M, 4G, "
                                                         "1.5GiB) or a share of the available memory (25%)",
                                                         text, why));
    };
    size_t used = 0;
    double number = 0;
    try {
        number = std::stod(text, &used);
    } catch (const std::exception&) {
        return refuse("not a number");
    }
    if (!(number > 0) || !std::isfinite(number)) return refuse("not a positive size");
    std::string unit = text.substr(used);
    for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    double bytes = 0;
    if (unit == "%") {
        if (number > 100) return refuse("more than all of the memory");
        bytes = static_cast<double>(available_bytes) * number / 100.0;
    } else {
        static const std::pair<const char*, double> kUnits[] = {
            {"", 1},           {"B", 1},          {"K", 1024.0},         {"KB", 1024.0},         {"KIB", 1024.0},
            {"M", 1048576.0},  {"MB", 1048576.0}, {"MIB", 1048576.0},    {"G", 1073741824.0},    {"GB", 1073741824.0},
            {"GIB", 1073741824.0}, {"T", 1099511627776.0}, {"TB", 1099511627776.0}, {"TIB", 1099511627776.0}};
        const auto* u = std::find_if(std::begin(kUnits), std::end(kUnits), [&](const auto& k) { return unit == k.first; });
        if (u == std::end(kUnits)) return refuse("unknown unit '" + text.substr(used) + "'");
        bytes = number * u->second;
    }
    if (bytes < static_cast<double>(kMiB)) return refuse("less than 1 MiB");
    if (bytes >= 9.0e18) return refuse("too large");
    return static_cast<size_t>(bytes);
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
