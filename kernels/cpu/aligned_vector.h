// A std::vector whose storage starts on a 64-byte boundary: a cache line, and one AVX-512 register.
// The kernels' scratch panels are such vectors; from plain new, a large vector starts 16 bytes into
// a page, and then every 64-byte load of it spans two lines.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace ls {

template <class T>
struct CacheLineAllocator {
    using value_type = T;
    static constexpr std::align_val_t kAlign{64};
    CacheLineAllocator() = default;
    template <class U>
    CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
    T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
    void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlign); }
    template <class U>
    bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
    template <class U>
    bool operator!=(const CacheLineAllocator<U>&) const noexcept { return false; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace ls
