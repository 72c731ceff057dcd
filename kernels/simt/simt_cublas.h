// cuBLAS for kernel sources: the real cublas_v2.h under nvcc; under the emulator the stand-in of
// simt_cublas.cpp, declared by the real header when the toolkit's headers exist (so the compiler
// checks the stand-in against the real signatures), else by our subset of it.
#pragma once

#include "kernels/simt/simt.h"

#if defined(__CUDACC__) || defined(LS_SIMT_HAVE_CUDA_HEADERS)
#include <cublas_v2.h>
#else
#include "kernels/simt/simt_cublas_fallback.h"
#endif
