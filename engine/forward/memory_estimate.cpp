// Memory estimates and the check that refuses what does not fit.
#include "engine/forward/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/common/host_memory.h"

namespace ls {

void MemoryEstimate::add(std::string what, std::string detail, uint64_t bytes) {
    parts.push_back({std::move(what), std::move(detail), bytes});
}

uint64_t MemoryEstimate::total() const {
    uint64_t sum = 0;
    for (const MemoryPart& p : parts) sum = add_sat(sum, p.bytes);
    return sum;
}

std::string MemoryEstimate::describe() const {
    std::vector<const MemoryPart*> sorted;
    for (const MemoryPart& p : parts)
        if (p.bytes > 0) sorted.push_back(&p);
    std::stable_sort(sorted.begin(), sorted.end(), [](const MemoryPart* a, const MemoryPart* b) { return a->bytes > b->bytes; });
    const uint64_t sum = total();
    std::string out = sum == UINT64_MAX ? "more than 16 EiB" : "about " + bytes_text(sum);
    for (size_t i = 0; i < sorted.size(); ++i) {
        const MemoryPart& p = *sorted[i];
        out += fmt::format("{}{} {}", i == 0 ? ": " : ", ", p.what, p.bytes == UINT64_MAX ? "> 16 EiB" : bytes_text(p.bytes));
        if (!p.detail.empty()) out += " (" + p.detail + ")";
    }
    return out;
}

Status check_memory(const std::string& what, const MemoryEstimate& need, const BackendMemory& memory,
                    const std::string& hint) {
    if (!memory.known || need.total() <= memory.available_bytes) return {};
    return make_error(ErrorCode::kBadInput, fmt::format("{} needs {}; {} available in {}.{}{}", what, need.describe(),
                                                        bytes_text(memory.available_bytes), memory.where,
                                                        hint.empty() ? "" : " ", hint));
}

}  // namespace ls
