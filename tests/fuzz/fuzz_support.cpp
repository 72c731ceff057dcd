// The fuzz targets' shared helpers: fixtures, the scratch folder, input splitting.
#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "engine/compare/reference.h"

namespace ls::fuzz {
namespace fs = std::filesystem;

std::string fixture_path(const std::string& rel) {
    const char* env = std::getenv("LAYERSCOPE_FIXTURES");
    const fs::path path = fs::path(env && *env ? env : LAYERSCOPE_FIXTURES) / rel;
    std::error_code ec;
    return fs::exists(path, ec) ? path.string() : "";
}

namespace {

// Removes the scratch folder at a normal exit, only in the process that made it.
struct Scratch {
    std::string dir;
    pid_t owner = getpid();
    ~Scratch() {
        std::error_code ec;
        if (!dir.empty() && getpid() == owner) fs::remove_all(dir, ec);
    }
};

}  // namespace

const std::string& scratch_dir() {
    static Scratch scratch = [] {
        Scratch s;
        std::string pattern = (fs::temp_directory_path() / "layerscope-fuzz-XXXXXX").string();
        if (!mkdtemp(pattern.data())) {
            std::perror("layerscope fuzz: cannot make a scratch folder");
            std::abort();
        }
        s.dir = pattern;
        return s;
    }();
    return scratch.dir;
}

void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.good()) {
        std::fprintf(stderr, "layerscope fuzz: cannot write %s\n", path.c_str());
        std::abort();
    }
}

std::vector<std::string_view> split(std::string_view text, char separator, size_t max_parts) {
    std::vector<std::string_view> parts;
    while (parts.size() + 1 < max_parts) {
        const size_t cut = text.find(separator);
        if (cut == std::string_view::npos) break;
        parts.push_back(text.substr(0, cut));
        text.remove_prefix(cut + 1);
    }
    parts.push_back(text);
    return parts;
}

const ReferenceDump* fixture_dump() {
    static const std::unique_ptr<ReferenceDump> dump = []() -> std::unique_ptr<ReferenceDump> {
        const std::string path = fixture_path("dumps/stories260K_once_n0_fa-off.gguf");
        if (path.empty()) return nullptr;
        auto d = ReferenceDump::open_gguf(path);
        return d ? std::move(d.value()) : nullptr;
    }();
    return dump.get();
}

}  // namespace ls::fuzz
