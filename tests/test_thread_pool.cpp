// The CPU backend's thread pool: every index of a job done exactly once on any thread count, and
// job after job with the workers spinning or asleep in between. Also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "kernels/cpu/thread_pool.h"

namespace ls {
namespace {

TEST(ThreadPool, EveryIndexIsDoneOnceOnAnyThreadCount) {
    for (int threads : {1, 2, 3, 8}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (int64_t n : {0, 1, 7, 64, 1000, 100003}) {
            for (int64_t min_chunk : {0, 1, 16, 4096}) {
                std::vector<int> hits(static_cast<size_t>(n), 0);
                pool.parallel_for(n, min_chunk, [&](int64_t begin, int64_t end) {
                    for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
                });
                int64_t wrong = 0;
                for (int h : hits) wrong += h != 1;
                EXPECT_EQ(wrong, 0) << threads << " threads, n " << n << ", min_chunk " << min_chunk;
            }
        }
    }
}

TEST(ThreadPool, JobAfterJobWithTheWorkersSpinningOrAsleep) {
    ThreadPool pool(3);
    std::vector<int64_t> values(200);
    for (int job = 1; job <= 1000; ++job) {
        // Now and then long enough a pause that the workers stop spinning and sleep.
        if (job % 250 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const int64_t n = 1 + job % 200;
        pool.parallel_for(n, 1, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) values[static_cast<size_t>(i)] = i * job;
        });
        int64_t sum = 0;
        for (int64_t i = 0; i < n; ++i) sum += values[static_cast<size_t>(i)];
        ASSERT_EQ(sum, job * n * (n - 1) / 2) << "job " << job;
    }
}

}  // namespace
}  // namespace ls
