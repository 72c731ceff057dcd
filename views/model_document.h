// An opened model as the panels see it: the mapped GGUF file plus what the engine derived from
// it once (config, lints, tokenizer summary, type totals), so panels never recompute per frame.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"
#include "engine/model/lint.h"
#include "engine/model/model_config.h"
#include "engine/model/model_summary.h"
#include "engine/util/result.h"

namespace ls::views {

struct ModelDocument {
    std::shared_ptr<const GgufFile> file;  // a header alone for a session on a server (has_data() false)
    std::optional<ModelConfig> config;  // empty when the metadata is incomplete (see config_error)
    std::string config_error;
    std::vector<SummaryLine> derived;  // what the config implies (derived_lines), empty without a config
    std::vector<Lint> lints;
    TokenizerSummary tokenizer;
    std::vector<TypeTotal> type_totals;
    uint64_t tensor_bytes = 0;
    int64_t tensor_elements = 0;

    static Result<std::shared_ptr<const ModelDocument>> load(const std::string& path);
    // The same for a file already open or parsed (the header a server sent).
    static std::shared_ptr<const ModelDocument> from_file(std::shared_ptr<const GgufFile> file);
};

}  // namespace ls::views
