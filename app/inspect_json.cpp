// `layerscope inspect --json`: the same facts as the text output as one JSON object (schema in
// the README): version, alignment, metadata, tokenizer, config and what it implies, tensors, type
// totals, lints.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "engine/gguf/gguf.h"
#include "app/inspect_output.h"
#include "engine/model/lint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_summary.h"
#include "engine/model/quant_block.h"

namespace ls::app {

namespace {

using nlohmann::json;

// Arrays longer than this keep their first items only ("count" says how many there are): a
// 150k-token vocabulary would otherwise make the output tens of megabytes.
constexpr size_t kMaxJsonArrayItems = 64;

// f32 values as their shortest decimal form (1e-05, not 9.999999747378752e-06).
double f32_json(double v) {
    float f = static_cast<float>(v);
    if (!std::isfinite(f)) return v;
    return std::strtod(fmt::format("{}", f).c_str(), nullptr);
}

json scalar_json(const GgufValue& v) {
    switch (v.type) {
        case GgufValueType::BOOL: return v.u64 != 0;
        case GgufValueType::STRING: return v.str;
        case GgufValueType::FLOAT32: return f32_json(v.f64);
        case GgufValueType::FLOAT64: return v.f64;
        case GgufValueType::UINT8: case GgufValueType::UINT16: case GgufValueType::UINT32: case GgufValueType::UINT64:
            return v.u64;
        default: return v.i64;
    }
}

json value_json(const GgufValue& v) {
    if (!v.is_array()) return scalar_json(v);
    json items = json::array();
    size_t n = std::min(v.array_size(), kMaxJsonArrayItems);
    for (size_t i = 0; i < n; ++i)
        items.push_back(v.elem_type == GgufValueType::STRING ? json(v.strings[i]) : value_json(v.item(i)));
    return items;
}

json metadata_json(const GgufFile& file) {
    json out = json::object();
    for (const GgufKV& kv : file.metadata()) {
        json entry = {{"type", gguf_value_type_name(kv.value.type)}, {"value", value_json(kv.value)}};
        if (kv.value.is_array()) {
            entry["elem_type"] = gguf_value_type_name(kv.value.elem_type);
            entry["count"] = kv.value.array_size();
            entry["truncated"] = kv.value.array_size() > kMaxJsonArrayItems;
        }
        out[kv.key] = std::move(entry);
    }
    return out;
}

json ne_json(const GgufTensorInfo& t) {
    json ne = json::array();
    for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) ne.push_back(t.ne[d]);
    return ne;
}

json tokenizer_json(const GgufFile& file) {
    TokenizerSummary t = summarize_tokenizer(file);
    auto id_or_null = [](int64_t id) { return id < 0 ? json(nullptr) : json(id); };
    auto flag_or_null = [](int v) { return v < 0 ? json(nullptr) : json(v != 0); };
    return {{"model", t.model},           {"pre", t.pre},
            {"n_tokens", t.n_tokens},     {"n_merges", t.n_merges},
            {"bos_token_id", id_or_null(t.bos_id)}, {"eos_token_id", id_or_null(t.eos_id)},
            {"bos_piece", t.bos_piece},   {"eos_piece", t.eos_piece},
            {"add_bos", flag_or_null(t.add_bos)},   {"add_eos", flag_or_null(t.add_eos)},
            {"chat_template", t.has_chat_template}, {"chat_template_bytes", t.chat_template_bytes}};
}

json config_json(const GgufFile& file) {
    auto config = model_config_from_gguf(file);
    if (!config.ok()) return {{"error", config.error().message}};
    const ModelConfig& c = *config;
    json out = {{"arch", c.arch_name},           {"n_embd", c.n_embd},
                {"n_layer", c.n_layer},          {"n_head", c.n_head},
                {"n_head_kv", c.n_head_kv},      {"head_dim_k", c.head_dim_k},
                {"head_dim_v", c.head_dim_v},    {"n_rot", c.n_rot},
                {"n_ff", c.n_ff},                {"n_ctx_train", c.n_ctx_train},
                {"n_vocab", c.n_vocab},          {"rms_eps", f32_json(c.rms_eps)},
                {"rope_type", rope_type_name(c.rope_type)}, {"rope_freq_base", c.rope_freq_base},
                {"rope_scaling", rope_scaling_name(c.rope_scaling)}};
    if (c.rope_scaling != RopeScaling::kNone) {
        out["rope_scaling_factor"] = c.rope_scaling_factor;
        out["rope_orig_ctx"] = c.rope_orig_ctx;
        out["rope_yarn_log_multiplier"] = c.rope_yarn_log_multiplier;
    }
    if (c.n_expert > 0) {
        out["n_expert"] = c.n_expert;
        out["n_expert_used"] = c.n_expert_used;
        out["n_expert_shared"] = c.n_expert_shared;
        out["n_ff_expert"] = c.n_ff_expert;
        out["n_layer_dense_lead"] = c.n_layer_dense_lead;
    }
    if (c.arch == Arch::kDeepseek2) {
        out["q_lora_rank"] = c.q_lora_rank;
        out["kv_lora_rank"] = c.kv_lora_rank;
        out["head_dim_k_mla"] = c.head_dim_k_mla;
        out["head_dim_v_mla"] = c.head_dim_v_mla;
        out["mla_split"] = c.mla_split;
    }
    return out;
}

// What the config implies (derive_params); null when the config cannot be read.
json derived_json(const GgufFile& file) {
    auto config = model_config_from_gguf(file);
    if (!config.ok()) return nullptr;
    const ModelConfig& c = *config;
    const DerivedParams d = derive_params(c, &file);
    json out = {{"kq_scale", f32_json(d.kq_scale)},
                {"kq_head_dim", d.kq_head_dim},
                {"freq_scale", f32_json(d.freq_scale)},
                {"rope_attn_factor", f32_json(d.rope_attn_factor)}};
    if (d.rope_freqs)
        out["rope_freqs"] = {{"pairs", d.rope_freqs_count},
                             {"scaled_pairs", d.rope_freqs_scaled},
                             {"min", f32_json(d.rope_freqs_min)},
                             {"max", f32_json(d.rope_freqs_max)}};
    if (d.yarn) {
        out["ggml_yarn_factor"] = f32_json(d.ggml_yarn_factor);
        out["rope_magnitude"] = f32_json(d.rope_magnitude);
        out["yarn_n_ctx_orig"] = d.n_ctx_orig;
        out["yarn_beta_fast"] = f32_json(d.beta_fast);
        out["yarn_beta_slow"] = f32_json(d.beta_slow);
        out["yarn_corr_dims"] = {d.corr_dims[0], d.corr_dims[1]};
    }
    if (d.mla) {
        out["mscale"] = f32_json(d.mscale);
        out["mscale_all_dim"] = f32_json(d.mscale_all_dim);
        out["mla"] = {{"qk_nope", d.qk_nope},
                      {"qk_rope", d.qk_rope},
                      {"head_k", d.head_k},
                      {"head_v", d.head_v},
                      {"head_k_absorbed", d.head_k_latent},
                      {"head_v_absorbed", d.head_v_latent},
                      {"cache_values_absorbed", d.cache_latent},
                      {"cache_values_unabsorbed", d.cache_mha},
                      {"cache_bytes_absorbed_f16", 2 * d.cache_latent},
                      {"cache_bytes_unabsorbed_f16", 2 * d.cache_mha},
                      {"llama_form", d.llama_absorbs ? "absorbed" : "unabsorbed"}};
    }
    if (d.moe)
        out["moe"] = {{"n_expert", c.n_expert},
                      {"n_expert_used", c.n_expert_used},
                      {"n_expert_shared", c.n_expert_shared},
                      {"n_layer_dense_lead", c.n_layer_dense_lead},
                      {"n_moe_layers", d.n_moe_layers},
                      {"gating", d.gating},
                      {"gating_given", d.gating_given},
                      {"weights_norm", c.expert_weights_norm},
                      {"weights_scale", f32_json(c.expert_weights_scale)}};
    return out;
}

json tensors_json(const GgufFile& file) {
    json out = json::array();
    for (const GgufTensorInfo& t : file.tensors())
        out.push_back({{"name", t.name}, {"type", ggml_type_name(t.type)}, {"ne", ne_json(t)},
                       {"offset", t.offset}, {"bytes", t.n_bytes}});
    return out;
}

json type_totals_json(const GgufFile& file) {
    json out = json::array();
    for (const TypeTotal& total : totals_by_type(file))
        out.push_back({{"type", ggml_type_name(total.type)}, {"count", total.n_tensors},
                       {"elements", total.n_elements}, {"bytes", total.n_bytes},
                       {"bits_per_weight", total.bits_per_weight()}});
    return out;
}

json lints_json(const GgufFile& file) {
    json out = json::array();
    for (const Lint& l : lint_model(file))
        out.push_back({{"severity", lint_severity_name(l.severity)}, {"subject", l.subject}, {"message", l.message}});
    return out;
}

}  // namespace

int print_inspect_json(const GgufFile& file, const InspectOptions& options) {
    json out = {{"file", file.path()},       {"file_size", file.file_size()},
                {"version", file.version()}, {"alignment", file.alignment()},
                {"data_offset", file.data_offset()}};
    out["metadata"] = metadata_json(file);
    out["tokenizer"] = tokenizer_json(file);
    out["config"] = config_json(file);
    out["derived"] = derived_json(file);
    out["tensors"] = tensors_json(file);
    out["tensor_types"] = type_totals_json(file);
    out["lints"] = lints_json(file);

    if (!options.tensor_name.empty()) {
        const GgufTensorInfo* t = file.find_tensor(options.tensor_name);  // checked by run_inspect
        auto values = dequantize_tensor(*t);
        if (!values.ok()) {
            fmt::print(stderr, "layerscope inspect: {}\n", values.error().message);
            return kExitBadInput;
        }
        ValueStats s = compute_stats(values->data(), static_cast<int64_t>(values->size()));
        size_t n = std::min(values->size(), static_cast<size_t>(std::max(options.values, 0)));
        out["tensor"] = {{"name", t->name},
                         {"type", ggml_type_name(t->type)},
                         {"ne", ne_json(*t)},
                         {"values", std::vector<float>(values->begin(), values->begin() + n)},
                         {"stats", {{"n", s.n}, {"min", s.min}, {"max", s.max}, {"mean", s.mean},
                                    {"rms", s.rms}, {"nan", s.n_nan}, {"inf", s.n_inf}}}};
        if (options.block >= 0) {
            const QuantBlock b = describe_quant_block(*t, file.data_offset(), options.block).value();  // checked by run_inspect
            json fields = json::object(), elements = json::array();
            for (const QuantBlockField& f : b.fields) fields[f.name] = f.value;
            for (const QuantBlockElement& e : b.elements)
                elements.push_back({{"index", e.index}, {"code", e.code}, {"level", e.level}, {"group", e.group}, {"value", e.value}});
            out["tensor"]["block"] = {{"index", b.block},         {"blocks", b.n_blocks},       {"elements_per_block", b.block_elements},
                                      {"bytes", b.block_bytes},   {"file_offset", b.file_offset}, {"formula", b.formula},
                                      {"fields", fields},         {"elements", elements}};
        }
    }
    // Token pieces can be partial UTF-8 sequences; replace them rather than throw.
    std::cout << out.dump(2, ' ', false, json::error_handler_t::replace) << '\n';
    return kExitOk;
}

}  // namespace ls::app
