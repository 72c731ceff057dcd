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

    // For a pass that reads the mapping once: gives back the pages of [begin, begin + n), rounded
    // out to whole pages and clipped to the mapping. They come back from the file when read again,
    // so a release never changes what the mapping reads; a failure is ignored (it is a hint).
    void release(const uint8_t* begin, uint64_t n) const;

private:
    MappedFile() = default;
    const uint8_t* data_ = nullptr;
    uint64_t size_ = 0;
};

}  // namespace ls
