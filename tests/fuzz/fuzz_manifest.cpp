// Fuzz target: folders of .npy files with a manifest.json (load_npy_folder), compared with a real
// dump as `layerscope compare DUMP FOLDER` does. The input is the manifest text, optionally
// followed by a NUL and the bytes of "fuzzed.npy"; the folder also holds fixed arrays of every
// dtype, a subfolder, a folder named like an array and a symlink that leads outside.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/compare/compare_run.h"
#include "engine/compare/reference_formats.h"
#include "tests/fuzz/fuzz_support.h"

namespace {
namespace fs = std::filesystem;

void must(const ls::Status& st) {
    if (!st.ok()) {
        std::fprintf(stderr, "layerscope fuzz: %s\n", st.error().message.c_str());
        std::abort();
    }
}

// The reference folder, made once per process.
const std::string& folder() {
    static const std::string dir = [] {
        const fs::path root = fs::path(ls::fuzz::scratch_dir());
        const fs::path ref = root / "ref";
        fs::create_directories(ref / "sub");
        fs::create_directories(ref / "dir.npy");
        const float f32[6] = {1, -2, 3.5f, 0, 1e-3f, -7};
        const int32_t i32[4] = {1, 403, 407, 261};
        const int64_t i64[3] = {0, -1, 1LL << 40};
        const double f64[2] = {0.25, -1e300};
        const uint16_t f16[4] = {0x3c00, 0xbc00, 0x7c00, 0x0001};
        must(ls::write_npy((ref / "a.npy").string(), "<f4", {2, 3}, f32));
        must(ls::write_npy((ref / "b.npy").string(), "<i4", {4}, i32));
        must(ls::write_npy((ref / "c.npy").string(), "<f2", {1, 2, 2}, f16));
        must(ls::write_npy((ref / "d.npy").string(), "<i8", {3}, i64));
        must(ls::write_npy((ref / "e.npy").string(), "<f8", {2}, f64));
        must(ls::write_npy((ref / "sub" / "f.npy").string(), "<f4", {1, 1, 6}, f32));
        must(ls::write_npy((root / "outside.npy").string(), "<f4", {6}, f32));
        fs::create_symlink("../outside.npy", ref / "escape.npy");
        return ref.string();
    }();
    return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& dir = folder();
    const auto parts = ls::fuzz::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0', 2);
    ls::fuzz::write_file(dir + "/manifest.json", parts[0]);
    const std::string npy = dir + "/fuzzed.npy";
    if (parts.size() > 1) {
        ls::fuzz::write_file(npy, parts[1]);
    } else {
        std::error_code ec;
        fs::remove(npy, ec);
    }
    auto loaded = ls::load_npy_folder(dir);
    if (!loaded) return 0;
    if (const ls::ReferenceDump* fixture = ls::fuzz::fixture_dump())
        (void)ls::compare_dumps(*fixture, *loaded->dump, ls::CompareThresholds{}, 1);
    return 0;
}
