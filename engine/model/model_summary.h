// Summaries of a GGUF model shared by the CLI and the GUI: tokenizer facts from metadata, bytes
// and bits per weight by tensor type, and a tensor's dequantized values with their statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/ggml_type.h"
#include "engine/util/result.h"

namespace ls {

class GgufFile;
struct GgufTensorInfo;

// What tokenizer.* metadata says (the tokenizer itself lives in engine/tokenizer).
struct TokenizerSummary {
    std::string model;          // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (BPE), ...
    std::string pre;            // tokenizer.ggml.pre ("" when absent)
    int64_t n_tokens = 0;       // entries of tokenizer.ggml.tokens
    int64_t n_merges = 0;       // entries of tokenizer.ggml.merges
    int64_t bos_id = -1;        // -1 when absent
    int64_t eos_id = -1;
    std::string bos_piece;      // the token text, "" when the id is absent or out of range
    std::string eos_piece;
    int add_bos = -1;           // tokenizer.ggml.add_bos_token: 1, 0, or -1 when absent
    int add_eos = -1;
    bool has_chat_template = false;
    size_t chat_template_bytes = 0;
};

TokenizerSummary summarize_tokenizer(const GgufFile& file);

struct TypeTotal {
    GgmlType type = GgmlType::F32;
    int64_t n_tensors = 0;
    int64_t n_elements = 0;
    uint64_t n_bytes = 0;
    double bits_per_weight() const { return n_elements ? 8.0 * double(n_bytes) / double(n_elements) : 0.0; }
};

// One entry per type present, largest share of the file first.
std::vector<TypeTotal> totals_by_type(const GgufFile& file);

// Statistics over a tensor's values; min/max/mean/rms ignore NaN and Inf, which are counted.
struct ValueStats {
    int64_t n = 0;
    int64_t n_nan = 0;
    int64_t n_inf = 0;
    double min = 0, max = 0, mean = 0, rms = 0;
};

ValueStats compute_stats(const float* values, int64_t n);

// All elements of `tensor` as f32 (ne0 fastest). Errors name the tensor and its type when the
// type cannot be decoded.
Result<std::vector<float>> dequantize_tensor(const GgufTensorInfo& tensor);

}  // namespace ls
