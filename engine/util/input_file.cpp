// Input files: stat before open, regular files only.
#include "engine/util/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "kernels/common/host_memory.h"

namespace ls {
namespace {

Error bad(const std::string& path, const std::string& msg) { return make_error(ErrorCode::kBadInput, path + ": " + msg); }

// What a non-regular file is, for the message.
const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "is a directory";
    if (S_ISFIFO(mode)) return "is a named pipe (FIFO); reading it would wait for a writer";
    if (S_ISCHR(mode)) return "is a character device";
    if (S_ISBLK(mode)) return "is a block device";
    if (S_ISSOCK(mode)) return "is a socket";
    return "is not a regular file";
}

}  // namespace

Status check_input_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return bad(path, std::string("cannot open: ") + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) return bad(path, std::string(kind_of(st.st_mode)) + "; expected a regular file");
    return {};
}

Result<int> open_input_file(const std::string& path) {
    if (Status s = check_input_file(path); !s) return s.error();
    // O_NONBLOCK: had the path become a FIFO since the check, open() would still not wait (on a
    // regular file the flag changes nothing).
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return bad(path, std::string("cannot open: ") + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return bad(path, std::string(kind_of(st.st_mode)) + "; expected a regular file");
    }
    return fd;
}

Result<std::string> read_input_file(const std::string& path, uint64_t max_bytes) {
    auto fd = open_input_file(path);
    if (!fd) return fd.error();
    struct stat st {};
    ::fstat(fd.value(), &st);
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const HostMemory host = available_host_memory();
    std::string refusal;
    if (size > max_bytes)
        refusal = fmt::format("is {}; a file of this kind is at most {}", bytes_text(size), bytes_text(max_bytes));
    else if (host.known && size > host.available_bytes)
        refusal = fmt::format("is {}, more than the {} of memory available ({})", bytes_text(size),
                              bytes_text(host.available_bytes), host.source);
    if (!refusal.empty()) {
        ::close(fd.value());
        return bad(path, refusal);
    }
    std::string text(static_cast<size_t>(size), '\0');
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::read(fd.value(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd.value());
            return bad(path, std::string("cannot read: ") + std::strerror(err));
        }
        if (n == 0) break;  // shrank while read
        done += static_cast<size_t>(n);
    }
    ::close(fd.value());
    text.resize(done);
    return text;
}

}  // namespace ls
