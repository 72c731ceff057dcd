// `layerscope inspect`: opens a GGUF file and prints its header, metadata, tokenizer summary,
// config with what it implies (kq scale, YaRN, MLA, MoE), tensor table, per-type totals, lints and (with --tensor) one tensor's values, as text. Exit 1
// when lints report errors (the model cannot run as it is), 0 with warnings only.
#include <fmt/format.h>

#include <cstdio>

#include "engine/gguf/gguf.h"
#include "app/inspect_output.h"
#include "engine/model/lint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_summary.h"
#include "engine/model/quant_block.h"
#include "engine/util/quote.h"

namespace ls::app {

namespace {

std::string ne_text(const GgufTensorInfo& t) {
    std::string out = "[";
    for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) out += (d ? ", " : "") + std::to_string(t.ne[d]);
    return out + "]";
}

std::string type_text(const GgufValue& v) {
    if (!v.is_array()) return gguf_value_type_name(v.type);
    return fmt::format("arr[{}]", gguf_value_type_name(v.elem_type));
}

std::string human_bytes(uint64_t n) {
    if (n >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(n) / double(1ull << 30));
    if (n >= (1ull << 20)) return fmt::format("{:.2f} MiB", double(n) / double(1ull << 20));
    if (n >= (1ull << 10)) return fmt::format("{:.1f} KiB", double(n) / double(1ull << 10));
    return fmt::format("{} B", n);
}

// Token pieces may hold control characters; show them escaped.
std::string printable(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out;
}

void print_metadata(const GgufFile& file) {
    fmt::print("\nmetadata ({} keys):\n", file.metadata().size());
    size_t width = 0;
    for (const GgufKV& kv : file.metadata()) width = std::max(width, kv.key.size());
    for (const GgufKV& kv : file.metadata())
        fmt::print("  {:<{}}  {:<9}  {}\n", kv.key, width, type_text(kv.value), kv.value.to_string(8));
}

void print_tokenizer(const GgufFile& file) {
    TokenizerSummary t = summarize_tokenizer(file);
    fmt::print("\ntokenizer:\n");
    if (t.model.empty() && t.n_tokens == 0) {
        fmt::print("  (no tokenizer.* metadata)\n");
        return;
    }
    fmt::print("  model {}, pre {}, {} tokens, {} merges\n", t.model.empty() ? "-" : t.model,
               t.pre.empty() ? "-" : t.pre, t.n_tokens, t.n_merges);
    auto special = [](int64_t id, const std::string& piece) {
        return id < 0 ? std::string("-") : fmt::format("{} \"{}\"", id, printable(piece));
    };
    auto flag = [](int v) { return v < 0 ? "-" : (v ? "true" : "false"); };
    fmt::print("  bos {}, eos {}, add_bos {}, add_eos {}\n", special(t.bos_id, t.bos_piece),
               special(t.eos_id, t.eos_piece), flag(t.add_bos), flag(t.add_eos));
    fmt::print("  chat template: {}\n",
               t.has_chat_template ? fmt::format("yes ({} bytes)", t.chat_template_bytes) : std::string("no"));
}

void print_config(const GgufFile& file) {
    auto config = model_config_from_gguf(file);
    fmt::print("\nmodel:\n");
    if (!config.ok()) {
        fmt::print("  {}\n", config.error().message);
        return;
    }
    const ModelConfig& c = *config;
    fmt::print("  {} : n_embd {}, n_layer {}, n_head {}, n_head_kv {}, head_dim {}/{} (k/v), n_ff {}, n_vocab {}\n",
               c.arch_name, c.n_embd, c.n_layer, c.n_head, c.n_head_kv, c.head_dim_k, c.head_dim_v, c.n_ff, c.n_vocab);
    fmt::print("  rope {} n_rot {} freq_base {}, scaling {}, rms_eps {:g}, n_ctx_train {}\n", rope_type_name(c.rope_type),
               c.n_rot, c.rope_freq_base, rope_scaling_name(c.rope_scaling), static_cast<float>(c.rms_eps), c.n_ctx_train);
    if (c.n_expert > 0)
        fmt::print("  moe: {} experts, {} used, {} shared, expert n_ff {}, {} leading dense layers\n", c.n_expert,
                   c.n_expert_used, c.n_expert_shared, c.n_ff_expert, c.n_layer_dense_lead);
    if (c.arch == Arch::kDeepseek2)
        fmt::print("  mla: {}, q_lora_rank {}, kv_lora_rank {}, k {} (nope {} + rope {}), v {}\n",
                   c.mla_split ? "split k_b/v_b" : "legacy kv_b", c.q_lora_rank, c.kv_lora_rank, c.head_dim_k_mla,
                   c.qk_nope_dim(), c.n_rot, c.head_dim_v_mla);
    fmt::print("  derived, as llama.cpp computes them:\n");
    for (const SummaryLine& line : derived_lines(c, &file)) fmt::print("    {:<13} {}\n", line.label + ":", line.value);
}

void print_tensors(const GgufFile& file, bool list) {
    const auto& tensors = file.tensors();
    if (list) {
        size_t width = 4;
        for (const auto& t : tensors) width = std::max(width, t.name.size());
        fmt::print("\ntensors ({}):\n  {:<{}}  {:<6}  {:<22}  {:>12}  {:>12}\n", tensors.size(), "name", width, "type",
                   "ne", "bytes", "offset");
        for (const auto& t : tensors)
            fmt::print("  {:<{}}  {:<6}  {:<22}  {:>12}  {:>12}\n", t.name, width, ggml_type_name(t.type), ne_text(t),
                       t.n_bytes, t.offset);
    }
    int64_t n_elements = 0;
    uint64_t n_bytes = 0;
    fmt::print("\ntensor types ({} tensors{}):\n", tensors.size(), list ? "" : "; --tensors lists them");
    for (const TypeTotal& total : totals_by_type(file)) {
        fmt::print("  {:<6} {:>4} tensors  {:>12} elements  {:>11}  {:6.3f} bits/weight\n",
                   ggml_type_name(total.type), total.n_tensors, total.n_elements, human_bytes(total.n_bytes),
                   total.bits_per_weight());
        n_elements += total.n_elements;
        n_bytes += total.n_bytes;
    }
    fmt::print("  total  {:>4} tensors  {:>12} elements  {:>11}  {:6.3f} bits/weight\n", tensors.size(), n_elements,
               human_bytes(n_bytes), n_elements ? 8.0 * double(n_bytes) / double(n_elements) : 0.0);
}

void print_lints(const GgufFile& file) {
    std::vector<Lint> lints = lint_model(file);
    fmt::print("\nlints: {} errors, {} warnings, {} infos\n", count_lints(lints, LintSeverity::kError),
               count_lints(lints, LintSeverity::kWarning), count_lints(lints, LintSeverity::kInfo));
    for (const Lint& l : lints)
        fmt::print("  {:<7} {}{}{}\n", lint_severity_name(l.severity), l.subject, l.subject.empty() ? "" : ": ",
                   l.message);
}

void print_quant_block(const QuantBlock& b) {
    fmt::print("\nblock {} of {} ({}, {} elements from element {}; {} bytes at file offset {}):\n", b.block, b.n_blocks, b.type,
               b.block_elements, b.block * b.block_elements, b.block_bytes, b.file_offset);
    for (const QuantBlockField& f : b.fields) fmt::print("  {:<7} {}\n", f.name, f.value);
    fmt::print("  {}\n", b.formula);
    fmt::print("  {:>10} {:>5} {:>5} {:>5}  {}\n", "element", "code", "level", "group", "value");
    for (const QuantBlockElement& e : b.elements)
        fmt::print("  {:>10} {:>5} {:>5} {:>5}  {:.9g}\n", e.index, e.code, e.level, e.group, e.value);
}

int print_tensor_values(const GgufFile& file, const InspectOptions& options) {
    const GgufTensorInfo* t = find_tensor_or_complain(file, options.tensor_name);
    if (!t) return kExitUsage;
    auto values = dequantize_tensor(*t);
    if (!values.ok()) {
        fmt::print(stderr, "layerscope inspect: {}\n", values.error().message);
        return kExitBadInput;
    }
    ValueStats s = compute_stats(values->data(), static_cast<int64_t>(values->size()));
    fmt::print("\ntensor {} ({}, ne {}, {} elements):\n", t->name, ggml_type_name(t->type), ne_text(*t), s.n);
    fmt::print("  min {:.6g}  max {:.6g}  mean {:.6g}  rms {:.6g}  nan {}  inf {}\n", s.min, s.max, s.mean, s.rms,
               s.n_nan, s.n_inf);
    size_t n = std::min(values->size(), static_cast<size_t>(std::max(options.values, 0)));
    fmt::print("  first {} values:", n);
    for (size_t i = 0; i < n; ++i) fmt::print("{}{:.9g}", i % 8 == 0 ? "\n   " : " ", (*values)[i]);
    fmt::print("\n");
    if (options.block >= 0) print_quant_block(describe_quant_block(*t, file.data_offset(), options.block).value());  // checked
    return kExitOk;
}

}  // namespace

const GgufTensorInfo* find_tensor_or_complain(const GgufFile& file, const std::string& name) {
    if (const GgufTensorInfo* t = file.find_tensor(name)) return t;
    std::string hint;
    for (const auto& t : file.tensors()) {
        if (t.name.find(name) == std::string::npos) continue;
        hint = fmt::format(" (did you mean {}?)", quote_text(t.name));
        break;
    }
    fmt::print(stderr, "layerscope inspect: no tensor named \"{}\" in {}{}; 'layerscope inspect --tensors {}' lists them\n",
               name, file.path(), hint, file.path());
    return nullptr;
}

int print_inspect_text(const GgufFile& file, const InspectOptions& options) {
    fmt::print("{}\n  GGUF v{}, alignment {}, data at byte {}, {} bytes\n", file.path(), file.version(),
               file.alignment(), file.data_offset(), file.file_size());
    print_metadata(file);
    print_tokenizer(file);
    print_config(file);
    print_tensors(file, options.list_tensors);
    print_lints(file);
    if (!options.tensor_name.empty()) return print_tensor_values(file, options);
    return kExitOk;
}

int run_inspect(const InspectOptions& options) {
    auto file = GgufFile::open(options.model_path);
    if (!file.ok()) {
        fmt::print(stderr, "layerscope inspect: {}\n", file.error().message);  // it names the file
        return kExitBadInput;
    }
    // A wrong --tensor is a usage error, reported before anything is printed.
    if (!options.tensor_name.empty() && !find_tensor_or_complain(**file, options.tensor_name)) return kExitUsage;
    if (options.block >= 0) {
        if (options.tensor_name.empty()) {
            fmt::print(stderr, "layerscope inspect: --block needs --tensor (the tensor whose block to show)\n");
            return kExitUsage;
        }
        auto block = describe_quant_block(*(*file)->find_tensor(options.tensor_name), (*file)->data_offset(), options.block);
        if (!block) {
            fmt::print(stderr, "layerscope inspect: {}: {}\n", options.model_path, block.error().message);
            return exit_code_for(block.error());
        }
    }
    const int printed = options.json ? print_inspect_json(**file, options) : print_inspect_text(**file, options);
    if (printed != kExitOk) return printed;
    // Lint errors are what llama.cpp refuses to load or what makes a forward pass wrong: the check fails.
    const std::vector<Lint> lints = lint_model(**file);
    if (const int errors = count_lints(lints, LintSeverity::kError); errors > 0) {
        for (const Lint& l : lints)
            if (l.severity == LintSeverity::kError) {
                fmt::print(stderr, "layerscope inspect: {} lint error{} ({}{}{}{}); the model cannot run as it is\n",
                           errors, errors == 1 ? "" : "s", errors == 1 ? "" : "the first: ", l.subject,
                           l.subject.empty() ? "" : ": ", l.message);
                break;
            }
        return kExitLintErrors;
    }
    return kExitOk;
}

}  // namespace ls::app
