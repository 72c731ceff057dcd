// What a run will allocate, by part, known before anything is allocated: a run that cannot fit is
// refused with the numbers ("needs about 512 GiB: attention scores ... ; 21.3 GiB available")
// rather than dying in std::bad_alloc, or swapping, halfway.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/result.h"
#include "kernels/backend.h"

namespace ls {

struct MemoryPart {
    std::string what;    // "attention scores"
    std::string detail;  // "n_ctx 16777216 x ubatch 512 x 8 heads x 2 buffers x 4 bytes"
    uint64_t bytes = 0;
};

struct MemoryEstimate {
    std::vector<MemoryPart> parts;

    void add(std::string what, std::string detail, uint64_t bytes);
    uint64_t total() const;  // saturates at UINT64_MAX
    // "about 512 GiB: attention scores 512 GiB (n_ctx ...), KV cache 160 MiB (...), ...", largest
    // part first.
    std::string describe() const;
};

// An error (kBadInput: a refused size) when `need` does not fit in what `memory` has left:
// "<what> needs about X: <parts>; Y available in <where>. <hint>". Nothing is checked when the
// backend cannot tell how much it has.
Status check_memory(const std::string& what, const MemoryEstimate& need, const BackendMemory& memory,
                    const std::string& hint);

}  // namespace ls
