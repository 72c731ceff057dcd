// mmap of a whole file, read-only.
#include "engine/gguf/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/util/input_file.h"

namespace ls {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
    auto opened = open_input_file(path);  // a FIFO or a directory is refused before open() could block
    if (!opened) return opened.error();
    const int fd = opened.value();
    struct stat st {};
    fstat(fd, &st);
    std::unique_ptr<MappedFile> file(new MappedFile());
    file->size_ = static_cast<uint64_t>(st.st_size);
    if (file->size_ > 0) {
        void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            return make_error(ErrorCode::kBadInput, path + ": cannot map: " + std::strerror(err));
        }
        file->data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return file;
}

void MappedFile::release_behind(const uint8_t* begin, uint64_t n) const {
    if (!data_ || n == 0 || begin < data_ || begin >= data_ + size_) return;
    static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
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

MappedFile::~MappedFile() {
    if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace ls
