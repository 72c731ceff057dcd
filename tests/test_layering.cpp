// Include rules between the layers, checked over the source tree: kernels know nothing above them,
// the engine knows no GUI, the views know no app and no CUDA, and every project include names its
// layer from the repository root.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Include {
    std::string file;    // relative to the source root: "engine/model/lint.cpp"
    int line = 0;
    bool quoted = false;  // "..." rather than <...>
    std::string target;  // what is between the quotes or brackets
};

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Every #include of the layers' sources. app/llama-dump is a separate program built against
// llama.cpp, with llama.cpp's include conventions.
const std::vector<Include>& all_includes() {
    static const std::vector<Include> includes = [] {
        std::vector<Include> out;
        const fs::path root = LAYERSCOPE_SOURCE_DIR;
        static const std::regex kInclude(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
        for (const char* layer : {"engine", "kernels", "views", "app"}) {
            for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
                if (!entry.is_regular_file()) continue;
                const std::string ext = entry.path().extension().string();
                if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
                const std::string rel = fs::relative(entry.path(), root).generic_string();
                if (starts_with(rel, "app/llama-dump/")) continue;
                std::ifstream in(entry.path());
                std::string text;
                for (int n = 1; std::getline(in, text); ++n) {
                    std::smatch m;
                    if (std::regex_search(text, m, kInclude)) out.push_back({rel, n, m[1] == "\"", m[2]});
                }
            }
        }
        return out;
    }();
    return includes;
}

// The includes of files under `layer` that `bad` rejects, one "file:line: #include ..." each.
std::vector<std::string> violations(const std::string& layer, const std::function<bool(const Include&)>& bad) {
    std::vector<std::string> out;
    for (const Include& inc : all_includes()) {
        if (!layer.empty() && !starts_with(inc.file, layer + "/")) continue;
        if (bad(inc))
            out.push_back(inc.file + ":" + std::to_string(inc.line) + ": #include " + (inc.quoted ? "\"" : "<") +
                          inc.target + (inc.quoted ? "\"" : ">"));
    }
    return out;
}

std::string listing(const std::vector<std::string>& lines) {
    std::string s;
    for (const std::string& l : lines) s += "\n  " + l;
    return s;
}

bool quoted_under(const Include& inc, std::initializer_list<const char*> prefixes) {
    if (!inc.quoted) return false;
    for (const char* p : prefixes)
        if (starts_with(inc.target, p)) return true;
    return false;
}

bool is_gui_header(const Include& inc) {
    return starts_with(inc.target, "imgui") || starts_with(inc.target, "GLFW/") || starts_with(inc.target, "GL/");
}

bool is_cuda_header(const Include& inc) {
    if (quoted_under(inc, {"kernels/cuda/", "kernels/simt/"})) return true;
    return !inc.quoted && (starts_with(inc.target, "cuda") || starts_with(inc.target, "cublas"));
}

TEST(Layering, SourcesAreFound) {
    // A wrong LAYERSCOPE_SOURCE_DIR would make every other rule pass vacuously.
    EXPECT_GT(all_includes().size(), 100u) << "source root: " << LAYERSCOPE_SOURCE_DIR;
}

TEST(Layering, EngineIncludesNoViewsAppOrGui) {
    auto v = violations("engine", [](const Include& inc) { return quoted_under(inc, {"views/", "app/"}) || is_gui_header(inc); });
    EXPECT_TRUE(v.empty()) << "the engine must not depend on the views, the app or the GUI libraries:" << listing(v);
}

TEST(Layering, KernelsIncludeNoEngineViewsOrApp) {
    auto v = violations("kernels", [](const Include& inc) { return quoted_under(inc, {"engine/", "views/", "app/"}); });
    EXPECT_TRUE(v.empty()) << "the kernels are the bottom layer; they include only kernels/ and libraries:" << listing(v);
}

TEST(Layering, ViewsIncludeNoAppOrCuda) {
    auto v = violations("views", [](const Include& inc) { return quoted_under(inc, {"app/"}) || is_cuda_header(inc); });
    EXPECT_TRUE(v.empty()) << "the views must not depend on the app or on CUDA (they reach kernels through "
                              "kernels/backend.h):" << listing(v);
}

TEST(Layering, ProjectIncludesNameTheirLayer) {
    auto v = violations("", [](const Include& inc) {
        return inc.quoted && !quoted_under(inc, {"kernels/", "engine/", "views/", "app/", "tests/"});
    });
    EXPECT_TRUE(v.empty()) << "quoted includes name their layer from the repository root "
                               "(\"engine/model/lint.h\", not \"lint.h\"):" << listing(v);
}

}  // namespace
