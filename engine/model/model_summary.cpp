// Tokenizer summary, per-type totals and tensor statistics (see model_summary.h).
#include "engine/model/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/common/host_memory.h"
#include "kernels/cpu/dequant.h"
#include "engine/gguf/gguf.h"

namespace ls {

TokenizerSummary summarize_tokenizer(const GgufFile& file) {
    TokenizerSummary s;
    s.model = file.get_string("tokenizer.ggml.model", "");
    s.pre = file.get_string("tokenizer.ggml.pre", "");
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (tokens && tokens->is_array()) s.n_tokens = static_cast<int64_t>(tokens->array_size());
    if (const GgufValue* merges = file.find("tokenizer.ggml.merges"); merges && merges->is_array())
        s.n_merges = static_cast<int64_t>(merges->array_size());
    s.bos_id = file.get_int("tokenizer.ggml.bos_token_id", -1);
    s.eos_id = file.get_int("tokenizer.ggml.eos_token_id", -1);
    auto piece = [&](int64_t id) -> std::string {
        if (!tokens || tokens->elem_type != GgufValueType::STRING || id < 0 || id >= s.n_tokens) return "";
        return tokens->strings[static_cast<size_t>(id)];
    };
    s.bos_piece = piece(s.bos_id);
    s.eos_piece = piece(s.eos_id);
    if (file.find("tokenizer.ggml.add_bos_token")) s.add_bos = file.get_bool("tokenizer.ggml.add_bos_token", false);
    if (file.find("tokenizer.ggml.add_eos_token")) s.add_eos = file.get_bool("tokenizer.ggml.add_eos_token", false);
    if (const GgufValue* tmpl = file.find("tokenizer.chat_template"); tmpl && tmpl->type == GgufValueType::STRING) {
        s.has_chat_template = true;
        s.chat_template_bytes = tmpl->str.size();
    }
    return s;
}

std::vector<TypeTotal> totals_by_type(const GgufFile& file) {
    std::map<uint32_t, TypeTotal> by_type;
    for (const GgufTensorInfo& t : file.tensors()) {
        TypeTotal& total = by_type[static_cast<uint32_t>(t.type)];
        total.type = t.type;
        total.n_tensors += 1;
        total.n_elements += t.n_elements();
        total.n_bytes += t.n_bytes;
    }
    std::vector<TypeTotal> out;
    for (auto& [id, total] : by_type) out.push_back(total);
    std::stable_sort(out.begin(), out.end(), [](const TypeTotal& a, const TypeTotal& b) { return a.n_bytes > b.n_bytes; });
    return out;
}

ValueStats compute_stats(const float* values, int64_t n) {
    ValueStats s;
    s.n = n;
    double sum = 0, sum_sq = 0;
    int64_t n_finite = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        float v = values[i];
        if (std::isnan(v)) { ++s.n_nan; continue; }
        if (std::isinf(v)) { ++s.n_inf; continue; }
        lo = std::min(lo, double(v));
        hi = std::max(hi, double(v));
        sum += v;
        sum_sq += double(v) * double(v);
        ++n_finite;
    }
    if (n_finite > 0) {
        s.min = lo;
        s.max = hi;
        s.mean = sum / double(n_finite);
        s.rms = std::sqrt(sum_sq / double(n_finite));
    }
    return s;
}

Result<std::vector<float>> dequantize_tensor(const GgufTensorInfo& tensor) {
    const GgmlTypeTraits* traits = ggml_type_traits(tensor.type);
    if (!can_dequantize(tensor.type))
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{}: type {} cannot be dequantized yet", tensor.name,
                                      traits ? traits->name : "?"));
    const uint64_t f32_bytes = mul_sat(static_cast<uint64_t>(tensor.n_elements()), sizeof(float));
    if (const HostMemory host = available_host_memory(); host.known && f32_bytes > host.available_bytes)
        return make_error(ErrorCode::kBadInput, fmt::format("{}: its {} values as f32 need {}; {} available ({})", tensor.name,
                                                            tensor.n_elements(), bytes_text(f32_bytes),
                                                            bytes_text(host.available_bytes), host.source));
    std::vector<float> values(static_cast<size_t>(tensor.n_elements()));
    if (!dequantize_rows(tensor.type, tensor.data, 0, values.data(), tensor.n_rows(), tensor.ne[0]))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: could not decode {} rows of {} {} elements", tensor.name,
                                      tensor.n_rows(), tensor.ne[0], traits ? traits->name : "?"));
    return values;
}

}  // namespace ls
