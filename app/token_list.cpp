// Parsing of --tokens.
#include "app/token_list.h"

#include <fmt/format.h>

#include <climits>
#include <sstream>

namespace ls::app {

Result<std::vector<int32_t>> parse_token_list(const std::string& text) {
    std::vector<int32_t> ids;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (...) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 0 || v > INT32_MAX)
            return make_error(ErrorCode::kUsage,
                              fmt::format("--tokens: \"{}\" is not a token id; expected e.g. --tokens 1,403,407", item));
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) return make_error(ErrorCode::kUsage, "--tokens is empty; expected e.g. --tokens 1,403,407");
    return ids;
}

}  // namespace ls::app
