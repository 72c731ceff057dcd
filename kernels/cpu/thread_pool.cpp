// Fixed-size thread pool: workers wait on a generation counter; each job is split into as many
// chunks as threads.
#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace ls {

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads_ = n_threads;
    for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    start_cv_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int index) {
    if (index >= n_chunks_) return;
    int64_t begin = index * chunk_;
    int64_t end = std::min(n_, begin + chunk_);
    if (begin < end) (*fn_)(begin, end);
}

void ThreadPool::worker_loop(int index) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        run_share(index);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--pending_ == 0) done_cv_.notify_one();
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
    {
        std::lock_guard<std::mutex> lock(mu_);
        fn_ = &fn;
        n_ = n;
        n_chunks_ = static_cast<int>(std::min<int64_t>(n_threads_, max_chunks));
        chunk_ = (n + n_chunks_ - 1) / n_chunks_;
        pending_ = n_threads_ - 1;
        ++generation_;
    }
    start_cv_.notify_all();
    run_share(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
}

}  // namespace ls
