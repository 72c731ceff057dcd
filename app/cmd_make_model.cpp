// `layerscope make-model`: the command-line face of ls::make_model (flags -> spec, errors -> exit
// codes and a message that says what to change).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "app/commands.h"
#include "engine/model/make_model.h"

namespace ls::app {

namespace {

// What make-model wrote: the file, the spec's shape and what is special about it.
void print_written(const MakeModelSpec& spec, const std::string& path, const MakeModelInfo& info) {
    // deepseek2's MLA layout is MQA over the latent (one KV head); the legacy one is MHA.
    const bool deepseek2 = spec.arch == "deepseek2";
    const int kv_heads = spec.legacy_kv_b ? spec.n_head : 1;
    fmt::print("wrote {}: {} n_embd {} layers {} heads {}/{} n_ff {} vocab {} ({} token rows), {}, seed {}: "
               "{} parameters, {} bytes\n",
               path, spec.arch, spec.n_embd, spec.n_layer, spec.n_head, deepseek2 ? kv_heads : spec.n_head_kv,
               spec.n_ff, spec.vocab, info.n_tokens, ggml_type_name(spec.type), spec.seed, info.n_params,
               info.file_bytes);
    if (deepseek2)
        fmt::print("  mla {}: q_lora_rank {}, kv_lora_rank {}, k {} + {} rope, v {}; moe: {} experts, {} used, {} shared, "
                   "expert n_ff {}, {} leading dense, {} gating{}{}, weights scale {}; yarn factor {}\n",
                   spec.legacy_kv_b ? "legacy kv_b" : "split k_b/v_b", spec.q_lora_rank, spec.kv_lora_rank,
                   spec.qk_nope_dim, spec.qk_rope_dim, spec.v_head_dim, spec.n_expert, spec.n_expert_used,
                   spec.n_expert_shared, spec.n_ff_expert, spec.n_dense_lead,
                   spec.expert_gating_func == 2 ? "sigmoid" : "softmax", spec.expert_bias ? " with a selection bias" : "",
                   spec.expert_weights_norm ? ", weights renormalised" : "", spec.expert_weights_scale, spec.yarn_factor);
    if (spec.arch == "qwen3moe" || spec.llama_experts)
        fmt::print("  moe: {} experts of {}, {} used (softmax, renormalised)\n", spec.n_expert,
                   spec.llama_experts ? spec.n_ff : spec.n_ff_expert, spec.n_expert_used);
    if (spec.arch == "qwen35moe")
        fmt::print("  moe: {} experts of {}, {} used (softmax, renormalised), a gated shared expert of {}{}\n", spec.n_expert,
                   spec.n_ff_expert, spec.n_expert_used, spec.n_ff, spec.fused_gate_up ? "; gate and up fused" : "");
    if (deepseek2 && spec.n_expert_groups > 1)
        fmt::print("  grouped routing: {} groups of {} experts, the best {} kept\n", spec.n_expert_groups,
                   spec.n_expert / spec.n_expert_groups, spec.n_expert_groups_used);
    if (deepseek2 && spec.fused_gate_up) fmt::print("  experts: gate and up fused in ffn_gate_up_exps\n");
    if (spec.rope_freqs_factor > 0)
        fmt::print("  rope_freqs: llama3 factors (factor {}, low {}, high {}, original context {})\n", spec.rope_freqs_factor,
                   spec.rope_freqs_low, spec.rope_freqs_high, spec.rope_freqs_orig_ctx);
    if (spec.out_biases)
        fmt::print("  biases: {}\n", spec.arch == "qwen2" ? "output.bias" : "attn_output, ffn_gate, ffn_up, ffn_down");
    if (spec.weight_scales) fmt::print("  scales: a .scale and an .input_scale per projection\n");
    if (spec.longrope)
        fmt::print("  longrope: rope_factors_short/_long, original context {} (a longer context takes the long "
                   "factors)\n", spec.longrope_orig_ctx);
    if (spec.n_swa > 0)
        fmt::print("  sliding window {}{}{}\n", spec.n_swa,
                   spec.swa_pattern > 0 ? fmt::format(", one global layer per {}", spec.swa_pattern) : "",
                   spec.arch == "gemma2" ? ", soft caps" : "");
    for (const std::string& f : info.fallbacks) fmt::print("  fallback: {}\n", f);
}

}  // namespace

int run_make_model(const MakeModelOptions& o) {
    MakeModelSpec spec = o.demo ? demo_model_spec() : MakeModelSpec{};
    if (!o.preset.empty()) {
        auto preset = make_model_preset(o.preset);
        if (!preset) {
            std::fprintf(stderr, "layerscope make-model: %s\n", preset.error().message.c_str());
            return exit_code_for(preset.error());
        }
        spec = preset.value();
    }
    if (!o.arch.empty() && o.arch != spec.arch) {
        spec.arch = o.arch;
        if (spec.arch == "gpt-oss" && spec.n_swa == 0) spec.n_swa = 128;  // gpt-oss's window unless --swa says
        if ((spec.arch == "qwen35" || spec.arch == "qwen35moe") && spec.n_layer < spec.full_attn_interval)
            spec.n_layer = spec.full_attn_interval;
    }
    // --type T, or a list T1,T2,...: one file per type from the same master weights.
    std::vector<GgmlType> types;
    for (size_t start = 0; !o.type.empty() && start <= o.type.size();) {
        const size_t comma = std::min(o.type.find(',', start), o.type.size());
        const std::string name = o.type.substr(start, comma - start);
        GgmlType t{};
        if (!ggml_type_from_name(name.c_str(), &t)) {
            std::fprintf(stderr, "layerscope make-model: unknown --type '%s'; use f32, f16, bf16, q4_0, q4_1, q5_0, "
                                 "q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, mxfp4 or nvfp4, or a list of them (f16,q8_0)\n",
                         name.c_str());
            return kExitUsage;
        }
        if (std::find(types.begin(), types.end(), t) != types.end()) {
            std::fprintf(stderr, "layerscope make-model: --type lists %s twice\n", name.c_str());
            return kExitUsage;
        }
        types.push_back(t);
        start = comma + 1;
    }
    if (types.empty()) types.push_back(spec.type);
    for (const std::string& nt : o.tensor_types) {
        const size_t eq = nt.rfind('=');
        GgmlType t{};
        if (eq == std::string::npos || eq == 0 || !ggml_type_from_name(nt.c_str() + eq + 1, &t)) {
            std::fprintf(stderr, "layerscope make-model: --tensor-type '%s': give NAME=TYPE, e.g. blk.1.ffn_down.weight=q2_K\n",
                         nt.c_str());
            return kExitUsage;
        }
        spec.tensor_types.emplace_back(nt.substr(0, eq), t);
    }
    if (o.n_embd) spec.n_embd = o.n_embd;
    if (o.n_layer) spec.n_layer = o.n_layer;
    if (o.n_head) spec.n_head = o.n_head;
    if (o.n_head_kv) spec.n_head_kv = o.n_head_kv;
    if (o.n_ff) spec.n_ff = o.n_ff;
    if (o.head_dim) spec.head_dim = o.head_dim;
    if (o.vocab) {
        spec.vocab = o.vocab;
        spec.vocab_rows = 0;  // a preset's padded rows belong to its own vocabulary
    }
    if (o.ctx_train) spec.n_ctx_train = o.ctx_train;
    if (o.seed_given) spec.seed = o.seed;
    if (o.q_lora_rank >= 0) spec.q_lora_rank = o.q_lora_rank;
    if (o.kv_lora_rank >= 0) spec.kv_lora_rank = o.kv_lora_rank;
    if (o.experts >= 0) spec.n_expert = o.experts;
    if (o.experts_used >= 0) spec.n_expert_used = o.experts_used;
    if (o.dense_lead >= 0) spec.n_dense_lead = o.dense_lead;
    if (o.expert_ff) spec.n_ff_expert = o.expert_ff;
    if (o.expert_groups) spec.n_expert_groups = o.expert_groups;
    if (o.expert_groups_used) spec.n_expert_groups_used = o.expert_groups_used;
    if (o.llama_experts) spec.llama_experts = true;
    if (o.fused_gate_up) spec.fused_gate_up = true;
    if (o.legacy_kvb) spec.legacy_kv_b = true;
    if (!o.gating.empty()) spec.expert_gating_func = o.gating == "sigmoid" ? 2 : 1;
    if (o.expert_weights_scale >= 0) spec.expert_weights_scale = static_cast<float>(o.expert_weights_scale);
    if (o.expert_weights_norm) spec.expert_weights_norm = true;
    if (o.expert_bias) spec.expert_bias = true;
    if (o.rope_freqs >= 0) spec.rope_freqs_factor = static_cast<float>(o.rope_freqs);
    if (o.tied_output) spec.tied_output = true;
    if (o.out_biases) spec.out_biases = true;
    if (o.weight_scales) spec.weight_scales = true;
    if (o.n_rot) spec.n_rot = o.n_rot;
    if (o.swa >= 0) spec.n_swa = o.swa;
    if (o.swa_pattern >= 0) spec.swa_pattern = o.swa_pattern;
    if (o.longrope_orig_ctx) {
        spec.longrope = true;
        spec.longrope_orig_ctx = o.longrope_orig_ctx;
    }

    // One type: OUT. Several: OUT with "-TYPE" before its extension (m.gguf -> m-f16.gguf, m-q8_0.gguf).
    const size_t dot = o.out_path.rfind('.');
    const bool has_ext = dot != std::string::npos && o.out_path.find('/', dot) == std::string::npos && dot > 0;
    for (GgmlType t : types) {
        spec.type = t;
        const std::string path = types.size() == 1 ? o.out_path
                                 : has_ext ? o.out_path.substr(0, dot) + "-" + ggml_type_name(t) + o.out_path.substr(dot)
                                           : o.out_path + "-" + ggml_type_name(t);
        MakeModelInfo info;
        Status st = make_model(spec, path, &info, o.force);
        if (!st.ok()) {
            std::fprintf(stderr, "layerscope make-model: %s\n", st.error().message.c_str());
            return exit_code_for(st.error());
        }
        print_written(spec, path, info);
    }
    return kExitOk;
}

}  // namespace ls::app
