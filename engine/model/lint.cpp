// Model lints: compares the architecture's tensor layout (engine/model/tensor_layout.h) and the
// vocabulary with what the file holds.
#include "engine/model/lint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"
#include "engine/model/tensor_layout.h"
#include "engine/util/quote.h"

namespace ls {

const char* lint_severity_name(LintSeverity severity) {
    switch (severity) {
        case LintSeverity::kError: return "error";
        case LintSeverity::kWarning: return "warning";
        case LintSeverity::kInfo: return "info";
    }
    return "?";
}

int count_lints(const std::vector<Lint>& lints, LintSeverity severity) {
    int n = 0;
    for (const Lint& l : lints) n += l.severity == severity;
    return n;
}

namespace {

std::string format_ne(const std::vector<int64_t>& ne) {
    return fmt::format("[{}]", fmt::join(ne, ", "));
}

std::vector<int64_t> actual_ne(const GgufTensorInfo& t) {
    std::vector<int64_t> ne(t.ne, t.ne + std::max<uint32_t>(t.n_dims, 1));
    return ne;
}

// Equal shapes up to trailing 1s (a {n} tensor and a {n, 1} tensor hold the same data).
bool same_shape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
        int64_t x = i < a.size() ? a[i] : 1, y = i < b.size() ? b[i] : 1;
        if (x != y) return false;
    }
    return true;
}

void lint_vocab(const GgufFile& file, const ModelConfig& c, std::vector<Lint>& lints) {
    const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
    if (!tokens || !tokens->is_array()) {
        lints.push_back({LintSeverity::kError, "tokenizer.ggml.tokens",
                         "missing; the vocabulary size (rows of token_embd and output) comes from it"});
        return;
    }
    if (c.n_vocab_key > 0 && c.n_vocab_key != c.n_vocab)
        lints.push_back({LintSeverity::kWarning, c.arch_name + ".vocab_size",
                         fmt::format("is {} but tokenizer.ggml.tokens has {} entries; llama.cpp uses the token list",
                                     c.n_vocab_key, c.n_vocab)});
    std::string model = file.get_string("tokenizer.ggml.model", "");
    if (model == "gpt2" && !file.find("tokenizer.ggml.merges"))
        lints.push_back({LintSeverity::kError, "tokenizer.ggml.merges",
                         "missing; byte-level BPE vocabularies (tokenizer.ggml.model = gpt2) need their merges"});

    // Trailing UNUSED tokens are padding rows (Qwen2.5, DeepSeek): legitimate, but a sampler that
    // picks them is reading rows no real token owns.
    if (const GgufValue* types = file.find("tokenizer.ggml.token_type"); types && types->is_array()) {
        int64_t n_pad = 0;
        for (size_t i = types->array_size(); i-- > 0;) {
            int64_t t = 0;
            if (!types->item_int(i, &t) || t != 5) break;
            ++n_pad;
        }
        if (n_pad > 0)
            lints.push_back({LintSeverity::kInfo, "tokenizer.ggml.token_type",
                             fmt::format("the last {} of {} tokens are UNUSED padding (e.g. {}): the vocabulary "
                                         "is padded to the embedding rows; they should never be sampled",
                                         n_pad, c.n_vocab, quote_text(tokens->strings.empty() ? "" : tokens->strings.back(), 40))});
    }
    for (const char* id_key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                               "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                               "tokenizer.ggml.seperator_token_id"}) {
        const GgufValue* v = file.find(id_key);
        int64_t id = 0;
        if (!v || !v->get_int(&id)) continue;
        if (id < 0 || id >= c.n_vocab)
            lints.push_back({LintSeverity::kWarning, id_key,
                             fmt::format("is {} but the vocabulary has {} tokens; llama.cpp ignores it", id, c.n_vocab)});
    }
}

void lint_keys(const ModelConfig& c, std::vector<Lint>& lints) {
    std::string a = c.arch_name;
    if (c.n_head % c.n_head_kv != 0)
        lints.push_back({LintSeverity::kError, a + ".attention.head_count_kv",
                         fmt::format("{} does not divide {}.attention.head_count ({})", c.n_head_kv, a, c.n_head)});
    if (c.arch == Arch::kLlama && c.n_rot != c.head_dim_k)
        lints.push_back({LintSeverity::kError, a + ".rope.dimension_count",
                         fmt::format("is {} but the head dimension is {}; llama rotates the whole head "
                                     "(llama.cpp: invalid n_rot)", c.n_rot, c.head_dim_k)});
    if (c.arch == Arch::kQwen2 && c.n_head * c.head_dim_k != c.n_embd)
        lints.push_back({LintSeverity::kError, a + ".attention.head_count",
                         fmt::format("n_head * head_dim = {} * {} = {} but embedding_length is {}; qwen2 needs "
                                     "attn_q to be square", c.n_head, c.head_dim_k, c.n_head * c.head_dim_k, c.n_embd)});
}

}  // namespace

std::vector<Lint> lint_model(const GgufFile& file) {
    std::vector<Lint> lints;
    if (!file.find("general.architecture") && file.get_string("dump.tool", "") != "") {
        lints.push_back({LintSeverity::kInfo, "general.architecture",
                         "absent: this is a tensor dump (dump.* keys), not a model; model lints skipped"});
        return lints;
    }
    auto config = model_config_from_gguf_unchecked(file);
    if (!config.ok()) {
        const std::string& msg = config.error().message;
        // Messages start with the key they are about ("llama.block_count is missing; ...").
        std::string subject = msg.substr(0, msg.find(' '));
        if (subject.find('.') == std::string::npos) subject = "general.architecture";
        lints.push_back({LintSeverity::kError, subject, msg + "; tensors were not checked"});
        return lints;
    }
    const ModelConfig& c = *config;
    lint_keys(c, lints);
    lint_vocab(file, c, lints);

    // Without a token list the embedding itself says how many rows the vocabulary has.
    int64_t n_vocab = c.n_vocab;
    const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
    if (n_vocab == 0 && embd) n_vocab = embd->ne[1];

    std::set<std::string> known;
    for (const TensorSpec& want : tensor_layout(c, n_vocab)) {
        known.insert(want.name);
        const GgufTensorInfo* t = file.find_tensor(want.name);
        if (!t) {
            if (want.required)
                lints.push_back({LintSeverity::kError, want.name,
                                 fmt::format("missing; {} models need it (expected ne {})", c.arch_name, format_ne(want.ne))});
            else if (want.name == "output.weight")
                lints.push_back({LintSeverity::kInfo, want.name,
                                 "absent: the LM head is token_embd.weight (tied embeddings)"});
            continue;
        }
        if (!want.unsupported.empty()) {
            lints.push_back({LintSeverity::kError, want.name, tensor_refusal({want}, want.name, c.arch_name) +
                                                                   ": layerscope refuses to run this file"});
            continue;
        }
        if ((want.name == "output.scale" || want.name == "output.input_scale")) {
            // llama.cpp creates the LM head's scales only for an untied NVFP4 head.
            const GgufTensorInfo* head = file.find_tensor("output.weight");
            if (!head || head->type != GgmlType::NVFP4) {
                lints.push_back({LintSeverity::kError, want.name,
                                 fmt::format("{}; llama.cpp reads the LM head's scales only for an untied NVFP4 "
                                             "output.weight; layerscope refuses to run this file",
                                             head ? fmt::format("output.weight is {}", ggml_type_name(head->type))
                                                  : "the LM head is token_embd (tied)")});
                continue;
            }
        }
        if (!want.unused.empty())
            lints.push_back({LintSeverity::kInfo, want.name,
                             fmt::format("loaded by llama.cpp's {} loader and unused: {}; layerscope leaves it unused too",
                                         c.arch_name, want.unused)});
        std::vector<int64_t> got = actual_ne(*t);
        if (!same_shape(want.ne, got)) {
            std::string msg = fmt::format("expected ne {} got {}", format_ne(want.ne), format_ne(got));
            if (want.vocab_rows && want.ne.size() == 2 && got.size() >= 2 && got[0] == want.ne[0])
                msg += fmt::format(": {} rows but the vocabulary (tokenizer.ggml.tokens) has {} tokens",
                                   got[1], n_vocab);
            lints.push_back({LintSeverity::kError, want.name, msg});
        }
        const bool elementwise = want.ne.size() == 1 || (want.name.size() > 5 && want.name.compare(want.name.size() - 5, 5, ".bias") == 0);
        if (elementwise && t->type != GgmlType::F32) {
            lints.push_back({LintSeverity::kError, want.name,
                             fmt::format("type {}: an element-wise operand (norm, bias, scale) must be f32; llama.cpp aborts on "
                                         "another type, layerscope refuses to run this file", ggml_type_name(t->type))});
            continue;
        }
        const GgmlTypeTraits* traits = ggml_type_traits(t->type);
        if (!traits || !traits->can_dequantize)
            lints.push_back({LintSeverity::kWarning, want.name,
                             fmt::format("type {} cannot be dequantized by layerscope yet", ggml_type_name(t->type))});
    }
    for (const GgufTensorInfo& t : file.tensors()) {
        if (known.count(t.name)) continue;
        lints.push_back({LintSeverity::kError, t.name,
                         tensor_refusal({}, t.name, c.arch_name) + ": layerscope refuses to run this file too"});
    }
    return lints;
}

}  // namespace ls
