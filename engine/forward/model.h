// A model opened for running: the mapped GGUF file, its config, its tokenizer, and lookups of
// weights by name with shape checks.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace ls {

class Model {
public:
    // Opens and validates a model of a supported architecture. kBadInput errors name the file, the
    // key or tensor, and what was expected.
    static Result<std::unique_ptr<Model>> open(const std::string& path);
    // The same from a file already parsed, such as a header alone (GgufFile::parse_header: the
    // model of a session that runs on a server, whose weights stay there).
    static Result<std::unique_ptr<Model>> from_file(std::shared_ptr<const GgufFile> file);
    // Whether the tensors' data are here (false for a header alone: config, tokenizer, chat
    // template and the tensor table, but nothing to run or read weights from).
    bool has_weights() const { return file_->has_data(); }

    const GgufFile& file() const { return *file_; }
    const std::shared_ptr<const GgufFile>& file_ptr() const { return file_; }
    const ModelConfig& config() const { return config_; }
    // Absent when the file has no tokenizer metadata (then only token ids can be run).
    const Tokenizer* tokenizer() const { return tokenizer_.get(); }
    const std::string& path() const { return file_->path(); }

    // The tensor `name` if present with exactly these dims (ggml order; trailing 1s may be
    // omitted); an error "expected ... got ..." otherwise.
    Result<const GgufTensorInfo*> tensor(const std::string& name, std::initializer_list<int64_t> ne) const;
    const GgufTensorInfo* find(const std::string& name) const;
    // Every tensor the model runs with, in file order: the file's, but for those taken from another
    // file by with_tensors_from.
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_.empty() ? file_->tensors() : tensors_; }

    // This model with the tensors `names` taken from `donor`, the same model in another format
    // (check_same_model): their types and data are the donor's, all else is this file's. `donor`
    // must outlive the result. kBadInput when a name is missing from either file or the two shapes
    // differ. What --ablate runs: one tensor of one format in a model of the other.
    Result<std::unique_ptr<Model>> with_tensors_from(const Model& donor, const std::vector<std::string>& names) const;

private:
    std::shared_ptr<const GgufFile> file_;
    ModelConfig config_;
    std::shared_ptr<const Tokenizer> tokenizer_;
    std::vector<GgufTensorInfo> tensors_;  // with_tensors_from: the file's table, some rows the donor's
};

std::string format_ne(const int64_t* ne, int n_dims);

// The model's RoPE frequency factors (Llama 3.1+'s rope_freqs.weight, f32 {n_rot/2}) as host
// values; empty when the file has none or stores them in another type (the graph refuses that).
std::vector<float> rope_freq_factors(const Model& model);

// Every RoPE frequency-factor set the model has, by tensor name: Llama 3.1+'s rope_freqs, or
// phi3's rope_factors_short and rope_factors_long (f32 only).
struct RopeFactorSet {
    std::string tensor;
    std::vector<float> factors;
};
std::vector<RopeFactorSet> rope_factor_sets(const Model& model);

}  // namespace ls
