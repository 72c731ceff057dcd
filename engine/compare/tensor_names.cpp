// Naming conventions: engines' own tensor names -> llama.cpp's, and their layouts.
#include "engine/compare/tensor_names.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "engine/forward/event.h"
#include "engine/util/input_file.h"
#include "engine/util/quote.h"

namespace ls {
namespace {

constexpr uint64_t kMaxMapBytes = uint64_t{16} << 20;

NameRule rule(const char* pattern, const char* name, bool projection = false) {
    return NameRule{pattern, name, NameLayout::kTokenFirst, projection};
}

// `name` against `pattern`: the pattern's text literally, "{layer}" as one or more digits (put in
// `layer`).
bool match(const std::string& pattern, const std::string& name, std::string* layer) {
    const size_t at = pattern.find("{layer}");
    if (at == std::string::npos) return pattern == name;
    const std::string head = pattern.substr(0, at), tail = pattern.substr(at + 7);
    if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
        name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
        return false;
    *layer = name.substr(head.size(), name.size() - head.size() - tail.size());
    return layer->size() <= 9 && layer->find_first_not_of("0123456789") == std::string::npos;
}

std::string substitute(std::string s, const std::string& layer) {
    for (size_t at; (at = s.find("{layer}")) != std::string::npos;) s.replace(at, 7, layer);
    return s;
}

// The rule of `convention` that `base` matches, and llama.cpp's name for it (without the bias
// occurrence a projection may get).
const NameRule* find_rule(const NameConvention& convention, const std::string& base, std::string* target) {
    const std::vector<std::string> none{""};
    for (const std::string& prefix : convention.prefixes.empty() ? none : convention.prefixes) {
        if (base.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string rest = base.substr(prefix.size());
        for (const NameRule& r : convention.rules) {
            std::string layer;
            if (match(r.pattern, rest, &layer)) {
                *target = substitute(r.name, layer);
                return &r;
            }
        }
    }
    return nullptr;
}

// llama.cpp's name for `t` under `convention`, with its layout; false when no rule matches.
bool mapped_name(const NameConvention& convention, const RefTensor& t, const BiasedProjection& biased, std::string* name,
                 NameLayout* layout) {
    std::string target;
    const NameRule* r = find_rule(convention, t.base_name, &target);
    if (!r) return false;
    DumpName parts;
    parse_dump_name(target, &parts);
    if (r->projection && parts.occurrence == 1 && biased && biased(parts.base)) parts.occurrence = 2;
    *name = event_dump_name(parts.base, parts.occurrence, t.decode, t.ubatch);
    *layout = r->layout;
    return true;
}

int64_t element_size(const RefTensor& t) { return t.stored_type == GgmlType::I64 ? 8 : 4; }

// Re-lays a heads-first tensor (numpy (n_head, T, head_dim): ne [head_dim, T, n_head]) as ggml's
// [head_dim, n_head, T].
Status heads_first(ReferenceDump& dump, RefTensor& t) {
    const int64_t hd = t.ne_[0], T = t.ne_[1], nh = t.ne_[2], es = element_size(t);
    if (t.ne_[3] != 1 || nh == 1)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: tensor {} has ne [{}, {}, {}, {}]; the heads-first layout is numpy "
                                      "(n_head, T, head_dim)", dump.source(), quote_text(t.name), t.ne_[0], t.ne_[1],
                                      t.ne_[2], t.ne_[3]));
    std::vector<uint8_t> out(static_cast<size_t>(hd * T * nh * es));
    for (int64_t h = 0; h < nh; ++h)
        for (int64_t tok = 0; tok < T; ++tok)
            std::memcpy(out.data() + ((tok * nh + h) * hd) * es, t.data + ((h * T + tok) * hd) * es, static_cast<size_t>(hd * es));
    t.data = dump.keep(std::move(out));
    t.ne_[1] = nh, t.ne_[2] = T;
    return {};
}

// Reverses every axis: numpy (features, T), read as ne [T, features], becomes [features, T].
void transposed(ReferenceDump& dump, RefTensor& t) {
    int n = 4;
    while (n > 1 && t.ne_[n - 1] == 1) --n;
    int64_t in[4] = {1, 1, 1, 1}, out_ne[4] = {1, 1, 1, 1};
    for (int k = 0; k < n; ++k) in[k] = t.ne_[k], out_ne[k] = t.ne_[n - 1 - k];
    const int64_t es = element_size(t);
    std::vector<uint8_t> out(static_cast<size_t>(t.n_elements() * es));
    // Element (i0, i1, i2, i3) of the result is element (i_{n-1}, ..., i0) of the input.
    int64_t i[4];
    for (i[3] = 0; i[3] < out_ne[3]; ++i[3])
        for (i[2] = 0; i[2] < out_ne[2]; ++i[2])
            for (i[1] = 0; i[1] < out_ne[1]; ++i[1])
                for (i[0] = 0; i[0] < out_ne[0]; ++i[0]) {
                    int64_t j[4] = {0, 0, 0, 0};
                    for (int k = 0; k < n; ++k) j[k] = i[n - 1 - k];
                    const int64_t src = j[0] + in[0] * (j[1] + in[1] * (j[2] + in[2] * j[3]));
                    const int64_t dst = i[0] + out_ne[0] * (i[1] + out_ne[1] * (i[2] + out_ne[2] * i[3]));
                    std::memcpy(out.data() + dst * es, t.data + src * es, static_cast<size_t>(es));
                }
    t.data = dump.keep(std::move(out));
    std::copy(out_ne, out_ne + 4, t.ne_);
}

bool pairable_kind(const RefTensor& t) { return t.kind != RefKind::kInput; }

// Tensors that carry llama.cpp's names once `convention` is applied.
int score(const ReferenceDump& dump, const NameConvention& convention) {
    int n = 0;
    for (const RefTensor& t : dump.tensors()) {
        if (!pairable_kind(t)) continue;
        std::string target;
        if (find_rule(convention, t.base_name, &target) || is_llama_name(t.base_name)) ++n;
    }
    return n;
}

Error map_error(const std::string& path, const std::string& msg) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: {}", path, msg));
}

}  // namespace

const char* name_layout_name(NameLayout layout) {
    switch (layout) {
        case NameLayout::kGgml: return "ggml";
        case NameLayout::kTokenFirst: return "token-first";
        case NameLayout::kHeadsFirst: return "heads-first";
        case NameLayout::kTransposed: return "transposed";
    }
    return "?";
}

NameConvention llama_names() { return NameConvention{"llama", {}, {}}; }

NameConvention hf_names() {
    // Forward-hook outputs of transformers' Llama/Qwen2 modules; "model." is optional, and
    // "model.model." (a wrapper's own "model" attribute) is accepted too.
    return NameConvention{"hf",
                          {rule("embed_tokens", "embd"),
                           rule("layers.{layer}.input_layernorm", "attn_norm-{layer}"),
                           rule("layers.{layer}.self_attn.q_proj", "Qcur-{layer}", true),
                           rule("layers.{layer}.self_attn.k_proj", "Kcur-{layer}", true),
                           rule("layers.{layer}.self_attn.v_proj", "Vcur-{layer}", true),
                           rule("layers.{layer}.self_attn.o_proj", "attn_out-{layer}"),
                           rule("layers.{layer}.post_attention_layernorm", "ffn_norm-{layer}"),
                           rule("layers.{layer}.mlp.gate_proj", "ffn_gate-{layer}"),
                           rule("layers.{layer}.mlp.up_proj", "ffn_up-{layer}"),
                           rule("layers.{layer}.mlp.down_proj", "ffn_out-{layer}"),
                           rule("layers.{layer}", "l_out-{layer}"),
                           rule("norm", "result_norm"),
                           rule("lm_head", "result_output")},
                          {"model.model.", "model.", ""}};
}

NameConvention meta_names() {
    return NameConvention{"meta",
                          {rule("tok_embeddings", "embd"),
                           rule("layers.{layer}.attention_norm", "attn_norm-{layer}"),
                           rule("layers.{layer}.attention.wq", "Qcur-{layer}", true),
                           rule("layers.{layer}.attention.wk", "Kcur-{layer}", true),
                           rule("layers.{layer}.attention.wv", "Vcur-{layer}", true),
                           rule("layers.{layer}.attention.wo", "attn_out-{layer}"),
                           rule("layers.{layer}.ffn_norm", "ffn_norm-{layer}"),
                           rule("layers.{layer}.feed_forward.w1", "ffn_gate-{layer}"),
                           rule("layers.{layer}.feed_forward.w3", "ffn_up-{layer}"),
                           rule("layers.{layer}.feed_forward.w2", "ffn_out-{layer}"),
                           rule("layers.{layer}", "l_out-{layer}"),
                           rule("norm", "result_norm"),
                           rule("output", "result_output")},
                          {}};
}

Result<NameConvention> load_name_map(const std::string& path) {
    auto text = read_input_file(path, kMaxMapBytes);
    if (!text) return text.error();
    nlohmann::json m;
    try {
        m = nlohmann::json::parse(text.value());
    } catch (const nlohmann::json::exception& e) {
        return map_error(path, fmt::format("not valid JSON: {}", quote_text(e.what(), 300)));
    }
    if (!m.is_object() || !m.contains("format") || m["format"] != "layerscope-names")
        return map_error(path, "a name map is a JSON object with \"format\": \"layerscope-names\"");
    if (!m.contains("version") || !m["version"].is_number_integer() || m["version"].get<int64_t>() != 1)
        return map_error(path, "\"version\" must be 1 (the only version this build reads)");
    if (!m.contains("map") || !m["map"].is_array() || m["map"].empty())
        return map_error(path, "\"map\" must be a non-empty array of {\"pattern\", \"name\", \"layout\"} entries");
    NameConvention c;
    c.name = path;
    for (size_t i = 0; i < m["map"].size(); ++i) {
        const nlohmann::json& e = m["map"][i];
        auto err = [&](const std::string& msg) {
            std::string label = e.is_object() && e.contains("pattern") && e["pattern"].is_string()
                                    ? fmt::format("map entry {} ({})", i, quote_text(e["pattern"].get<std::string>()))
                                    : fmt::format("map entry {}", i);
            return map_error(path, label + ": " + msg);
        };
        if (!e.is_object()) return err("must be an object with \"pattern\" and \"name\"");
        NameRule r;
        for (auto [key, out] : {std::pair<const char*, std::string*>{"pattern", &r.pattern}, {"name", &r.name}}) {
            if (!e.contains(key) || !e[key].is_string() || e[key].get<std::string>().empty())
                return err(fmt::format("\"{}\" must be a non-empty string", key));
            *out = e[key].get<std::string>();
        }
        const size_t at = r.pattern.find("{layer}");
        if (at != std::string::npos && r.pattern.find("{layer}", at + 1) != std::string::npos)
            return err("\"pattern\" may hold \"{layer}\" once");
        if (at == std::string::npos && r.name.find("{layer}") != std::string::npos)
            return err("\"name\" uses \"{layer}\" but \"pattern\" does not match one");
        DumpName parts;
        if (!parse_dump_name(substitute(r.name, "0"), &parts) || parts.occurrence < 1 || parts.decode != 0 || parts.ubatch != 0 ||
            substitute(r.name, "0").find('@') != std::string::npos)
            return err(fmt::format("\"name\" {} is not a llama.cpp tensor name with an optional \"#k\" (k >= 2)",
                                   quote_text(r.name)));
        if (e.contains("layout")) {
            const std::string l = e["layout"].is_string() ? e["layout"].get<std::string>() : "";
            if (l == "ggml") r.layout = NameLayout::kGgml;
            else if (l == "token-first" || l == "row-major") r.layout = NameLayout::kTokenFirst;
            else if (l == "heads-first") r.layout = NameLayout::kHeadsFirst;
            else if (l == "transposed") r.layout = NameLayout::kTransposed;
            else return err("\"layout\" must be \"ggml\", \"token-first\", \"heads-first\" or \"transposed\"");
        }
        c.rules.push_back(std::move(r));
    }
    return c;
}

Result<std::vector<NameConvention>> name_conventions(const std::string& spec) {
    if (spec == "auto") return std::vector<NameConvention>{llama_names(), hf_names(), meta_names()};
    if (spec == "llama") return std::vector<NameConvention>{llama_names()};
    if (spec == "hf") return std::vector<NameConvention>{hf_names()};
    if (spec == "meta") return std::vector<NameConvention>{meta_names()};
    std::error_code ec;
    if (!std::filesystem::exists(spec, ec))
        return make_error(ErrorCode::kUsage, fmt::format("--names {}: neither auto, llama, hf, meta nor an existing name "
                                                         "map file", quote_text(spec)));
    auto map = load_name_map(spec);
    if (!map) return map.error();
    return std::vector<NameConvention>{std::move(map.value())};
}

BiasedProjection biased_in(const ReferenceDump& other) {
    return [&other](const std::string& base) {
        const RefTensor* t = other.find(event_dump_name(base, 2, 0, 0));
        return t && t->op == "ADD";
    };
}

BiasedProjection biased_in(const Model& model) {
    return [&model](const std::string& base) {
        const size_t dash = base.rfind('-');
        const std::string stem = base.substr(0, dash == std::string::npos ? 0 : dash);
        const char* w = stem == "Qcur" ? "attn_q" : stem == "Kcur" ? "attn_k" : stem == "Vcur" ? "attn_v" : nullptr;
        return w && model.find(fmt::format("blk.{}.{}.bias", base.substr(dash + 1), w)) != nullptr;
    };
}

bool is_llama_name(const std::string& base) {
    static const std::set<std::string> stems = {
        "inp_tokens", "inp_embd", "embd", "inp_pos", "norm", "attn_norm", "Qcur", "Kcur", "Vcur", "kq", "kq_soft_max",
        "kqv", "kqv_out", "attn_out", "ffn_inp", "ffn_norm", "ffn_gate", "ffn_up", "ffn_swiglu", "ffn_silu", "ffn_gelu",
        "ffn_out", "l_out", "result_norm", "result_output", "llama_logits", "out_ids", "q", "k", "v", "q_nope", "q_pe",
        "k_pe", "kv_cmpr", "kv", "k_nope", "inp_scaled", "Qcur_normed", "Kcur_normed", "kq_scaled_1", "kq_tanh",
        "kq_scaled_2", "attn_post_norm", "sa_out", "ffn_geglu", "ffn_post_norm"};
    std::string stem = base.substr(0, base.find(' '));
    if (const size_t dash = stem.rfind('-');
        dash != std::string::npos && dash + 1 < stem.size() && stem.find_first_not_of("0123456789", dash + 1) == std::string::npos)
        stem.resize(dash);
    for (const char* prefix : {"node_", "cache_", "attn_inp_", "ffn_moe_", "ffn_shexp"})
        if (stem.rfind(prefix, 0) == 0) return true;
    return stems.count(stem) > 0;
}

Result<NamingReport> apply_names(ReferenceDump& dump, const std::vector<NameConvention>& candidates,
                                 const BiasedProjection& biased) {
    NamingReport report;
    if (candidates.empty()) return report;
    const NameConvention* chosen = &candidates.front();
    int best = -1;
    for (const NameConvention& c : candidates)
        if (const int s = score(dump, c); s > best) best = s, chosen = &c;
    report.convention = chosen->name;
    if (chosen->rules.empty()) return report;

    std::vector<RefTensor>& tensors = dump.mutable_tensors();
    std::set<std::string> taken;
    for (const RefTensor& t : tensors) taken.insert(t.name);
    for (RefTensor& t : tensors) {
        if (!pairable_kind(t)) continue;
        std::string name;
        NameLayout layout;
        if (!mapped_name(*chosen, t, biased, &name, &layout) || taken.count(name)) continue;
        taken.insert(name);
        t.source_name = t.name;
        t.name = name;
        DumpName parts;
        parse_dump_name(name, &parts);
        t.base_name = parts.base;
        t.occurrence = parts.occurrence;
        ++report.renamed;
        if (t.order_given || !t.complete()) continue;
        if (layout == NameLayout::kHeadsFirst) {
            if (Status s = heads_first(dump, t); !s) return s.error();
            ++report.relaid;
        } else if (layout == NameLayout::kTransposed) {
            transposed(dump, t);
            ++report.relaid;
        }
    }
    dump.reindex();
    return report;
}

}  // namespace ls
