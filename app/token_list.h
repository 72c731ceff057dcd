// The --tokens argument shared by run, compare and export: "1,403,407".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/util/result.h"

namespace ls::app {

// Token ids separated by commas; kUsage errors name the item that is not an id.
Result<std::vector<int32_t>> parse_token_list(const std::string& text);

}  // namespace ls::app
