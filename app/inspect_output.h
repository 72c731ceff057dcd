// The two renderings of `layerscope inspect`: human-readable text and one JSON object.
#pragma once

#include "app/commands.h"

namespace ls {
class GgufFile;
struct GgufTensorInfo;
}

namespace ls::app {

// Both return an exit code: --tensor naming a missing tensor is a usage error (2), a tensor that
// cannot be decoded is bad input (3).
int print_inspect_text(const GgufFile& file, const InspectOptions& options);
int print_inspect_json(const GgufFile& file, const InspectOptions& options);

// Shared by both: finds --tensor, prints the reason to stderr when it is not there.
const GgufTensorInfo* find_tensor_or_complain(const GgufFile& file, const std::string& name);

}  // namespace ls::app
