// The op table: one enum of the ops a forward pass is made of, named as ggml names them (the op a
// llama.cpp dump records for each tensor). Backends answer supports(op, ...) with it, events carry
// it, and test-backend-ops walks it.
#pragma once

#include <cstdint>
#include <string_view>

namespace ls {

enum class Op : uint8_t {
    kNone,          // no op (an event that is not a computed tensor)
    kGetRows,       // GET_ROWS: rows of a table by index (embeddings, output rows)
    kRmsNorm,       // RMS_NORM: x / sqrt(mean(x^2) + eps)
    kMul,           // MUL: element-wise product, broadcast over rows
    kAdd,           // ADD: element-wise sum, broadcast over rows
    kScale,         // SCALE: x * s
    kMulMat,        // MUL_MAT: weight rows dotted with activation columns
    kMulMatId,      // MUL_MAT_ID: MUL_MAT with a weight matrix chosen per row (MoE experts)
    kRope,          // ROPE: rotary position embedding
    kSwiglu,        // SWIGLU: silu(gate) * up
    kSoftMax,       // SOFT_MAX: softmax(x * scale + mask)
    kFlashAttnExt,  // FLASH_ATTN_EXT: fused attention
    kSetRows,       // SET_ROWS: rows written into a table (the KV cache)
    kCpy,           // CPY: a copy between tensors (any strides)
    kCont,          // CONT: a strided view made contiguous
    kReshape,       // RESHAPE: the same data with other counts
    kView,          // VIEW: a window of a tensor with byte strides
    kPermute,       // PERMUTE: axes reordered (strides only)
    kConcat,        // CONCAT: two tensors joined along an axis
    kArgsort,       // ARGSORT: indices that sort each row
    kRepeat,        // REPEAT: a tensor tiled to a larger shape
    kDiv,           // DIV: element-wise quotient, broadcast (MoE weights over their sum)
    kSigmoid,       // SIGMOID: 1 / (1 + exp(-x)) (sigmoid MoE gating)
    kClamp,         // CLAMP: x limited to [min, max]
    kSumRows,       // SUM_ROWS: the sum of each row
    kGeglu,         // GEGLU: gelu(gate) * up, GELU's tanh form (gemma's feed-forward)
    kTanh,          // TANH: tanh(x) (gemma's soft caps)
    kSwigluOai,     // SWIGLU_OAI: gpt-oss's clamped swiglu, (min(g, L) * sigmoid(a min(g, L))) * (clamp(u, -L, L) + 1)
    kAddId,         // ADD_ID: rows of a table chosen per column added (gpt-oss's expert biases)
    kSilu,          // SILU: x / (1 + exp(-x)) (qwen35's conv output and output gate)
    kSoftplus,      // SOFTPLUS: log(1 + exp(x)), x itself above 20 (qwen35's decay gate)
    kSsmConv,       // SSM_CONV: a causal conv1d over each channel's window (conv state then the ubatch)
    kGatedDeltaNet, // GATED_DELTA_NET: the gated delta rule over a recurrent state (qwen35's linear attention)
    kTranspose,     // TRANSPOSE: the first two axes swapped (strides only)
    kCount
};

inline constexpr const char* kOpNames[] = {
    "NONE",     "GET_ROWS", "RMS_NORM", "MUL",     "ADD",  "SCALE",   "MUL_MAT",    "MUL_MAT_ID",
    "ROPE",     "SWIGLU",   "SOFT_MAX", "FLASH_ATTN_EXT", "SET_ROWS", "CPY", "CONT", "RESHAPE",
    "VIEW",     "PERMUTE",  "CONCAT",   "ARGSORT", "REPEAT", "DIV",   "SIGMOID", "CLAMP",
    "SUM_ROWS", "GEGLU",    "TANH",     "SWIGLU_OAI", "ADD_ID", "SILU", "SOFTPLUS", "SSM_CONV",
    "GATED_DELTA_NET", "TRANSPOSE",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == static_cast<size_t>(Op::kCount),
              "every op needs its name in kOpNames, in enum order");

inline const char* op_name(Op op) {
    return op < Op::kCount ? kOpNames[static_cast<size_t>(op)] : "?";
}

// The op named `name` (ggml's spelling), or Op::kNone for names not in the table.
inline Op op_from_name(std::string_view name) {
    for (size_t i = 1; i < static_cast<size_t>(Op::kCount); ++i)
        if (name == kOpNames[i]) return static_cast<Op>(i);
    return Op::kNone;
}

}  // namespace ls
