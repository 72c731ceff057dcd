// Finding the CUDA backend at run time: dlopens the CUDA module and asks it for a device, so the
// program itself never depends on the CUDA libraries.
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace ls {

struct BackendProbe {
    bool cuda_available = false;
    // "CUDA: <device>" or "CPU: <why CUDA is not used>".
    std::string description;
};

// Looks for liblayerscope_cuda.so in $LAYERSCOPE_CUDA_MODULE (a file), beside the executable, in
// lib/ or ../lib from it, then on the library path. The module stays loaded once found.
BackendProbe probe_cuda_backend();

// The CUDA backend from the module, or none with why not (module missing, no driver, no device).
struct CudaModuleBackend {
    std::unique_ptr<Backend> backend;
    std::string why_not;
};
CudaModuleBackend create_cuda_module_backend(const BackendOptions& options);

}  // namespace ls
