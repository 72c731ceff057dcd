// A read-only memory mapping of a whole file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "engine/util/result.h"

namespace ls {

class MappedFile {
public:
    static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const uint8_t* data() const { return data_; }
    uint64_t size() const { return size_; }

    // For a pass that reads the mapping front to back (threads a little out of order): gives back
    // the pages of [begin, begin + n) once read, with those before it in the same page table. A
    // read maps the pages around it too (the kernel's fault-around, which stays within one page
    // table), some of them given back before; each release takes those again. Pages given back
    // come back from the file when read again, so this never changes what the mapping reads; a
    // failure is ignored (it is a hint).
    void release_behind(const uint8_t* begin, uint64_t n) const;

    // For bytes read again and again (a model's weights, every token): the file's bytes copied
    // into memory of this process's own, advised for transparent huge pages, which then replaces
    // the mapping at the same addresses (mremap), so every pointer into it stays valid and reads
    // the same bytes. Decoding streams the weights each token: from a mapping of the page cache in
    // 4 KiB pages (a file read in pieces, or partly so, as a file just written is) the 8B shape's
    // Q4_K decode ran 0.75-0.96x as fast as from such a copy (both modes, 2026-12-02, runs
    // interleaved). The copy is made once (later calls return at once), only when it
    // fits in half the memory available (copy_refusal), and the file's pages are given back as they
    // are copied, so that the process holds one copy. Returns what was done, for the user:
    // "in memory, N MiB" or "mapped: " and why not.
    std::string keep_in_memory() const;
    // What keep_in_memory did, "mapped" before it was asked (this never asks).
    std::string residency() const;
    bool in_memory() const { return in_memory_.load(); }

private:
    MappedFile() = default;
    std::string move_into_memory() const;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
    mutable std::mutex moving_;  // guards asked_ and residency_; held for the copy
    mutable bool asked_ = false;
    mutable std::string residency_;
    mutable std::atomic<bool> in_memory_{false};
};

// Why a file of `size` bytes is not copied into memory when `available` bytes are
// (available_host_memory: MemAvailable, the cgroup's limit, ulimit -v; 0 when unknown): "" when it
// is copied (it fits in half of them).
std::string copy_refusal(uint64_t size, uint64_t available);

}  // namespace ls
