// A fixed pool of worker threads for data-parallel loops; the calling thread works too.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ls {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);  // total threads including the caller; 0 = all cores
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Calls fn(begin, end) over disjoint chunks covering [0, n), in parallel; returns when all are
    // done. Chunks are at least `min_chunk` long. Not reentrant.
    void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

private:
    void stop_workers();  // wakes the workers to end and joins them
    void worker_loop();
    void run_share();

    int n_threads_;
    std::vector<std::thread> workers_;
    // A forward pass calls parallel_for a few hundred times per token: workers and the caller
    // spin briefly on these before sleeping, since waking a sleeping thread costs tens of
    // microseconds each time.
    std::atomic<uint64_t> generation_{0};
    std::atomic<int> pending_{0};
    std::mutex mu_;
    std::condition_variable start_cv_, done_cv_;
    std::atomic<bool> stop_{false};
    int sleeping_ = 0;   // workers waiting on start_cv_, guarded by mu_
    // The current job, published by the generation's release store.
    const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
    int64_t n_ = 0, long_chunk_ = 0, chunk_ = 0;  // the first n_threads_ chunks are long
    int n_chunks_ = 0;
    std::atomic<int> next_chunk_{0};
};

}  // namespace ls
