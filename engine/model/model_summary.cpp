// Tokenizer summary, derived parameters, per-type totals and tensor statistics (see model_summary.h).
#include "engine/model/model_summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
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

namespace {

// ggml_rope_yarn_corr_dim: the rotated dim whose wavelength fits `turns` times into n_ctx_orig.
float yarn_corr_dim(int64_t n_dims, int64_t n_ctx_orig, float turns, float base) {
    const float pi = 3.14159265358979323846f;
    return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (turns * 2 * pi)) /
           (2 * std::log(base));
}

}  // namespace

DerivedParams derive_params(const ModelConfig& c, const GgufFile* file) {
    DerivedParams d;
    const RopeScales scales = rope_scales(c);
    d.freq_scale = scales.freq_scale;
    d.rope_attn_factor = scales.attn_factor;
    d.rope_attn_factor_key = static_cast<float>(c.rope_attn_factor);
    const GgufTensorInfo* freqs = file && c.arch == Arch::kLlama ? file->find_tensor("rope_freqs.weight") : nullptr;
    if (freqs && freqs->type == GgmlType::F32 && freqs->n_dims == 1 && freqs->ne[0] > 0 &&
        freqs->n_bytes >= static_cast<uint64_t>(freqs->ne[0]) * sizeof(float)) {
        d.rope_freqs = true;
        d.rope_freqs_count = freqs->ne[0];
    }
    if (d.rope_freqs && freqs->data) {  // a model whose weights are on a server has the count alone
        d.rope_freqs_read = true;
        std::vector<float> v(static_cast<size_t>(freqs->ne[0]));
        std::memcpy(v.data(), freqs->data, v.size() * sizeof(float));
        d.rope_freqs_min = v.empty() ? 1.0f : *std::min_element(v.begin(), v.end());
        d.rope_freqs_max = v.empty() ? 1.0f : *std::max_element(v.begin(), v.end());
        d.rope_freqs_scaled = std::count_if(v.begin(), v.end(), [](float f) { return f != 1.0f; });
    }
    d.kq_scale = attention_kq_scale(c);
    d.kq_head_dim = c.arch == Arch::kDeepseek2 && c.head_dim_k_mla > 0 ? c.head_dim_k_mla : c.head_dim_k;

    if (c.rope_scaling == RopeScaling::kYarn) {
        d.yarn = true;
        d.ggml_yarn_factor = scales.ggml_yarn_factor;
        d.rope_magnitude = d.rope_attn_factor * d.ggml_yarn_factor;
        d.n_ctx_orig = c.rope_orig_ctx > 0 ? c.rope_orig_ctx : c.n_ctx_train;
        d.beta_fast = static_cast<float>(c.rope_yarn_beta_fast);
        d.beta_slow = static_cast<float>(c.rope_yarn_beta_slow);
        const float base = static_cast<float>(c.rope_freq_base);
        const float start = std::floor(yarn_corr_dim(c.n_rot, d.n_ctx_orig, d.beta_fast, base));
        const float end = std::ceil(yarn_corr_dim(c.n_rot, d.n_ctx_orig, d.beta_slow, base));
        d.corr_dims[0] = std::max(0.0f, start);
        d.corr_dims[1] = std::min(static_cast<float>(c.n_rot - 1), end);
    }

    if (c.arch == Arch::kDeepseek2) {
        d.mla = true;
        d.mscale = deepseek2_mscale(c);
        d.mscale_all_dim = yarn_log_mul(c);
        d.qk_rope = c.n_rot;
        d.qk_nope = c.qk_nope_dim();
        d.head_k = c.head_dim_k_mla;
        d.head_v = c.head_dim_v_mla;
        d.head_k_latent = c.kv_lora_rank + c.n_rot;
        d.head_v_latent = c.kv_lora_rank;
        d.cache_latent = c.kv_lora_rank + c.n_rot;
        d.cache_mha = c.n_head * (c.head_dim_k_mla + c.head_dim_v_mla);
        d.llama_absorbs = c.mla_split;
    }

    if (c.n_expert > 0) {
        d.moe = true;
        // Without the key llama.cpp's deepseek2 loader picks softmax, except for GLM-4.7 Lite's shape
        // (47 or 48 layers, 154880 tokens), which gates with sigmoid.
        const bool glm_lite = (c.n_layer == 47 || c.n_layer == 48) && c.n_vocab == 154880;
        const bool sigmoid = c.expert_gating_func == 2 || (c.expert_gating_func == 0 && glm_lite);
        d.gating = sigmoid ? "sigmoid" : "softmax";
        d.gating_given = c.expert_gating_func != 0;
        d.n_moe_layers = std::max<int64_t>(c.n_layer - c.n_layer_dense_lead, 0);
    }
    return d;
}

std::string layer_list(const ModelConfig& c, bool recurrent) {
    std::string out;
    int64_t run_start = -1;
    auto flush = [&](int64_t end) {  // [run_start, end)
        if (run_start < 0) return;
        out += (out.empty() ? "" : ", ") + (end - run_start > 2 ? fmt::format("{}..{}", run_start, end - 1)
                                             : end - run_start == 2 ? fmt::format("{}, {}", run_start, end - 1)
                                                                    : std::to_string(run_start));
        run_start = -1;
    };
    for (int64_t il = 0; il <= c.n_layer; ++il) {
        const bool match = il < c.n_layer && c.layer_is_recurrent(il) == recurrent;
        if (match && run_start < 0) run_start = il;
        if (!match) flush(il);
    }
    return out.empty() ? "none" : out;
}

std::vector<SummaryLine> hybrid_lines(const ModelConfig& c) {
    std::vector<SummaryLine> lines;
    int64_t n_recurrent = 0;
    for (int64_t il = 0; il < c.n_layer; ++il) n_recurrent += c.layer_is_recurrent(il) ? 1 : 0;
    lines.push_back({"layers", fmt::format("{} Gated DeltaNet (recurrent): {}; {} gated attention: {}", n_recurrent,
                                           layer_list(c, true), c.n_layer - n_recurrent, layer_list(c, false))});
    const int64_t S = c.ssm_d_state;
    lines.push_back({"delta net", fmt::format("q/k {} heads x {}, v {} heads x {} (value head h reads q/k head h % {}); "
                                              "conv1d of {} taps over {} channels; q and k L2-normalised, scaled 1/sqrt({}) "
                                              "in the rule; decay exp(softplus(alpha + dt_bias) * ssm_a)",
                                              c.ssm_n_k_heads, S, c.ssm_n_v_heads, S, c.ssm_n_k_heads, c.ssm_d_conv,
                                              c.ssm_conv_channels(), S)});
    const int64_t per_layer = c.ssm_conv_state() + c.ssm_state();
    lines.push_back({"state", fmt::format("per DeltaNet layer {} conv values ({} x {}) + {} delta-rule values ({} heads of "
                                          "{} x {}) = {} at f32; {} for the model, whatever the context",
                                          c.ssm_conv_state(), c.ssm_d_conv - 1, c.ssm_conv_channels(), c.ssm_state(),
                                          c.ssm_n_v_heads, S, S, bytes_text(static_cast<uint64_t>(per_layer) * 4),
                                          bytes_text(static_cast<uint64_t>(per_layer * n_recurrent) * 4))});
    const int* sec = c.rope_sections;
    lines.push_back({"imrope", fmt::format("sections [{}, {}, {}, {}] interleaved over {} of {} dims (the rest unrotated); a "
                                           "text token's first three positions are its position, the fourth 0; "
                                           "attention output times sigmoid(gate) (attn_q's second half per head)",
                                           sec[0], sec[1], sec[2], sec[3], c.n_rot, c.head_dim_k)});
    return lines;
}

std::vector<SummaryLine> derived_lines(const ModelConfig& c, const GgufFile* file) {
    const DerivedParams d = derive_params(c, file);
    std::vector<SummaryLine> lines;
    if (d.mla)
        lines.push_back({"attention", fmt::format("kq scale {:.6f} = mscale^2/sqrt({}), mscale {:.6f} (mscale_all_dim {:g})",
                                                  d.kq_scale, d.kq_head_dim, d.mscale, d.mscale_all_dim)});
    else if (c.arch == Arch::kPhi3)
        lines.push_back({"attention", fmt::format("the roped Q scaled by {:.6f} = 1/sqrt({}) (Qcur-L), then kq scale 1",
                                                  phi3_q_scale(c), c.head_dim_k)});
    else if (c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3)
        lines.push_back({"attention", fmt::format("the roped Q scaled by {:.6f} (Qcur-L), then kq scale 1{}", gemma_q_scale(c),
                                                  c.attn_softcap > 0 ? fmt::format(", scores capped at {:g} * tanh(kq / {:g})",
                                                                                   c.attn_softcap, c.attn_softcap)
                                                                     : "")});
    if (c.has_swa()) {
        int64_t local = 0;
        std::string globals;
        for (int64_t il = 0; il < c.n_layer; ++il) {
            if (c.layer_is_swa(il)) ++local;
            else globals += (globals.empty() ? "" : ", ") + std::to_string(il);
        }
        lines.push_back({"sliding window", fmt::format("{} of {} layers local: each token sees the last {} positions, RoPE "
                                                       "base {:g} {}; global layers: {}", local, c.n_layer, c.n_swa,
                                                       c.rope_freq_base_swa,
                                                       c.swa_rope_scaled ? "with the model's scaling" : "at scale 1",
                                                       globals.empty() ? "none" : globals)});
    }
    if (c.arch == Arch::kGptOss)
        lines.push_back({"gpt-oss", "one attention sink per head in every softmax (attn_sinks); experts chosen by the top "
                                    "k of the biased router logits and weighted by a softmax over those k; biased expert "
                                    "products; SwiGLU x sigmoid(1.702 x) (up + 1) with gate <= 7, -7 <= up <= 7"});
    if (c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3)
        lines.push_back({"gemma", fmt::format("embeddings times sqrt({}) = {:.6f} (inp_scaled); GEGLU feed-forward (GELU tanh "
                                              "form){}", c.n_embd, std::sqrt(static_cast<float>(c.n_embd)),
                                              c.final_softcap > 0 ? fmt::format("; logits capped at {:g} * tanh(x / {:g})",
                                                                                c.final_softcap, c.final_softcap)
                                                                  : "")});
    else
        lines.push_back({"attention", fmt::format("kq scale {:.6f} = 1/sqrt({})", d.kq_scale, d.kq_head_dim)});
    if (c.rope_scaling != RopeScaling::kNone)
        lines.push_back({"rope scaling", fmt::format("{}, freq_scale {:g} (factor {:g})", rope_scaling_name(c.rope_scaling),
                                                     d.freq_scale, c.rope_scaling_factor)});
    if (d.rope_freqs && d.rope_freqs_read)
        lines.push_back({"rope freqs", fmt::format("rope_freqs.weight: {} of {} pairs slowed down by factors {:g}..{:g} "
                                                   "(each pair's angle divided by its factor; Llama 3.1+ \"llama3\" scaling)",
                                                   d.rope_freqs_scaled, d.rope_freqs_count, d.rope_freqs_min,
                                                   d.rope_freqs_max)});
    else if (d.rope_freqs)
        lines.push_back({"rope freqs", fmt::format("rope_freqs.weight: a factor for each of {} pairs (each pair's angle "
                                                   "divided by its factor; Llama 3.1+ \"llama3\" scaling); its values "
                                                   "are where the weights are", d.rope_freqs_count)});
    if (c.rope_scaling == RopeScaling::kLongRope && file && file->find_tensor("rope_factors_long.weight"))
        lines.push_back({"longrope", fmt::format("rope_factors_short for a context of up to {} cells, rope_factors_long "
                                                 "beyond (llama.cpp compares the run's n_ctx with "
                                                 "rope.scaling.original_context_length)", c.rope_orig_ctx)});
    if (d.rope_attn_factor_key != 1.0f)
        lines.push_back({"rope attn", fmt::format("rope.scaling.attn_factor {:g}: cos/sin of every rotation scaled by it "
                                                  "(attn_factor given to the rope op {:.6f})",
                                                  d.rope_attn_factor_key, d.rope_attn_factor)});
    if (d.yarn) {
        lines.push_back({"yarn rope", fmt::format("attn_factor {:.6f} given to the rope op, ggml's YaRN factor {:.6f}, "
                                                  "cos/sin scaled by {:.6f}",
                                                  d.rope_attn_factor, d.ggml_yarn_factor, d.rope_magnitude)});
        lines.push_back({"yarn ramp", fmt::format("corr dims [{}, {}] of {} rope dims (n_ctx_orig {}, beta_fast {:g}, "
                                                  "beta_slow {:g}): pairs below {} extrapolate, above {} interpolate",
                                                  d.corr_dims[0], d.corr_dims[1], c.n_rot, d.n_ctx_orig, d.beta_fast,
                                                  d.beta_slow, d.corr_dims[0], d.corr_dims[1])});
    }
    if (d.mla) {
        lines.push_back({"mla heads", fmt::format("unabsorbed q/k {} (nope {} + rope {}), v {}; absorbed q/k {} "
                                                  "(latent {} + rope {}), v {} (latent)",
                                                  d.head_k, d.qk_nope, d.qk_rope, d.head_v, d.head_k_latent,
                                                  c.kv_lora_rank, d.qk_rope, d.head_v_latent)});
        const double ratio = d.cache_latent > 0 ? double(d.cache_mha) / double(d.cache_latent) : 0.0;
        lines.push_back({"mla cache", fmt::format("per token and layer {} values absorbed ({} B at f16) vs {} unabsorbed "
                                                  "({} B), {:.1f}x less; llama.cpp runs the {} form",
                                                  d.cache_latent, 2 * d.cache_latent, d.cache_mha, 2 * d.cache_mha,
                                                  ratio, d.llama_absorbs ? "absorbed" : "unabsorbed")});
    }
    if (c.hybrid()) for (const SummaryLine& line : hybrid_lines(c)) lines.push_back(line);
    if (d.moe) {
        const std::string scale = c.expert_weights_scale != 0 ? fmt::format("{:g}", c.expert_weights_scale) : "none";
        const std::string groups = c.n_expert_groups > 1
                                       ? fmt::format(" within the best {} of {} groups of {} (each scored by its two best)",
                                                     c.n_group_used, c.n_expert_groups, c.n_expert / c.n_expert_groups)
                                       : "";
        lines.push_back({"moe", fmt::format("top {} of {} experts{} + {} shared, {} gating{}, weights norm {}, scale {}; "
                                            "{} leading dense layer{}, {} MoE layers",
                                            c.n_expert_used, c.n_expert, groups, c.n_expert_shared, d.gating,
                                            d.gating_given ? "" : " (default)", c.expert_weights_norm ? "yes" : "no",
                                            scale, c.n_layer_dense_lead, c.n_layer_dense_lead == 1 ? "" : "s",
                                            d.n_moe_layers)});
    }
    return lines;
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
    if (!tensor.data)
        return make_error(ErrorCode::kUnsupported, fmt::format("{}: its data are not here (a model whose weights stay "
                                                               "on the server it runs on)", tensor.name));
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
