// A read-only memory mapping of a whole file.
#pragma once

#include <cstdint>
#include <memory>
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

private:
    MappedFile() = default;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace ls
