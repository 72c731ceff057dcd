// Loads a ModelDocument: opens the GGUF file and runs the engine's summaries once.
#include "views/model_document.h"

namespace ls::views {

Result<std::shared_ptr<const ModelDocument>> ModelDocument::load(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file.ok()) return file.error();
    return from_file(std::move(file.value()));
}

std::shared_ptr<const ModelDocument> ModelDocument::from_file(std::shared_ptr<const GgufFile> file) {
    auto doc = std::make_shared<ModelDocument>();
    doc->file = std::move(file);
    auto config = model_config_from_gguf(*doc->file);
    if (config.ok()) {
        doc->config = config.value();
        doc->derived = derived_lines(*doc->config, doc->file.get());
    } else {
        doc->config_error = config.error().message;
    }
    doc->lints = lint_model(*doc->file);
    doc->tokenizer = summarize_tokenizer(*doc->file);
    doc->type_totals = totals_by_type(*doc->file);
    for (const TypeTotal& t : doc->type_totals) {
        doc->tensor_bytes += t.n_bytes;
        doc->tensor_elements += t.n_elements;
    }
    return std::shared_ptr<const ModelDocument>(std::move(doc));
}

}  // namespace ls::views
