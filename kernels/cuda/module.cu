// The CUDA module's C entry points, looked up by kernels/cuda/loader.cpp after dlopen: the program
// never links libcudart itself, so it starts on machines without CUDA.
#include <cstdio>

#include "kernels/simt/simt.h"

#define LS_CUDA_EXPORT extern "C" __attribute__((visibility("default")))

// Bumped when the entry points change, so that a stale module is refused rather than misused.
LS_CUDA_EXPORT int ls_cuda_module_abi() { return 2; }

// Writes a one-line description to msg (at most cap bytes, NUL-terminated). Returns the number of
// devices (> 0), 0 when the runtime works but sees no device, or -cudaError_t on failure.
LS_CUDA_EXPORT int ls_cuda_probe(char* msg, int cap) {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        std::snprintf(msg, static_cast<size_t>(cap), "cudaGetDeviceCount failed: %s (%s, error %d)",
                      cudaGetErrorString(err), cudaGetErrorName(err), static_cast<int>(err));
        return -static_cast<int>(err);
    }
    if (count == 0) {
        std::snprintf(msg, static_cast<size_t>(cap), "the CUDA runtime sees no device");
        return 0;
    }
#if LS_SIMT_EMULATED
    std::snprintf(msg, static_cast<size_t>(cap), "SIMT emulator on the CPU");
#else
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        std::snprintf(msg, static_cast<size_t>(cap), "%d device(s); properties of device 0 unavailable", count);
        return count;
    }
    std::snprintf(msg, static_cast<size_t>(cap), "%s (sm_%d%d, %.1f GiB)%s", prop.name, prop.major, prop.minor,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                  count > 1 ? ", more devices present; using device 0" : "");
#endif
    return count;
}
