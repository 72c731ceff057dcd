// Shared by the fuzz targets: where the fixtures are, a scratch folder for loaders that read
// files, and one fixture dump to compare fuzzed references against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ls {
class ReferenceDump;
}

namespace ls::fuzz {

// ../shared/fixtures/<rel> (or $LAYERSCOPE_FIXTURES/<rel>), "" when it does not exist.
std::string fixture_path(const std::string& rel);

// A folder of this process's own under $TMPDIR, made on first use and removed with its contents
// when the process exits normally. (A crash leaves it; the fuzz script gives every run a TMPDIR
// of its own and removes that.)
const std::string& scratch_dir();

// Writes `bytes` to `path`, replacing it; aborts when it cannot (the scratch folder is ours).
void write_file(const std::string& path, std::string_view bytes);

// `text` cut at every `separator`, into at most `max_parts` parts (the last takes the rest).
std::vector<std::string_view> split(std::string_view text, char separator, size_t max_parts);

// A real dump (stories260K, prompt "Once upon a time", flash attention off) to compare fuzzed
// references with, as `layerscope compare` would; nullptr without the fixtures.
const ReferenceDump* fixture_dump();

}  // namespace ls::fuzz
