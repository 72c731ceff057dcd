// Fixture location and temporary directories for tests.
#include "test_support.h"

#include <cstdlib>
#include <filesystem>
#include <random>

namespace ls::test {

static std::string fixtures_root() {
    if (const char* env = std::getenv("LAYERSCOPE_FIXTURES")) return env;
    return LAYERSCOPE_FIXTURES;
}

bool have_fixtures() { return std::filesystem::is_directory(fixtures_root()); }

std::string fixture_path(const std::string& rel) {
    if (!have_fixtures()) return "";
    return fixtures_root() + "/" + rel;
}

std::string make_temp_dir() {
    std::random_device rd;
    auto base = std::filesystem::temp_directory_path();
    for (;;) {
        auto dir = base / ("layerscope-test-" + std::to_string(rd()));
        if (std::filesystem::create_directory(dir)) return dir.string();
    }
}

}  // namespace ls::test
