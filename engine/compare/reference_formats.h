// Reference sources other than GGUF dumps: folders of .npy files with a manifest.json, and the text
// printout of llama.cpp's eval callback (llama-eval-callback, llama-debug). See REFERENCE_FORMATS.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/util/result.h"

namespace ls {

// ---- .npy files ----------------------------------------------------------------------------

// One array read from a .npy file, as a RefTensor takes it: f16/f32/f64 become F32 values, i4
// stays I32, i8 stays I64. `shape` is numpy's (outermost first), `dtype` the descr ("<f4").
// f4, i4 and i8 values are used where they are (the mapped file, nothing copied, whatever its
// size); f2 and f8 are converted into `converted`.
struct NpyArray {
    std::string dtype;
    std::vector<int64_t> shape;
    GgmlType stored_type = GgmlType::F32;
    const uint8_t* in_place = nullptr;   // the values in the parsed bytes (f4, i4, i8)
    std::vector<uint8_t> converted;      // the values converted to f32 (f2, f8)
    std::shared_ptr<const void> owner;   // keeps `in_place` readable (read_npy: the mapping)
    int64_t n_elements() const;
    // C order, little-endian, 4 or 8 bytes per element.
    const uint8_t* data() const { return in_place ? in_place : converted.data(); }
};

// Reads and validates a .npy file (format versions 1, 2, 3), mapped rather than read. Errors name
// the file and the problem.
Result<NpyArray> read_npy(const std::string& path);
// Parses .npy bytes already in memory; `what` names them in errors. The array points into `data`
// unless converted. A conversion larger than the memory available is refused with the numbers.
Result<NpyArray> parse_npy(const uint8_t* data, size_t size, const std::string& what);
// Writes a C-order array as .npy version 1 (dtype "<f4", "<i4" or "<i8") to `out`; `what` names
// it in errors.
Status write_npy(std::FILE* out, const std::string& what, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data);
// The same to the file `path`, through a staging file that takes the name only when complete
// (engine/util/safe_write.h): an existing file is replaced only with `overwrite`, and only a
// regular file.
Status write_npy(const std::string& path, const std::string& dtype, const std::vector<int64_t>& shape,
                 const void* data, bool overwrite = false);

// ---- folder of .npy + manifest.json ------------------------------------------------------------

struct NpyFolder {
    std::unique_ptr<ReferenceDump> dump;
    std::vector<int32_t> prompt_tokens, generated_tokens;  // from the manifest, when present
};

// Loads `dir`/manifest.json and every file it names.
Result<NpyFolder> load_npy_folder(const std::string& dir);
Result<std::unique_ptr<ReferenceDump>> open_npy_folder(const std::string& dir);

// ---- llama.cpp eval-callback text logs ---------------------------------------------------------

// Parses a llama-eval-callback / llama-debug printout into partial RefTensors (samples + sum).
// `source` names the text in errors (the file path).
Result<std::unique_ptr<ReferenceDump>> parse_eval_log(const std::string& text, const std::string& source);
Result<std::unique_ptr<ReferenceDump>> open_eval_log(const std::string& path);

}  // namespace ls
