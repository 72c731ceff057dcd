// Declarations shared by the emulator's scheduler and its runtime stand-in; not for kernels.
#pragma once

#include "kernels/simt/simt.h"

#include <string>

namespace ls::simt::detail {

// Runs every block of the launch over the worker threads; "" on success, else the first error.
std::string run_blocks(const GridLaunch& launch, Schedule schedule, uint64_t seed);
void set_worker_threads(int workers);
void add_block_counts(uint64_t threads, uint64_t barrier_releases, uint64_t warp_collectives);
// Bytes from p to the end of its device allocation, or -1 when p is not device memory.
int64_t device_bytes_from(const void* p);

}  // namespace ls::simt::detail
