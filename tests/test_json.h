// For the tests of commands with --json: run one and parse what it prints (only the tests that
// read JSON include it; json.hpp is heavy).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tests/test_support.h"

namespace ls::test {

// `layerscope ARGS --json`: expects `expected_exit` and one JSON value on stdout (test failures
// otherwise); the parsed value (discarded when it is not JSON).
inline nlohmann::json run_layerscope_json(const std::string& args, int expected_exit) {
    CommandResult r = run_layerscope(args + " --json");
    EXPECT_EQ(r.exit_code, expected_exit) << args << "\n" << r.out;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
}

}  // namespace ls::test
