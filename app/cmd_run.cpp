// `layerscope run`: tokenizes a prompt (or takes token ids), runs the model greedily on the CPU
// backend, prints the tokens, the text and the time per token, and optionally writes every
// intermediate tensor as a dump in llama.cpp's reference-dump format.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "engine/capture/dump_writer.h"
#include "app/commands.h"
#include "app/token_list.h"
#include "engine/forward/generate.h"
#include "engine/forward/memory_estimate.h"
#include "engine/session/event_plan.h"
#include "kernels/common/host_memory.h"
#include "engine/tokenizer/chat_jinja.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/util/safe_write.h"

namespace ls::app {
namespace {


std::string printable(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c < 0x20) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
    return out;
}

// A dump streams every event of every decode call to the disk as it comes, keeping a record of
// each in memory: refuse up front, with the numbers, a run whose dump cannot fit either (it grows
// with -n squared: attention over the cells so far).
Status check_dump_fits(const Model& model, const ForwardOptions& fo, const std::vector<int32_t>& tokens, int n_predict,
                       uint64_t n_vocab, const std::string& dump_path) {
    auto volume = planned_event_volume(model, fo, tokens, n_predict);
    if (!volume) return volume.error();
    const EventVolume& v = volume.value();
    const uint64_t logit_rows = (fo.all_logits ? tokens.size() : 1) + static_cast<uint64_t>(n_predict);
    const uint64_t n_tensors = v.n_events + 1 + static_cast<uint64_t>(n_predict);  // and the logits of each decode call
    const uint64_t bytes = add_sat(v.f32_bytes, mul_sat(mul_sat(logit_rows, n_vocab), 4));
    const HostMemory host = available_host_memory();
    const std::filesystem::path target(dump_path);
    return check_dump_room(fmt::format("--dump with -n {}", n_predict), n_tensors, bytes,
                           BackendMemory{host.known, host.available_bytes, "RAM (" + host.source + ")", false},
                           disk_room(target.has_parent_path() ? target.parent_path().string() : "."),
                           "Lower -n, or dump a shorter run.");
}

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope run: %s\n", e.message.c_str());
    return exit_code_for(e);
}

}  // namespace

int run_run(const RunOptions& o) {
    MathMode mode;
    if (!math_mode_from_name(o.mode, &mode)) return fail(make_error(ErrorCode::kUsage, "--mode must be exact or llama"));
    if (o.prompt.empty() == o.tokens.empty())
        return fail(make_error(ErrorCode::kUsage, "give exactly one of --prompt TEXT or --tokens 1,2,3"));
    // A dump that would be refused is refused before the run, not after it.
    if (!o.dump_path.empty())
        if (Status s = check_file_target(o.dump_path, o.force); !s) return fail(s.error());

    auto model = Model::open(o.model_path);
    if (!model) return fail(model.error());
    const Tokenizer* tok = model.value()->tokenizer();

    std::string prompt = o.prompt;
    std::vector<int32_t> tokens;
    if (!o.tokens.empty()) {
        auto ids = parse_token_list(o.tokens);
        if (!ids) return fail(ids.error());
        tokens = ids.value();
    } else {
        if (!tok) return fail(make_error(ErrorCode::kBadInput, o.model_path + " has no tokenizer; use --tokens"));
        if (o.chat || !o.chat_template.empty()) {
            // The prompt becomes one user message in the model's chat template (or the family named).
            auto templated = chat_prompt(model.value()->file(), *tok, prompt, o.chat_template);
            if (!templated) return fail(templated.error());
            prompt = templated.value();
        }
        tokens = tok->encode(prompt, true, true);
    }

    ForwardOptions fo;
    fo.mode = mode;
    fo.n_ubatch = o.ubatch;
    fo.flash_attn = o.flash_attn;
    mla_form_from_name(o.mla, &fo.mla);
    fo.delta_chunked = o.delta_rule == "chunked";
    fo.all_logits = o.all_logits;
    if (Status s = parse_llama_isa(o.llama_isa, &fo.llama_isa); !s) return fail(s.error());
    auto n_ctx = context_for_run(model.value()->config(), static_cast<int64_t>(tokens.size()), o.n_predict, o.ctx,
                                 o.ctx_beyond_train);
    if (!n_ctx) return fail(n_ctx.error());
    fo.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*model.value(), o.backend, o.threads, fo);
    if (!chosen) return fail(chosen.error());
    Backend* backend = chosen.value().backend.get();
    auto forward = make_forward(*model.value(), *backend, fo);
    if (!forward) return fail(forward.error());
    if (!o.dump_path.empty()) {
        const uint64_t n_vocab = forward.value()->last_logits().size();
        if (Status s = check_dump_fits(*model.value(), fo, tokens, o.n_predict, n_vocab, o.dump_path); !s)
            return fail(s.error());
    }

    const ModelConfig& c = model.value()->config();
    std::printf("model:   %s (%s, %lld layers, n_embd %lld)\n", o.model_path.c_str(), c.arch_name.c_str(),
                static_cast<long long>(c.n_layer), static_cast<long long>(c.n_embd));
    const std::string& why = chosen.value().note;
    const std::string isa = mode == MathMode::kLlama ? std::string(" (llama.cpp build ") + llama_isa_name(fo.llama_isa) + ")" : "";
    std::printf("backend: %s%s, mode %s%s%s\n", backend->name().c_str(), why.empty() ? "" : (" (" + why + ")").c_str(),
                math_mode_name(mode), isa.c_str(), fo.flash_attn ? ", flash attention" : "");
    auto piece = [&](int32_t id, bool render_special) {
        return tok && tok->valid(id) ? tok->token_to_piece(id, render_special) : std::string("?");
    };
    if (o.chat || !o.chat_template.empty()) std::printf("chat:    \"%s\"\n", printable(prompt).c_str());
    std::printf("prompt:  %zu tokens\n", tokens.size());
    if (o.show_tokens)
        for (size_t i = 0; i < tokens.size(); ++i) std::printf("  %4zu %8d  '%s'\n", i, tokens[i], printable(piece(tokens[i], true)).c_str());

    DumpWriter dump;
    if (!o.dump_path.empty())
        if (Status s = dump.stream_to(o.dump_path); !s) return fail(s.error());
    const int64_t n_vocab = static_cast<int64_t>(forward.value()->last_logits().size());
    auto after = [&](int d) {
        if (!o.dump_path.empty()) dump.add_logits(d, forward.value()->last_logits(), n_vocab);
    };
    auto result = generate_greedy(*forward.value(), tok, tokens, o.n_predict, o.dump_path.empty() ? nullptr : &dump, after);
    if (!result) return fail(result.error());
    const GenerateResult& r = result.value();

    std::string text;
    for (int32_t id : tokens) text += piece(id, false);
    std::string generated_text;
    for (int32_t id : r.generated) generated_text += piece(id, false);
    std::printf("generated: %zu tokens:", r.generated.size());
    for (int32_t id : r.generated) std::printf(" %d", id);
    std::printf("\ntext:    %s%s\n", printable(text).c_str(), printable(generated_text).c_str());

    double gen_ms = 0;
    for (size_t d = 1; d < r.decode_ms.size(); ++d) gen_ms += r.decode_ms[d];
    std::printf("time:    prompt %.2f ms (%.3f ms/token)", r.decode_ms[0], r.decode_ms[0] / tokens.size());
    if (r.decode_ms.size() > 1) std::printf(", generation %.3f ms/token", gen_ms / (r.decode_ms.size() - 1));
    std::printf("\n");

    if (!o.dump_path.empty()) {
        DumpInfo info;
        info.model_path = o.model_path;
        info.model_desc = c.arch_name + " " + math_mode_name(mode);
        info.prompt = o.tokens.empty() ? prompt : "";
        info.add_bos = tok && tok->add_bos();
        info.prompt_tokens = tokens;
        for (int32_t id : tokens) info.prompt_token_pieces.push_back(piece(id, true));
        info.n_predict = o.n_predict;
        info.generated_tokens = r.generated;
        info.generated_text = generated_text;
        info.decode_n_tokens = r.decode_n_tokens;
        info.n_ctx = static_cast<uint32_t>(fo.n_ctx);
        info.n_ubatch = static_cast<uint32_t>(fo.n_ubatch);
        info.n_threads = o.threads;
        info.flash_attn = fo.flash_attn;
        info.all_logits = fo.all_logits;
        info.system_info = backend->name() + ", math mode " + math_mode_name(mode) +
                           (mode == MathMode::kLlama ? std::string(", llama.cpp build ") + llama_isa_name(fo.llama_isa) : "");
        if (Status s = dump.write(o.dump_path, info, o.force); !s) return fail(s.error());
        std::printf("dump:    %zu tensors, %.2f MiB -> %s\n", dump.n_tensors(), dump.bytes() / 1048576.0, o.dump_path.c_str());
    }
    return kExitOk;
}

}  // namespace ls::app
