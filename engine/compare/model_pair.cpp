#include "engine/compare/model_pair.h"

#include <algorithm>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "kernels/common/ggml_type.h"

namespace ls {
namespace {

std::string shape_text(const GgufTensorInfo& t) {
    std::string s;
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? "x" : "") + std::to_string(t.ne[d]);
    return s;
}

}  // namespace

Status check_same_model(const Model& ours, const Model& other) {
    const std::string a = ours.path(), b = other.path();
    auto differ = [&](const std::string& what) {
        return make_error(ErrorCode::kBadInput, fmt::format("{} and {} are not one model in two formats: {}; compare a file "
                                                            "with another format of the same weights",
                                                            a, b, what));
    };
    const std::string arch = ours.config().arch_name, arch_other = other.config().arch_name;
    if (arch != arch_other) return differ(fmt::format("the architecture is {} in the first, {} in the second", arch, arch_other));
    // The hyperparameters: every key of the architecture's namespace, on both sides.
    const std::string prefix = arch + ".";
    std::map<std::string, std::string> keys_a, keys_b;
    for (const GgufKV& kv : ours.file().metadata())
        if (kv.key.rfind(prefix, 0) == 0) keys_a[kv.key] = kv.value.to_string(1 << 20);
    for (const GgufKV& kv : other.file().metadata())
        if (kv.key.rfind(prefix, 0) == 0) keys_b[kv.key] = kv.value.to_string(1 << 20);
    for (const auto& [key, value] : keys_a) {
        auto it = keys_b.find(key);
        if (it == keys_b.end()) return differ(fmt::format("{} is {} in the first and absent from the second", key, value));
        if (it->second != value) return differ(fmt::format("{} is {} in the first, {} in the second", key, value, it->second));
    }
    for (const auto& [key, value] : keys_b)
        if (!keys_a.count(key)) return differ(fmt::format("{} is {} in the second and absent from the first", key, value));
    // The tensors: the same names and shapes.
    for (const GgufTensorInfo& t : ours.tensors()) {
        const GgufTensorInfo* u = other.find(t.name);
        if (!u) return differ(fmt::format("tensor {} is in the first only", t.name));
        if (u->n_dims != t.n_dims || !std::equal(t.ne, t.ne + kGgmlMaxDims, u->ne))
            return differ(fmt::format("tensor {} is {} in the first, {} in the second", t.name, shape_text(t), shape_text(*u)));
    }
    for (const GgufTensorInfo& u : other.tensors())
        if (!ours.find(u.name)) return differ(fmt::format("tensor {} is in the second only", u.name));
    return {};
}

std::string tensor_type_mix(const Model& model) {
    std::map<std::string, int> count;
    for (const GgufTensorInfo& t : model.tensors()) ++count[ggml_type_name(t.type)];
    std::vector<std::pair<std::string, int>> sorted(count.begin(), count.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    std::string s;
    for (const auto& [type, n] : sorted) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", type, n);
    return s;
}

}  // namespace ls
