// Greedy generation over a ForwardPass, as llama-completion does it: the prompt is decode call 0,
// each generated token is then evaluated in a call of its own (n_predict tokens: n_predict + 1
// calls), stopping early at an end-of-generation token (which is not evaluated).
#pragma once

#include <functional>
#include <vector>

#include "engine/forward/forward.h"

namespace ls {

struct GenerateResult {
    std::vector<int32_t> generated;        // generated[d] = argmax of decode call d's logits
    std::vector<int32_t> decode_n_tokens;  // tokens per decode call
    std::vector<double> decode_ms;         // wall time per decode call
};

// Index of the largest logit (the first one on ties), over every row, padding rows included.
int32_t argmax(const std::vector<float>& logits);

// `after_decode(d)` runs after decode call d (the forward's last_logits are that call's).
Result<GenerateResult> generate_greedy(ForwardPass& forward, const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                                       int n_predict, EventSink* sink,
                                       const std::function<void(int decode)>& after_decode = {});

}  // namespace ls
