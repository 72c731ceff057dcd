// Model lints: builds the tensor list each architecture needs from the config (names and ne as
// llama.cpp's loader creates them) and compares it, and the vocabulary, with what the file holds.
#include "engine/model/lint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "engine/gguf/gguf.h"
#include "engine/model/model_config.h"

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

struct ExpectedTensor {
    std::string name;
    std::vector<int64_t> ne;  // ggml order
    bool required = true;
    bool vocab_rows = false;  // ne[1] is the vocabulary size
};

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

class Expector {
public:
    explicit Expector(std::vector<ExpectedTensor>& out) : out_(out) {}
    void need(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), true, false}); }
    void maybe(std::string name, std::vector<int64_t> ne) { out_.push_back({std::move(name), std::move(ne), false, false}); }
    void vocab(std::string name, std::vector<int64_t> ne, bool required) {
        out_.push_back({std::move(name), std::move(ne), required, true});
    }

private:
    std::vector<ExpectedTensor>& out_;
};

std::string blk(int64_t il, const char* what) { return fmt::format("blk.{}.{}", il, what); }

void expect_dense_ffn(Expector& e, int64_t il, int64_t n_embd, int64_t n_ff) {
    e.need(blk(il, "ffn_gate.weight"), {n_embd, n_ff});
    e.need(blk(il, "ffn_down.weight"), {n_ff, n_embd});
    e.need(blk(il, "ffn_up.weight"), {n_embd, n_ff});
}

void expect_moe_ffn(Expector& e, const ModelConfig& c, int64_t il) {
    e.need(blk(il, "ffn_gate_inp.weight"), {c.n_embd, c.n_expert});
    e.need(blk(il, "ffn_gate_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
    e.need(blk(il, "ffn_down_exps.weight"), {c.n_ff_expert, c.n_embd, c.n_expert});
    e.need(blk(il, "ffn_up_exps.weight"), {c.n_embd, c.n_ff_expert, c.n_expert});
}

std::vector<ExpectedTensor> expected_tensors(const ModelConfig& c, int64_t n_vocab) {
    std::vector<ExpectedTensor> out;
    Expector e(out);
    e.vocab("token_embd.weight", {c.n_embd, n_vocab}, true);
    e.need("output_norm.weight", {c.n_embd});
    // llama and qwen2 tie the LM head to token_embd when output.weight is absent.
    e.vocab("output.weight", {c.n_embd, n_vocab}, c.arch == Arch::kDeepseek2);
    if (c.arch == Arch::kLlama) e.maybe("rope_freqs.weight", {c.n_rot / 2});

    for (int64_t il = 0; il < c.n_layer; ++il) {
        e.need(blk(il, "attn_norm.weight"), {c.n_embd});
        e.need(blk(il, "ffn_norm.weight"), {c.n_embd});
        if (c.arch == Arch::kDeepseek2) {
            int64_t q_width = c.n_head * c.head_dim_k_mla;
            if (c.q_lora_rank == 0) {
                e.need(blk(il, "attn_q.weight"), {c.n_embd, q_width});
            } else {
                e.need(blk(il, "attn_q_a_norm.weight"), {c.q_lora_rank});
                e.need(blk(il, "attn_q_a.weight"), {c.n_embd, c.q_lora_rank});
                e.need(blk(il, "attn_q_b.weight"), {c.q_lora_rank, q_width});
            }
            e.need(blk(il, "attn_kv_a_mqa.weight"), {c.n_embd, c.kv_lora_rank + c.n_rot});
            e.need(blk(il, "attn_kv_a_norm.weight"), {c.kv_lora_rank});
            if (c.mla_split) {
                e.need(blk(il, "attn_k_b.weight"), {c.qk_nope_dim(), c.kv_lora_rank, c.n_head});
                e.need(blk(il, "attn_v_b.weight"), {c.kv_lora_rank, c.head_dim_v_mla, c.n_head});
            } else {
                e.need(blk(il, "attn_kv_b.weight"), {c.kv_lora_rank, c.n_head * (c.qk_nope_dim() + c.head_dim_v_mla)});
            }
            e.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v_mla, c.n_embd});
            if (!c.layer_is_moe(il)) {
                expect_dense_ffn(e, il, c.n_embd, c.n_ff);
            } else {
                expect_moe_ffn(e, c, il);
                e.maybe(blk(il, "exp_probs_b.bias"), {c.n_expert});
                int64_t shared = c.n_ff_expert * c.n_expert_shared;
                e.need(blk(il, "ffn_gate_shexp.weight"), {c.n_embd, shared});
                e.need(blk(il, "ffn_down_shexp.weight"), {shared, c.n_embd});
                e.need(blk(il, "ffn_up_shexp.weight"), {c.n_embd, shared});
            }
            continue;
        }
        // llama and qwen2 attention: q/k/v projections, optional biases.
        e.need(blk(il, "attn_q.weight"), {c.n_embd, c.n_head * c.head_dim_k});
        e.need(blk(il, "attn_k.weight"), {c.n_embd, c.n_embd_k_gqa()});
        e.need(blk(il, "attn_v.weight"), {c.n_embd, c.n_embd_v_gqa()});
        e.need(blk(il, "attn_output.weight"), {c.n_head * c.head_dim_v, c.n_embd});
        e.maybe(blk(il, "attn_q.bias"), {c.n_head * c.head_dim_k});
        e.maybe(blk(il, "attn_k.bias"), {c.n_embd_k_gqa()});
        e.maybe(blk(il, "attn_v.bias"), {c.n_embd_v_gqa()});
        if (c.arch == Arch::kLlama) e.maybe(blk(il, "attn_output.bias"), {c.n_embd});
        if (c.arch == Arch::kLlama && c.n_expert > 0) expect_moe_ffn(e, c, il);
        else expect_dense_ffn(e, il, c.n_embd, c.n_ff);
    }
    return out;
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
        for (size_t i = types->items.size(); i-- > 0;) {
            int64_t t = 0;
            if (!types->items[i].get_int(&t) || t != 5) break;
            ++n_pad;
        }
        if (n_pad > 0)
            lints.push_back({LintSeverity::kInfo, "tokenizer.ggml.token_type",
                             fmt::format("the last {} of {} tokens are UNUSED padding (e.g. \"{}\"): the vocabulary "
                                         "is padded to the embedding rows; they should never be sampled",
                                         n_pad, c.n_vocab, tokens->strings.empty() ? "" : tokens->strings.back())});
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
    for (const ExpectedTensor& want : expected_tensors(c, n_vocab)) {
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
        std::vector<int64_t> got = actual_ne(*t);
        if (!same_shape(want.ne, got)) {
            std::string msg = fmt::format("expected ne {} got {}", format_ne(want.ne), format_ne(got));
            if (want.vocab_rows && want.ne.size() == 2 && got.size() >= 2 && got[0] == want.ne[0])
                msg += fmt::format(": {} rows but the vocabulary (tokenizer.ggml.tokens) has {} tokens",
                                   got[1], n_vocab);
            lints.push_back({LintSeverity::kError, want.name, msg});
        }
        const GgmlTypeTraits* traits = ggml_type_traits(t->type);
        if (!traits || !traits->can_dequantize)
            lints.push_back({LintSeverity::kWarning, want.name,
                             fmt::format("type {} cannot be dequantized by layerscope yet", ggml_type_name(t->type))});
    }
    for (const GgufTensorInfo& t : file.tensors()) {
        if (known.count(t.name)) continue;
        lints.push_back({LintSeverity::kWarning, t.name,
                         fmt::format("not used by {} models (llama.cpp refuses files with unused tensors: "
                                     "wrong number of tensors)", c.arch_name)});
    }
    return lints;
}

}  // namespace ls
