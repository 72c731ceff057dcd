// Helpers shared by the tests: where the fixtures are, and skipping when they are absent.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace ls::test {

// Absolute path of ../shared/fixtures/<rel>, or "" when the fixtures folder is absent.
std::string fixture_path(const std::string& rel);
bool have_fixtures();
// A fresh, empty temporary directory for one test; removed with its contents when the test
// process exits.
std::string make_temp_dir();

// Runs the built `layerscope` binary with `args` (already shell-quoted where needed); stdout is
// captured, stderr too when `with_stderr`.
struct CommandResult {
    int exit_code = -1;
    std::string out;
};
CommandResult run_layerscope(const std::string& args, bool with_stderr = false);

}  // namespace ls::test

// Skips the current test with a clear message when ../shared/fixtures is missing.
#define LS_REQUIRE_FIXTURES()                                                                   \
    do {                                                                                        \
        if (!::ls::test::have_fixtures())                                                       \
            GTEST_SKIP() << "../shared/fixtures not found beside the checkout; this test needs " \
                            "the llama.cpp reference fixtures";                                 \
    } while (0)
