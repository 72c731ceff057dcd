// `layerscope export`: runs a model and exports the selected events, or converts a reference
// (GGUF dump, .npy folder) to a GGUF dump or a .npy folder; never leaves a half-written export.
#include <fmt/format.h>

#include <cstdio>
#include <sstream>

#include "engine/capture/export.h"
#include "app/commands.h"
#include "app/token_list.h"
#include "engine/forward/generate.h"
#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"

namespace ls::app {
namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope export: %s\n", e.message.c_str());
    return exit_code_for(e);
}


// A model run whose selected events become the export set.
Result<ExportSet> run_model(const ExportCmdOptions& o, const std::vector<std::string>& globs) {
    MathMode mode;
    if (!math_mode_from_name(o.mode, &mode)) return make_error(ErrorCode::kUsage, "--mode must be exact or llama");
    if (o.prompt.empty() == o.tokens.empty())
        return make_error(ErrorCode::kUsage, "give exactly one of --prompt TEXT or --tokens 1,2,3 with --model");
    auto model = Model::open(o.model_path);
    if (!model) return model.error();
    const Tokenizer* tok = model.value()->tokenizer();

    std::string prompt = o.prompt;
    std::vector<int32_t> tokens;
    if (!o.tokens.empty()) {
        auto ids = parse_token_list(o.tokens);
        if (!ids) return ids.error();
        tokens = ids.value();
    } else {
        if (!tok) return make_error(ErrorCode::kBadInput, o.model_path + " has no tokenizer; use --tokens");
        if (o.chat || !o.chat_template.empty()) {
            auto templated = chat_prompt(model.value()->file(), *tok, prompt, o.chat_template);
            if (!templated) return templated.error();
            prompt = templated.value();
        }
        tokens = tok->encode(prompt, true, true);
    }

    ForwardOptions fo;
    fo.mode = mode;
    if (Status s = parse_llama_isa(o.llama_isa, &fo.llama_isa); !s) return s.error();
    auto n_ctx = context_for_run(model.value()->config(), static_cast<int64_t>(tokens.size()), o.n_predict, 0, false);
    if (!n_ctx) return n_ctx.error();
    fo.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*model.value(), o.backend, o.threads, fo);
    if (!chosen) return chosen.error();
    auto forward = make_forward(*model.value(), *chosen.value().backend, fo);
    if (!forward) return forward.error();

    ExportCollector collector(globs);
    const int64_t n_vocab = static_cast<int64_t>(forward.value()->last_logits().size());
    auto after = [&](int d) { collector.add_logits(d, forward.value()->last_logits(), n_vocab); };
    auto result = generate_greedy(*forward.value(), tok, tokens, o.n_predict, &collector, after);
    if (!result) return result.error();

    ExportSet set;
    set.tensors = std::move(collector.tensors());
    DumpInfo& info = set.info;
    info.tool = "layerscope export";
    info.model_path = o.model_path;
    info.model_desc = model.value()->config().arch_name + " " + math_mode_name(mode);
    info.prompt = o.tokens.empty() ? prompt : "";
    info.add_bos = tok && tok->add_bos();
    info.prompt_tokens = tokens;
    for (int32_t id : tokens) info.prompt_token_pieces.push_back(tok && tok->valid(id) ? tok->token_to_piece(id, true) : "");
    info.n_predict = o.n_predict;
    info.generated_tokens = result.value().generated;
    for (int32_t id : info.generated_tokens)
        if (tok && tok->valid(id)) info.generated_text += tok->token_to_piece(id, false);
    info.decode_n_tokens = result.value().decode_n_tokens;
    info.n_ctx = static_cast<uint32_t>(fo.n_ctx);
    info.n_ubatch = static_cast<uint32_t>(fo.n_ubatch);
    info.n_threads = o.threads;
    info.system_info = chosen.value().backend->name() + ", math mode " + math_mode_name(mode) +
                           (mode == MathMode::kLlama ? std::string(", llama.cpp build ") + llama_isa_name(fo.llama_isa) : "");
    return set;
}

}  // namespace

int run_export(const ExportCmdOptions& o) {
    if (o.gguf_path.empty() == o.npy_path.empty())
        return fail(make_error(ErrorCode::kUsage, "give exactly one output: --gguf OUT.gguf or --npy OUTDIR"));
    if (o.model_path.empty() == o.from_path.empty())
        return fail(make_error(ErrorCode::kUsage, "give exactly one source: --model MODEL.gguf (with --prompt or --tokens) "
                                                  "or --from DUMP (a GGUF dump or a .npy folder)"));
    const std::vector<std::string> globs = split_export_globs(o.events);

    ExportSet set;
    if (!o.from_path.empty()) {
        if (!o.prompt.empty() || !o.tokens.empty())
            return fail(make_error(ErrorCode::kUsage, "--from converts a dump as it is; --prompt and --tokens need --model"));
        auto opened = ReferenceDump::open(o.from_path);  // a .npy folder's tokens come from its manifest
        if (!opened) return fail(opened.error());
        set = export_set_from_reference(std::shared_ptr<const ReferenceDump>(std::move(opened.value())), globs);
        if (set.tensors.empty() && set.skipped_partial > 0)
            return fail(make_error(ErrorCode::kBadInput,
                                   fmt::format("{} holds only partial tensors (printed samples of a text log); there "
                                               "are no full values to export", o.from_path)));
    } else {
        auto run = run_model(o, globs);
        if (!run) return fail(run.error());
        set = std::move(run.value());
    }
    if (set.tensors.empty())
        return fail(make_error(ErrorCode::kUsage, fmt::format("no event matches --events \"{}\"; patterns are globs over "
                                                              "names such as attn_norm-0, Qcur-*, *-3, result_output",
                                                              o.events)));

    ExportOptions eo;
    eo.format = o.gguf_path.empty() ? ExportFormat::kNpyFolder : ExportFormat::kGgufDump;
    eo.path = o.gguf_path.empty() ? o.npy_path : o.gguf_path;
    eo.overwrite = o.force;
    auto done = export_tensors(set, eo);
    if (!done) return fail(done.error());
    std::printf("export:  %zu tensors, %.2f MiB -> %s (%s)\n", done.value().n_tensors, done.value().bytes / 1048576.0,
                done.value().path.c_str(), eo.format == ExportFormat::kGgufDump ? "GGUF dump" : ".npy folder + manifest.json");
    if (set.skipped_partial > 0)
        std::printf("skipped: %zu partial tensors (printed samples only)\n", set.skipped_partial);
    return kExitOk;
}

}  // namespace ls::app
