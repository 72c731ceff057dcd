// How much memory this process may still take on the host, for the checks that refuse a run, a
// reference or a dump up front (with the numbers) instead of dying in std::bad_alloc halfway.
#pragma once

#include <cstdint>
#include <string>

namespace ls {

struct HostMemory {
    bool known = false;           // false: nothing could be read (then no check is made)
    uint64_t available_bytes = 0;
    std::string source;           // what bounds it: "MemAvailable", "the cgroup's memory limit", "ulimit -v"
};

// The smallest of: /proc/meminfo's MemAvailable (free memory plus what the kernel can reclaim;
// swap is not counted), the room left under the memory limits of this process's cgroup and its
// parents (v2 memory.max, v1 memory.limit_in_bytes; their inactive file cache counts as room), and
// the address space left under RLIMIT_AS (ulimit -v).
HostMemory available_host_memory();

// The same from what those sources hold: the text of /proc/meminfo ("" when absent), and the
// rooms left under the cgroup limits and under RLIMIT_AS (UINT64_MAX without a limit). For tests.
HostMemory host_memory_from(const std::string& meminfo, uint64_t cgroup_room, uint64_t address_space_room);
// The room under one cgroup's limit: limit - (usage - inactive file cache), from the texts of its
// limit and usage files and of memory.stat (whose `inactive_file_key` line is used). UINT64_MAX
// when the limit is "max" or unreadable.
uint64_t cgroup_room_from(const std::string& limit, const std::string& usage, const std::string& stat,
                          const std::string& inactive_file_key);

// "512 B", "3.0 KiB", "12.3 GiB".
std::string bytes_text(uint64_t bytes);

// a * b, saturating at UINT64_MAX: sizes of absurd shapes still compare as "too large".
inline uint64_t mul_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
inline uint64_t add_sat(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

}  // namespace ls
