// Model lints: where a GGUF file's metadata and tensors disagree (missing or misshapen tensors,
// output rows vs vocabulary, rope dims), each saying exactly what was expected and what was found.
#pragma once

#include <string>
#include <vector>

namespace ls {

class GgufFile;

enum class LintSeverity { kError, kWarning, kInfo };

const char* lint_severity_name(LintSeverity severity);  // "error", "warning", "info"

struct Lint {
    LintSeverity severity = LintSeverity::kError;
    std::string subject;  // the tensor name or metadata key the lint is about ("" for the file)
    std::string message;  // "expected ne [512, 512] got [512, 256]"
};

// Every lint for `file`; errors are what llama.cpp would refuse to load or what makes a forward
// pass wrong, warnings are suspicious but loadable, infos explain legitimate oddities (padded vocab).
std::vector<Lint> lint_model(const GgufFile& file);

int count_lints(const std::vector<Lint>& lints, LintSeverity severity);

}  // namespace ls
