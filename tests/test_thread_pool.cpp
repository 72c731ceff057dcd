// The CPU backend's thread pool: every index of a job done exactly once on any thread count, long
// ranges first, and job after job with the workers spinning or asleep in between. Also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
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

// A job is one long range per thread (three quarters of the work between them) and a few short
// ones, never shorter than min_chunk except the last.
TEST(ThreadPool, LongRangesFirstThenAFewShortOnes) {
    for (int threads : {2, 3, 8}) {
        ThreadPool pool(threads);
        for (int64_t n : {10, 1000, 100003}) {
            for (int64_t min_chunk : {1, 7}) {
                std::mutex mu;
                std::vector<std::pair<int64_t, int64_t>> ranges;
                pool.parallel_for(n, min_chunk, [&](int64_t begin, int64_t end) {
                    std::lock_guard<std::mutex> lock(mu);
                    ranges.emplace_back(begin, end);
                });
                std::sort(ranges.begin(), ranges.end());
                ASSERT_LE(ranges.size(), static_cast<size_t>(3 * threads + 1)) << threads << " threads, n " << n;
                for (size_t i = 0; i + 1 < ranges.size(); ++i) {
                    EXPECT_EQ(ranges[i].second, ranges[i + 1].first);
                    EXPECT_GE(ranges[i].second - ranges[i].first, min_chunk);
                }
                if (n >= 1000) {
                    for (int t = 0; t < threads; ++t)
                        EXPECT_GE(ranges[t].second - ranges[t].first, n * 3 / 4 / threads) << threads << " threads, n " << n;
                }
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
