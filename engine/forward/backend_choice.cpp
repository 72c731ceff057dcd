// Backends by name, for the commands and the session (see forward.h).
#include <fmt/format.h>

#include "engine/forward/forward.h"

namespace ls {

Result<ChosenBackend> open_backend(const std::string& name, int n_threads) {
    BackendKind kind;
    if (!backend_kind_from_name(name, &kind))
        return make_error(ErrorCode::kUsage, fmt::format("unknown backend '{}': use cpu, cuda, cuda-emulated or auto", name));
    BackendOptions options;
    options.n_threads = n_threads;
    MadeBackend made = make_backend(kind, options);
    if (!made.backend)
        return make_error(ErrorCode::kUsage, fmt::format("the {} backend is not available: {}", name, made.note));
    return ChosenBackend{std::move(made.backend), made.note};
}

Result<ChosenBackend> open_backend_for(const Model& model, const std::string& name, int n_threads,
                                       const ForwardOptions& options) {
    auto chosen = open_backend(name, n_threads);
    if (!chosen || name != "auto" || chosen.value().backend->kind() == BackendKind::kCpu) return chosen;
    // auto means a backend that runs this model: CUDA when its kernels cover the graph.
    auto forward = make_forward(model, *chosen.value().backend, options);
    if (forward || forward.error().code != ErrorCode::kUnsupported) return chosen;
    return ChosenBackend{make_cpu_backend(n_threads), "CPU: " + forward.error().message};
}

}  // namespace ls
