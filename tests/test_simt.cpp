// Self-tests of the SIMT emulator: results under several schedules, PTX shuffle rules, and that
// races, divergent barriers, deadlocks and shared-memory overflows are reported, not hidden.
#include "kernels/simt/simt.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

namespace {

using ls::simt::Schedule;

// ---- kernels --------------------------------------------------------------------------------

__device__ int warp_sum(int v) {
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

// One partial sum per block: warp shuffles, then the warps' sums through shared memory.
__global__ void block_sum_kernel(const int* in, int n, int* block_sums) {
    __shared__ int warp_sums[32];
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = i < n ? in[i] : 0;
    v = warp_sum(v);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const int warps = (blockDim.x + 31) / 32;
        v = lane < warps ? warp_sums[lane] : 0;
        v = warp_sum(v);
        if (lane == 0) block_sums[blockIdx.x] = v;
    }
}

// Rotates a block's values by one through shared memory; `with_barrier` false is the classic race.
__global__ void rotate_kernel(const float* in, float* out, bool with_barrier) {
    DYNAMIC_SHARED(float, tile);
    const unsigned t = threadIdx.x;
    tile[t] = in[blockIdx.x * blockDim.x + t];
    if (with_barrier) __syncthreads();
    out[blockIdx.x * blockDim.x + t] = tile[(t + 1) % blockDim.x];
}

// Each lane records the source lane every shuffle flavour reads from, for widths 8, 16, 32.
__global__ void shuffle_sources_kernel(int* out, int arg) {
    const int lane = threadIdx.x;
    int* o = out;
    for (int width = 8; width <= 32; width *= 2) {
        o[lane] = __shfl_sync(0xffffffffu, lane, arg, width);
        o[32 + lane] = __shfl_up_sync(0xffffffffu, lane, arg, width);
        o[64 + lane] = __shfl_down_sync(0xffffffffu, lane, arg, width);
        o[96 + lane] = __shfl_xor_sync(0xffffffffu, lane, arg, width);
        o += 128;
    }
    o[lane] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
    o[32 + lane] = static_cast<int>(__reduce_add_sync(0xffffffffu, static_cast<unsigned>(lane)));
    o[64 + lane] = __all_sync(0xffffffffu, lane < 32) + 2 * __any_sync(0xffffffffu, lane == 7);
    // A sub-group: the even lanes only.
    if (lane % 2 == 0) o[96 + lane] = static_cast<int>(__reduce_add_sync(0x55555555u, 1u));
}

__global__ void divergent_barrier_kernel(int* out) {
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1;
}

__global__ void barrier_after_exit_kernel(int* out, int n) {
    if (static_cast<int>(threadIdx.x) >= n) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void deadlock_kernel(int* out) {
    int v = static_cast<int>(threadIdx.x);
    if (threadIdx.x < 16) v = __shfl_xor_sync(0xffffffffu, v, 1);  // waits for lanes 16-31 forever
    else __syncthreads();
    out[threadIdx.x] = v;
}

__global__ void exited_lane_kernel(int* out) {
    if (threadIdx.x >= 16) return;
    out[threadIdx.x] = __shfl_down_sync(0xffffffffu, static_cast<int>(threadIdx.x), 1);
}

__global__ void smem_overflow_kernel(float* out, int extra) {
    DYNAMIC_SHARED(float, buf);
    buf[threadIdx.x + extra] = 1.0f;  // extra > 0 writes past the end for the last threads
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x];
}

__global__ void smem_poison_kernel(unsigned* out) {
    DYNAMIC_SHARED(unsigned, buf);
    out[threadIdx.x] = buf[threadIdx.x];  // read before any write
}

__global__ void atomics_kernel(int* counter, int* max_block, float* float_sum, unsigned long long* big) {
    atomicAdd(counter, 1);
    atomicMax(max_block, static_cast<int>(blockIdx.x));
    atomicAdd(float_sum, 0.5f);
    atomicAdd(big, 1ull << 33);
}

__global__ void index_kernel(int* hits) {
    const unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
    atomicAdd(&hits[bx * threads + tx], 1);
}

__global__ void trap_kernel(int* out) {
    if (threadIdx.x == 5) __trap();
    out[threadIdx.x] = 1;
}

__global__ void empty_kernel(int*) {}

__global__ void barrier_loop_kernel(int* out, int rounds) {
    __shared__ int slot[1024];
    int v = static_cast<int>(threadIdx.x);
    for (int r = 0; r < rounds; ++r) {
        slot[threadIdx.x] = v;
        __syncthreads();
        v = slot[(threadIdx.x + 1) % blockDim.x];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// ---- helpers --------------------------------------------------------------------------------

template <class T>
struct DeviceBuffer {
    T* ptr = nullptr;
    size_t n = 0;
    explicit DeviceBuffer(size_t count) : n(count) { EXPECT_EQ(cudaMalloc(&ptr, count * sizeof(T)), cudaSuccess); }
    DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
        EXPECT_EQ(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ~DeviceBuffer() { cudaFree(ptr); }
    std::vector<T> get() const {
        std::vector<T> host(n);
        EXPECT_EQ(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
        return host;
    }
};

// Expects the last launch to have failed as a faulty kernel, with `needle` in its message.
void expect_launch_failure(const std::string& needle) {
    const std::string message = ls::simt::last_error_message();
    EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
    EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
    EXPECT_NE(message.find(needle), std::string::npos) << message;
    EXPECT_NE(message.find("HINT"), std::string::npos) << message;
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reading the error clears it
}

class SimtSchedules : public ::testing::TestWithParam<Schedule> {
protected:
    void SetUp() override { ls::simt::set_schedule(GetParam(), 12345); }
    void TearDown() override { ls::simt::set_schedule(Schedule::Forward); }
};

std::string schedule_param_name(const ::testing::TestParamInfo<Schedule>& info) {
    return ls::simt::schedule_name(info.param);
}

// ---- tests ----------------------------------------------------------------------------------

TEST_P(SimtSchedules, BlockReductionWithShufflesEqualsTheSum) {
    for (int block : {32, 96, 256, 1024}) {
        const int n = 10007;
        std::vector<int> in(n);
        for (int i = 0; i < n; ++i) in[i] = (i * 7919) % 1000 - 500;
        const int blocks = (n + block - 1) / block;
        DeviceBuffer<int> d_in(in), d_sums(blocks);
        LAUNCH(block_sum_kernel, blocks, block, 0, d_in.ptr, n, d_sums.ptr);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ls::simt::last_error_message();
        const std::vector<int> sums = d_sums.get();
        for (int b = 0; b < blocks; ++b) {
            const int end = std::min(n, (b + 1) * block);
            EXPECT_EQ(sums[b], std::accumulate(in.begin() + b * block, in.begin() + end, 0)) << "block " << b << " size " << block;
        }
    }
}

TEST_P(SimtSchedules, RotationWithBarrierIsCorrect) {
    const int block = 256, blocks = 8;
    std::vector<float> in(block * blocks);
    std::iota(in.begin(), in.end(), 1.0f);
    DeviceBuffer<float> d_in(in), d_out(in.size());
    LAUNCH(rotate_kernel, blocks, block, block * sizeof(float), d_in.ptr, d_out.ptr, true);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ls::simt::last_error_message();
    const std::vector<float> out = d_out.get();
    for (int b = 0; b < blocks; ++b)
        for (int t = 0; t < block; ++t) ASSERT_EQ(out[b * block + t], in[b * block + (t + 1) % block]);
}

TEST_P(SimtSchedules, ShufflesFollowPtxRules) {
    for (int arg : {0, 1, 3, 5, 13, 31}) {
        DeviceBuffer<int> d_out(3 * 128 + 128);
        LAUNCH(shuffle_sources_kernel, 1, 32, 0, d_out.ptr, arg);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ls::simt::last_error_message();
        const std::vector<int> out = d_out.get();
        int base = 0;
        for (int width = 8; width <= 32; width *= 2, base += 128) {
            for (int lane = 0; lane < 32; ++lane) {
                const int segment = lane / width * width;  // first lane of this lane's segment
                EXPECT_EQ(out[base + lane], segment + arg % width) << "shfl w" << width << " lane " << lane;
                EXPECT_EQ(out[base + 32 + lane], lane - arg >= segment ? lane - arg : lane) << "up w" << width << " lane " << lane;
                EXPECT_EQ(out[base + 64 + lane], lane + arg < segment + width ? lane + arg : lane) << "down w" << width;
                EXPECT_EQ(out[base + 96 + lane], (lane ^ arg) < segment + width ? lane ^ arg : lane) << "xor w" << width;
            }
        }
        for (int lane = 0; lane < 32; ++lane) {
            EXPECT_EQ(static_cast<unsigned>(out[base + lane]), 0x49249249u);  // lanes 0, 3, 6, ...
            EXPECT_EQ(out[base + 32 + lane], 496);
            EXPECT_EQ(out[base + 64 + lane], 3);
            if (lane % 2 == 0) {
                EXPECT_EQ(out[base + 96 + lane], 16);
            }
        }
    }
}

TEST_P(SimtSchedules, AtomicsAcrossBlocksAreAtomic) {
    const int blocks = 64, block = 256;
    DeviceBuffer<int> counter(std::vector<int>{0}), max_block(std::vector<int>{-1});
    DeviceBuffer<float> float_sum(std::vector<float>{0.0f});
    DeviceBuffer<unsigned long long> big(std::vector<unsigned long long>{0});
    LAUNCH(atomics_kernel, blocks, block, 0, counter.ptr, max_block.ptr, float_sum.ptr, big.ptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ls::simt::last_error_message();
    EXPECT_EQ(counter.get()[0], blocks * block);
    EXPECT_EQ(max_block.get()[0], blocks - 1);
    EXPECT_EQ(float_sum.get()[0], 0.5f * blocks * block);  // exact: every partial sum is representable
    EXPECT_EQ(big.get()[0], (1ull << 33) * blocks * block);
}

INSTANTIATE_TEST_SUITE_P(Schedules, SimtSchedules,
                         ::testing::Values(Schedule::Forward, Schedule::Reverse, Schedule::Random), schedule_param_name);

// The emulator is only useful if a missing barrier gives wrong answers under the schedules tests use.
TEST(Simt, MissingSyncthreadsIsCaughtUnderForwardAndRandom) {
    const int block = 256, blocks = 4;
    std::vector<float> in(block * blocks);
    std::iota(in.begin(), in.end(), 1.0f);
    for (Schedule schedule : {Schedule::Forward, Schedule::Random}) {
        ls::simt::set_schedule(schedule, 777);
        DeviceBuffer<float> d_in(in), d_out(in.size());
        LAUNCH(rotate_kernel, blocks, block, block * sizeof(float), d_in.ptr, d_out.ptr, false);
        ASSERT_EQ(cudaGetLastError(), cudaSuccess);
        const std::vector<float> out = d_out.get();
        int wrong = 0;
        for (int b = 0; b < blocks; ++b)
            for (int t = 0; t < block; ++t) wrong += out[b * block + t] != in[b * block + (t + 1) % block];
        EXPECT_GT(wrong, block / 4) << "race not visible under the " << ls::simt::schedule_name(schedule) << " schedule";
    }
    ls::simt::set_schedule(Schedule::Forward);
}

TEST(Simt, DivergentSyncthreadsIsAnError) {
    DeviceBuffer<int> out(64);
    LAUNCH(divergent_barrier_kernel, 2, 64, 0, out.ptr);
    expect_launch_failure("divergent __syncthreads");
}

TEST(Simt, SyncthreadsAfterThreadsExitedIsAnError) {
    DeviceBuffer<int> out(64);
    LAUNCH(barrier_after_exit_kernel, 1, 64, 0, out.ptr, 40);
    expect_launch_failure("after some threads of the block exited");
}

TEST(Simt, DeadlockIsReportedWithWhereEachThreadWaits) {
    DeviceBuffer<int> out(32);
    LAUNCH(deadlock_kernel, 1, 32, 0, out.ptr);
    const std::string message = ls::simt::last_error_message();
    expect_launch_failure("deadlock");
    EXPECT_NE(message.find("threads 0-15 wait at __shfl_xor_sync"), std::string::npos) << message;
    EXPECT_NE(message.find("threads 16-31 wait at __syncthreads"), std::string::npos) << message;
}

TEST(Simt, ShuffleWithAnExitedLaneInTheMaskIsAnError) {
    DeviceBuffer<int> out(32);
    LAUNCH(exited_lane_kernel, 1, 32, 0, out.ptr);
    expect_launch_failure("has already exited");
}

TEST(Simt, DynamicSharedMemoryOverflowIsCaughtByTheRedzone) {
    DeviceBuffer<float> out(128);
    LAUNCH(smem_overflow_kernel, 1, 128, 128 * sizeof(float), out.ptr, 0);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess) << ls::simt::last_error_message();
    LAUNCH(smem_overflow_kernel, 1, 128, 128 * sizeof(float), out.ptr, 1);
    expect_launch_failure("write past the end of dynamic shared memory");
}

TEST(Simt, DynamicSharedMemoryStartsPoisoned) {
    DeviceBuffer<unsigned> out(64);
    LAUNCH(smem_poison_kernel, 1, 64, 64 * sizeof(unsigned), out.ptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (unsigned v : out.get()) EXPECT_EQ(v, 0xffffffffu);
}

TEST(Simt, LaunchConfigurationIsChecked) {
    DeviceBuffer<int> out(2048);
    LAUNCH(empty_kernel, 1, 1025, 0, out.ptr);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    LAUNCH(empty_kernel, 1, dim3(32, 1, 65), 0, out.ptr);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
    LAUNCH(empty_kernel, 1, 64, 64 * 1024, out.ptr);
    EXPECT_NE(ls::simt::last_error_message().find("cudaFuncSetAttribute"), std::string::npos);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    ASSERT_EQ(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 64 * 1024), cudaSuccess);
    LAUNCH(empty_kernel, 1, 64, 64 * 1024, out.ptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST(Simt, HostPointerArgumentsAndCopyDirectionsAreChecked) {
    std::vector<int> host(64);
    LAUNCH(empty_kernel, 1, 32, 0, host.data());
    EXPECT_NE(ls::simt::last_error_message().find("argument 0 is not a device pointer"), std::string::npos);
    EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
    DeviceBuffer<int> dev(64);
    EXPECT_EQ(cudaMemcpy(dev.ptr, host.data(), 64 * sizeof(int), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    EXPECT_EQ(cudaMemcpy(dev.ptr, host.data(), 65 * sizeof(int), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
    cudaGetLastError();
}

// Host memory may start right where a device allocation ends (allocators that keep no header
// between blocks do that, ThreadSanitizer's among them): that address is not device memory.
TEST(Simt, TheAddressJustPastADeviceAllocationIsHostMemory) {
    char* dev = nullptr;
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 256), cudaSuccess);
    EXPECT_TRUE(ls::simt::detail::is_device_pointer(dev));
    EXPECT_TRUE(ls::simt::detail::is_device_pointer(dev + 255));
    EXPECT_FALSE(ls::simt::detail::is_device_pointer(dev + 256));
    EXPECT_EQ(cudaFree(dev), cudaSuccess);
}

TEST(Simt, ThreadAndBlockIndicesCoverA3dGridOnce) {
    const dim3 grid(3, 2, 2), block(8, 4, 2);
    const int total = 3 * 2 * 2 * 8 * 4 * 2;
    DeviceBuffer<int> hits(std::vector<int>(total, 0));
    LAUNCH(index_kernel, grid, block, 0, hits.ptr);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    for (int h : hits.get()) EXPECT_EQ(h, 1);
}

TEST(Simt, TrapFailsTheLaunchAndLaterLaunchesStillRun) {
    DeviceBuffer<int> out(64);
    LAUNCH(trap_kernel, 1, 64, 0, out.ptr);
    expect_launch_failure("__trap()");
    LAUNCH(empty_kernel, 4, 64, 0, out.ptr);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Measures emulation speed (printed) and checks the counters that the figures come from.
TEST(Simt, EmulationSpeed) {
    const int blocks = 1024, block = 256;
    DeviceBuffer<int> out(blocks * block);
    ls::simt::reset_counters();
    auto t0 = std::chrono::steady_clock::now();
    LAUNCH(empty_kernel, blocks, block, 0, out.ptr);
    auto t1 = std::chrono::steady_clock::now();
    LAUNCH(barrier_loop_kernel, blocks / 4, block, 0, out.ptr, 16);
    auto t2 = std::chrono::steady_clock::now();
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const auto c = ls::simt::counters();
    EXPECT_EQ(c.launches, 2u);
    EXPECT_EQ(c.threads, static_cast<uint64_t>(blocks + blocks / 4) * block);
    EXPECT_EQ(c.barrier_releases, static_cast<uint64_t>(blocks / 4) * 32);
    const double empty_s = std::chrono::duration<double>(t1 - t0).count();
    const double barrier_s = std::chrono::duration<double>(t2 - t1).count();
    std::printf("[ speed ] empty kernel: %.1f ns per CUDA thread (%.2f M threads/s)\n", empty_s * 1e9 / (blocks * block),
                blocks * block / empty_s / 1e6);
    std::printf("[ speed ] barrier loop: %.1f ns per barrier arrival\n", barrier_s * 1e9 / (blocks / 4 * block * 32.0));
}

}  // namespace
