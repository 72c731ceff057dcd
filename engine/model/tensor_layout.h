// One tensor layout per architecture: the weights a model of it has, named and shaped as
// llama.cpp's loader creates them. The lints, make-model and the forward pass's graph builders
// all read it, so the three can never disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/model/model_config.h"

namespace ls {

struct TensorSpec {
    std::string name;         // "blk.0.attn_q.weight"
    std::vector<int64_t> ne;  // ggml order; trailing 1s omitted
    bool required = true;     // false: the model may omit it (biases, a tied output.weight)
    bool vocab_rows = false;  // ne[1] is the vocabulary size (token_embd, output)
    // Non-empty: llama.cpp's graph for this architecture reads the tensor when a file has it, and
    // Layerscope does not run it yet; a file that has it is refused with this reason.
    std::string unsupported;
    // Non-empty: llama.cpp's loader accepts it and its generation graph never reads it (an NVFP4
    // conversion's input scales, qwen2's feed-forward scales, a reranker's head): accepted, and
    // unused here too; this says so.
    std::string unused;
    // With `unsupported`: llama.cpp's loader itself refuses a file that has it (`unsupported` says
    // why), so neither runs it.
    bool loader_refuses = false;
};

// Every tensor a model with config `c` and `n_vocab` tokens has or may have, in load order.
std::vector<TensorSpec> tensor_layout(const ModelConfig& c, int64_t n_vocab);

// The spec named `name`, or nullptr.
const TensorSpec* find_tensor_spec(const std::vector<TensorSpec>& layout, const std::string& name);

// Why a file holding tensor `name` cannot be run: it is one llama.cpp reads and Layerscope does
// not yet (the spec's reason), or one llama.cpp's loader does not know for this architecture
// (llama.cpp refuses such files: wrong number of tensors). "" when the layout has it.
std::string tensor_refusal(const std::vector<TensorSpec>& layout, const std::string& name, const std::string& arch);

}  // namespace ls
