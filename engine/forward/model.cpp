// Model opening: GGUF + config + tokenizer, and shape-checked weight lookups.
#include "engine/forward/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace ls {

std::string format_ne(const int64_t* ne, int n_dims) {
    std::string s = "[";
    for (int i = 0; i < n_dims; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

Result<std::unique_ptr<Model>> Model::open(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file) return file.error();
    return from_file(std::move(file.value()));
}

Result<std::unique_ptr<Model>> Model::from_file(std::shared_ptr<const GgufFile> file) {
    auto config = model_config_from_gguf(*file);
    if (!config) return config.error();
    std::unique_ptr<Model> m(new Model());
    m->file_ = std::move(file);
    m->config_ = config.value();
    if (m->file_->find("tokenizer.ggml.tokens")) {
        auto tok = Tokenizer::from_gguf(*m->file_);
        if (!tok) return tok.error();
        m->tokenizer_ = std::make_shared<const Tokenizer>(std::move(tok.value()));
    }
    return m;
}

const GgufTensorInfo* Model::find(const std::string& name) const {
    const GgufTensorInfo* t = file_->find_tensor(name);
    if (!t || tensors_.empty()) return t;
    return &tensors_[static_cast<size_t>(t - file_->tensors().data())];  // the same row of the substituted table
}

Result<std::unique_ptr<Model>> Model::with_tensors_from(const Model& donor, const std::vector<std::string>& names) const {
    std::unique_ptr<Model> m(new Model(*this));
    if (m->tensors_.empty()) m->tensors_ = file_->tensors();
    for (const std::string& name : names) {
        const GgufTensorInfo* ours = file_->find_tensor(name);
        const GgufTensorInfo* theirs = donor.find(name);
        if (!ours || !theirs)
            return make_error(ErrorCode::kBadInput, fmt::format("tensor {} is missing from {}", name,
                                                                ours ? donor.path() : path()));
        if (!std::equal(ours->ne, ours->ne + 4, theirs->ne))
            return make_error(ErrorCode::kBadInput, fmt::format("tensor {}: {} has ne {}, {} has {}", name, path(),
                                                                format_ne(ours->ne, ours->n_dims), donor.path(),
                                                                format_ne(theirs->ne, theirs->n_dims)));
        GgufTensorInfo& row = m->tensors_[static_cast<size_t>(ours - file_->tensors().data())];
        row.type = theirs->type;
        row.n_bytes = theirs->n_bytes;
        row.data = theirs->data;
    }
    return m;
}

Result<const GgufTensorInfo*> Model::tensor(const std::string& name, std::initializer_list<int64_t> ne) const {
    const GgufTensorInfo* t = find(name);
    if (!t)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: tensor {} is missing; a {} model needs it", path(), name, config_.arch_name));
    int64_t want[4] = {1, 1, 1, 1};
    int n = 0;
    for (int64_t v : ne) want[n++] = v;
    for (int d = 0; d < 4; ++d)
        if (t->ne[d] != want[d])
            return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {}: expected ne {} got {}", path(), name,
                                                                format_ne(want, n), format_ne(t->ne, t->n_dims)));
    return t;
}

std::vector<RopeFactorSet> rope_factor_sets(const Model& model) {
    std::vector<RopeFactorSet> sets;
    for (const char* name : {"rope_freqs.weight", "rope_factors_short.weight", "rope_factors_long.weight"}) {
        const GgufTensorInfo* t = model.find(name);
        if (!t || t->type != GgmlType::F32 || t->ne[0] <= 0 || t->n_bytes < static_cast<uint64_t>(t->ne[0]) * 4) continue;
        if ((model.config().arch == Arch::kLlama) != (std::string(name) == "rope_freqs.weight")) continue;
        RopeFactorSet set{name, std::vector<float>(static_cast<size_t>(t->ne[0]))};
        std::memcpy(set.factors.data(), t->data, set.factors.size() * sizeof(float));
        sets.push_back(std::move(set));
    }
    return sets;
}

std::vector<float> rope_freq_factors(const Model& model) {
    const GgufTensorInfo* t = model.config().arch == Arch::kLlama ? model.find("rope_freqs.weight") : nullptr;
    if (!t || t->type != GgmlType::F32 || t->ne[0] <= 0 || t->n_bytes < static_cast<uint64_t>(t->ne[0]) * 4) return {};
    std::vector<float> v(static_cast<size_t>(t->ne[0]));
    std::memcpy(v.data(), t->data, v.size() * sizeof(float));
    return v;
}

}  // namespace ls
