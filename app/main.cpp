// layerscope entry point: parses the command line (CLI11) and dispatches to a command; with no
// command it opens the GUI, or explains how to get one in a headless build.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <stdexcept>
#include <system_error>

#include "app/cli.h"
#include "app/commands.h"
#include "engine/session/capture_store.h"
#include "kernels/common/host_memory.h"

namespace {

using ls::app::add_llama_isa_option;
using ls::app::kNonEmptyPath;

void add_tokenize_command(CLI::App& app, ls::app::TokenizeOptions& o) {
    CLI::App* cmd = app.add_subcommand("tokenize", "Token ids of a text, as llama-tokenize prints them (same flags), or as "
                                                   "JSON; --against compares them with another engine's. Exit 1 when they differ");
    cmd->add_option("-m,--model,model", o.model_path, "GGUF model or vocabulary-only file")->required();
    cmd->add_option("-p,--prompt", o.prompt, "The text (escapes such as \\n are processed unless --no-escape)")
        ->each([&o](const std::string&) { o.prompt_given = true; });
    cmd->add_option("-f,--file", o.file, "Read the text from this file, byte for byte");
    cmd->add_flag("--stdin", o.use_stdin, "Read the text from standard input (before -f and -p)");
    cmd->add_flag("--ids", o.ids, "Print only the ids, as [1, 2, 3]");
    cmd->add_flag("--no-bos", o.no_bos, "Add no BOS (or EOS) even where the vocabulary asks for it");
    cmd->add_flag("--no-parse-special", o.no_parse_special, "Special-token text such as <|im_start|> stays text");
    cmd->add_flag("--show-count", o.show_count, "Print the number of tokens");
    cmd->add_flag("--no-escape", o.no_escape, "Take backslashes in the text literally");
    cmd->add_flag("--json", o.json, "One JSON object: ids, pieces, byte offsets in the text, special flags");
    cmd->add_flag("--chat", o.chat, "Render the text as one user message with the file's Jinja chat template");
    cmd->add_option("--chat-template", o.chat_template, "With --chat: a built-in template family (chatml, llama3, ...) "
                                                        "instead of the file's template");
    cmd->add_option("--chat-template-file", o.chat_template_file, "With --chat: this Jinja template instead of the file's");
    cmd->add_option("--messages", o.messages_file, "A conversation to render with the chat template: JSON, a list of "
                                                   "messages or {\"messages\": [...], \"tools\": [...]}");
    cmd->add_option("--chat-template-kwargs", o.chat_kwargs, "Template variables as a JSON object, e.g. "
                                                             "'{\"enable_thinking\": false}'");
    cmd->add_option("--against", o.against, "Another engine's ids ([1, 2, 3] or a file holding them): print the first "
                                            "token where they differ");
    cmd->add_flag("--timing", o.timing, "Print the vocabulary's load time and the encoding speed to stderr");
}

void add_inspect_command(CLI::App& app, ls::app::InspectOptions& options) {
    CLI::App* inspect = app.add_subcommand("inspect", "Show a GGUF file's metadata, tokenizer, tensors and lints. Exit 1 when lints "
                                                        "report errors (the model cannot run as it is)");
    inspect->add_option("model", options.model_path, "GGUF model file")->required();
    inspect->add_flag("--json", options.json, "Print one JSON object instead of text");
    inspect->add_flag("--tensors", options.list_tensors, "List every tensor (name, type, ne, bytes, offset)");
    inspect->add_option("--tensor", options.tensor_name, "Dequantize this tensor: print values and statistics");
    inspect->add_option("--values", options.values, "How many values --tensor prints (default 16)")
        ->check(CLI::Range(0, 1 << 30));
    inspect->add_option("--block", options.block,
                        "With --tensor: show this quantization block as stored (scales, each element's code, level and value)")
        ->check(CLI::NonNegativeNumber);
}

void add_make_model_command(CLI::App& app, ls::app::MakeModelOptions& o) {
    CLI::App* mk = app.add_subcommand("make-model", "Write a deterministic synthetic GGUF model (random weights, generated "
                                                    "vocabulary) for tests and demos");
    mk->add_option("out", o.out_path, "Output GGUF file")->required()->check(kNonEmptyPath);
    mk->add_flag("--force", o.force, "Replace an existing output file (only a regular file is ever replaced)");
    auto* demo = mk->add_flag("--demo", o.demo, "The GUI's built-in demo model (other flags override its values)");
    mk->add_option("--preset", o.preset, "Real models' shapes (other flags override them): deepseek-v2-lite, "
                                         "deepseek2-tiny, tinyllama-1.1b, qwen2.5-0.5b, llama-3.2-1b, llama-3.1-8b, "
                                         "llama3-tiny, qwen3-0.6b, qwen3-8b, qwen3-tiny, qwen3-30b-a3b, qwen3moe-tiny, "
                                         "mixtral-8x7b, llama-moe-tiny, phi-3.5-mini, phi-4-mini, phi3-tiny, gemma-2-2b, "
                                         "gemma-3-1b, gemma-3-4b, gemma2-tiny, gemma3-tiny, gpt-oss-20b, gpt-oss-tiny, "
                                         "qwen3.5-4b, qwen35-tiny, qwen3.5-35b-a3b, qwen35moe-tiny")
        ->excludes(demo);
    mk->add_option("--arch", o.arch, "llama (default), qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, deepseek2, gpt-oss or "
                                     "qwen35")
        ->check(CLI::IsMember({"llama", "qwen2", "qwen3", "qwen3moe", "phi3", "gemma2", "gemma3", "deepseek2", "gpt-oss",
                               "qwen35", "qwen35moe"}));
    mk->add_option("--type", o.type, "Weight type: f32, f16 (default), bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K, "
                                     "mxfp4 (experts MXFP4, other matrices Q8_0, as llama-quantize's MXFP4_MOE), nvfp4 (every "
                                     "matrix but token_embd and the router NVFP4, as ModelOpt conversions); a list (f16,q8_0,q4_K) writes one "
                                     "file per type from the same master weights, OUT with -TYPE before its extension");
    mk->add_option("--tensor-type", o.tensor_types, "NAME=TYPE: this tensor (a matrix, by its GGUF name) in another type "
                                                    "than --type's, e.g. blk.1.ffn_down.weight=q2_K (repeatable)");
    mk->add_option("--embd", o.n_embd, "Embedding width (default 256)")->check(CLI::Range(1, 65536));
    mk->add_option("--layers", o.n_layer, "Blocks (default 2)")->check(CLI::Range(1, 1024));
    mk->add_option("--heads", o.n_head, "Attention heads (default 4)")->check(CLI::Range(1, 1024));
    mk->add_option("--kv-heads", o.n_head_kv, "KV heads (default 2)")->check(CLI::Range(1, 1024));
    mk->add_option("--ff", o.n_ff, "Feed-forward width (default 512)")->check(CLI::Range(1, 1 << 20));
    mk->add_option("--vocab", o.vocab, "Tokens (default 512, at least 354)")->check(CLI::Range(1, 1 << 20));
    mk->add_option("--ctx-train", o.ctx_train, "context_length key (default: llama 2048, qwen2 32768)")
        ->check(CLI::Range(1, 1 << 24));
    mk->add_option("--seed", o.seed, "Random seed (default 1)")->each([&o](const std::string&) { o.seed_given = true; });
    mk->add_option("--q-lora-rank", o.q_lora_rank, "deepseek2: q compression rank, 0 = plain attn_q (default 0)")
        ->check(CLI::Range(0, 65536));
    mk->add_option("--kv-lora-rank", o.kv_lora_rank, "deepseek2: KV latent width (default 64)")->check(CLI::Range(1, 65536));
    mk->add_option("--experts", o.experts, "deepseek2, qwen3moe, qwen35moe, gpt-oss, llama --moe: routed experts (default 8)")
        ->check(CLI::Range(1, 1024));
    mk->add_option("--experts-used", o.experts_used, "deepseek2, qwen3moe, qwen35moe, gpt-oss, llama --moe: experts per token (default 2)")
        ->check(CLI::Range(1, 1024));
    mk->add_option("--expert-groups", o.expert_groups, "deepseek2: route within groups of experts "
                                                       "(expert_group_count, DeepSeek-V3's 8; default 1)")
        ->check(CLI::Range(1, 1024));
    mk->add_option("--expert-groups-used", o.expert_groups_used, "deepseek2: the groups kept per token "
                                                                 "(expert_group_used_count, DeepSeek-V3's 4)")
        ->check(CLI::Range(1, 1024));
    mk->add_option("--expert-ff", o.expert_ff, "deepseek2, qwen3moe, qwen35moe, gpt-oss: an expert's feed-forward width (default 256)")
        ->check(CLI::Range(1, 1 << 20));
    mk->add_flag("--moe", o.llama_experts, "llama: experts in every layer instead of the dense feed-forward (Mixtral; "
                                           "they are --ff wide)");
    mk->add_flag("--fused-gate-up", o.fused_gate_up, "deepseek2, qwen35moe: gate and up experts fused in one ffn_gate_up_exps "
                                                     "(current converters)");
    mk->add_option("--gating", o.gating, "deepseek2: the router's gating, softmax (default) or sigmoid")
        ->check(CLI::IsMember({"softmax", "sigmoid"}));
    mk->add_option("--expert-weights-scale", o.expert_weights_scale, "deepseek2: the chosen experts' weights times this "
                                                                     "(default 1)")
        ->check(CLI::Range(0.0, 1000.0));
    mk->add_flag("--expert-weights-norm", o.expert_weights_norm, "deepseek2: renormalise the chosen experts' weights to "
                                                                  "sum 1");
    mk->add_flag("--expert-bias", o.expert_bias, "deepseek2: a selection bias per MoE layer (exp_probs_b), as DeepSeek-V3");
    mk->add_option("--dense-lead", o.dense_lead, "deepseek2: dense FFN blocks before the MoE ones (default 1)")
        ->check(CLI::Range(0, 1024));
    mk->add_option("--rope-freqs", o.rope_freqs, "llama: rope_freqs.weight with Llama 3.1's llama3 factors of this "
                                                 "scale (0: none)")
        ->check(CLI::Range(0.0, 1024.0));
    mk->add_option("--head-dim", o.head_dim, "qwen3, gemma, gpt-oss, qwen35: head width, attention.key_length (default n_embd / heads)")
        ->check(CLI::Range(2, 65536));
    mk->add_option("--rot", o.n_rot, "phi3, qwen35: rotated dims per head, rope.dimension_count (default: the whole head)")
        ->check(CLI::Range(2, 65536));
    mk->add_option("--longrope-orig-ctx", o.longrope_orig_ctx, "phi3: write LongRoPE factors with this original context "
                                                               "(a longer context takes the long factors)")
        ->check(CLI::Range(1, 1 << 24));
    mk->add_option("--swa", o.swa, "gemma, gpt-oss: the sliding window of the local layers, attention.sliding_window "
                                   "(gemma3: 0 = none; gpt-oss: 128 by default)")
        ->check(CLI::Range(0, 1 << 24));
    mk->add_option("--swa-pattern", o.swa_pattern, "gemma3: one global layer per this many (layer il is local when "
                                                   "il % n < n - 1; default 6)")
        ->check(CLI::Range(1, 1024));
    mk->add_flag("--tied-output", o.tied_output, "llama, qwen3: no output.weight, the LM head is token_embd (Llama 3.2 "
                                                 "1B/3B, Qwen3-0.6B)");
    mk->add_flag("--biases", o.out_biases, "llama: attn_output and ffn_gate/up/down biases; qwen2: output.bias");
    mk->add_flag("--scales", o.weight_scales, "llama, qwen2, qwen3, qwen3moe: a .scale and .input_scale for every "
                                              "projection (one per expert on the experts; the LM head's too when it is "
                                              "NVFP4), as NVFP4 conversions have them");
    mk->add_flag("--legacy-kvb", o.legacy_kvb, "deepseek2: one attn_kv_b per block (older converters' layout) "
                                                "instead of attn_k_b/attn_v_b");
}

void add_bench_command(CLI::App& app, ls::app::BenchOptions& o) {
    CLI::App* b = app.add_subcommand("bench", "Prompt and generation tokens/s, time per op class, capture overhead and peak "
                                               "memory of a model here");
    b->add_option("--model,-m", o.model_path, "GGUF model file")->required();
    b->add_option("--prompt-tokens", o.prompt_tokens, "Prompt length in tokens (default 64)")->check(CLI::Range(1, 1 << 16));
    b->add_option("--gen", o.gen, "Tokens generated after the prompt, one decode call each (default 32)")
        ->check(CLI::Range(0, 1 << 16));
    b->add_option("--depth,-d", o.depth, "Tokens already in the cache when the timed prompt starts, processed untimed "
                                         "first (llama-bench's -d; default 0)")
        ->check(CLI::Range(0, 1 << 20));
    b->add_option("--threads,-t", o.threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    b->add_option("--mode", o.mode, "exact or llama (default)")->check(CLI::IsMember({"exact", "llama"}));
    b->add_option("--backend", o.backend, "cpu, cuda, cuda-emulated or auto (default)")
        ->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}));
    b->add_option("--sync", o.sync, "needed (default, run mode: the backend waits only where data is read) or event (step "
                                    "mode: it waits after every event, as when stepping)")
        ->check(CLI::IsMember({"needed", "event"}));
    b->add_option("--capture", o.capture, "none (default), stats (statistics of every event on the backend) or all (also a "
                                          "host copy of every tensor); the overhead is measured against a run without")
        ->check(CLI::IsMember({"none", "stats", "all"}));
    b->add_option("--repetitions,-r", o.repetitions,
                  "Timed runs after one warm-up run; medians are reported, capture and bare runs alternate (default 3)")
        ->check(CLI::Range(1, 100));
    b->add_flag("--json", o.json,
                "Print one JSON object (prompt_tps, gen_tps, capture_overhead, peak_rss_bytes, op_seconds; per decoded "
                "token launches_per_token, syncs_per_token, d2h_copies_per_token)");
}

void add_serve_command(CLI::App& app, ls::app::ServeOptions& o) {
    CLI::App* sv = app.add_subcommand("serve", "Serve this machine's GPU to a client elsewhere: run, compare and export "
                                               "with --remote HOST:PORT run here, and GUI sessions (--connect)");
    sv->add_option("--listen", o.listen, "HOST:PORT to listen on (default 127.0.0.1:7070; port 0 picks a free one)");
    sv->add_option("--token-file", o.token_file, "The token clients present: made (mode 0600) when absent (default: "
                                                 "~/.config/layerscope/serve-token)");
    sv->add_option("--root", o.roots, "A folder clients may read models and dumps from (repeatable; default: the current "
                                      "folder); relative paths are relative to the first");
    sv->add_option("--max-connections", o.max_connections, "Connections served at once (default 8)")->check(CLI::Range(1, 256));
    sv->add_flag("--tls", o.tls, "Speak TLS on a loopback address too (a non-loopback --listen always does)");
    sv->add_option("--tls-identity", o.tls_identity, "The TLS key and certificate (PEM, mode 0600): made when absent "
                                                     "(default: serve-tls.pem beside the token file)");
}

// The arguments typed after `command`, without --remote and --token-file (the server never sees
// them).
std::vector<std::string> command_args(int argc, char** argv, const std::string& command) {
    int first = 1;
    while (first < argc && command != argv[first]) ++first;
    std::vector<std::string> args;
    for (int i = first + 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--remote" || a == "--token-file") {
            ++i;
            continue;
        }
        if (a.rfind("--remote=", 0) == 0 || a.rfind("--token-file=", 0) == 0) continue;
        args.push_back(a);
    }
    return args;
}

// What escapes a command (out of memory that no estimate foresaw, an I/O failure inside a library)
// becomes a message naming the command and exit 3, never an abort.
template <class Command>
int guarded(const std::string& who, Command&& run) {
    try {
        return run();
    } catch (const std::bad_alloc&) {
        const ls::HostMemory host = ls::available_host_memory();
        const std::string left =
            host.known ? fmt::format(" ({} available, {})", ls::bytes_text(host.available_bytes), host.source) : "";
        std::fprintf(stderr, "%s: out of memory%s: the input or the run is too large for this machine; try a shorter run "
                             "(-n, --ctx, --ubatch) or a smaller input\n", who.c_str(), left.c_str());
    } catch (const std::length_error& e) {
        std::fprintf(stderr, "%s: a size is too large: %s\n", who.c_str(), e.what());
    } catch (const std::system_error& e) {  // std::ios_base::failure included
        std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s\n", who.c_str(), e.what());
    }
    return ls::app::kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
    // Under `layerscope serve` stdout is a pipe: line by line, the client sees each line as it comes.
    if (const char* lb = std::getenv("LAYERSCOPE_LINE_BUFFERED"); lb && lb[0] == '1') std::setvbuf(stdout, nullptr, _IOLBF, 0);
    CLI::App app{"Layerscope: a debugger and visualizer for LLM inference.\n"
                 "Without a command, opens the GUI (optionally on MODEL)."};
    app.set_version_flag("--version", "layerscope 0.1.0");
    app.require_subcommand(0, 1);

    ls::app::GuiOptions gui;
    app.add_option("model", gui.model_path, "GGUF model to open in the GUI");
    app.add_option("--screenshot", gui.screenshot_path,
                   "GUI check: render --frames frames, save the window as PNG to this path (a new file) and exit")
        ->check(kNonEmptyPath);
    app.add_option("--frames", gui.frames, "Frames to render before --screenshot (default 3)")
        ->check(CLI::Range(1, 100000));
    app.add_option("--reference,-r", gui.reference_path, "Reference dump to load at start");
    app.add_option("--against-model", gui.against_model,
                   "The same model in another format (F16 for a Q4_K_M file): its run of the session's tokens is the "
                   "reference; the Quantization panel shows what each weight's format costs (with --connect: a path "
                   "on the server, run there)")
        ->check(kNonEmptyPath);
    app.add_option("--model,-m", gui.doctor_model_path,
                   "With a dump: the GGUF model it was made from, for the doctor and the local errors");
    app.add_option("--connect", gui.connect, "Open MODEL (a path on the server) in a session on a `layerscope serve` at "
                                             "HOST:PORT; --reference is uploaded when it is a file here (server:PATH: the server's)")
        ->check(kNonEmptyPath);
    app.add_option("--token-file", gui.token_file, "With --connect: the server's token (default: "
                                                   "~/.config/layerscope/serve-token)");
    app.add_option("--script", gui.script_path, "Run UI actions from this file (see app/gui_script.h)");
    app.add_option("--state-log", gui.state_log_path, "Append the app's state log to this file");
    app.add_option("--screenshot-dir", gui.screenshot_dir, "Where F12 saves screenshots");
    app.add_option("--measure-frames", gui.measure_frames, "Print the UI's CPU time per frame over N frames and exit")
        ->check(CLI::Range(1, 100000));
    app.add_flag("--all-panels", gui.all_panels, "Open every panel at start");
    app.add_flag("--keep-open", gui.keep_open, "Stay open after --script ends");
    app.add_option_function<std::string>(
           "--window-size",
           [&gui](const std::string& text) {
               int w = 0, h = 0;
               char x = 0, extra = 0;
               if (std::sscanf(text.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || x != 'x' || w < 320 || h < 240 ||
                   w > 16384 || h > 16384)
                   throw CLI::ValidationError("--window-size", "WIDTHxHEIGHT, e.g. 2560x1440 (320x240 to 16384x16384), not '" + text + "'");
               gui.window_width = w, gui.window_height = h;
           },
           "The window's size at start, WIDTHxHEIGHT (default 1280x800)");
    app.add_option("--ui-scale", gui.ui_scale,
                   "Fonts and sizes times this (HiDPI screens whose content scale the system does not report); default: "
                   "the monitor's content scale, followed when the window moves")
        ->check(CLI::Range(0.5, 4.0));
    app.add_option("--layout", gui.layout, "Start with this workspace layout (default, divergence hunt, attention, moe, "
                                           "quantization)");
    // The CUDA module is loaded at run time, so this binary never links the CUDA libraries.
    app.add_option("--backend", gui.backend, "Where the session runs models: cpu, cuda, cuda-emulated or auto (default)")->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}));
    app.add_option("--capture-budget", gui.capture_budget,
                   "Memory for the full values of captured events: bytes (512M, 4G) or a share of the memory available "
                   "when a session starts (25%); default: half of it. The oldest values are dropped beyond it (their "
                   "statistics stay)")
        ->check([](const std::string& text) {
            auto b = ls::capture_budget_bytes(text, uint64_t{1} << 30);
            return b ? std::string() : b.error().message;
        });

    ls::app::InspectOptions inspect;
    add_inspect_command(app, inspect);
    ls::app::TokenizeOptions tokenize;
    add_tokenize_command(app, tokenize);
    ls::app::RunOptions run;
    add_run_command(app, run);
    ls::app::CompareOptions compare;
    add_compare_command(app, compare);
    ls::app::MakeModelOptions make_model;
    add_make_model_command(app, make_model);
    ls::app::ExportCmdOptions export_options;
    add_export_command(app, export_options);
    ls::app::BenchOptions bench;
    add_bench_command(app, bench);
    ls::app::add_remote_options(app.get_subcommand("run"), run.remote);
    ls::app::add_remote_options(app.get_subcommand("compare"), compare.remote);
    ls::app::add_remote_options(app.get_subcommand("export"), export_options.remote);
    ls::app::ServeOptions serve;
    add_serve_command(app, serve);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);  // prints help/version to stdout, errors to stderr
        if (code == 0) return ls::app::kExitOk;
        return ls::app::kExitUsage;
    }

    if (app.got_subcommand("serve")) return guarded("layerscope serve", [&] { return ls::app::run_serve(serve); });
    if (run.remote.address.size() || compare.remote.address.size() || export_options.remote.address.size()) {
        const std::string command = app.got_subcommand("run") ? "run" : app.got_subcommand("compare") ? "compare" : "export";
        std::vector<ls::app::RemoteOutput> outputs;
        std::vector<std::string> inputs;  // references and dumps, uploaded when they are here
        const ls::app::RemoteFlags* flags = &compare.remote;
        if (command == "compare") {
            inputs = compare.files;
            inputs.push_back(compare.reference_path);
            if (!compare.names.empty() && compare.names != "auto" && compare.names != "llama" && compare.names != "hf" &&
                compare.names != "meta")
                inputs.push_back(compare.names);
        }
        if (command == "run") {
            flags = &run.remote;
            if (!run.dump_path.empty()) outputs.push_back({"--dump", run.dump_path, false, run.force});
        } else if (command == "export") {
            flags = &export_options.remote;
            if (!export_options.gguf_path.empty()) outputs.push_back({"--gguf", export_options.gguf_path, false, export_options.force});
            if (!export_options.npy_path.empty()) outputs.push_back({"--npy", export_options.npy_path, true, export_options.force});
            inputs.push_back(export_options.from_path);
        }
        return guarded("layerscope " + command, [&] {
            return ls::app::run_remote(command, command_args(argc, argv, command), *flags, outputs, inputs);
        });
    }
    if (app.got_subcommand("inspect")) return guarded("layerscope inspect", [&] { return ls::app::run_inspect(inspect); });
    if (app.got_subcommand("tokenize"))
        return guarded("layerscope tokenize", [&] { return ls::app::run_tokenize(tokenize); });
    if (app.got_subcommand("run")) return guarded("layerscope run", [&] { return ls::app::run_run(run); });
    if (app.got_subcommand("compare")) return guarded("layerscope compare", [&] { return ls::app::run_compare(compare); });
    if (app.got_subcommand("make-model"))
        return guarded("layerscope make-model", [&] { return ls::app::run_make_model(make_model); });
    if (app.got_subcommand("export")) return guarded("layerscope export", [&] { return ls::app::run_export(export_options); });
    if (app.got_subcommand("bench")) return guarded("layerscope bench", [&] { return ls::app::run_bench(bench); });

    // `layerscope typo` would otherwise open a window that fails to load "typo".
    if (!gui.connect.empty() && gui.model_path.empty()) {
        std::fprintf(stderr, "layerscope: --connect %s needs the model to open there (a path on the server)\n", gui.connect.c_str());
        return ls::app::kExitUsage;
    }
    if (gui.connect.empty() && !gui.model_path.empty() && !std::filesystem::exists(gui.model_path)) {
        std::fprintf(stderr, "layerscope: '%s' is neither a command nor a file. Commands: inspect, tokenize, run, compare, export, make-model, bench, serve; "
                             "see 'layerscope --help'.\n", gui.model_path.c_str());
        return ls::app::kExitUsage;
    }

#ifdef LAYERSCOPE_HAVE_GUI
    return guarded("layerscope", [&] { return ls::app::run_gui(gui); });
#else
    std::fputs("layerscope: this build has no GUI (GLFW, OpenGL or Dear ImGui were not found when it was "
               "configured).\nInstall libglfw3-dev, libimgui-dev and an OpenGL development package, then "
               "reconfigure with -DLAYERSCOPE_GUI=ON.\nHeadless commands work: layerscope inspect MODEL.gguf\n",
               stderr);
    return ls::app::kExitUsage;
#endif
}
