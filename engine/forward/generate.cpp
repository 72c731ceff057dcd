// Greedy decoding loop.
#include "engine/forward/generate.h"

#include <chrono>

namespace ls {

int32_t argmax(const std::vector<float>& logits) {
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
        if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
    return best;
}

Result<GenerateResult> generate_greedy(ForwardPass& forward, const Tokenizer* tokenizer, const std::vector<int32_t>& prompt,
                                       int n_predict, EventSink* sink, const std::function<void(int decode)>& after_decode) {
    GenerateResult r;
    std::vector<int32_t> input = prompt;
    for (int d = 0;; ++d) {
        auto start = std::chrono::steady_clock::now();
        if (Status s = forward.eval(input, sink); !s) return s.error();
        r.decode_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        r.decode_n_tokens.push_back(static_cast<int32_t>(input.size()));
        if (after_decode) after_decode(d);
        if (static_cast<int>(r.generated.size()) >= n_predict) break;
        const int32_t next = argmax(forward.last_logits());
        r.generated.push_back(next);
        if (tokenizer && tokenizer->is_eog(next)) break;
        input = {next};  // every generated token is evaluated, as llama.cpp does
    }
    return r;
}

}  // namespace ls
