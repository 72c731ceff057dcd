// Finding the CUDA backend at run time: the probe never crashes and says why the CPU is used. The
// module is loaded once per process, so the cases that point LAYERSCOPE_CUDA_MODULE elsewhere hold
// when each case runs in its own process, as ctest runs them.
#include "kernels/cuda/loader.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

namespace {

struct ScopedEnv {
    explicit ScopedEnv(const char* value) { setenv("LAYERSCOPE_CUDA_MODULE", value, 1); }
    ~ScopedEnv() { unsetenv("LAYERSCOPE_CUDA_MODULE"); }
};

TEST(CudaLoader, ProbeDescribesTheBackendItChose) {
    const ls::BackendProbe probe = ls::probe_cuda_backend();
    if (probe.cuda_available) {
        EXPECT_EQ(probe.description.rfind("CUDA: ", 0), 0u) << probe.description;
    } else {
        EXPECT_EQ(probe.description.rfind("CPU: ", 0), 0u) << probe.description;
        EXPECT_GT(probe.description.size(), 10u) << "a reason must follow";
    }
    std::printf("[ probe ] %s\n", probe.description.c_str());
}

// When the build produced the module, the probe must get past loading it and report what the
// CUDA runtime said (on a machine without a GPU: the cudaGetDeviceCount error).
TEST(CudaLoader, BuiltModuleIsFoundBesideTheExecutables) {
    const std::filesystem::path module = std::filesystem::path(LAYERSCOPE_BINARY_DIR) / "lib" / "liblayerscope_cuda.so";
    if (!std::filesystem::exists(module)) GTEST_SKIP() << "built without nvcc: " << module << " absent";
    const ls::BackendProbe probe = ls::probe_cuda_backend();
    EXPECT_EQ(probe.description.find("not found"), std::string::npos) << probe.description;
    EXPECT_EQ(probe.description.find("could not be loaded"), std::string::npos) << probe.description;
    if (!probe.cuda_available) {
        EXPECT_NE(probe.description.find("cuda"), std::string::npos) << probe.description;
    }
}

TEST(CudaLoader, MissingModuleFallsBackToTheCpu) {
    ScopedEnv env("/nonexistent/liblayerscope_cuda.so");
    const ls::BackendProbe probe = ls::probe_cuda_backend();
    EXPECT_FALSE(probe.cuda_available);
    EXPECT_EQ(probe.description.rfind("CPU: ", 0), 0u) << probe.description;
    EXPECT_NE(probe.description.find("not found"), std::string::npos) << probe.description;
}

TEST(CudaLoader, ABrokenModuleFallsBackToTheCpu) {
    const auto path = std::filesystem::temp_directory_path() / "layerscope_not_a_module.so";
    {
        std::FILE* f = std::fopen(path.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs("not an ELF file", f);
        std::fclose(f);
    }
    ScopedEnv env(path.c_str());
    const ls::BackendProbe probe = ls::probe_cuda_backend();
    std::filesystem::remove(path);
    EXPECT_FALSE(probe.cuda_available);
    EXPECT_NE(probe.description.find("could not be loaded"), std::string::npos) << probe.description;
}

}  // namespace
