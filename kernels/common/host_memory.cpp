// Available host memory from /proc/meminfo, the cgroup limits and RLIMIT_AS.
#include "kernels/common/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ls {
namespace {

std::string read_small_file(const char* path) {
    std::ifstream in(path);
    if (!in) return "";
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// A decimal byte count, surrounding white space allowed; false otherwise ("max" included).
bool parse_bytes(const std::string& text, uint64_t* out) {
    size_t i = 0;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    uint64_t v = 0;
    const size_t digits = i;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i)
        v = add_sat(mul_sat(v, 10), static_cast<uint64_t>(text[i] - '0'));
    if (i == digits) return false;
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i != text.size()) return false;
    *out = v;
    return true;
}

void lower_to(HostMemory* m, uint64_t bytes, const char* source) {
    if (m->known && m->available_bytes <= bytes) return;
    m->known = true;
    m->available_bytes = bytes;
    m->source = source;
}

// The path of this process's cgroup in /proc/self/cgroup for v2 ("0::/a/b") or for v1's memory
// controller ("4:memory:/a/b"); false when there is none.
bool cgroup_path(const std::string& proc_self_cgroup, bool v2, std::string* path) {
    std::istringstream lines(proc_self_cgroup);
    std::string line;
    while (std::getline(lines, line)) {
        const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
        if (b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1);
        if (v2 ? (line.compare(0, a, "0") == 0 && controllers.empty()) : controllers == "memory") {
            *path = line.substr(b + 1);
            return true;
        }
    }
    return false;
}

// The least room under the limits of the cgroup at `path` and of each parent up to the root.
uint64_t cgroup_tree_room(const std::string& mount, std::string path, const char* limit_file, const char* usage_file,
                          const char* inactive_key) {
    uint64_t room = UINT64_MAX;
    for (;;) {
        const std::string dir = mount + (path == "/" ? "" : path) + "/";
        room = std::min(room, cgroup_room_from(read_small_file((dir + limit_file).c_str()),
                                               read_small_file((dir + usage_file).c_str()),
                                               read_small_file((dir + "memory.stat").c_str()), inactive_key));
        const size_t slash = path.rfind('/');
        if (path.empty() || path == "/" || slash == std::string::npos) break;
        path = slash == 0 ? "/" : path.substr(0, slash);
    }
    return room;
}

}  // namespace

uint64_t cgroup_room_from(const std::string& limit, const std::string& usage, const std::string& stat,
                          const std::string& inactive_file_key) {
    uint64_t max = 0, used = 0, inactive = 0;
    if (!parse_bytes(limit, &max) || !parse_bytes(usage, &used)) return UINT64_MAX;  // "max": no limit
    std::istringstream lines(stat);
    std::string line;
    while (std::getline(lines, line))
        if (line.compare(0, inactive_file_key.size() + 1, inactive_file_key + " ") == 0)
            parse_bytes(line.substr(inactive_file_key.size() + 1), &inactive);
    used = used > inactive ? used - inactive : 0;
    return max > used ? max - used : 0;
}

HostMemory host_memory_from(const std::string& meminfo, uint64_t cgroup_room, uint64_t address_space_room) {
    HostMemory m;
    std::istringstream lines(meminfo);
    std::string line;
    while (std::getline(lines, line)) {
        unsigned long long kib = 0;
        if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) lower_to(&m, mul_sat(kib, 1024), "MemAvailable");
    }
    if (cgroup_room != UINT64_MAX) lower_to(&m, cgroup_room, "the cgroup's memory limit");
    if (address_space_room != UINT64_MAX) lower_to(&m, address_space_room, "ulimit -v");
    return m;
}

HostMemory available_host_memory() {
    const std::string self = read_small_file("/proc/self/cgroup");
    uint64_t cgroup = UINT64_MAX;
    std::string path;
    if (cgroup_path(self, true, &path))
        cgroup = std::min(cgroup, cgroup_tree_room("/sys/fs/cgroup", path, "memory.max", "memory.current", "inactive_file"));
    if (cgroup_path(self, false, &path))
        cgroup = std::min(cgroup, cgroup_tree_room("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes",
                                                   "memory.usage_in_bytes", "total_inactive_file"));
    // Under ulimit -v every mapping counts, so the room is the limit less what is mapped already.
    uint64_t address_space = UINT64_MAX;
    rlimit limit{};
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
        unsigned long long vm_kib = 0;
        std::istringstream status(read_small_file("/proc/self/status"));
        std::string line;
        while (std::getline(status, line)) std::sscanf(line.c_str(), "VmSize: %llu kB", &vm_kib);
        const uint64_t mapped = mul_sat(vm_kib, 1024);
        address_space = limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0;
    }
    return host_memory_from(read_small_file("/proc/meminfo"), cgroup, address_space);
}

std::string bytes_text(uint64_t bytes) {
    static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double v = static_cast<double>(bytes) / 1024.0;
    int u = 0;
    while (v >= 1024.0 && u < 5) v /= 1024.0, ++u;
    char buf[32];
    std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnits[u]);
    return buf;
}

}  // namespace ls
