// Runs CUDA blocks on the CPU: each CUDA thread is a fiber that switches only at __syncthreads and
// warp collectives; blocks are spread over OS worker threads.
#include "kernels/simt/simt_internal.h"

#include <boost/context/fiber.hpp>
#include <boost/context/stack_context.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <cstdio>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

// AddressSanitizer must be told of every stack switch (g++ and clang say it differently).
#if defined(__SANITIZE_ADDRESS__)
#define LS_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LS_SIMT_ASAN 1
#endif
#endif
#ifndef LS_SIMT_ASAN
#define LS_SIMT_ASAN 0
#endif
#if LS_SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace ls::simt::detail {
namespace {

namespace ctx = boost::context;

constexpr size_t kFiberStackBytes = 128 * 1024;
constexpr size_t kSmemRedzoneBytes = 256;
constexpr unsigned char kSmemPoison = 0xff;  // reads as NaN for floats, -1 for integers
constexpr unsigned char kRedzoneByte = 0xa5;

// Stacks with a guard page below, kept per worker thread and reused by every block it runs.
class StackPool {
public:
    ~StackPool() {
        for (auto& sc : free_) munmap(static_cast<char*>(sc.sp) - sc.size - page_, sc.size + page_);
    }
    ctx::stack_context take() {
        if (!free_.empty()) {
            ctx::stack_context sc = free_.back();
            free_.pop_back();
            return sc;
        }
        void* base = mmap(nullptr, kFiberStackBytes + page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED) throw std::bad_alloc();
        mprotect(base, page_, PROT_NONE);  // a stack overflow faults instead of corrupting a neighbour
        ctx::stack_context sc;
        sc.size = kFiberStackBytes;
        sc.sp = static_cast<char*>(base) + page_ + kFiberStackBytes;
        return sc;
    }
    void give_back(const ctx::stack_context& sc) { free_.push_back(sc); }

private:
    size_t page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<ctx::stack_context> free_;
};

enum class Wait : uint8_t { Runnable, Barrier, Warp, Exited, Failed };

struct CudaThread : ThreadContext {
    ctx::fiber fiber;                      // this thread, while suspended
    ctx::fiber* scheduler = nullptr;       // where to switch back to, while running
    ctx::stack_context stack{};
    Wait wait = Wait::Runnable;
    SourceLocation where;
    WarpOp op = WarpOp::SyncWarp;
    unsigned mask = 0;
    int arg = 0;
    int width = 32;
    uint64_t value = 0;
    uint64_t result = 0;
    std::string failure;
};

// Thrown into suspended fibers when their block fails, so that they unwind and end normally.
struct BlockAborted {};

class StackAllocator {
public:
    StackAllocator(StackPool* pool, CudaThread* thread) : pool_(pool), thread_(thread) {}
    ctx::stack_context allocate() { return thread_->stack = pool_->take(); }
    void deallocate(ctx::stack_context& sc) { pool_->give_back(sc); }

private:
    StackPool* pool_;
    CudaThread* thread_;
};

std::string where_text(const SourceLocation& where) {
    const char* file = where.file_name();
    if (const char* slash = std::strrchr(file, '/')) file = slash + 1;
    return std::string(file) + ":" + std::to_string(where.line());
}

const char* op_name(WarpOp op) {
    switch (op) {
        case WarpOp::Shfl: return "__shfl_sync";
        case WarpOp::ShflUp: return "__shfl_up_sync";
        case WarpOp::ShflDown: return "__shfl_down_sync";
        case WarpOp::ShflXor: return "__shfl_xor_sync";
        case WarpOp::Ballot: return "__ballot_sync";
        case WarpOp::All: return "__all_sync";
        case WarpOp::Any: return "__any_sync";
        case WarpOp::ReduceAdd: return "__reduce_add_sync";
        case WarpOp::SyncWarp: return "__syncwarp";
    }
    return "?";
}

std::string hex(unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", v);
    return buf;
}

// Runs one block at a time on the OS thread that owns it.
class BlockRunner {
public:
    // Returns "" on success, otherwise what went wrong.
    std::string run(const GridLaunch& launch, uint3 block_idx, Schedule schedule, uint64_t seed);

    // Called from inside a fiber: back to the scheduler until this thread may continue.
    void yield(CudaThread& t) {
#if LS_SIMT_ASAN
        void* fake_stack = nullptr;
        __sanitizer_start_switch_fiber(&fake_stack, scheduler_stack_bottom_, scheduler_stack_size_);
#endif
        *t.scheduler = std::move(*t.scheduler).resume();
#if LS_SIMT_ASAN
        __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
        if (aborting_) throw BlockAborted{};
    }

private:
    void switch_to(CudaThread& t);
    void start(CudaThread& t, const GridLaunch& launch);
    bool complete_warp_collectives(std::string& error);
    std::string describe_waits() const;
    std::string abort_all(const std::string& error);

    StackPool stacks_;
    std::vector<CudaThread> threads_;
    std::vector<unsigned char> smem_;
    std::vector<int> order_;
    bool aborting_ = false;
    uint64_t barrier_releases_ = 0;
    uint64_t warp_collectives_ = 0;
    const void* scheduler_stack_bottom_ = nullptr;
    size_t scheduler_stack_size_ = 0;
};

thread_local BlockRunner* t_runner = nullptr;

CudaThread& current_thread() { return *static_cast<CudaThread*>(t_current); }

void BlockRunner::start(CudaThread& t, const GridLaunch& launch) {
    t.fiber = ctx::fiber(std::allocator_arg, StackAllocator(&stacks_, &t),
                         [this, &t, &launch](ctx::fiber&& scheduler) {
#if LS_SIMT_ASAN
                             __sanitizer_finish_switch_fiber(nullptr, &scheduler_stack_bottom_, &scheduler_stack_size_);
#endif
                             t.scheduler = &scheduler;
                             try {
                                 if (!aborting_) launch.run_thread(launch.closure);
                                 t.wait = Wait::Exited;
                             } catch (BlockAborted&) {
                                 t.wait = Wait::Exited;
                             } catch (std::exception& e) {
                                 t.wait = Wait::Failed;
                                 t.failure = std::string("exception in kernel: ") + e.what();
                             }
#if LS_SIMT_ASAN
                             __sanitizer_start_switch_fiber(nullptr, scheduler_stack_bottom_, scheduler_stack_size_);
#endif
                             return std::move(scheduler);
                         });
}

void BlockRunner::switch_to(CudaThread& t) {
    t_current = &t;
#if LS_SIMT_ASAN
    void* fake_stack = nullptr;
    __sanitizer_start_switch_fiber(&fake_stack, static_cast<char*>(t.stack.sp) - t.stack.size, t.stack.size);
#endif
    t.fiber = std::move(t.fiber).resume();
#if LS_SIMT_ASAN
    __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
    t_current = nullptr;
}

// Lists where each thread waits, in runs of consecutive threads: "threads 0-31 wait at a.cu:10".
std::string BlockRunner::describe_waits() const {
    auto wait_text = [](const CudaThread& t) -> std::string {
        switch (t.wait) {
            case Wait::Barrier: return "wait at __syncthreads " + where_text(t.where);
            case Wait::Warp:
                return std::string("wait at ") + op_name(t.op) + " " + where_text(t.where) + " (mask " + hex(t.mask) + ")";
            case Wait::Exited: return "have exited";
            case Wait::Failed: return "failed";
            case Wait::Runnable: return "are runnable";
        }
        return "?";
    };
    std::string out;
    size_t begin = 0;
    while (begin < threads_.size()) {
        std::string text = wait_text(threads_[begin]);
        size_t end = begin + 1;
        while (end < threads_.size() && wait_text(threads_[end]) == text) ++end;
        if (!out.empty()) out += "; ";
        out += end - begin == 1 ? "thread " + std::to_string(begin) : "threads " + std::to_string(begin) + "-" + std::to_string(end - 1);
        out += " " + text;
        begin = end;
    }
    return out;
}

// Lets every suspended thread unwind so that its fiber ends and its stack returns to the pool.
std::string BlockRunner::abort_all(const std::string& error) {
    aborting_ = true;
    for (auto& t : threads_)
        if (t.fiber) switch_to(t);
    aborting_ = false;
    return error;
}

// Completes each warp collective whose mask lanes have all arrived; false when none could.
bool BlockRunner::complete_warp_collectives(std::string& error) {
    bool progressed = false;
    const size_t n = threads_.size();
    for (size_t warp_base = 0; warp_base < n; warp_base += 32) {
        const int lanes = static_cast<int>(std::min<size_t>(32, n - warp_base));
        const unsigned existing = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1);
        for (int lane = 0; lane < lanes; ++lane) {
            CudaThread& first = threads_[warp_base + lane];
            if (first.wait != Wait::Warp) continue;
            const unsigned mask = first.mask;
            const std::string who = "thread " + std::to_string(warp_base + lane) + " at " + op_name(first.op) + " " +
                                    where_text(first.where) + " with mask " + hex(mask);
            if (!(mask >> lane & 1)) {
                error = who + ": the mask does not name the calling lane " + std::to_string(lane) +
                        "\nHINT: a lane must include itself in the member mask (PTX: undefined otherwise)";
                return false;
            }
            if (mask & ~existing) {
                error = who + ": the mask names lanes that do not exist (the warp has " + std::to_string(lanes) +
                        " threads)\nHINT: build the mask from the lanes that exist, e.g. __ballot_sync on a bounds test";
                return false;
            }
            bool ready = true;
            for (int other = 0; other < lanes && ready; ++other) {
                if (!(mask >> other & 1)) continue;
                const CudaThread& o = threads_[warp_base + other];
                if (o.wait == Wait::Exited) {
                    error = who + ": lane " + std::to_string(other) + " named in the mask has already exited" +
                            "\nHINT: exclude lanes that returned early from the mask";
                    return false;
                }
                if (o.wait != Wait::Warp) {
                    ready = false;
                } else if (o.op != first.op || o.mask != mask) {
                    error = who + " meets lane " + std::to_string(other) + " at " + op_name(o.op) + " " +
                            where_text(o.where) + " with mask " + hex(o.mask) +
                            "\nHINT: all lanes of a mask must execute the same collective with the same mask";
                    return false;
                }
            }
            if (!ready) continue;
            uint64_t ballot = 0, sum = 0;
            for (int l = 0; l < lanes; ++l)
                if (mask >> l & 1) {
                    ballot |= (threads_[warp_base + l].value != 0 ? 1ull : 0ull) << l;
                    sum += threads_[warp_base + l].value;
                }
            for (int l = 0; l < lanes; ++l) {
                if (!(mask >> l & 1)) continue;
                CudaThread& t = threads_[warp_base + l];
                if (t.op == WarpOp::Shfl || t.op == WarpOp::ShflUp || t.op == WarpOp::ShflDown || t.op == WarpOp::ShflXor) {
                    // PTX shfl.sync: c = ((32 - width) << 8) | clamp, segments of `width` lanes.
                    const int seg_mask = (32 - t.width) & 31;
                    const int clamp = t.op == WarpOp::ShflUp ? 0 : 31;
                    const int max_lane = (l & seg_mask) | (clamp & ~seg_mask);
                    const int min_lane = l & seg_mask;
                    int src = l;
                    bool in_range = false;
                    switch (t.op) {
                        case WarpOp::ShflUp: src = l - t.arg; in_range = src >= max_lane; break;
                        case WarpOp::ShflDown: src = l + t.arg; in_range = src <= max_lane; break;
                        case WarpOp::ShflXor: src = l ^ (t.arg & 31); in_range = src <= max_lane; break;
                        default: src = min_lane | (t.arg & 31 & ~seg_mask); in_range = src <= max_lane; break;
                    }
                    if (!in_range) src = l;
                    // Reading a lane outside the mask is undefined: poison makes any use visible.
                    t.result = (mask >> src & 1) ? threads_[warp_base + src].value : ~0ull;
                } else if (t.op == WarpOp::Ballot) {
                    t.result = ballot;
                } else if (t.op == WarpOp::All) {
                    t.result = ballot == mask;
                } else if (t.op == WarpOp::Any) {
                    t.result = ballot != 0;
                } else if (t.op == WarpOp::ReduceAdd) {
                    t.result = static_cast<uint32_t>(sum);
                }
                t.wait = Wait::Runnable;
            }
            ++warp_collectives_;
            progressed = true;
        }
    }
    return progressed;
}

std::string BlockRunner::run(const GridLaunch& launch, uint3 block_idx, Schedule schedule, uint64_t seed) {
    const size_t n = static_cast<size_t>(launch.block.x) * launch.block.y * launch.block.z;
    threads_.clear();
    threads_.resize(n);
    barrier_releases_ = warp_collectives_ = 0;

    // Dynamic shared memory: [redzone | exactly the bytes asked for, poisoned | redzone].
    const size_t smem = launch.dynamic_shared_bytes;
    smem_.assign(smem + 2 * kSmemRedzoneBytes + 64, kRedzoneByte);
    unsigned char* aligned = smem_.data() + ((64 - reinterpret_cast<uintptr_t>(smem_.data()) % 64) % 64);
    unsigned char* dynamic = aligned + kSmemRedzoneBytes;
    std::memset(dynamic, kSmemPoison, smem);

    for (size_t i = 0; i < n; ++i) {
        CudaThread& t = threads_[i];
        t.thread_idx = uint3{static_cast<unsigned>(i % launch.block.x),
                             static_cast<unsigned>(i / launch.block.x % launch.block.y),
                             static_cast<unsigned>(i / (static_cast<size_t>(launch.block.x) * launch.block.y))};
        t.block_idx = block_idx;
        t.block_dim = launch.block;
        t.grid_dim = launch.grid;
        t.dynamic_shared = dynamic;
    }
    std::mt19937_64 rng(seed ^ (0x9e3779b97f4a7c15ull * (1 + block_idx.x + 65536ull * (block_idx.y + 65536ull * block_idx.z))));

    std::string error;
    size_t exited = 0;
    while (exited < n) {
        order_.clear();
        for (size_t i = 0; i < n; ++i)
            if (threads_[i].wait == Wait::Runnable) order_.push_back(static_cast<int>(i));
        if (schedule == Schedule::Reverse) std::reverse(order_.begin(), order_.end());
        if (schedule == Schedule::Random) std::shuffle(order_.begin(), order_.end(), rng);
        for (int i : order_) {
            CudaThread& t = threads_[i];
            if (!t.fiber) start(t, launch);
            switch_to(t);
            if (t.wait == Wait::Exited) ++exited;
        }
        for (size_t i = 0; i < n; ++i)
            if (threads_[i].wait == Wait::Failed) return abort_all("thread " + std::to_string(i) + ": " + threads_[i].failure);
        if (exited == n) break;
        if (complete_warp_collectives(error)) continue;
        if (!error.empty()) return abort_all(error);

        size_t at_barrier = 0;
        const CudaThread* first_at_barrier = nullptr;
        bool same_site = true;
        for (auto& t : threads_) {
            if (t.wait != Wait::Barrier) continue;
            ++at_barrier;
            if (!first_at_barrier) first_at_barrier = &t;
            else if (t.where.line() != first_at_barrier->where.line() || t.where.column() != first_at_barrier->where.column() ||
                     std::strcmp(t.where.file_name(), first_at_barrier->where.file_name()) != 0)
                same_site = false;
        }
        if (at_barrier == 0 || at_barrier + exited != n)
            return abort_all("deadlock: " + describe_waits() +
                             "\nHINT: a warp collective waits for a lane that never arrives, or lanes wait at a "
                             "barrier that the rest of the block never reaches");
        if (exited > 0)
            return abort_all("__syncthreads after some threads of the block exited: " + describe_waits() +
                             "\nHINT: keep every thread alive up to the last __syncthreads (guard the work, not the "
                             "barrier, with the bounds test)");
        if (!same_site)
            return abort_all("divergent __syncthreads: " + describe_waits() +
                             "\nHINT: every thread of a block must reach the same __syncthreads; move it out of the "
                             "conditional");
        for (auto& t : threads_) t.wait = Wait::Runnable;
        ++barrier_releases_;
    }
    add_block_counts(n, barrier_releases_, warp_collectives_);

    for (size_t i = 0; i < kSmemRedzoneBytes; ++i) {
        if (dynamic[smem + i] != kRedzoneByte)
            return "write past the end of dynamic shared memory: byte " + std::to_string(smem + i) + " of a " +
                   std::to_string(smem) + "-byte allocation was changed\nHINT: launch with more shared memory "
                   "bytes or fix the index";
        if (aligned[i] != kRedzoneByte)
            return "write before the start of dynamic shared memory (" + std::to_string(kSmemRedzoneBytes - i) +
                   " bytes before it)\nHINT: a negative index into shared memory";
    }
    return "";
}

// OS threads that run the blocks of one launch at a time; the launching thread works too.
class WorkerPool {
public:
    static WorkerPool& instance() {
        static WorkerPool pool;
        return pool;
    }
    ~WorkerPool() {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& w : workers_) w.join();
    }
    void set_workers(int workers) {
        std::lock_guard run_lock(run_mutex_);
        resize(std::max(1, workers) - 1);
    }
    template <class Fn>
    void run(Fn&& body) {
        std::lock_guard run_lock(run_mutex_);
        if (!sized_) resize(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())) - 1);
        std::function<void()> work = body;
        {
            std::lock_guard lock(mutex_);
            work_ = &work;
            busy_ = workers_.size();
            ++generation_;
        }
        wake_.notify_all();
        body();
        std::unique_lock lock(mutex_);
        done_.wait(lock, [&] { return busy_ == 0; });
        work_ = nullptr;
    }

private:
    void resize(int extra) {
        {
            std::lock_guard lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        for (auto& w : workers_) w.join();
        workers_.clear();
        stopping_ = false;
        sized_ = true;
        // A worker starts from the current generation, so a launch posted before it first runs
        // is not missed.
        for (int i = 0; i < extra; ++i) workers_.emplace_back([this, seen = generation_] { loop(seen); });
    }
    void loop(uint64_t seen) {
        for (;;) {
            std::function<void()>* work;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
                if (stopping_) return;
                seen = generation_;
                work = work_;
            }
            (*work)();
            std::lock_guard lock(mutex_);
            if (--busy_ == 0) done_.notify_all();
        }
    }

    std::mutex run_mutex_;  // one launch at a time
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    std::vector<std::thread> workers_;
    std::function<void()>* work_ = nullptr;
    size_t busy_ = 0;
    uint64_t generation_ = 0;
    bool stopping_ = false;
    bool sized_ = false;
};

}  // namespace

void set_worker_threads(int workers) { WorkerPool::instance().set_workers(workers); }

std::string run_blocks(const GridLaunch& launch, Schedule schedule, uint64_t seed) {
    const uint64_t blocks = static_cast<uint64_t>(launch.grid.x) * launch.grid.y * launch.grid.z;
    std::atomic<uint64_t> next{0};
    std::atomic<bool> failed{false};
    std::mutex error_mutex;
    std::string first_error;
    WorkerPool::instance().run([&] {
        thread_local BlockRunner runner;
        t_runner = &runner;
        for (;;) {
            const uint64_t b = next.fetch_add(1);
            if (b >= blocks || failed.load()) break;
            const uint3 block_idx{static_cast<unsigned>(b % launch.grid.x), static_cast<unsigned>(b / launch.grid.x % launch.grid.y),
                                  static_cast<unsigned>(b / (static_cast<uint64_t>(launch.grid.x) * launch.grid.y))};
            std::string error = runner.run(launch, block_idx, schedule, seed);
            if (!error.empty()) {
                std::lock_guard lock(error_mutex);
                if (!failed.exchange(true))
                    first_error = "block (" + std::to_string(block_idx.x) + "," + std::to_string(block_idx.y) + "," +
                                  std::to_string(block_idx.z) + "): " + error;
            }
        }
        t_runner = nullptr;
    });
    return first_error;
}

void block_barrier(const SourceLocation& where) {
    CudaThread& t = current_thread();
    t.wait = Wait::Barrier;
    t.where = where;
    t_runner->yield(t);
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int arg, int width, const SourceLocation& where) {
    CudaThread& t = current_thread();
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        kernel_trap(("width " + std::to_string(width) + " of " + op_name(op) + " is not a power of two up to 32\nHINT: use 1, 2, 4, 8, 16 or 32").c_str(), where);
    t.wait = Wait::Warp;
    t.op = op;
    t.mask = mask;
    t.value = value;
    t.arg = arg;
    t.width = width;
    t.where = where;
    t_runner->yield(t);
    return t.result;
}

unsigned active_mask() {
    // Lanes of this warp that have not exited: the closest the emulator has to "converged".
    CudaThread& t = current_thread();
    CudaThread* self = &t;
    const size_t tid = t.thread_idx.x + static_cast<size_t>(t.block_dim.x) * (t.thread_idx.y + static_cast<size_t>(t.block_dim.y) * t.thread_idx.z);
    CudaThread* base = self - tid % 32;
    const size_t n = static_cast<size_t>(t.block_dim.x) * t.block_dim.y * t.block_dim.z;
    const size_t warp_base = tid - tid % 32;
    unsigned mask = 0;
    for (size_t l = 0; l < 32 && warp_base + l < n; ++l)
        if (base[l].wait != Wait::Exited) mask |= 1u << l;
    return mask;
}

void kernel_trap(const char* why, const SourceLocation& where) {
    CudaThread& t = current_thread();
    t.wait = Wait::Failed;
    // The HINT line, if any, stays last.
    const char* hint = std::strstr(why, "\nHINT");
    t.failure = hint ? std::string(why, hint) + " at " + where_text(where) + hint
                     : std::string(why) + " at " + where_text(where);
    t_runner->yield(t);
    throw BlockAborted{};
}

}  // namespace ls::simt::detail
