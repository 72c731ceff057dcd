// LS_HD marks functions shared by host code and CUDA device code.
#pragma once

#if defined(__CUDACC__)
#define LS_HD __host__ __device__
#else
#define LS_HD
#endif
