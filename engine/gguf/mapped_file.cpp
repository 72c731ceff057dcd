// mmap of a whole file, read-only; optionally moved into memory of the process's own.
#include "engine/gguf/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "engine/util/input_file.h"
#include "kernels/common/host_memory.h"

namespace ls {

namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

uintptr_t page_size() {
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    return page;
}

// `n` bytes (a multiple of the page size) of fresh anonymous memory starting on a 2 MiB boundary,
// so that transparent huge pages can back it whole; nullptr when there is none.
uint8_t* map_aligned(uint64_t n, int prot, int flags) {
    void* raw = mmap(nullptr, n + kHugePage, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    const uintptr_t r = reinterpret_cast<uintptr_t>(raw), a = (r + kHugePage - 1) & ~(kHugePage - 1);
    if (a > r) munmap(raw, a - r);
    if (r + n + kHugePage > a + n) munmap(reinterpret_cast<void*>(a + n), r + n + kHugePage - (a + n));
    return reinterpret_cast<uint8_t*>(a);
}

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
    auto opened = open_input_file(path);  // a FIFO or a directory is refused before open() could block
    if (!opened) return opened.error();
    const int fd = opened.value();
    struct stat st {};
    fstat(fd, &st);
    std::unique_ptr<MappedFile> file(new MappedFile());
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ > 0) {
        // On a 2 MiB boundary, as the file's offsets are: the page cache's huge folios can then be
        // mapped whole, and a copy moved here (keep_in_memory) keeps its huge pages.
        const uint64_t length = (file->size_ + page_size() - 1) & ~(page_size() - 1);
        uint8_t* at = map_aligned(length, PROT_NONE, MAP_NORESERVE);
        void* p = mmap(at, file->size_, PROT_READ, MAP_PRIVATE | (at ? MAP_FIXED : 0), fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            if (at) munmap(at, length);
            ::close(fd);
            return make_error(ErrorCode::kBadInput, path + ": cannot map: " + std::strerror(err));
        }
        file->data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return file;
}

void MappedFile::release_behind(const uint8_t* begin, uint64_t n) const {
    // In memory, the pages are the only copy: dropping them would read zeros.
    if (!data_ || n == 0 || begin < data_ || begin >= data_ + size_ || in_memory_.load()) return;
    const uintptr_t page = page_size();
    // One page table maps page / 8 pages (2 MiB of 4 KiB pages). The mapping starts on a page and
    // runs to the end of the page holding the file's last byte.
    const uintptr_t table = page * (page / sizeof(uint64_t));
    const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
    const uintptr_t from = std::max(reinterpret_cast<uintptr_t>(begin) & ~(table - 1), base);
    const uintptr_t end = base + std::min<uint64_t>(static_cast<uint64_t>(begin - data_) + n, size_);
    const uintptr_t to = (end + page - 1) & ~(page - 1);
    // The mapping is private and never written, so its pages are the file's: dropping them only
    // unmaps them (the page cache keeps them for a later read).
    madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

std::string copy_refusal(uint64_t size, uint64_t available) {
    if (available == 0) return "the memory available is unknown";
    if (size > available / 2)
        return fmt::format("its {:.1f} GiB exceed half the memory available ({:.1f} GiB)", size / 1073741824.0,
                           available / 1073741824.0);
    return "";
}

std::string MappedFile::keep_in_memory() const {
    if (!data_) return "";
    std::lock_guard<std::mutex> lock(moving_);
    if (!asked_) residency_ = move_into_memory();
    asked_ = true;
    return residency_;
}

std::string MappedFile::residency() const {
    if (!data_) return "";
    std::lock_guard<std::mutex> lock(moving_);
    return asked_ ? residency_ : "mapped";
}

std::string MappedFile::move_into_memory() const {
    // MemAvailable, or less under the cgroup's memory limit or ulimit -v (a copy beyond a cgroup's
    // limit would be killed, where the mapping's pages can be dropped).
    const HostMemory memory = available_host_memory();
    if (std::string why = copy_refusal(size_, memory.known ? memory.available_bytes : 0); !why.empty())
        return "mapped: " + why;
    const uint64_t length = (size_ + page_size() - 1) & ~(page_size() - 1);
    uint8_t* copy = map_aligned(length, PROT_READ | PROT_WRITE, 0);
    if (!copy) return fmt::format("mapped: no memory for a copy ({})", std::strerror(errno));
    madvise(copy, length, MADV_HUGEPAGE);  // a hint: where the kernel has none, 4 KiB pages
    // In pieces, each piece's pages of the mapping given back once copied: the process holds one
    // copy of the file at a time, not two. Threads take the pieces in turn: most of the time goes
    // to the kernel's work on the copy's fresh pages (in a virtual machine, the host's too), which
    // they share.
    constexpr uint64_t kPiece = uint64_t{64} << 20;
    const uint64_t n_pieces = (size_ + kPiece - 1) / kPiece;
    std::atomic<uint64_t> next{0};
    const auto copy_pieces = [&] {
        for (uint64_t i; (i = next.fetch_add(1)) < n_pieces;) {
            const uint64_t off = i * kPiece, n = std::min(kPiece, size_ - off);
            std::memcpy(copy + off, data_ + off, n);
            madvise(const_cast<uint8_t*>(data_) + off, (n + page_size() - 1) & ~(page_size() - 1), MADV_DONTNEED);
        }
    };
    std::vector<std::thread> helpers;
    const unsigned n_threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    for (unsigned t = 1; t < n_threads && t < n_pieces; ++t) helpers.emplace_back(copy_pieces);
    copy_pieces();
    for (std::thread& t : helpers) t.join();
    mprotect(copy, length, PROT_READ);
    // The copy takes the mapping's place in one step: a reader meanwhile reads the file's bytes
    // either way.
    if (mremap(copy, length, length, MREMAP_MAYMOVE | MREMAP_FIXED, const_cast<uint8_t*>(data_)) == MAP_FAILED) {
        const int err = errno;
        munmap(copy, length);
        return fmt::format("mapped: the copy could not replace the mapping ({})", std::strerror(err));
    }
    in_memory_.store(true);
    return fmt::format("in memory, {:.0f} MiB", size_ / 1048576.0);
}

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ls
