// Reads ModelConfig from GGUF metadata following llama.cpp's key names, defaults and the checks
// its loader makes (so a file we accept is one llama.cpp would accept, and vice versa).
#include "engine/model/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/gguf/gguf.h"
#include "engine/util/quote.h"

namespace ls {

const char* arch_name(Arch arch) {
    switch (arch) {
        case Arch::kLlama: return "llama";
        case Arch::kQwen2: return "qwen2";
        case Arch::kQwen3: return "qwen3";
        case Arch::kQwen3Moe: return "qwen3moe";
        case Arch::kPhi3: return "phi3";
        case Arch::kGemma2: return "gemma2";
        case Arch::kGemma3: return "gemma3";
        case Arch::kDeepseek2: return "deepseek2";
        case Arch::kGptOss: return "gpt-oss";
        case Arch::kQwen35: return "qwen35";
        case Arch::kQwen35Moe: return "qwen35moe";
    }
    return "?";
}

const char* rope_type_name(RopeType type) {
    return type == RopeType::kNeox ? "neox" : type == RopeType::kImrope ? "imrope" : "norm";
}

const char* rope_scaling_name(RopeScaling scaling) {
    switch (scaling) {
        case RopeScaling::kNone: return "none";
        case RopeScaling::kLinear: return "linear";
        case RopeScaling::kYarn: return "yarn";
        case RopeScaling::kLongRope: return "longrope";
    }
    return "?";
}

bool arch_from_name(std::string_view name, Arch* out) {
    if (name == "llama") { *out = Arch::kLlama; return true; }
    if (name == "qwen2") { *out = Arch::kQwen2; return true; }
    if (name == "qwen3") { *out = Arch::kQwen3; return true; }
    if (name == "qwen3moe") { *out = Arch::kQwen3Moe; return true; }
    if (name == "phi3") { *out = Arch::kPhi3; return true; }
    if (name == "gemma2") { *out = Arch::kGemma2; return true; }
    if (name == "gemma3") { *out = Arch::kGemma3; return true; }
    if (name == "deepseek2") { *out = Arch::kDeepseek2; return true; }
    if (name == "gpt-oss") { *out = Arch::kGptOss; return true; }
    if (name == "qwen35") { *out = Arch::kQwen35; return true; }
    if (name == "qwen35moe") { *out = Arch::kQwen35Moe; return true; }
    return false;
}

namespace {

// Reads "<arch>.<suffix>" keys with the messages a user can act on.
class KeyReader {
public:
    KeyReader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

    std::string key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }

    // Integer key. An array is an error here: only the keys llama.cpp reads per layer take one.
    Result<int64_t> required_int(std::string_view suffix) const { return read_int(suffix, nullptr, 0); }
    Result<int64_t> optional_int(std::string_view suffix, int64_t fallback) const { return read_int(suffix, &fallback, 0); }
    // A key llama.cpp accepts as one value or one per layer (head counts, feed_forward_length,
    // expert_used_count, expert_feed_forward_length). An array must have n_layer entries, all
    // equal: the graphs here give every layer one shape, so a model whose layers differ is refused
    // by name rather than run with layer 0's value.
    Result<int64_t> required_layer_int(std::string_view suffix, int64_t n_layer) const {
        return read_int(suffix, nullptr, n_layer);
    }
    Result<int64_t> optional_layer_int(std::string_view suffix, int64_t fallback, int64_t n_layer) const {
        return read_int(suffix, &fallback, n_layer);
    }

    Result<double> get_float(std::string_view suffix, const double* fallback) const {
        std::string k = key(suffix);
        const GgufValue* v = file_.find(k);
        if (!v) {
            if (fallback) return *fallback;
            return make_error(ErrorCode::kBadInput, fmt::format("{} is missing; {} models need it", k, arch_));
        }
        double out = 0;
        if (!v->get_float(&out))
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{} has type {}; expected a number", k, gguf_value_type_name(v->type)));
        return out;
    }
    Result<double> required_float(std::string_view suffix) const { return get_float(suffix, nullptr); }
    Result<double> optional_float(std::string_view suffix, double fallback) const { return get_float(suffix, &fallback); }

    bool has(std::string_view suffix) const { return file_.find(key(suffix)) != nullptr; }

private:
    Result<int64_t> read_int(std::string_view suffix, const int64_t* fallback, int64_t n_layer) const {
        std::string k = key(suffix);
        const GgufValue* v = file_.find(k);
        if (!v) {
            if (fallback) return *fallback;
            return make_error(ErrorCode::kBadInput, fmt::format("{} is missing; {} models need it", k, arch_));
        }
        int64_t out = 0;
        if (!v->is_array()) {
            if (v->get_int(&out)) return out;
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{} has type {}; expected an integer", k, gguf_value_type_name(v->type)));
        }
        if (n_layer <= 0)
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{} is an array of {}; expected one integer", k, gguf_value_type_name(v->elem_type)));
        if (v->array_size() != static_cast<size_t>(n_layer))
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{} has {} entries for {} layers", k, v->array_size(), n_layer));
        for (size_t il = 0; il < v->array_size(); ++il) {
            int64_t x = 0;
            if (!v->item_int(il, &x))
                return make_error(ErrorCode::kBadInput, fmt::format("{} holds {}; expected integers", k,
                                                                    gguf_value_type_name(v->elem_type)));
            if (il == 0) out = x;
            else if (x != out)
                return make_error(ErrorCode::kUnsupported,
                                  fmt::format("{} differs between layers ({} in layer 0, {} in layer {}): layers of "
                                              "different shapes are not supported yet", k, out, x, il));
        }
        return out;
    }

    const GgufFile& file_;
    std::string arch_;
};

// Assigns a Result's value or returns its error from the enclosing function.
#define LS_ASSIGN(dst, expr)                 \
    do {                                     \
        auto ls_r_ = (expr);                 \
        if (!ls_r_.ok()) return ls_r_.error(); \
        (dst) = ls_r_.value();               \
    } while (0)

Error positive_error(const KeyReader& keys, std::string_view suffix, int64_t value) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{} is {}; it must be positive", keys.key(suffix), value));
}

Status read_rope_scaling(const GgufFile& file, const KeyReader& keys, ModelConfig& c) {
    // llama.cpp reads a missing rope.scaling.type as "linear": a rope.scaling.factor (or the older
    // rope.scale_linear) without a type scales positions linearly.
    const bool has_factor = keys.has("rope.scaling.factor") || keys.has("rope.scale_linear");
    std::string type = file.get_string(keys.key("rope.scaling.type"), "");
    if (type.empty()) c.rope_scaling = has_factor ? RopeScaling::kLinear : RopeScaling::kNone;
    else if (type == "none") c.rope_scaling = RopeScaling::kNone;
    else if (type == "linear") c.rope_scaling = RopeScaling::kLinear;
    else if (type == "yarn") c.rope_scaling = RopeScaling::kYarn;
    else if (type == "longrope" && c.arch == Arch::kPhi3) c.rope_scaling = RopeScaling::kLongRope;
    else if (type == "longrope")
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{} is \"longrope\" (LongRoPE short/long frequency factors): not supported yet "
                                      "for {} (phi3 runs it)", keys.key("rope.scaling.type"), c.arch_name));
    else
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {}; expected none, linear, yarn or longrope", keys.key("rope.scaling.type"),
                                      quote_text(type)));
    const char* factor_key = keys.has("rope.scaling.factor") ? "rope.scaling.factor" : "rope.scale_linear";
    LS_ASSIGN(c.rope_scaling_factor, keys.optional_float(factor_key, 1.0));
    if (c.rope_scaling_factor == 0.0) c.rope_scaling_factor = 1.0;  // llama.cpp: 0 means no scaling
    LS_ASSIGN(c.rope_attn_factor, keys.optional_float("rope.scaling.attn_factor", 1.0));
    LS_ASSIGN(c.rope_orig_ctx, keys.optional_int("rope.scaling.original_context_length", c.n_ctx_train));
    LS_ASSIGN(c.rope_yarn_log_multiplier, keys.optional_float("rope.scaling.yarn_log_multiplier", 0.0));
    LS_ASSIGN(c.rope_yarn_beta_fast, keys.optional_float("rope.scaling.yarn_beta_fast", 32.0));
    LS_ASSIGN(c.rope_yarn_beta_slow, keys.optional_float("rope.scaling.yarn_beta_slow", 1.0));
    return {};
}

// Group-limited routing (every architecture's loader reads the keys; build_moe_ffn routes by them):
// the checks llama.cpp's loader asserts, and two experts per group at least (its graph scores a
// group by its two best).
Status read_expert_groups(const KeyReader& keys, ModelConfig& c) {
    LS_ASSIGN(c.n_expert_groups, keys.optional_int("expert_group_count", 1));
    LS_ASSIGN(c.n_group_used, keys.optional_int("expert_group_used_count", 0));
    if (c.n_expert_groups <= 1 || c.n_expert <= 0) return {};
    const std::string groups = keys.key("expert_group_count"), used = keys.key("expert_group_used_count");
    if (c.n_expert_groups >= c.n_expert || c.n_expert % c.n_expert_groups != 0 || c.n_expert / c.n_expert_groups < 2)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {} for {} experts; the groups must divide the experts, two or more each "
                                      "(llama.cpp aborts on this file)", groups, c.n_expert_groups, c.n_expert));
    if (c.n_group_used <= 0 || c.n_group_used >= c.n_expert_groups)
        return make_error(ErrorCode::kBadInput, fmt::format("{} is {}; with {} = {} it must be between 1 and {} (llama.cpp "
                                                            "aborts on this file)", used, c.n_group_used, groups,
                                                            c.n_expert_groups, c.n_expert_groups - 1));
    return {};
}

Status read_experts(const GgufFile& file, const KeyReader& keys, ModelConfig& c, bool required) {
    if (required) {
        LS_ASSIGN(c.n_expert, keys.required_int("expert_count"));
        LS_ASSIGN(c.n_expert_used, keys.required_layer_int("expert_used_count", c.n_layer));
        LS_ASSIGN(c.n_expert_shared, keys.required_int("expert_shared_count"));
        LS_ASSIGN(c.n_ff_expert, keys.required_layer_int("expert_feed_forward_length", c.n_layer));
    } else {
        LS_ASSIGN(c.n_expert, keys.optional_int("expert_count", 0));
        LS_ASSIGN(c.n_expert_used, keys.optional_layer_int("expert_used_count", 0, c.n_layer));
        LS_ASSIGN(c.n_expert_shared, keys.optional_int("expert_shared_count", 0));
        LS_ASSIGN(c.n_ff_expert, keys.optional_layer_int("expert_feed_forward_length", c.n_ff, c.n_layer));
    }
    LS_ASSIGN(c.n_layer_dense_lead, keys.optional_int("leading_dense_block_count", 0));
    LS_ASSIGN(c.expert_weights_scale, keys.optional_float("expert_weights_scale", 0.0));
    c.expert_weights_norm = file.get_bool(keys.key("expert_weights_norm"), false);
    LS_ASSIGN(c.expert_gating_func, keys.optional_int("expert_gating_func", 0));
    if (Status s = read_expert_groups(keys, c); !s) return s;
    if (c.n_expert > 0 && (c.n_expert_used <= 0 || c.n_expert_used > c.n_expert))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {}; it must be between 1 and {} ({})", keys.key("expert_used_count"),
                                      c.n_expert_used, c.n_expert, keys.key("expert_count")));
    if (required && c.n_expert <= 0 && c.n_layer_dense_lead < c.n_layer)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {}; {} models with MoE blocks need n_expert > 0",
                                      keys.key("expert_count"), c.n_expert, c.arch_name));
    return {};
}

// The routing llama.cpp's llama and qwen3moe graphs hard-code: softmax gating, the chosen
// weights renormalised, no scale (their loaders read none of these keys).
void fixed_routing(ModelConfig& c) {
    c.expert_gating_func = 1;
    c.expert_weights_norm = true;
    c.expert_weights_scale = 0;
    c.n_expert_shared = 0;
    c.n_layer_dense_lead = 0;
}

// qwen3moe's loader: expert_count and expert_used_count must be positive; the experts are
// expert_feed_forward_length wide, or n_ff / n_expert_used without the key.
Status read_qwen3moe_experts(const KeyReader& keys, ModelConfig& c) {
    LS_ASSIGN(c.n_expert, keys.required_int("expert_count"));
    LS_ASSIGN(c.n_expert_used, keys.required_layer_int("expert_used_count", c.n_layer));
    if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {} and {} is {}; qwen3moe needs 1 <= experts used <= experts (llama.cpp "
                                      "refuses the file)", keys.key("expert_count"), c.n_expert,
                                      keys.key("expert_used_count"), c.n_expert_used));
    LS_ASSIGN(c.n_ff_expert, keys.optional_layer_int("expert_feed_forward_length", 0, c.n_layer));
    if (c.n_ff_expert <= 0) c.n_ff_expert = c.n_ff / c.n_expert_used;
    if (c.n_ff_expert <= 0)
        return make_error(ErrorCode::kBadInput, fmt::format("{} is missing and {} / {} is 0; the experts need a width",
                                                            keys.key("expert_feed_forward_length"),
                                                            keys.key("feed_forward_length"), keys.key("expert_used_count")));
    if (Status s = read_expert_groups(keys, c); !s) return s;
    fixed_routing(c);
    return {};
}

// deepseek2 MLA: llama.cpp decides "lite" (no q compression) from the layer count, so a model of
// another depth must say q_lora_rank explicitly, 0 included.
Status read_mla(const KeyReader& keys, ModelConfig& c) {
    bool lite_by_depth = c.n_layer == 26 || c.n_layer == 27 || (c.n_layer == 48 && c.n_vocab == 128256);
    if (lite_by_depth) {
        LS_ASSIGN(c.q_lora_rank, keys.optional_int("attention.q_lora_rank", 0));
    } else {
        LS_ASSIGN(c.q_lora_rank, keys.required_int("attention.q_lora_rank"));
    }
    LS_ASSIGN(c.kv_lora_rank, keys.required_int("attention.kv_lora_rank"));
    int64_t k_mla = 0, v_mla = 0;
    LS_ASSIGN(k_mla, keys.optional_int("attention.key_length_mla", 0));
    LS_ASSIGN(v_mla, keys.optional_int("attention.value_length_mla", 0));
    c.mla_split = k_mla > 0 && v_mla > 0;
    c.head_dim_k_mla = c.mla_split ? k_mla : c.head_dim_k;
    c.head_dim_v_mla = c.mla_split ? v_mla : c.head_dim_v;
    if (c.head_dim_k_mla <= c.n_rot)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} ({}) must be larger than {} ({}): the key is nope + rope dims",
                                      keys.key(c.mla_split ? "attention.key_length_mla" : "attention.key_length"),
                                      c.head_dim_k_mla, keys.key("rope.dimension_count"), c.n_rot));
    return {};
}

// A key given as one bool per layer (an array of at least n_layer numbers): `out` takes them and
// `given` says it was such an array; anything else leaves both alone for the caller's default.
Status read_layer_flags(const GgufFile& file, const KeyReader& keys, const char* suffix, int64_t n_layer,
                        std::vector<uint8_t>* out, bool* given) {
    *given = false;
    const GgufValue* flags = file.find(keys.key(suffix));
    if (!flags || !flags->is_array()) return {};
    if (flags->array_size() < static_cast<size_t>(n_layer))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} has {} entries for {} layers", keys.key(suffix), flags->array_size(), n_layer));
    for (int64_t il = 0; il < n_layer; ++il) {
        int64_t v = 0;
        if (!flags->item_int(static_cast<size_t>(il), &v))
            return make_error(ErrorCode::kBadInput, fmt::format("{} holds {}; expected one bool per layer", keys.key(suffix),
                                                                gguf_value_type_name(flags->elem_type)));
        (*out)[static_cast<size_t>(il)] = v != 0;
    }
    *given = true;
    return {};
}

// Which layers attend over a sliding window (n_swa > 0): attention.sliding_window_pattern as one
// bool per layer or as a period n (layer il is local when il % n < n - 1; 0: every layer; absent:
// `default_period`), as llama.cpp's load_swa_pattern.
Status read_swa_pattern(const GgufFile& file, const KeyReader& keys, ModelConfig& c, int64_t default_period) {
    c.swa_layers.assign(static_cast<size_t>(c.n_layer), 0);
    if (c.n_swa > 0) {
        bool given = false;
        if (Status s = read_layer_flags(file, keys, "attention.sliding_window_pattern", c.n_layer, &c.swa_layers, &given); !s)
            return s;
        if (!given) {
            int64_t n = 0;
            LS_ASSIGN(n, keys.optional_int("attention.sliding_window_pattern", default_period));
            if (n < 0) return positive_error(keys, "attention.sliding_window_pattern", n);
            for (int64_t il = 0; il < c.n_layer; ++il) c.swa_layers[il] = n == 0 || il % n < n - 1;
        }
    }
    return {};
}

// Gemma's sliding-window keys as llama.cpp's gemma2/gemma3 loaders read them: attention.sliding_window
// (gemma2: 4096 when absent; gemma3: no local layers when absent or 0), sliding_window_pattern as
// one bool per layer or as a period n (layer il is local when il % n < n - 1; 0: every layer; the
// default 2 for gemma2, 6 for gemma3), rope.freq_base_swa (gemma2: rope.freq_base when absent;
// gemma3: 10000), and the soft caps (gemma2: 50 and 30 by default; gemma3: a final cap only when given).
Status read_gemma(const GgufFile& file, const KeyReader& keys, ModelConfig& c) {
    const bool gemma2 = c.arch == Arch::kGemma2;
    LS_ASSIGN(c.n_swa, keys.optional_int("attention.sliding_window", gemma2 ? 4096 : 0));
    if (c.n_swa < 0) return positive_error(keys, "attention.sliding_window", c.n_swa);
    if (Status st = read_swa_pattern(file, keys, c, gemma2 ? 2 : 6); !st) return st;
    LS_ASSIGN(c.rope_freq_base_swa, keys.optional_float("rope.freq_base_swa", gemma2 ? c.rope_freq_base : 10000.0));
    LS_ASSIGN(c.attn_softcap, keys.optional_float("attn_logit_softcapping", gemma2 ? 50.0 : 0.0));
    if (!gemma2) c.attn_softcap = 0;  // gemma3's graph has no attention cap (llama.cpp never reads the key)
    LS_ASSIGN(c.final_softcap, keys.optional_float("final_logit_softcapping", gemma2 ? 30.0 : 0.0));
    for (auto [suffix, cap] : {std::pair{"attn_logit_softcapping", c.attn_softcap}, {"final_logit_softcapping", c.final_softcap}})
        if (!std::isfinite(cap) || cap < 0 || (gemma2 && cap == 0))
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{} is {}; the tanh cap must be a positive number", keys.key(suffix), cap));
    return {};
}

// gpt-oss (llama.cpp's openai-moe loader and graph): experts in every layer, the routing fixed by
// the graph (the top k of the biased router logits, a softmax over the k chosen: gating 3,
// SOFTMAX_WEIGHT; no renormalisation, no scale), experts expert_feed_forward_length wide; local
// layers (attention.sliding_window, required; period 2 by default: the even layers) whose RoPE
// keeps the model's scale (YaRN) at rope.freq_base_swa (default rope.freq_base); heads n_rot wide.
Status read_gpt_oss(const GgufFile& file, const KeyReader& keys, ModelConfig& c) {
    LS_ASSIGN(c.n_expert, keys.optional_int("expert_count", 0));
    LS_ASSIGN(c.n_expert_used, keys.optional_layer_int("expert_used_count", 0, c.n_layer));
    if (c.n_expert <= 0 || c.n_expert_used <= 0 || c.n_expert_used > c.n_expert)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {} and {} is {}; gpt-oss needs 1 <= experts used <= experts (llama.cpp "
                                      "refuses the file)", keys.key("expert_count"), c.n_expert,
                                      keys.key("expert_used_count"), c.n_expert_used));
    LS_ASSIGN(c.n_ff_expert, keys.required_layer_int("expert_feed_forward_length", c.n_layer));
    if (c.n_ff_expert <= 0) return positive_error(keys, "expert_feed_forward_length", c.n_ff_expert);
    if (Status s = read_expert_groups(keys, c); !s) return s;
    c.expert_gating_func = 3;
    c.expert_weights_norm = false;
    c.expert_weights_scale = 0;
    LS_ASSIGN(c.n_swa, keys.required_int("attention.sliding_window"));
    if (c.n_swa <= 0) return positive_error(keys, "attention.sliding_window", c.n_swa);
    if (Status s = read_swa_pattern(file, keys, c, 2); !s) return s;
    LS_ASSIGN(c.rope_freq_base_swa, keys.optional_float("rope.freq_base_swa", c.rope_freq_base));
    c.swa_rope_scaled = true;
    return {};
}

// qwen35 (llama.cpp's llama_model_qwen35 loader): the rope sections (required; an array of up to
// four, or one value for all four), the DeltaNet widths (all required), which layers are recurrent
// (attention.recurrent_layers, one bool per layer, or every full_attention_interval-th layer
// attends: default 4). MTP draft layers (nextn_predict_layers) are refused: the main graph skips
// them, and nothing here runs the draft graph.
Status read_qwen35(const GgufFile& file, const KeyReader& keys, ModelConfig& c) {
    const GgufValue* sections = file.find(keys.key("rope.dimension_sections"));
    if (!sections)
        return make_error(ErrorCode::kBadInput, fmt::format("{} is missing; qwen35 needs its IMROPE sections (llama.cpp "
                                                            "refuses the file)", keys.key("rope.dimension_sections")));
    if (sections->is_array()) {
        if (sections->array_size() > 4)
            return make_error(ErrorCode::kBadInput, fmt::format("{} has {} entries; at most 4",
                                                                keys.key("rope.dimension_sections"), sections->array_size()));
        for (size_t i = 0; i < sections->array_size(); ++i) {
            int64_t v = 0;
            if (!sections->item_int(i, &v) || v < 0 || v > (1 << 20))
                return make_error(ErrorCode::kBadInput, fmt::format("{} entry {} is not a count",
                                                                    keys.key("rope.dimension_sections"), i));
            c.rope_sections[i] = static_cast<int>(v);
        }
    } else {
        int64_t v = 0;
        LS_ASSIGN(v, keys.required_int("rope.dimension_sections"));
        if (v < 0 || v > (1 << 20)) return positive_error(keys, "rope.dimension_sections", v);
        for (int& s : c.rope_sections) s = static_cast<int>(v);
    }
    const int64_t sect_dims = int64_t{c.rope_sections[0]} + c.rope_sections[1] + c.rope_sections[2] + c.rope_sections[3];
    if (c.rope_sections[0] + c.rope_sections[1] + c.rope_sections[2] == 0 || sect_dims > c.head_dim_k)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is [{}, {}, {}, {}]; the first three cannot all be 0 and the sum must be at most "
                                      "the head width {} (ggml's rope aborts)", keys.key("rope.dimension_sections"),
                                      c.rope_sections[0], c.rope_sections[1], c.rope_sections[2], c.rope_sections[3],
                                      c.head_dim_k));
    LS_ASSIGN(c.ssm_d_conv, keys.required_int("ssm.conv_kernel"));
    LS_ASSIGN(c.ssm_d_inner, keys.required_int("ssm.inner_size"));
    LS_ASSIGN(c.ssm_d_state, keys.required_int("ssm.state_size"));
    LS_ASSIGN(c.ssm_n_v_heads, keys.required_int("ssm.time_step_rank"));
    LS_ASSIGN(c.ssm_n_k_heads, keys.required_int("ssm.group_count"));
    constexpr int64_t kMaxSsm = int64_t{1} << 20;
    for (auto [suffix, value] : {std::pair{"ssm.conv_kernel", c.ssm_d_conv}, {"ssm.inner_size", c.ssm_d_inner},
                                 {"ssm.state_size", c.ssm_d_state}, {"ssm.time_step_rank", c.ssm_n_v_heads},
                                 {"ssm.group_count", c.ssm_n_k_heads}})
        if (value <= 0 || value > kMaxSsm)
            return make_error(ErrorCode::kBadInput, fmt::format("{} is {}; it must be in 1..{}", keys.key(suffix), value, kMaxSsm));
    if (c.ssm_d_inner != c.ssm_d_state * c.ssm_n_v_heads || c.ssm_n_v_heads % c.ssm_n_k_heads != 0)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} {} with {} {} value heads and {} {} key heads: llama.cpp's delta net needs value "
                                      "heads as wide as the state ({} = {} x {}) and a whole number of value heads per key head",
                                      keys.key("ssm.inner_size"), c.ssm_d_inner, keys.key("ssm.time_step_rank"),
                                      c.ssm_n_v_heads, keys.key("ssm.group_count"), c.ssm_n_k_heads,
                                      keys.key("ssm.state_size"), c.ssm_d_state, c.ssm_n_v_heads));
    int64_t nextn = 0;
    LS_ASSIGN(nextn, keys.optional_int("nextn_predict_layers", 0));
    if (nextn != 0)
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("{} is {}: multi-token-prediction draft layers are not supported yet",
                                      keys.key("nextn_predict_layers"), nextn));
    c.recurrent_layers.assign(static_cast<size_t>(c.n_layer), 0);
    bool given = false;
    if (Status s = read_layer_flags(file, keys, "attention.recurrent_layers", c.n_layer, &c.recurrent_layers, &given); !s)
        return s;
    if (!given) {
        int64_t interval = 0;
        LS_ASSIGN(interval, keys.optional_int("full_attention_interval", 4));
        if (interval <= 0) return positive_error(keys, "full_attention_interval", interval);
        for (int64_t il = 0; il < c.n_layer; ++il) c.recurrent_layers[il] = (il + 1) % interval != 0;
    }
    if (std::all_of(c.recurrent_layers.begin(), c.recurrent_layers.end(), [](uint8_t r) { return r != 0; }))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("every one of the {} layers is a DeltaNet layer ({}, {}): llama.cpp's hybrid cache "
                                      "then holds no attention layer and aborts", c.n_layer,
                                      keys.key("attention.recurrent_layers"), keys.key("full_attention_interval")));
    return {};
}

}  // namespace

namespace {

Result<ModelConfig> read_config(const GgufFile& file, bool check) {
    ModelConfig c;
    const GgufValue* arch_value = file.find("general.architecture");
    if (!arch_value)
        return make_error(ErrorCode::kBadInput,
                          "general.architecture is missing; every model needs it (llama, qwen2, qwen3, qwen3moe, phi3, "
                          "gemma2, gemma3, deepseek2, gpt-oss, qwen35 or qwen35moe)");
    if (arch_value->type != GgufValueType::STRING)
        return make_error(ErrorCode::kBadInput, "general.architecture is not a string");
    c.arch_name = arch_value->str;
    if (!arch_from_name(c.arch_name, &c.arch))
        return make_error(ErrorCode::kUnsupported,
                          fmt::format("architecture {} is not supported; supported: llama, qwen2, qwen3, qwen3moe, phi3, gemma2, "
                                      "gemma3, deepseek2, gpt-oss, qwen35, qwen35moe",
                                      quote_text(c.arch_name)));

    KeyReader keys(file, c.arch_name);
    if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens"); tokens && tokens->is_array())
        c.n_vocab = static_cast<int64_t>(tokens->array_size());
    LS_ASSIGN(c.n_vocab_key, keys.optional_int("vocab_size", 0));

    LS_ASSIGN(c.n_ctx_train, keys.required_int("context_length"));
    LS_ASSIGN(c.n_embd, keys.required_int("embedding_length"));
    LS_ASSIGN(c.n_layer, keys.required_int("block_count"));
    if (c.n_embd <= 0) return positive_error(keys, "embedding_length", c.n_embd);
    if (c.n_layer <= 0) return positive_error(keys, "block_count", c.n_layer);
    // Every block has tensors of its own, so a count beyond the file's tensors is nonsense (and
    // would size per-layer tables before any tensor is looked at).
    if (static_cast<uint64_t>(c.n_layer) > file.tensors().size())
        return make_error(ErrorCode::kBadInput, fmt::format("{} is {} but the file holds only {} tensors; every block has "
                                                            "tensors of its own", keys.key("block_count"), c.n_layer,
                                                            file.tensors().size()));
    LS_ASSIGN(c.n_head, keys.required_layer_int("attention.head_count", c.n_layer));
    if (c.n_head <= 0) return positive_error(keys, "attention.head_count", c.n_head);
    LS_ASSIGN(c.n_head_kv, keys.optional_layer_int("attention.head_count_kv", c.n_head, c.n_layer));
    if (c.n_head_kv <= 0) return positive_error(keys, "attention.head_count_kv", c.n_head_kv);
    if (check && c.n_head % c.n_head_kv != 0)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} ({}) is not a multiple of {} ({})", keys.key("attention.head_count"),
                                      c.n_head, keys.key("attention.head_count_kv"), c.n_head_kv));
    LS_ASSIGN(c.head_dim_k, keys.optional_int("attention.key_length", c.n_embd / c.n_head));
    LS_ASSIGN(c.head_dim_v, keys.optional_int("attention.value_length", c.n_embd / c.n_head));
    LS_ASSIGN(c.n_rot, keys.optional_int("rope.dimension_count", c.head_dim_k));
    // llama.cpp gives sliding-window layers heads of their own width when these keys say so; every
    // graph here gives all layers one width, so a file whose keys differ is refused by name.
    for (auto [suffix, full] : {std::pair{"attention.key_length_swa", c.head_dim_k},
                                {"attention.value_length_swa", c.head_dim_v}, {"rope.dimension_count_swa", c.n_rot}}) {
        int64_t swa = 0;
        LS_ASSIGN(swa, keys.optional_int(suffix, full));
        if (swa != full)
            return make_error(ErrorCode::kUnsupported,
                              fmt::format("{} is {} where the other layers have {}: sliding-window layers of another "
                                          "head width are not supported yet", keys.key(suffix), swa, full));
    }
    LS_ASSIGN(c.n_ff, keys.required_layer_int("feed_forward_length", c.n_layer));
    LS_ASSIGN(c.rms_eps, keys.required_float("attention.layer_norm_rms_epsilon"));
    LS_ASSIGN(c.rope_freq_base, keys.optional_float("rope.freq_base", 10000.0));
    if (!(c.rms_eps > 0) || !std::isfinite(c.rms_eps))
        return make_error(ErrorCode::kBadInput, fmt::format("{} is {}; it must be a small positive number",
                                                            keys.key("attention.layer_norm_rms_epsilon"), c.rms_eps));
    if (c.n_rot <= 0 || c.n_rot % 2 != 0)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is {}; it must be positive and even", keys.key("rope.dimension_count"), c.n_rot));
    if (Status s = read_rope_scaling(file, keys, c); !s) return s.error();

    switch (c.arch) {
        case Arch::kLlama:
            c.rope_type = RopeType::kNorm;
            // llama.cpp: "invalid n_rot" unless the whole head is rotated.
            if (check && c.n_rot != c.head_dim_k)
                return make_error(ErrorCode::kBadInput,
                                  fmt::format("{} is {} but the head dimension is {}; llama models rotate the whole "
                                              "head (llama.cpp refuses this file: invalid n_rot)",
                                              keys.key("rope.dimension_count"), c.n_rot, c.head_dim_k));
            if (Status s = read_experts(file, keys, c, false); !s) return s.error();
            if (c.n_expert > 0) {
                // llama.cpp's llama graph: experts n_ff wide, softmax, renormalised, no scale.
                c.n_ff_expert = c.n_ff;
                fixed_routing(c);
            }
            break;
        case Arch::kQwen3Moe:
            if (Status s = read_qwen3moe_experts(keys, c); !s) return s.error();
            [[fallthrough]];
        case Arch::kQwen2:
        case Arch::kQwen3:
            c.rope_type = RopeType::kNeox;
            // llama.cpp's qwen2 and qwen3 graphs assert that the whole head is rotated.
            if (check && c.n_rot != c.head_dim_k)
                return make_error(ErrorCode::kBadInput,
                                  fmt::format("{} is {} but the head dimension is {}; {} rotates the whole head "
                                              "(llama.cpp aborts on this file)", keys.key("rope.dimension_count"),
                                              c.n_rot, c.head_dim_k, c.arch_name));
            break;
        case Arch::kPhi3:
            // NEOX pairs over the first rope.dimension_count dims (Phi-4-mini rotates 96 of 128).
            c.rope_type = RopeType::kNeox;
            if (check && c.n_head * c.head_dim_k != c.n_embd)
                return make_error(ErrorCode::kBadInput,
                                  fmt::format("n_head * head_dim = {} * {} but {} is {}; phi3's attention projections are "
                                              "n_embd wide", c.n_head, c.head_dim_k, keys.key("embedding_length"), c.n_embd));
            break;
        case Arch::kGemma2:
        case Arch::kGemma3:
            c.rope_type = RopeType::kNeox;
            if (Status s = read_gemma(file, keys, c); !s) return s.error();
            break;
        case Arch::kDeepseek2:
            c.rope_type = RopeType::kNorm;
            if (Status s = read_experts(file, keys, c, true); !s) return s.error();
            if (Status s = read_mla(keys, c); !s) return s.error();
            break;
        case Arch::kQwen35Moe:
            // qwen3moe's experts (softmax, renormalised, no scale: its loader reads none of those keys)
            // and one shared expert of expert_shared_feed_forward_length (n_ff without it).
            if (Status s = read_qwen3moe_experts(keys, c); !s) return s.error();
            LS_ASSIGN(c.n_ff_shexp, keys.optional_int("expert_shared_feed_forward_length", c.n_ff));
            if (c.n_ff_shexp <= 0) return positive_error(keys, "expert_shared_feed_forward_length", c.n_ff_shexp);
            [[fallthrough]];
        case Arch::kQwen35:
            c.rope_type = RopeType::kImrope;
            if (Status s = read_qwen35(file, keys, c); !s) return s.error();
            break;
        case Arch::kGptOss:
            c.rope_type = RopeType::kNeox;
            // Its graph makes q, k and v heads n_rot wide and scales kq by 1/sqrt(n_rot).
            if (check && (c.n_rot != c.head_dim_k || c.n_rot != c.head_dim_v))
                return make_error(ErrorCode::kBadInput,
                                  fmt::format("{} is {} but the heads are {} (keys) and {} (values) wide; gpt-oss's graph "
                                              "makes every head n_rot wide", keys.key("rope.dimension_count"), c.n_rot,
                                              c.head_dim_k, c.head_dim_v));
            if (Status s = read_gpt_oss(file, keys, c); !s) return s.error();
            break;
    }
    // llama.cpp's llama, qwen2 and qwen3 graphs assert equal key and value head widths.
    if (check && c.arch != Arch::kDeepseek2 && c.head_dim_k != c.head_dim_v)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} ({}) differs from {} ({}); {} needs equal key and value heads (llama.cpp "
                                      "aborts on this file)", keys.key("attention.key_length"), c.head_dim_k,
                                      keys.key("attention.value_length"), c.head_dim_v, c.arch_name));
    // Shapes multiply these (n_head x head dim, ...): beyond 2^30 a product could overflow, and no
    // model comes near it (llama.cpp keeps them in 32 bits).
    constexpr int64_t kMaxDim = int64_t{1} << 30;
    for (auto [suffix, value] : {std::pair{"embedding_length", c.n_embd}, {"attention.head_count", c.n_head},
                                 {"attention.head_count_kv", c.n_head_kv}, {"attention.key_length", c.head_dim_k},
                                 {"attention.value_length", c.head_dim_v}, {"rope.dimension_count", c.n_rot},
                                 {"feed_forward_length", c.n_ff}, {"expert_count", c.n_expert},
                                 {"expert_feed_forward_length", c.n_ff_expert}, {"attention.q_lora_rank", c.q_lora_rank},
                                 {"attention.kv_lora_rank", c.kv_lora_rank}, {"attention.key_length_mla", c.head_dim_k_mla},
                                 {"attention.value_length_mla", c.head_dim_v_mla}})
        if (value > kMaxDim)
            return make_error(ErrorCode::kBadInput, fmt::format("{} is {}; a model dimension is at most 2^30 ({})",
                                                                keys.key(suffix), value, kMaxDim));
    return c;
}

}  // namespace

RopeScales rope_scales(const ModelConfig& c) {
    RopeScales s;
    // llama.cpp (llama-context.cpp) multiplies rope.scaling.attn_factor in last, whatever the scaling.
    s.attn_factor = static_cast<float>(c.rope_attn_factor);
    if (c.rope_scaling == RopeScaling::kNone) return s;  // llama.cpp never scales then
    if (c.rope_scaling_factor > 0) s.freq_scale = 1.0f / static_cast<float>(c.rope_scaling_factor);
    if (c.rope_scaling != RopeScaling::kYarn) return s;
    // llama.cpp (de3ff81, llama-context.cpp): the YaRN attention factor is get_mscale(factor, 1)
    // = 1 + 0.1 ln(factor), except for deepseek2 with a yarn_log_multiplier, where its ratio
    // get_mscale(factor, mscale_all_dim) / get_mscale(factor, mscale_all_dim) is 1 (deepseek2
    // puts the correction into its kq scale instead). Either way it is then divided by
    // 1 + 0.1 ln(factor), the factor ggml's rope multiplies in whenever YaRN is on. Only the
    // deepseek2 loader reads yarn_log_multiplier.
    const float factor = 1.0f / s.freq_scale;
    const bool log_mul = c.arch == Arch::kDeepseek2 && c.rope_yarn_log_multiplier != 0;
    float yarn = log_mul || factor <= 1.0f ? 1.0f : 0.1f * std::log(factor) + 1.0f;
    yarn *= 1.0f / (1.0f + 0.1f * std::log(factor));
    s.attn_factor = yarn * static_cast<float>(c.rope_attn_factor);
    s.ggml_yarn_factor = 1.0f + 0.1f * std::log(1.0f / s.freq_scale);
    return s;
}

float deepseek2_mscale(const ModelConfig& c) {
    if (c.arch != Arch::kDeepseek2) return 1.0f;
    // llama.cpp (de3ff81, src/models/deepseek2.cpp, after its PR 17945 "TAG_DEEPSEEK2_YARN_LOG_MUL_FIX")
    // moves YaRN's magnitude correction out of RoPE and into the kq scale:
    //   attn_factor_org = attn_factor * (1 + 0.1 ln(1/freq_scale))   (undoes the context's division)
    //   mscale          = attn_factor_org * (1 + 0.1 * rope_yarn_log_mul * ln(1/freq_scale))
    // where rope_yarn_log_mul is the stored key divided by 0.1f (yarn_log_mul) and attn_factor is
    // what the context passes to the rope op (rope_scales). The fixtures' deepseek2-mini (factor
    // 40, stored multiplier 0.0707) checks it: mscale 1.260804. Computed in float, in llama.cpp's
    // order, so the bits match too.
    const RopeScales s = rope_scales(c);
    const float ln_inv = std::log(1.0f / s.freq_scale);
    const float attn_factor_org = s.attn_factor * (1.0f + 0.1f * ln_inv);
    return attn_factor_org * (1.0f + 0.1f * yarn_log_mul(c) * ln_inv);
}

float attention_kq_scale(const ModelConfig& c) {
    if (c.arch == Arch::kPhi3) return 1.0f;  // llama.cpp's phi3 graph scales Q by 1/sqrt(d) itself (phi3_q_scale)
    if (c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3) return 1.0f;  // gemma_q_scale on the roped Q
    if (c.arch != Arch::kDeepseek2) return 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
    // deepseek2: kq_scale = mscale^2 / sqrt(n_embd_head_k_mla), over the MLA key width. The
    // fixtures' deepseek2-mini (key width 48) gives 0.229443 in kq_soft_max, not 1/sqrt(48).
    const float mscale = deepseek2_mscale(c);
    const int64_t head_dim = c.head_dim_k_mla > 0 ? c.head_dim_k_mla : c.head_dim_k;
    return 1.0f * mscale * mscale / std::sqrt(static_cast<float>(head_dim));
}

float gemma_q_scale(const ModelConfig& c) {
    const bool is_27b = (c.arch == Arch::kGemma2 && c.n_layer == 46) || (c.arch == Arch::kGemma3 && c.n_layer == 62);
    return is_27b ? 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head))
                  : 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
}

LayerView layer_view(const ModelConfig& c, int64_t il, int64_t pos) {
    LayerView v;
    v.local = c.layer_is_swa(il);
    v.last = pos;
    v.first = v.local ? std::max<int64_t>(0, pos - c.n_swa + 1) : 0;
    return v;
}

std::string layer_view_text(const ModelConfig& c, int64_t il, int64_t pos) {
    if (!c.has_swa() || il < 0 || pos < 0) return "";
    const LayerView v = layer_view(c, il, pos);
    return fmt::format("{}: position {} sees positions {}..{}",
                       v.local ? fmt::format("local layer (window {})", c.n_swa) : std::string("global layer"), pos,
                       v.first, v.last);
}

float phi3_q_scale(const ModelConfig& c) { return 1.0f / std::sqrt(static_cast<float>(c.head_dim_k)); }

float roped_qk_scale(const ModelConfig& c) {
    if (c.arch == Arch::kPhi3) return phi3_q_scale(c) * attention_kq_scale(c);
    if (c.arch == Arch::kGemma2 || c.arch == Arch::kGemma3) return gemma_q_scale(c) * attention_kq_scale(c);
    return attention_kq_scale(c);
}

float yarn_log_mul(const ModelConfig& c) {
    const float stored = static_cast<float>(c.rope_yarn_log_multiplier);
    return c.arch == Arch::kDeepseek2 ? stored / 0.1f : stored;
}

std::vector<float> imrope_text_factors(const int sections[4], int64_t n_rot) {
    // ggml_mrope_cache_init's interleaved choice: pair i's sector is i % (the sections' sum); sector
    // s takes position t, h or w when s % 3 is 0, 1 or 2 and s < 3 x that section, else the fourth.
    const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    std::vector<float> factors(static_cast<size_t>(std::max<int64_t>(0, n_rot / 2)), 1.0f);
    bool any_fourth = false;
    for (size_t i = 0; i < factors.size() && sect_dims > 0; ++i) {
        const int sector = static_cast<int>(i % static_cast<size_t>(sect_dims));
        const bool t_h_w = (sector % 3 == 0 && sector < 3 * sections[0]) || (sector % 3 == 1 && sector < 3 * sections[1]) ||
                           (sector % 3 == 2 && sector < 3 * sections[2]);
        if (!t_h_w) factors[i] = std::numeric_limits<float>::infinity(), any_fourth = true;
    }
    if (!any_fourth) factors.clear();
    return factors;
}

Result<ModelConfig> model_config_from_gguf(const GgufFile& file) { return read_config(file, true); }

Result<ModelConfig> model_config_from_gguf_unchecked(const GgufFile& file) { return read_config(file, false); }

}  // namespace ls
