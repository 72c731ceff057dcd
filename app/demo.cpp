// Generates the demo model and its clean reference dump.
#include "app/demo.h"

#include <cstdlib>
#include <filesystem>

#include "engine/capture/dump_writer.h"
#include "engine/forward/generate.h"
#include "engine/model/make_model.h"

namespace ls::app {

std::string demo_directory() {
    namespace fs = std::filesystem;
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return (fs::path(xdg) / "layerscope").string();
    if (const char* home = std::getenv("HOME"); home && *home) return (fs::path(home) / ".cache" / "layerscope").string();
    return (fs::temp_directory_path() / "layerscope").string();
}

namespace {

constexpr const char* kDemoPrompt = "Once upon a time, a little girl";

Status make_demo_directory(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot create " + dir + ": " + ec.message());
    return {};
}

}  // namespace

Result<QuantDemoFiles> prepare_quant_demo(const std::string& dir) {
    namespace fs = std::filesystem;
    if (Status s = make_demo_directory(dir); !s) return s.error();
    QuantDemoFiles demo;
    demo.source_path = (fs::path(dir) / "demo-quant-f16.gguf").string();
    demo.quantized_path = (fs::path(dir) / "demo-quant-q4_K.gguf").string();
    demo.prompt = kDemoPrompt;
    MakeModelSpec spec = demo_model_spec();
    spec.n_embd = 256;  // rows of 256: Q4_K's super-blocks
    spec.n_ff = 512;
    for (auto [type, path] : {std::pair{GgmlType::F16, demo.source_path}, std::pair{GgmlType::Q4_K, demo.quantized_path}}) {
        spec.type = type;
        if (Status s = make_model(spec, path, nullptr, true); !s) return s.error();
    }
    return demo;
}

Result<DemoFiles> prepare_demo(const std::string& dir) {
    namespace fs = std::filesystem;
    if (Status s = make_demo_directory(dir); !s) return s.error();
    DemoFiles demo;
    demo.model_path = (fs::path(dir) / "demo-model.gguf").string();
    demo.reference_path = (fs::path(dir) / "demo-reference.gguf").string();
    demo.prompt = kDemoPrompt;
    // The demo's own files in its cache folder: made again on every start (the same bytes).
    if (Status s = make_model(demo_model_spec(), demo.model_path, nullptr, true); !s) return s.error();

    // The reference: the clean engine in llama mode, dumped like llama.cpp's reference dumper.
    auto model = Model::open(demo.model_path);
    if (!model) return model.error();
    auto backend = make_cpu_backend(0);
    ForwardOptions fo;
    auto forward = make_forward(*model.value(), *backend, fo);
    if (!forward) return forward.error();
    const Tokenizer* tok = model.value()->tokenizer();
    std::vector<int32_t> tokens = tok->encode(demo.prompt, true, true);
    DumpWriter dump;
    const int64_t n_vocab = static_cast<int64_t>(forward.value()->last_logits().size());
    auto result = generate_greedy(*forward.value(), nullptr, tokens, demo.n_generate, &dump,
                                  [&](int d) { dump.add_logits(d, forward.value()->last_logits(), n_vocab); });
    if (!result) return result.error();
    DumpInfo info;
    info.tool = "layerscope demo";
    info.model_path = demo.model_path;
    info.model_desc = "llama demo";
    info.prompt = demo.prompt;
    info.add_bos = tok->add_bos();
    info.prompt_tokens = tokens;
    for (int32_t id : tokens) info.prompt_token_pieces.push_back(tok->token_to_piece(id));
    info.n_predict = demo.n_generate;
    info.generated_tokens = result.value().generated;
    info.decode_n_tokens = result.value().decode_n_tokens;
    info.n_ctx = static_cast<uint32_t>(fo.n_ctx);
    info.n_ubatch = static_cast<uint32_t>(fo.n_ubatch);
    info.system_info = backend->name() + ", math mode llama, llama.cpp build " + llama_isa_name(fo.llama_isa);
    if (Status s = dump.write(demo.reference_path, info, true); !s) return s.error();
    return demo;
}

}  // namespace ls::app
