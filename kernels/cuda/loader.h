// Finding the CUDA backend at run time: dlopens the CUDA module and asks it for a device, so the
// program itself never depends on the CUDA libraries.
#pragma once

#include <string>

namespace ls {

struct BackendProbe {
    bool cuda_available = false;
    // "CUDA: <device>" or "CPU: <why CUDA is not used>".
    std::string description;
};

// Looks for liblayerscope_cuda.so in $LAYERSCOPE_CUDA_MODULE (a file), beside the executable, in
// lib/ or ../lib from it, then on the library path. The module stays loaded once found.
BackendProbe probe_cuda_backend();

}  // namespace ls
