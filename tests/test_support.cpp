// Fixture location and temporary directories for tests.
#include "tests/test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

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

namespace {

// The folders make_temp_dir made; they are removed, with their contents, when the test process
// exits. Only by the process that made them: a forked child (a death test) exits without them.
class TempDirs {
public:
    ~TempDirs() {
        if (getpid() != owner_) return;
        std::error_code ec;
        for (const std::filesystem::path& dir : dirs_) std::filesystem::remove_all(dir, ec);
    }
    void add(std::filesystem::path dir) {
        std::lock_guard<std::mutex> lock(mutex_);
        dirs_.push_back(std::move(dir));
    }

private:
    pid_t owner_ = getpid();
    std::mutex mutex_;
    std::vector<std::filesystem::path> dirs_;
};

TempDirs& temp_dirs() {
    static TempDirs dirs;
    return dirs;
}

}  // namespace

std::string make_temp_dir() {
    std::random_device rd;
    auto base = std::filesystem::temp_directory_path();
    TempDirs& registry = temp_dirs();  // constructed before the first folder, so destroyed after its users
    for (;;) {
        auto dir = base / ("layerscope-test-" + std::to_string(rd()));
        if (std::filesystem::create_directory(dir)) {
            registry.add(dir);
            return dir.string();
        }
    }
}

CommandResult run_layerscope(const std::string& args, bool with_stderr) {
    CommandResult r;
    std::string cmd = "'" LAYERSCOPE_BINARY_DIR "/app/layerscope' " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
    FILE* pipe = popen(cmd.c_str(), "r");
    if (!pipe) return r;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
    int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

}  // namespace ls::test
