// The command-line definitions (CLI11) of the commands a server also parses: the client sends
// the arguments as typed and the server reads them with the same definitions before it checks
// their paths (app/cmd_serve.cpp).
#include "app/cli.h"

#include <fmt/format.h>

namespace ls::app {

const CLI::Validator kNonEmptyPath(
    [](std::string& path) { return path.empty() ? std::string("an empty path; give a file name") : std::string(); },
    "PATH");


void add_llama_isa_option(CLI::App* cmd, std::string& value, const char* automatic) {
    cmd->add_option("--llama-isa", value, fmt::format("llama mode: the llama.cpp CPU build to reproduce: avx2, avx512, "
                                                      "avx512-fp16 or auto (default: {})", automatic))
        ->check(CLI::IsMember({"auto", "avx2", "avx512", "avx512-fp16"}));
}


void add_run_command(CLI::App& app, RunOptions& o) {
    CLI::App* run = app.add_subcommand("run", "Run a model greedily; print tokens, text and timing; optionally dump every tensor");
    run->add_option("--model,-m", o.model_path, "GGUF model file")->required();
    auto* prompt = run->add_option("--prompt,-p", o.prompt, "Prompt text (BOS added as the vocabulary says; special-token text is parsed)");
    auto* tokens = run->add_option("--tokens", o.tokens, "Token ids instead of a prompt, e.g. 1,403,407");
    prompt->excludes(tokens);
    run->add_option("-n,--n-predict", o.n_predict, "Tokens to generate (default 16)")->check(CLI::Range(0, 1 << 20));
    run->add_option("--mode", o.mode, "exact (f32 math on dequantized weights) or llama (ggml's CPU arithmetic; default)")
        ->check(CLI::IsMember({"exact", "llama"}));
    add_llama_isa_option(run, o.llama_isa, "the build llama.cpp would have compiled for this processor");
    run->add_option("--dump", o.dump_path, "Write every intermediate tensor to this GGUF dump")->check(kNonEmptyPath);
    run->add_flag("--force", o.force, "Replace an existing --dump file (only a regular file is ever replaced)");
    run->add_option("--threads,-t", o.threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    run->add_option("--ctx,-c", o.ctx, "KV cache cells (default: prompt + n, rounded up to 256); at most the model's "
                                       "trained context")->check(CLI::Range(0, 1 << 24));
    run->add_flag("--ctx-beyond-train", o.ctx_beyond_train, "Allow a context longer than the model's trained context "
                                                            "(<arch>.context_length)");
    run->add_option("--ubatch", o.ubatch, "Tokens per graph evaluation (default 512)")->check(CLI::Range(1, 1 << 16));
    run->add_flag("--flash-attn", o.flash_attn, "Attention as llama.cpp's flash-attention CPU kernel computes it");
    run->add_option("--mla", o.mla, "deepseek2 attention: absorbed (k_b folded into the query; llama.cpp's form for "
                                    "attn_k_b/attn_v_b files), unabsorbed (keys and values per head; its form for legacy "
                                    "attn_kv_b files) or auto (default: as llama.cpp runs the file)")
        ->check(CLI::IsMember({"auto", "absorbed", "unabsorbed"}));
    run->add_option("--delta-rule", o.delta_rule, "qwen35 prompts: recurrent (token by token, llama.cpp's CPU form; "
                                                  "default) or chunked (chunks of 64 solved at once)")
        ->check(CLI::IsMember({"recurrent", "chunked"}));
    run->add_flag("--all-logits", o.all_logits, "Keep every prompt row to the logits (llama.cpp --all-logits)");
    run->add_option("--backend", o.backend, "cpu, cuda, cuda-emulated (the CUDA kernels on the CPU) or auto (default: CUDA "
                                            "when a device is usable)")->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}));
    run->add_flag("--show-tokens", o.show_tokens, "Print the token ids and pieces that enter the model");
    run->add_flag("--chat", o.chat, "Apply the model's chat template (tokenizer.chat_template) to the prompt");
    run->add_option("--chat-template", o.chat_template, "Use this template family (chatml, llama2, llama3, zephyr, deepseek2, ...)");
}

void add_compare_command(CLI::App& app, CompareOptions& o) {
    CLI::App* cmp = app.add_subcommand("compare",
                                       "Compare a model run (or dump A) with a reference dump (or dump B): table, first "
                                       "divergence, doctor. Exit 0 = no divergence, 1 = diverged, 2 = nothing compared "
                                       "(or bad usage), 3 = bad input (or a paired tensor without values)");
    cmp->add_option("dumps", o.files, "Two dumps to compare: ours, then the reference");
    cmp->add_option("--model,-m", o.model_path, "GGUF model to run; with two dumps, the model the doctor reads");
    cmp->add_option("--reference,-r", o.reference_path, "Reference: a GGUF dump, a .npy folder with manifest.json, or an "
                                                        "eval-callback log");
    // The flags of a model run, which a comparison of two dumps refuses by name (it runs nothing).
    auto run_flag = [&o](const char* name) { return [&o, name](const std::string&) { o.run_flags_given.push_back(name); }; };
    auto* prompt = cmp->add_option("--prompt,-p", o.prompt, "Prompt (default: the reference's prompt tokens)")->each(run_flag("--prompt"));
    auto* tokens = cmp->add_option("--tokens", o.tokens, "Token ids, e.g. 1,403,407")->each(run_flag("--tokens"));
    prompt->excludes(tokens);
    cmp->add_option("--mode", o.mode, "exact or llama (default)")->check(CLI::IsMember({"exact", "llama"}))->each(run_flag("--mode"));
    cmp->add_option("--fault", o.fault, "Inject a bug from the fault catalogue (see --list-faults)")->each(run_flag("--fault"));
    cmp->add_option("--mla", o.mla, "deepseek2 attention form of our run: auto (as llama.cpp runs the file), absorbed "
                                    "or unabsorbed")
        ->check(CLI::IsMember({"auto", "absorbed", "unabsorbed"}))
        ->each(run_flag("--mla"));
    cmp->add_option("--delta-rule", o.delta_rule, "qwen35 prompts of our run: recurrent (default) or chunked")
        ->check(CLI::IsMember({"recurrent", "chunked"}))
        ->each(run_flag("--delta-rule"));
    cmp->add_option("-n,--decode-calls", o.n_decode, "Decode calls to run (default: as many as the reference)")
        ->check(CLI::Range(1, 1 << 20))
        ->each(run_flag("--decode-calls"));
    auto given = [&o](const std::string&) { o.thresholds_given = true; };
    cmp->add_option("--warn", o.warn_nmse, "NMSE above which an event is 'warn' (default 1e-6; no noise floor when given)")
        ->check(CLI::PositiveNumber)
        ->each(given);
    cmp->add_option("--diverged", o.diverged_nmse, "NMSE above which an event is 'diverged' (default 1e-4; no noise floor "
                                                  "when given)")
        ->check(CLI::PositiveNumber)
        ->each(given);
    cmp->add_option("--threads,-t", o.threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    add_llama_isa_option(cmp, o.llama_isa, "the reference's, from what it records of its build and which variant matches "
                                           "its first events");
    cmp->add_option("--backend", o.backend, "cpu, cuda, cuda-emulated or auto (default)")
        ->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}))
        ->each(run_flag("--backend"));
    cmp->add_option("--against-backend", o.against_backend,
                    "Compare two backends: run -m MODEL on this one too (cpu, cuda, cuda-emulated) and use that run as "
                    "the reference, event by event")
        ->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}));
    cmp->add_option("--against-model", o.against_model,
                    "Compare two files of one model (the same weights in two formats, e.g. F16 and Q4_K_M): run the "
                    "same tokens through this one too and use that run as the reference, event by event")
        ->check(kNonEmptyPath);
    cmp->add_flag("--logit-lens", o.logit_lens,
                  "Read each layer's output (l_out) through output_norm and the LM head, ours and the reference's: the "
                  "top tokens per layer and position, the layer where they first differ, where the final token first leads");
    cmp->add_option("--ablate", o.ablate,
                    "With --against-model: rank the tensors (tensors) or layers (layers) by what they do to the output: "
                    "the --against-model file run with one of them from -m at a time, the KL of its final distributions "
                    "against its own run's")
        ->check(CLI::IsMember({"tensors", "layers"}));
    cmp->add_flag("--ablate-restore", o.ablate_restore,
                  "With --ablate: run -m with one tensor (or layer) restored from --against-model at a time instead");
    cmp->add_option("--names", o.names, "How the dumps name their tensors: llama (llama.cpp's names), hf (Hugging Face "
                                        "module paths), meta (Meta / llama2.c), a name map file (JSON, see the README), or "
                                        "auto (default: whichever names the most tensors)");
    cmp->add_option("--min-paired", o.min_paired, "Share of the smaller side's tensors that must pair, else exit 2 with "
                                                  "what did not pair and suggestions (default 0.5)")
        ->check(CLI::Range(0.0, 1.0));
    cmp->add_flag("--json", o.json, "Print one JSON object");
    cmp->add_flag("--all", o.all, "Show every event and every unmatched reference tensor");
}


void add_export_command(CLI::App& app, ExportCmdOptions& o) {
    CLI::App* ex = app.add_subcommand("export", "Run a model and export the selected events, or convert a dump, to a GGUF "
                                                "dump or a folder of .npy files with manifest.json");
    auto* model = ex->add_option("--model,-m", o.model_path, "GGUF model to run");
    auto* from = ex->add_option("--from", o.from_path, "Convert this reference instead: a GGUF dump or a .npy folder");
    model->excludes(from);
    auto* prompt = ex->add_option("--prompt,-p", o.prompt, "Prompt text (with --model)");
    auto* tokens = ex->add_option("--tokens", o.tokens, "Token ids instead of a prompt, e.g. 1,403,407");
    prompt->excludes(tokens);
    ex->add_option("-n,--n-predict", o.n_predict, "Tokens to generate after the prompt (default 0)")->check(CLI::Range(0, 1 << 20));
    ex->add_option("--events", o.events, "Comma-separated globs over event names, e.g. 'attn_norm-*,Qcur-0' (default: all)");
    auto* gguf = ex->add_option("--gguf", o.gguf_path, "Write a GGUF tensor dump here");
    auto* npy = ex->add_option("--npy", o.npy_path, "Write a folder of .npy files and manifest.json here");
    gguf->excludes(npy);
    ex->add_flag("--force", o.force, "Replace an existing output file, or a folder holding an earlier export");
    ex->add_option("--mode", o.mode, "exact or llama (default)")->check(CLI::IsMember({"exact", "llama"}));
    add_llama_isa_option(ex, o.llama_isa, "the build llama.cpp would have compiled for this processor");
    ex->add_option("--threads,-t", o.threads, "CPU threads (default: all cores)")->check(CLI::Range(0, 1024));
    ex->add_option("--backend", o.backend, "cpu, cuda, cuda-emulated or auto (default)")->check(CLI::IsMember({"cpu", "cuda", "cuda-emulated", "auto"}));
    ex->add_flag("--chat", o.chat, "Apply the model's chat template to the prompt");
    ex->add_option("--chat-template", o.chat_template, "Use this template family (chatml, llama2, llama3, ...)");
}


void add_remote_options(CLI::App* cmd, RemoteFlags& r) {
    cmd->add_option("--remote", r.address, "Run on a `layerscope serve` at HOST:PORT (its paths are the server's; output "
                                           "files come back here)");
    cmd->add_option("--token-file", r.token_file, "With --remote: the server's token (default: "
                                                  "~/.config/layerscope/serve-token)");
}

}  // namespace ls::app
