// The layerscope commands main.cpp dispatches to; each returns the process exit code (DESIGN.md
// section 7): 0 ok, 1 diverged (compare) or lint errors (inspect), 2 usage, 3 bad or unreadable input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/result.h"
#include "kernels/backend.h"

namespace ls::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDiverged = 1;    // compare: a divergence
inline constexpr int kExitLintErrors = 1;  // inspect: lints say the model cannot run
inline constexpr int kExitUsage = 2;       // also: nothing compared, an output that cannot be written
inline constexpr int kExitBadInput = 3;    // also: a reference tensor that cannot be compared
inline constexpr int kExitWriteError = kExitUsage;  // the output path given cannot take the output

// The exit code of a command that failed with `e`: a flag, an unsupported request or an output
// that cannot be written is usage (2); anything else is the input's fault (3).
inline int exit_code_for(const Error& e) {
    switch (e.code) {
        case ErrorCode::kUsage: case ErrorCode::kUnsupported: case ErrorCode::kIo: return kExitUsage;
        default: return kExitBadInput;
    }
}

// --llama-isa's value into `isa` ("auto" leaves it as it is); a usage error for anything else.
inline Status parse_llama_isa(const std::string& value, LlamaIsa* isa) {
    if (value == "auto" || llama_isa_from_name(value, isa)) return {};
    return make_error(ErrorCode::kUsage, "--llama-isa must be auto, avx2, avx512 or avx512-fp16");
}

struct InspectOptions {
    std::string model_path;
    bool json = false;
    bool list_tensors = false;   // the full tensor table in text mode (JSON always has it)
    std::string tensor_name;     // print this tensor's values and stats
    int values = 16;             // how many values of tensor_name to print
    int64_t block = -1;          // the quant block inspector: this block of tensor_name (-1: none)
};

int run_inspect(const InspectOptions& options);

struct TokenizeOptions {
    std::string model_path;  // a model or a vocabulary-only GGUF
    std::string prompt;
    bool prompt_given = false;
    std::string file;
    bool use_stdin = false;
    bool ids = false;               // print "[1, 2, 3]" only
    bool no_bos = false;            // no BOS/EOS even where the vocabulary adds them
    bool no_parse_special = false;  // special-token text stays text
    bool show_count = false;
    bool no_escape = false;         // take \n etc. in the text literally
    bool json = false;
    bool chat = false;              // wrap the text as one user message in the chat template
    std::string chat_template;      // a built-in family instead of the file's Jinja template
    std::string chat_template_file; // a Jinja template instead of the file's
    std::string messages_file;      // a JSON conversation for the template (implies chat)
    std::string chat_kwargs;        // JSON object of template variables
    std::string against;            // another engine's ids, or a file of them
    bool timing = false;            // print load and encode times to stderr
};

int run_tokenize(const TokenizeOptions& options);

// --remote HOST:PORT [--token-file FILE] on run, compare and export.
struct RemoteFlags {
    std::string address;     // empty: run here
    std::string token_file;  // empty: remote::default_token_path()
};

struct RunOptions {
    std::string model_path;
    std::string prompt;        // text (tokenized with BOS/EOS as the vocabulary says, special text parsed)
    std::string tokens;        // or token ids: "1,403,407"
    int n_predict = 16;
    std::string mode = "llama";
    std::string dump_path;     // write every intermediate here
    bool force = false;        // replace an existing dump file (never anything but a regular file)
    int threads = 0;           // 0 = all cores
    int64_t ctx = 0;           // KV cells; 0 = enough for the prompt and n_predict
    bool ctx_beyond_train = false;  // allow more KV cells than the model's trained context
    int64_t ubatch = 512;
    bool flash_attn = false;
    std::string mla = "auto";  // deepseek2: auto, absorbed, unabsorbed
    std::string delta_rule = "recurrent";  // qwen35 prompts: recurrent (llama.cpp's CPU form) or chunked
    bool all_logits = false;
    bool show_tokens = false;
    bool chat = false;          // wrap the prompt as one user message in the model's chat template
    std::string chat_template;  // a template family name instead of the model's (implies chat)
    std::string backend = "auto";  // cpu, cuda, cuda-emulated, auto
    std::string llama_isa = "auto";  // the llama.cpp CPU build llama mode reproduces (auto: this processor's)
    RemoteFlags remote;        // --remote: run on a server
};

int run_run(const RunOptions& options);

struct CompareOptions {
    std::vector<std::string> files;  // two dumps: ours, then the reference
    std::string model_path, reference_path;
    std::string prompt, tokens;      // default: the reference's prompt tokens
    std::string mode = "llama";
    std::string fault;
    std::string mla = "auto";        // deepseek2: auto, absorbed, unabsorbed
    std::string delta_rule = "recurrent";  // qwen35 prompts: recurrent or chunked
    int n_decode = -1;               // decode calls; -1 = as many as the reference has
    double warn_nmse = 1e-6, diverged_nmse = 1e-4;
    bool thresholds_given = false;   // --warn or --diverged: no noise floor
    int threads = 0;
    bool json = false;
    bool all = false;                // every event and every unmatched reference tensor
    std::string backend = "auto";
    std::string against_backend;     // set: the reference is the same run on this backend
    std::string against_model;       // set: the reference is the same run of this file (the model in another format)
    bool logit_lens = false;         // each layer's output through the output head, ours and the reference's
    std::string ablate;              // with against_model: "tensors" or "layers" (run_ablation)
    bool ablate_restore = false;     // --ablate: restore one unit at a time instead of quantizing one
    std::string llama_isa = "auto";  // the llama.cpp CPU build llama mode reproduces
    std::string names = "auto";      // naming convention of the dumps: auto, llama, hf, meta or a map file
    double min_paired = 0.5;         // share of the smaller side that must pair (kDefaultMinPaired)
    std::vector<std::string> run_flags_given;  // flags of a model run given (--mode, --fault, ...), in order
    RemoteFlags remote;        // --remote: run on a server
};

int run_compare(const CompareOptions& options);

struct MakeModelOptions {
    std::string out_path;
    bool demo = false;          // start from the GUI demo's spec; other flags override it
    std::string preset;         // start from a named spec (make_model_preset); other flags override it
    std::string arch, type;     // "" = the spec's default
    std::vector<std::string> tensor_types;  // NAME=TYPE: one tensor in another type
    // 0 = the spec's default (or the demo's or preset's).
    int n_embd = 0, n_layer = 0, n_head = 0, n_head_kv = 0, n_ff = 0, vocab = 0, ctx_train = 0, head_dim = 0;
    // deepseek2; -1 = the spec's default (0 is a value: no q compression, no dense block).
    int q_lora_rank = -1, kv_lora_rank = -1, experts = -1, experts_used = -1, dense_lead = -1;
    bool legacy_kvb = false;
    int expert_groups = 0, expert_groups_used = 0;  // deepseek2: 0 = the spec's
    int expert_ff = 0;                // deepseek2, qwen3moe: expert_feed_forward_length (0 = the spec's)
    bool llama_experts = false;       // llama: Mixtral's experts in every layer
    bool fused_gate_up = false;       // deepseek2: ffn_gate_up_exps
    std::string gating;               // deepseek2: softmax or sigmoid ("" = the spec's)
    double expert_weights_scale = -1; // deepseek2: < 0 = the spec's
    bool expert_weights_norm = false; // deepseek2: renormalise the chosen experts' weights
    bool expert_bias = false;         // deepseek2: a selection bias per MoE layer (exp_probs_b)
    double rope_freqs = -1;           // llama: Llama 3.1's rope_freqs with this factor (0 = none; < 0 = the spec's)
    bool tied_output = false;         // llama: no output.weight (the LM head is token_embd)
    bool out_biases = false;          // llama's attn_output / ffn biases, qwen2's output.bias
    bool weight_scales = false;       // llama, qwen2, qwen3: .scale / .input_scale per projection
    int n_rot = 0;                    // phi3: rotated dims per head (0 = the spec's)
    int longrope_orig_ctx = 0;        // phi3: LongRoPE with this original context (0 = the spec's)
    int swa = -1;                     // gemma: the sliding window (-1 = the spec's)
    int swa_pattern = -1;             // gemma3: the local/global period (-1 = the spec's)
    bool seed_given = false;
    uint64_t seed = 0;
    bool force = false;         // replace an existing file (never anything but a regular file)
};

// Writes a deterministic synthetic model (0 ok, 2 bad spec or cannot write).
int run_make_model(const MakeModelOptions& options);

struct ExportCmdOptions {
    std::string model_path, from_path;  // exactly one: run a model, or convert a dump / .npy folder
    std::string prompt, tokens;         // with model_path: text or ids "1,403,407"
    int n_predict = 0;                  // tokens generated after the prompt
    std::string mode = "llama";
    std::string events;                 // comma-separated globs; "" = every event
    std::string gguf_path, npy_path;    // exactly one output
    bool force = false;                 // replace an existing file or earlier export folder
    int threads = 0;
    bool chat = false;
    std::string chat_template;
    std::string backend = "auto";
    std::string llama_isa = "auto";     // the llama.cpp CPU build llama mode reproduces (auto: this processor's)
    RemoteFlags remote;        // --remote: run on a server
};

// Exports a run's events or converts a dump (0 ok, 2 bad usage, nothing selected, cannot write or
// the output exists without --force, 3 unreadable input).
int run_export(const ExportCmdOptions& options);

struct BenchOptions {
    std::string model_path;
    int prompt_tokens = 64;
    int gen = 32;
    int depth = 0;  // tokens in the cache before the timed prompt (llama-bench's -d)
    int threads = 0;
    std::string mode = "llama";
    std::string backend = "auto";
    std::string capture = "none";  // none, stats (on the backend, every event), all (also host copies)
    std::string sync = "needed";   // needed (run mode) or event (step mode: the backend synced after every event)
    int repetitions = 3;           // timed runs after a warm-up; the medians are reported
    bool json = false;
};

// Prompt and generation speed, time per op class, capture overhead and peak RSS (0 ok, 2 usage,
// 3 unreadable model).
int run_bench(const BenchOptions& options);

struct GuiOptions {
    std::string model_path;       // a model or a dump opened at start; empty: the built-in demo
    std::string connect;          // --connect HOST:PORT: model_path (and reference_path) are that server's
    std::string token_file;       // with --connect: the server's token (default: ~/.config/layerscope/serve-token)
    std::string reference_path;   // a reference loaded at start
    std::string against_model;    // the same model in another format, whose run is the reference
    std::string doctor_model_path;  // with a dump: the model it is diagnosed with (--model)
    std::string screenshot_path;  // when set: render `frames` frames, save a PNG, exit
    int frames = 3;
    std::string script_path;      // UI actions, one per line (see app/gui_script.h)
    std::string state_log_path;   // the app's own log of actions and state changes
    std::string screenshot_dir;   // where F12 saves screenshots
    int measure_frames = 0;       // print the UI's CPU time per frame over this many frames, exit
    bool all_panels = false;      // open every panel at start
    bool keep_open = false;       // stay open after the script ends
    std::string backend = "auto"; // where the session runs models
    std::string capture_budget;   // --capture-budget: "" (half the memory available), "4G", "25%"
    int window_width = 1280, window_height = 800;  // --window-size
    float ui_scale = 0;           // --ui-scale: fonts and sizes; 0: the monitor's content scale
    std::string layout;           // --layout: a named layout to start with
};

// Opens the window; only built with the GUI (LAYERSCOPE_HAVE_GUI).
int run_gui(const GuiOptions& options);

struct ServeOptions {
    std::string listen = "127.0.0.1:7070";  // HOST:PORT; port 0 picks a free one (printed)
    std::string token_file;                 // empty: remote::default_token_path()
    std::vector<std::string> roots;         // the folders inputs may come from (default: the current one)
    int max_connections = 8;
    bool tls = false;           // TLS on loopback too (off loopback it always is)
    std::string tls_identity;   // key + certificate; empty: serve-tls.pem beside the token file
};

int run_serve(const ServeOptions& options);

// A headless command (run, compare, export) on a server: `args` are those typed after the
// command's name; the output paths of `outputs` (file or folder, with --force) are this machine's;
// `inputs` are the values of input flags that may be files here (references, dumps): those found
// here are uploaded ("server:PATH" is the server's PATH).
struct RemoteOutput {
    std::string flag;   // "--dump", "--gguf", "--npy"
    std::string path;   // where it goes here
    bool folder = false;
    bool force = false;
};
int run_remote(const std::string& command, const std::vector<std::string>& args, const RemoteFlags& flags,
               const std::vector<RemoteOutput>& outputs, const std::vector<std::string>& inputs);

}  // namespace ls::app
