// Opening the files a user names as input (models, dumps, .npy files, manifests, logs): regular
// files only, checked before any open() that could block (a FIFO waits for a writer) or read
// nonsense (a directory, a device), with a message that says what the path is instead.
#pragma once

#include <cstdint>
#include <string>

#include "engine/util/result.h"

namespace ls {

// kBadInput naming `path` unless it is a regular file (symlinks followed): "is a directory",
// "is a named pipe (FIFO)", "cannot open: No such file or directory", ...
Status check_input_file(const std::string& path);

// The file opened read-only (close-on-exec) after that check; the caller closes it.
Result<int> open_input_file(const std::string& path);

// The whole file as text. Refused up front, with both sizes, when it is larger than `max_bytes`
// (what its format can sensibly be) or than the memory available.
Result<std::string> read_input_file(const std::string& path, uint64_t max_bytes);

}  // namespace ls
