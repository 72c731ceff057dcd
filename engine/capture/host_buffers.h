// Host buffers for captured tensors that go back to a pool, not to the system, when their last
// reference drops. Fresh memory costs a page fault and the kernel's zeroing for every 4 KiB on
// first touch, several times what copying a tensor into it costs; a capture that reuses a buffer
// freed by an eviction or by the previous run (the same shapes come again) skips all of that.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace ls {

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
public:
    // Idle buffers beyond max_idle_bytes are freed as they come back.
    static std::shared_ptr<HostBufferPool> create(size_t max_idle_bytes = size_t{1} << 30);

    // A vector of n floats whose contents the caller overwrites (a reused buffer holds old values).
    // It comes back here when the last shared_ptr to it is released, from any thread; the pool
    // lives as long as any of its buffers.
    std::shared_ptr<std::vector<float>> take(size_t n);

    size_t idle_bytes() const;
    // Frees every idle buffer.
    void trim();

private:
    explicit HostBufferPool(size_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}
    void give_back(std::vector<float>* v);

    const size_t max_idle_bytes_;
    mutable std::mutex mu_;
    std::multimap<size_t, std::unique_ptr<std::vector<float>>> idle_;  // by capacity in floats
    size_t idle_bytes_ = 0;
};

}  // namespace ls
