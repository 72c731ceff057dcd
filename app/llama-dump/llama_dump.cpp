// llama-dump: runs a prompt (and N greedy tokens) through llama.cpp and writes every graph tensor, the graph
// inputs and the logits into one GGUF reference dump that ls::ReferenceDump::open reads.
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include "gguf.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#ifndef LLAMA_DUMP_LLAMA_COMMIT
#define LLAMA_DUMP_LLAMA_COMMIT ""
#endif

namespace {

constexpr const char* kTool = "llama-tensor-dump (reference dumper)";
constexpr const char* kNaming =
    "tensor = llama.cpp name; '#k' = k-th occurrence of that name within one graph eval; '@d' = decode call d "
    "(0 = prompt, omitted for d=0,u=0), '@d.u' = ubatch u>0 of decode d; inputs (kind=1) are graph input leafs "
    "captured before their first consumer; llama_logits (kind=2) = llama_get_logits_ith; data converted to f32 "
    "except integer types; shapes are ggml ne order (ne0 fastest)";

// prefix + decimal number, e.g. "#2", "@1", "node_17".
std::string tagged(const char* prefix, int64_t v) {
    std::string s(prefix);
    s += std::to_string(v);
    return s;
}

enum Kind : int32_t { kNode = 0, kInput = 1, kLogits = 2 };

// One captured tensor, already gathered into a contiguous host array of `type` (F32, I32 or I64).
struct Captured {
    std::string name, orig_name, op, src0, src1, orig_type;
    int32_t decode = 0, ubatch = 0, node_index = -1, kind = kNode;
    ggml_type type = GGML_TYPE_F32;
    int64_t ne[4] = {1, 1, 1, 1};
    std::vector<uint8_t> data;
};

// State shared with the eval callback. The callback cannot see where one graph evaluation ends, so the next
// ubatch is recognized by its first node: either a node already seen in this evaluation (a reused graph runs
// the same tensors again) or a node reading a graph input whose name was already captured from another
// tensor (a rebuilt graph has new tensors but the same input names, and every graph has one of each).
struct DumpState {
    bool active = false;
    bool cache_tensors = true;
    int32_t decode = 0, ubatch = 0, node_counter = 0;
    std::unordered_set<const ggml_tensor*> seen_nodes, seen_inputs;
    std::unordered_map<std::string, const ggml_tensor*> input_by_name;
    std::unordered_map<const ggml_tensor*, std::string> unnamed;  // unnamed node -> "node_<i>"
    std::unordered_map<std::string, int> occurrences;             // base name -> count in this evaluation
    std::vector<Captured> tensors;
    std::string error;

    void begin_eval(int32_t d, int32_t u) {
        decode = d;
        ubatch = u;
        node_counter = 0;
        seen_nodes.clear();
        seen_inputs.clear();
        input_by_name.clear();
        unnamed.clear();
        occurrences.clear();
    }

    std::string suffix() const {
        if (ubatch > 0) return tagged("@", decode) + tagged(".", ubatch);
        if (decode > 0) return tagged("@", decode);
        return "";
    }

    // Final dump name: base, '#k' for repeated names within this evaluation, then '@d[.u]'; GGUF caps names
    // at 63 bytes.
    std::string dump_name(const std::string& base) {
        int k = ++occurrences[base];
        std::string n = base + (k >= 2 ? tagged("#", k) : std::string()) + suffix();
        if (n.size() > GGML_MAX_NAME - 1) n.resize(GGML_MAX_NAME - 1);
        return n;
    }

    std::string src_name(const ggml_tensor* s) const {
        if (!s) return "";
        if (s->name[0]) return s->name;
        auto it = unnamed.find(s);
        return it == unnamed.end() ? std::string() : it->second;
    }
};

bool is_graph_input(const ggml_tensor* t) {
    return t && t->op == GGML_OP_NONE && (t->flags & GGML_TENSOR_FLAG_INPUT);
}

// Copies `t` into c.data in the element order of its own ne (views and permutes included), converting
// float types to F32 and widening small integers to I32. Returns false with `err` set when impossible;
// an empty tensor returns false with `err` empty.
bool gather(const ggml_tensor* t, Captured& c, std::string& err) {
    const int64_t n = ggml_nelements(t);
    if (n == 0) return false;
    if (!t->data) {
        err = "tensor has no data";
        return false;
    }

    // Bring the byte span of the tensor to the host when it lives in device memory.
    const uint8_t* base = static_cast<const uint8_t*>(t->data);
    std::vector<uint8_t> staging;
    if (t->buffer && !ggml_backend_buffer_is_host(t->buffer)) {
        staging.resize(ggml_nbytes(t));
        ggml_backend_tensor_get(t, staging.data(), 0, staging.size());
        base = staging.data();
    }

    for (int i = 0; i < 4; ++i) c.ne[i] = t->ne[i];
    const ggml_type src_type = t->type;
    const size_t esize = ggml_type_size(src_type);
    const int64_t blck = ggml_blck_size(src_type);
    const int64_t ne0 = t->ne[0];

    switch (src_type) {
        case GGML_TYPE_I32:
        case GGML_TYPE_I64: c.type = src_type; break;
        case GGML_TYPE_I8:
        case GGML_TYPE_I16: c.type = GGML_TYPE_I32; break;
        default: c.type = GGML_TYPE_F32; break;
    }
    const auto* traits = ggml_get_type_traits(src_type);
    const bool is_float_convertible =
        src_type == GGML_TYPE_F32 || src_type == GGML_TYPE_F64 || (traits && traits->to_float);
    if (c.type == GGML_TYPE_F32 && !is_float_convertible) {
        err = std::string("no conversion to f32 for type ") + ggml_type_name(src_type);
        return false;
    }
    // Block types can only be read row by row, so their rows must be contiguous.
    if (blck > 1 && (size_t)t->nb[0] != esize) {
        err = "quantized tensor with non-contiguous rows";
        return false;
    }

    c.data.resize((size_t)n * ggml_type_size(c.type));
    uint8_t* out = c.data.data();
    const size_t out_row = (size_t)ne0 * ggml_type_size(c.type);

    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                const uint8_t* row = base + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                const bool dense = (size_t)t->nb[0] == esize;
                if (c.type == GGML_TYPE_F32 && src_type != GGML_TYPE_F32 && src_type != GGML_TYPE_F64) {
                    float* dst = reinterpret_cast<float*>(out);
                    if (dense) {
                        traits->to_float(row, dst, ne0);
                    } else {
                        for (int64_t i0 = 0; i0 < ne0; ++i0) traits->to_float(row + i0 * t->nb[0], dst + i0, 1);
                    }
                } else if (src_type == GGML_TYPE_F64) {
                    float* dst = reinterpret_cast<float*>(out);
                    for (int64_t i0 = 0; i0 < ne0; ++i0) {
                        double v;
                        std::memcpy(&v, row + i0 * t->nb[0], sizeof v);
                        dst[i0] = (float)v;
                    }
                } else if (src_type == GGML_TYPE_I8 || src_type == GGML_TYPE_I16) {
                    int32_t* dst = reinterpret_cast<int32_t*>(out);
                    for (int64_t i0 = 0; i0 < ne0; ++i0) {
                        const uint8_t* p = row + i0 * t->nb[0];
                        if (src_type == GGML_TYPE_I8) {
                            dst[i0] = *reinterpret_cast<const int8_t*>(p);
                        } else {
                            int16_t v;
                            std::memcpy(&v, p, sizeof v);
                            dst[i0] = v;
                        }
                    }
                } else if (dense) {  // F32, I32, I64 stored as they are
                    std::memcpy(out, row, out_row);
                } else {
                    for (int64_t i0 = 0; i0 < ne0; ++i0) std::memcpy(out + i0 * esize, row + i0 * t->nb[0], esize);
                }
                out += out_row;
            }
    return true;
}

void capture(DumpState& st, const ggml_tensor* t, int32_t kind, int32_t node_index, const std::string& base) {
    if (!st.cache_tensors && kind == kNode && (base.rfind("cache_k_l", 0) == 0 || base.rfind("cache_v_l", 0) == 0)) return;
    Captured c;
    std::string err;
    if (!gather(t, c, err)) {
        if (!err.empty())
            std::fprintf(stderr, "llama-dump: warning: skipping '%s' (%s, %s): %s\n", base.c_str(),
                         ggml_op_desc(t), ggml_type_name(t->type), err.c_str());
        return;
    }
    c.orig_name = base;
    c.name = st.dump_name(base);
    c.op = kind == kInput ? "INPUT" : ggml_op_desc(t);
    if (kind == kNode) {
        c.src0 = st.src_name(t->src[0]);
        c.src1 = st.src_name(t->src[1]);
    }
    c.orig_type = ggml_type_name(t->type);
    c.decode = st.decode;
    c.ubatch = st.ubatch;
    c.node_index = node_index;
    c.kind = kind;
    st.tensors.push_back(std::move(c));
}

bool starts_new_eval(const DumpState& st, const ggml_tensor* t) {
    if (st.seen_nodes.count(t)) return true;
    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        const ggml_tensor* s = t->src[i];
        if (!is_graph_input(s) || !s->name[0]) continue;
        // Only the token (or embedding) input says so: a graph may hold several inputs of one name
        // (a sliding-window model's KV indices and masks, one set per cache).
        if (std::strcmp(s->name, "inp_tokens") != 0 && std::strcmp(s->name, "inp_embd") != 0) continue;
        auto it = st.input_by_name.find(s->name);
        if (it != st.input_by_name.end() && it->second != s) return true;
    }
    return false;
}

// ggml_backend_sched_eval_callback: ask for every node; when a node has run, first capture the graph
// inputs it is the first to read, then the node itself.
bool eval_callback(ggml_tensor* t, bool ask, void* user_data) {
    auto& st = *static_cast<DumpState*>(user_data);
    if (ask) return st.active;
    if (!st.active) return true;

    if (st.node_counter > 0 && starts_new_eval(st, t)) st.begin_eval(st.decode, st.ubatch + 1);
    st.seen_nodes.insert(t);
    const int32_t index = st.node_counter++;
    std::string base = t->name;
    if (base.empty()) {
        base = tagged("node_", index);
        st.unnamed[t] = base;
    }

    for (int i = 0; i < GGML_MAX_SRC; ++i) {
        const ggml_tensor* s = t->src[i];
        if (!is_graph_input(s) || st.seen_inputs.count(s)) continue;
        st.seen_inputs.insert(s);
        if (s->name[0]) st.input_by_name[s->name] = s;
        capture(st, s, kInput, -1, s->name[0] ? std::string(s->name) : tagged("input_", index));
    }
    capture(st, t, kNode, index, base);
    return true;
}

struct Options {
    std::string model, prompt, out;
    int32_t n_predict = 0, n_ctx = 0, n_ubatch = 512, n_threads = 4;
    bool all_logits = false, use_extra_bufts = true, verbose = false;
    bool cache_tensors = true;  // the KV-cache views and writes (most of a small model's dump)
    std::string fa = "auto";
};

void usage(const char* argv0) {
    std::fprintf(stderr,
                 "usage: %s -m MODEL.gguf -p PROMPT -o OUT.gguf [options]\n"
                 "  -n N              greedy tokens to generate after the prompt (default 0)\n"
                 "  --all-logits      keep the logits of every prompt token (default: last token only)\n"
                 "  --fa on|off|auto  flash attention (default auto)\n"
                 "  -c N              context size (default: prompt + N rounded up to 256)\n"
                 "  -ub N             physical batch size (default 512, capped by the context)\n"
                 "  -t N              threads (default 4)\n"
                 "  --no-extra-bufts  keep weights out of extra (AMX/repacked) buffer types\n"
                 "  --no-cache-tensors  leave out the KV-cache views and writes (cache_k_lN ..., cache_v_lN ...)\n"
                 "  -v                show llama.cpp's informational log\n",
                 argv0);
}

bool parse_int(const char* s, int32_t& v) {
    char* end = nullptr;
    long x = std::strtol(s, &end, 10);
    if (!end || *end || end == s) return false;
    v = (int32_t)x;
    return true;
}

bool parse_args(int argc, char** argv, Options& o) {
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&]() -> const char* {
            if (i + 1 >= argc) {
                std::fprintf(stderr, "llama-dump: %s needs a value\n", a.c_str());
                return nullptr;
            }
            return argv[++i];
        };
        const char* v = nullptr;
        if (a == "-h" || a == "--help") return false;
        if (a == "--all-logits") { o.all_logits = true; continue; }
        if (a == "--no-extra-bufts") { o.use_extra_bufts = false; continue; }
        if (a == "--no-cache-tensors") { o.cache_tensors = false; continue; }
        if (a == "-v") { o.verbose = true; continue; }
        if (!(v = next())) return false;
        bool ok = true;
        if (a == "-m") o.model = v;
        else if (a == "-p") o.prompt = v;
        else if (a == "-o") o.out = v;
        else if (a == "-n") ok = parse_int(v, o.n_predict) && o.n_predict >= 0;
        else if (a == "-c") ok = parse_int(v, o.n_ctx) && o.n_ctx >= 0;
        else if (a == "-ub") ok = parse_int(v, o.n_ubatch) && o.n_ubatch > 0;
        else if (a == "-t") ok = parse_int(v, o.n_threads) && o.n_threads > 0;
        else if (a == "--fa") ok = (o.fa = v) == "on" || o.fa == "off" || o.fa == "auto";
        else {
            std::fprintf(stderr, "llama-dump: unknown option %s\n", a.c_str());
            return false;
        }
        if (!ok) {
            std::fprintf(stderr, "llama-dump: bad value for %s: %s\n", a.c_str(), v);
            return false;
        }
    }
    if (o.model.empty() || o.prompt.empty() || o.out.empty()) {
        std::fprintf(stderr, "llama-dump: -m, -p and -o are required\n");
        return false;
    }
    return true;
}

void log_callback(ggml_log_level level, const char* text, void* user_data) {
    const bool verbose = *static_cast<bool*>(user_data);
    if (verbose || level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

std::string piece(const llama_vocab* vocab, llama_token tok) {
    std::string s(64, '\0');
    int32_t n = llama_token_to_piece(vocab, tok, s.data(), (int32_t)s.size(), 0, true);
    if (n < 0) {
        s.resize((size_t)-n);
        n = llama_token_to_piece(vocab, tok, s.data(), (int32_t)s.size(), 0, true);
    }
    s.resize(n < 0 ? 0 : (size_t)n);
    return s;
}

// The logits of one decode call as a kind-2 tensor: the last row, or every row with --all-logits.
void capture_logits(DumpState& st, llama_context* ctx, int32_t n_vocab, int32_t n_rows) {
    Captured c;
    c.name = c.orig_name = "llama_logits";
    if (st.decode > 0) c.name += tagged("@", st.decode);
    c.op = "LLAMA_GET_LOGITS";
    c.orig_type = "f32";
    c.decode = st.decode;
    c.ubatch = 0;
    c.kind = kLogits;
    c.ne[0] = n_vocab;
    c.ne[1] = n_rows;
    c.data.resize((size_t)n_vocab * n_rows * sizeof(float));
    for (int32_t r = 0; r < n_rows; ++r) {
        const float* row = llama_get_logits_ith(ctx, n_rows == 1 ? -1 : r);
        std::memcpy(c.data.data() + (size_t)r * n_vocab * sizeof(float), row, (size_t)n_vocab * sizeof(float));
    }
    st.tensors.push_back(std::move(c));
}

void set_str_array(gguf_context* g, const char* key, const std::vector<std::string>& v) {
    std::vector<const char*> p;
    p.reserve(v.size());
    for (const auto& s : v) p.push_back(s.c_str());
    gguf_set_arr_str(g, key, p.data(), p.size());
}

void set_i32_array(gguf_context* g, const char* key, const std::vector<int32_t>& v) {
    gguf_set_arr_data(g, key, GGUF_TYPE_INT32, v.data(), v.size());
}

template <class F>
std::vector<std::string> column_s(const std::vector<Captured>& ts, F f) {
    std::vector<std::string> out;
    for (const auto& t : ts) out.push_back(f(t));
    return out;
}

template <class F>
std::vector<int32_t> column_i(const std::vector<Captured>& ts, F f) {
    std::vector<int32_t> out;
    for (const auto& t : ts) out.push_back(f(t));
    return out;
}

std::string commit_string() {
    std::string s = LLAMA_DUMP_LLAMA_COMMIT;
    std::string ggml = std::string("ggml ") + ggml_version() + ", ggml commit " + ggml_commit();
    return s.empty() ? ggml : s + " (" + ggml + ")";
}

// The processor's vector-extension flags (from /proc/cpuinfo): llama.cpp's system_info does not
// show whether AVX-512 f16 arithmetic is native, and which code path ggml took depends on it.
std::string cpu_flags() {
    std::FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return "";
    char line[8192];
    std::string out;
    while (std::fgets(line, sizeof line, f)) {
        if (std::strncmp(line, "flags", 5) != 0) continue;
        const char* colon = std::strchr(line, ':');
        std::string word;
        for (const char* p = colon ? colon + 1 : line;; ++p) {
            if (*p && *p != ' ' && *p != '\n') {
                word += *p;
                continue;
            }
            const bool keep = word.rfind("avx", 0) == 0 || word == "fma" || word == "f16c" || word.rfind("amx", 0) == 0 ||
                              word == "sse4_2";
            if (keep) out += (out.empty() ? "" : " ") + word;
            word.clear();
            if (!*p || *p == '\n') break;
        }
        break;
    }
    std::fclose(f);
    return out;
}

// The devices the context runs on: "CPU", "CUDA0", ...
std::string backend_devices() {
    std::string out;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
        out += (out.empty() ? "" : ", ") + std::string(ggml_backend_dev_name(ggml_backend_dev_get(i)));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    if (!parse_args(argc, argv, o)) {
        usage(argv[0]);
        return 2;
    }

    llama_log_set(log_callback, &o.verbose);
    ggml_backend_load_all();
    llama_backend_init();

    llama_model_params mp = llama_model_default_params();
    mp.use_extra_bufts = o.use_extra_bufts;
    llama_model* model = llama_model_load_from_file(o.model.c_str(), mp);
    if (!model) {
        std::fprintf(stderr, "llama-dump: cannot load model %s\n", o.model.c_str());
        return 1;
    }
    const llama_vocab* vocab = llama_model_get_vocab(model);
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);

    // add_special = true (BOS/EOS as the vocab says), parse_special = true (special-token text is one token).
    std::vector<llama_token> prompt(o.prompt.size() + 16);
    int32_t n_prompt = llama_tokenize(vocab, o.prompt.c_str(), (int32_t)o.prompt.size(), prompt.data(),
                                      (int32_t)prompt.size(), true, true);
    if (n_prompt < 0 && n_prompt != INT32_MIN) {
        prompt.resize((size_t)-n_prompt);
        n_prompt = llama_tokenize(vocab, o.prompt.c_str(), (int32_t)o.prompt.size(), prompt.data(),
                                  (int32_t)prompt.size(), true, true);
    }
    if (n_prompt <= 0) {
        std::fprintf(stderr, "llama-dump: the prompt gives no tokens\n");
        return 1;
    }
    prompt.resize((size_t)n_prompt);

    const int32_t needed = n_prompt + o.n_predict;
    const int32_t n_ctx = o.n_ctx > 0 ? o.n_ctx : std::max(256, (needed + 255) / 256 * 256);
    if (n_ctx < needed) {
        std::fprintf(stderr, "llama-dump: -c %d is smaller than prompt (%d) + -n (%d)\n", n_ctx, n_prompt,
                     o.n_predict);
        return 1;
    }

    DumpState st;
    st.cache_tensors = o.cache_tensors;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = (uint32_t)std::max(n_ctx, n_prompt);  // the prompt goes in one llama_decode call
    cp.n_ubatch = (uint32_t)o.n_ubatch;
    cp.n_threads = o.n_threads;
    cp.n_threads_batch = o.n_threads;
    cp.flash_attn_type = o.fa == "on"    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                         : o.fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                         : LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.cb_eval = eval_callback;
    cp.cb_eval_user_data = &st;
    cp.no_perf = true;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        std::fprintf(stderr, "llama-dump: cannot create a context\n");
        llama_model_free(model);
        return 1;
    }

    std::vector<int32_t> decode_n_tokens, generated;
    std::string generated_text;

    // Decode call d: capture its graph evaluation(s), then its logits; returns the greedy (argmax) token.
    auto run_decode = [&](int32_t d, llama_batch batch, int32_t n_rows, llama_token& next) -> bool {
        st.begin_eval(d, 0);
        st.active = true;
        const int32_t rc = llama_decode(ctx, batch);
        st.active = false;
        if (rc != 0) {
            std::fprintf(stderr, "llama-dump: llama_decode failed (%d) in decode call %d\n", rc, d);
            return false;
        }
        decode_n_tokens.push_back(batch.n_tokens);
        capture_logits(st, ctx, n_vocab, n_rows);
        const float* last = llama_get_logits_ith(ctx, -1);
        next = (llama_token)(std::max_element(last, last + n_vocab) - last);
        return true;
    };

    bool ok = true;
    llama_token next = 0;
    if (o.all_logits) {
        llama_batch b = llama_batch_init(n_prompt, 0, 1);
        for (int32_t i = 0; i < n_prompt; ++i) {
            b.token[i] = prompt[i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        b.n_tokens = n_prompt;
        ok = run_decode(0, b, n_prompt, next);
        llama_batch_free(b);
    } else {
        ok = run_decode(0, llama_batch_get_one(prompt.data(), n_prompt), 1, next);
    }
    for (int32_t g = 0; ok && g < o.n_predict; ++g) {
        llama_token tok = next;
        generated.push_back(tok);
        generated_text += piece(vocab, tok);
        if (llama_vocab_is_eog(vocab, tok)) break;  // nothing worth decoding after end of generation
        ok = run_decode(g + 1, llama_batch_get_one(&tok, 1), 1, next);
    }
    if (!ok) {
        llama_free(ctx);
        llama_model_free(model);
        return 1;
    }

    // Metadata.
    gguf_context* g = gguf_init_empty();
    gguf_set_val_u32(g, "dump.format_version", 1);
    gguf_set_val_str(g, "dump.tool", kTool);
    gguf_set_val_str(g, "dump.llama_cpp.commit", commit_string().c_str());
    gguf_set_val_str(g, "dump.model_path", o.model.c_str());
    char desc[256] = {0};
    llama_model_desc(model, desc, sizeof desc);
    gguf_set_val_str(g, "dump.model_desc", desc);
    gguf_set_val_str(g, "dump.prompt", o.prompt.c_str());
    gguf_set_val_bool(g, "dump.add_special", true);
    gguf_set_val_bool(g, "dump.add_bos", llama_vocab_get_add_bos(vocab));
    set_i32_array(g, "dump.prompt_tokens", std::vector<int32_t>(prompt.begin(), prompt.end()));
    std::vector<std::string> pieces;
    for (llama_token t : prompt) pieces.push_back(piece(vocab, t));
    set_str_array(g, "dump.prompt_token_pieces", pieces);
    gguf_set_val_i32(g, "dump.n_predict", o.n_predict);
    if (o.n_predict > 0) {
        set_i32_array(g, "dump.generated_tokens", generated);
        gguf_set_val_str(g, "dump.generated_text", generated_text.c_str());
    }
    set_i32_array(g, "dump.decode_n_tokens", decode_n_tokens);
    gguf_set_val_u32(g, "dump.n_ctx", llama_n_ctx(ctx));
    gguf_set_val_u32(g, "dump.n_ubatch", llama_n_ubatch(ctx));
    gguf_set_val_i32(g, "dump.n_threads", llama_n_threads(ctx));
    gguf_set_val_str(g, "dump.flash_attn", o.fa.c_str());
    gguf_set_val_bool(g, "dump.all_logits", o.all_logits);
    gguf_set_val_bool(g, "dump.use_extra_bufts", o.use_extra_bufts);
    gguf_set_val_bool(g, "dump.cache_tensors", o.cache_tensors);
    gguf_set_val_str(g, "dump.system_info", llama_print_system_info());
    gguf_set_val_str(g, "dump.cpu_flags", cpu_flags().c_str());
    gguf_set_val_str(g, "dump.backend", backend_devices().c_str());
    gguf_set_val_str(g, "dump.naming", kNaming);

    const auto& ts = st.tensors;
    set_str_array(g, "dump.tensor.orig_name", column_s(ts, [](const Captured& c) { return c.orig_name; }));
    set_str_array(g, "dump.tensor.op", column_s(ts, [](const Captured& c) { return c.op; }));
    set_str_array(g, "dump.tensor.src0", column_s(ts, [](const Captured& c) { return c.src0; }));
    set_str_array(g, "dump.tensor.src1", column_s(ts, [](const Captured& c) { return c.src1; }));
    set_str_array(g, "dump.tensor.orig_type", column_s(ts, [](const Captured& c) { return c.orig_type; }));
    set_i32_array(g, "dump.tensor.decode", column_i(ts, [](const Captured& c) { return c.decode; }));
    set_i32_array(g, "dump.tensor.ubatch", column_i(ts, [](const Captured& c) { return c.ubatch; }));
    set_i32_array(g, "dump.tensor.node_index", column_i(ts, [](const Captured& c) { return c.node_index; }));
    set_i32_array(g, "dump.tensor.kind", column_i(ts, [](const Captured& c) { return c.kind; }));

    // Tensors: metadata-only ggml tensors pointing at the captured host arrays; gguf copies the data on write.
    ggml_init_params ip = {ts.size() * ggml_tensor_overhead() + 1024, nullptr, true};
    ggml_context* tctx = ggml_init(ip);
    for (const Captured& c : ts) {
        if (gguf_find_tensor(g, c.name.c_str()) >= 0) {
            std::fprintf(stderr, "llama-dump: duplicate tensor name '%s' (cut to %d bytes?)\n", c.name.c_str(),
                         GGML_MAX_NAME - 1);
            ok = false;
            break;
        }
        ggml_tensor* t = ggml_new_tensor(tctx, c.type, 4, c.ne);
        ggml_set_name(t, c.name.c_str());
        t->data = const_cast<uint8_t*>(c.data.data());
        gguf_add_tensor(g, t);
    }
    if (ok && !gguf_write_to_file(g, o.out.c_str(), false)) {
        std::fprintf(stderr, "llama-dump: cannot write %s\n", o.out.c_str());
        ok = false;
    }
    if (ok)
        std::fprintf(stderr, "llama-dump: wrote %zu tensors from %zu decode call(s) to %s\n", ts.size(),
                     decode_n_tokens.size(), o.out.c_str());

    gguf_free(g);
    ggml_free(tctx);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return ok ? 0 : 1;
}
