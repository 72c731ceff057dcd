// Fixed-size thread pool: workers wait for a new generation (spinning a little, then on a
// condition variable). Each job is split into one long chunk per thread, three quarters of the
// work, then a few short ones, all taken in turn from a shared counter: a thread streams one long
// range of rows (each new range costs a memory latency before its prefetches run ahead), and one
// slowed by the machine does not hold up the others.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <string>
#include <system_error>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace ls {
namespace {

// About 50 microseconds of polling before a thread goes to sleep.
constexpr int kSpins = 20000;
// Short chunks per thread after the long ones: enough to even out threads that run at different
// speeds. (With eight equal chunks per thread a decoded token took 1.12-1.2x as long as with one
// chunk per thread, in three rounds on 2 cores.)
constexpr int kShortChunksPerThread = 2;

inline void relax() {
#if defined(__x86_64__)
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    try {
        for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {
        // The threads already started must end before the members they wait on go away.
        stop_workers();
        throw std::system_error(e.code(), "cannot start " + std::to_string(n_threads_) + " CPU threads (" +
                                              std::to_string(workers_.size() + 1) + " started); lower --threads");
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_.store(true, std::memory_order_release);
        generation_.fetch_add(1, std::memory_order_release);
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_share() {
    for (int c; (c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) < n_chunks_;) {
        const int64_t begin = c < n_threads_ ? c * long_chunk_ : n_threads_ * long_chunk_ + (c - n_threads_) * chunk_;
        const int64_t end = std::min(n_, begin + (c < n_threads_ ? long_chunk_ : chunk_));
        if (begin < end) (*fn_)(begin, end);
    }
}

void ThreadPool::worker_loop() {
    uint64_t seen = 0;
    for (;;) {
        uint64_t g = generation_.load(std::memory_order_acquire);
        for (int spin = 0; g == seen && spin < kSpins; ++spin) {
            relax();
            g = generation_.load(std::memory_order_acquire);
        }
        if (g == seen) {
            std::unique_lock<std::mutex> lock(mu_);
            ++sleeping_;
            start_cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
            --sleeping_;
            g = generation_.load(std::memory_order_acquire);
        }
        if (stop_.load(std::memory_order_acquire)) return;
        seen = g;
        run_share();
        if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            std::lock_guard<std::mutex> lock(mu_);  // the caller may be about to sleep on done_cv_
            done_cv_.notify_one();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn) {
    if (n <= 0) return;
    min_chunk = std::max<int64_t>(1, min_chunk);
    int64_t max_chunks = (n + min_chunk - 1) / min_chunk;
    if (n_threads_ == 1 || max_chunks == 1) {
        fn(0, n);
        return;
    }
    fn_ = &fn;
    n_ = n;
    long_chunk_ = std::max(min_chunk, n * 3 / 4 / n_threads_);
    const int64_t rest = std::max<int64_t>(0, n - n_threads_ * long_chunk_);
    chunk_ = std::max(min_chunk, (rest + kShortChunksPerThread * n_threads_ - 1) / (kShortChunksPerThread * n_threads_));
    n_chunks_ = static_cast<int>(std::min<int64_t>(n_threads_, (n + long_chunk_ - 1) / long_chunk_) + (rest + chunk_ - 1) / chunk_);
    next_chunk_.store(0, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    bool wake;
    {
        std::lock_guard<std::mutex> lock(mu_);
        generation_.fetch_add(1, std::memory_order_release);
        wake = sleeping_ > 0;
    }
    if (wake) start_cv_.notify_all();
    run_share();
    for (int spin = 0; pending_.load(std::memory_order_acquire) != 0 && spin < kSpins; ++spin) relax();
    if (pending_.load(std::memory_order_acquire) != 0) {
        std::unique_lock<std::mutex> lock(mu_);
        done_cv_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    fn_ = nullptr;
}

}  // namespace ls
