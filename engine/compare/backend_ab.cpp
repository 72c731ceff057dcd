#include "engine/compare/backend_ab.h"

#include "engine/capture/dump_writer.h"
#include "engine/forward/generate.h"
#include "engine/gguf/gguf.h"

namespace ls {

Result<std::unique_ptr<ReferenceDump>> run_as_reference(const Model& model, Backend& backend, const ForwardOptions& options,
                                                        const std::vector<int32_t>& prompt, int n_generate,
                                                        const std::string& source) {
    auto forward = make_forward(model, backend, options);
    if (!forward) return forward.error();
    DumpWriter dump;
    const int64_t n_vocab = static_cast<int64_t>(forward.value()->last_logits().size());
    auto after = [&](int d) { dump.add_logits(d, forward.value()->last_logits(), n_vocab); };
    auto run = generate_greedy(*forward.value(), model.tokenizer(), prompt, n_generate, &dump, after);
    if (!run) return run.error();
    DumpInfo info;
    info.tool = "layerscope compare --against-backend";
    info.model_desc = model.config().arch_name + " " + math_mode_name(options.mode);
    info.prompt_tokens = prompt;
    info.n_predict = n_generate;
    info.generated_tokens = run.value().generated;
    info.decode_n_tokens = run.value().decode_n_tokens;
    info.n_ctx = static_cast<uint32_t>(options.n_ctx);
    info.n_ubatch = static_cast<uint32_t>(options.n_ubatch);
    info.flash_attn = options.flash_attn;
    info.all_logits = options.all_logits;
    info.system_info = backend.name() + ", math mode " + math_mode_name(options.mode);
    auto bytes = dump.to_bytes(info);
    if (!bytes) return bytes.error();
    auto file = GgufFile::parse(std::move(bytes.value()), source);
    if (!file) return file.error();
    return ReferenceDump::from_gguf(std::move(file.value()));
}

}  // namespace ls
