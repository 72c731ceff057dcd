// The pool of capture buffers: idle vectors by capacity, handed out again for a size that fits.
#include "engine/capture/host_buffers.h"

namespace ls {

std::shared_ptr<HostBufferPool> HostBufferPool::create(size_t max_idle_bytes) {
    return std::shared_ptr<HostBufferPool>(new HostBufferPool(max_idle_bytes));
}

std::shared_ptr<std::vector<float>> HostBufferPool::take(size_t n) {
    std::unique_ptr<std::vector<float>> v;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // The smallest idle buffer that holds n floats, unless it is more than twice as large.
        auto it = idle_.lower_bound(n);
        if (it != idle_.end() && it->first <= 2 * n) {
            v = std::move(it->second);
            idle_bytes_ -= it->first * sizeof(float);
            idle_.erase(it);
        }
    }
    if (v) v->resize(n);  // within the capacity: no allocation (shrinking writes nothing)
    else v = std::make_unique<std::vector<float>>(n);
    std::shared_ptr<HostBufferPool> self = shared_from_this();
    return std::shared_ptr<std::vector<float>>(v.release(), [self](std::vector<float>* p) { self->give_back(p); });
}

void HostBufferPool::give_back(std::vector<float>* v) {
    std::unique_ptr<std::vector<float>> owned(v);
    const size_t bytes = owned->capacity() * sizeof(float);
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes == 0 || idle_bytes_ + bytes > max_idle_bytes_) return;  // freed
    idle_bytes_ += bytes;
    idle_.emplace(owned->capacity(), std::move(owned));
}

size_t HostBufferPool::idle_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return idle_bytes_;
}

void HostBufferPool::trim() {
    std::multimap<size_t, std::unique_ptr<std::vector<float>>> idle;
    {
        std::lock_guard<std::mutex> lock(mu_);
        idle.swap(idle_);
        idle_bytes_ = 0;
    }
}

}  // namespace ls
