// Every CUDA and cuBLAS call of the CUDA backend is checked: a failure throws with the error, the
// statement, the file and the line (the session and the commands turn it into a message).
#pragma once

#include <stdexcept>
#include <string>

#define LS_CUDA_CHECK(stmt)                                                                              \
    do {                                                                                                 \
        const cudaError_t err_ = (stmt);                                                                 \
        if (err_ != cudaSuccess)                                                                         \
            throw std::runtime_error(std::string("CUDA error: ") + cudaGetErrorString(err_) + " in " #stmt \
                                     " at " __FILE__ ":" + std::to_string(__LINE__));                     \
    } while (0)

#define LS_CUBLAS_CHECK(stmt)                                                                                \
    do {                                                                                                     \
        const cublasStatus_t st_ = (stmt);                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                                    \
            throw std::runtime_error(std::string("cuBLAS error: ") + cublasGetStatusName(st_) + " in " #stmt \
                                     " at " __FILE__ ":" + std::to_string(__LINE__));                         \
    } while (0)
