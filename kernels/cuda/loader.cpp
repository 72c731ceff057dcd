// Finding the CUDA backend at run time (see loader.h): every failure becomes a "CPU: <reason>"
// description instead of a crash or a missing-library error at start-up.
#include "kernels/cuda/loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace ls {
namespace {

constexpr const char* kModuleName = "liblayerscope_cuda.so";
constexpr int kModuleAbi = 2;

std::string executable_dir() {
    std::error_code ec;
    const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : exe.parent_path().string();
}

struct LoadedModule {
    void* handle = nullptr;
    std::string why_not;  // "CPU: ..." when handle is null
};

// dlopen's the module once; later calls return the same handle (or the same reason).
const LoadedModule& load_module();

}  // namespace

BackendProbe probe_cuda_backend() {
    const LoadedModule& m = load_module();
    if (!m.handle) return {false, m.why_not};
    using ProbeFn = int (*)(char*, int);
    auto probe = reinterpret_cast<ProbeFn>(dlsym(m.handle, "ls_cuda_probe"));
    char message[512] = {};
    const int devices = probe(message, sizeof message);
    if (devices > 0) return {true, std::string("CUDA: ") + message};
    return {false, std::string("CPU: ") + message};
}

CudaModuleBackend create_cuda_module_backend(const BackendOptions& options) {
    const BackendProbe probe = probe_cuda_backend();
    // The description starts with "CPU: " when CUDA is not usable; the reason is what follows.
    if (!probe.cuda_available) return {nullptr, probe.description.substr(probe.description.find(": ") + 2)};
    using CreateFn = Backend* (*)(int, char*, int);
    auto create = reinterpret_cast<CreateFn>(dlsym(load_module().handle, "ls_cuda_create_backend"));
    char message[512] = {};
    Backend* backend = create(options.n_threads, message, sizeof message);
    if (!backend) return {nullptr, message};
    return {std::unique_ptr<Backend>(backend), ""};
}

namespace {

LoadedModule load_module_once() {
    std::vector<std::string> candidates;
    if (const char* explicit_path = std::getenv("LAYERSCOPE_CUDA_MODULE"); explicit_path && *explicit_path) {
        candidates.push_back(explicit_path);
    } else {
        const std::string dir = executable_dir();
        if (!dir.empty()) {
            candidates.push_back(dir + "/" + kModuleName);
            candidates.push_back(dir + "/lib/" + kModuleName);
            candidates.push_back(dir + "/../lib/" + kModuleName);
        }
        candidates.push_back(kModuleName);  // the library path
    }

    void* module = nullptr;
    std::string load_errors;
    for (const auto& path : candidates) {
        // A path with a slash that does not exist is skipped quietly; a module that exists but
        // fails to load (typically: libcudart missing) is the interesting error.
        if (path.find('/') != std::string::npos && access(path.c_str(), F_OK) != 0) continue;
        module = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (module) break;
        const char* error_text = dlerror();
        const std::string why = error_text ? error_text : path;
        // dlopen by bare name reports a module absent from the library path as "<name>: ...".
        if (path.find('/') == std::string::npos && why.rfind(path + ":", 0) == 0) continue;
        load_errors += (load_errors.empty() ? "" : "; ") + why;
    }
    if (!module) {
        if (load_errors.empty())
            return {nullptr, std::string("CPU: the CUDA module ") + kModuleName + " was not found (built without nvcc?)"};
        return {nullptr, "CPU: the CUDA module could not be loaded: " + load_errors};
    }

    using AbiFn = int (*)();
    auto abi = reinterpret_cast<AbiFn>(dlsym(module, "ls_cuda_module_abi"));
    if (!abi || abi() != kModuleAbi || !dlsym(module, "ls_cuda_probe") || !dlsym(module, "ls_cuda_create_backend"))
        return {nullptr, "CPU: the CUDA module is from another version of Layerscope (entry points missing or ABI "
                         "mismatch); rebuild it"};
    return {module, ""};
}

const LoadedModule& load_module() {
    static const LoadedModule loaded = load_module_once();
    return loaded;
}

}  // namespace

}  // namespace ls
