// Every file and folder the program writes goes through here, so that nothing the user made is
// lost: only regular files are written, nothing is replaced unless asked (and then only what we
// wrote), and new contents are written under a staging name beside the target and renamed into
// place, so the old version stays until the new one is complete.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "engine/util/result.h"

namespace ls {

// What a path names. A symbolic link is followed: a link to a regular file is kRegular, a link to
// nothing is kBrokenLink.
enum class PathKind {
    kMissing, kRegular, kDirectory, kFifo, kCharDevice, kBlockDevice, kSocket, kBrokenLink,
    kSymlink,  // only where a link is deliberately not followed
    kOther,
};
PathKind path_kind(const std::string& path);
const char* path_kind_name(PathKind kind);  // "a FIFO (named pipe)", for messages

// Whether a regular file may be written at `path`: nothing is there, or (with `overwrite`) a
// regular file is. Refusals (a folder, a FIFO, a device, an existing file without `overwrite`)
// are kUsage and name the path and what is there; a missing parent folder is kIo.
Status check_file_target(const std::string& path, bool overwrite);

// Whether a StagedFolder may be put at `path`: nothing is there, or (with `overwrite`) a folder
// an earlier StagedFolder wrote, holding nothing but what it wrote. Refusals are kUsage.
Status check_folder_target(const std::string& path, bool overwrite);

// Written into every folder StagedFolder makes, listing the files it wrote:
// {"format": "layerscope-folder", "version": 1, "files": ["a.npy", ...]}. A folder is replaced
// only when it has this marker and nothing beside the files it lists.
inline constexpr const char* kFolderMarkerName = ".layerscope-folder.json";

// Staging entries are named ".<target name>.layerscope-staging.<pid>.<n>" beside the target. A
// writer removes, before it starts, those of the same target left by a process that is gone
// (files, and folders with our marker or empty); nothing else is touched.

// A regular file written under a staging name and renamed to its target by commit(). Without
// commit (an error, a cancel), the staging file is removed.
class StagedFile {
public:
    static Result<std::unique_ptr<StagedFile>> create(const std::string& path, bool overwrite);
    ~StagedFile();
    StagedFile(const StagedFile&) = delete;
    StagedFile& operator=(const StagedFile&) = delete;

    std::FILE* file() { return file_; }
    const std::string& target() const { return target_; }
    // Flushes and syncs the file, then puts it in place. Refuses (kUsage) when the target became
    // something it may not replace while the file was written (a file or folder that appeared,
    // without overwrite; something that is not a regular file): that is left untouched.
    Status commit();

private:
    StagedFile() = default;
    std::string given_, target_, staging_;
    bool overwrite_ = false;
    std::FILE* file_ = nullptr;
    bool committed_ = false;
    bool kept_ = false;  // the staging name holds something that is not ours: never removed
};

// `bytes` as the whole contents of the file at `path`, through a StagedFile.
Status write_file_safely(const std::string& path, std::string_view bytes, bool overwrite);

// Opens `path` to append to it (created when absent). Only a regular file is accepted; a FIFO or
// a device is refused (kUsage) rather than waited on.
Result<std::FILE*> open_for_append(const std::string& path);

// A folder written under a staging name (with the marker) and swapped in for its target by
// commit(). Without commit, the staging folder is removed with what was written into it.
class StagedFolder {
public:
    static Result<std::unique_ptr<StagedFolder>> create(const std::string& path, bool overwrite);
    ~StagedFolder();
    StagedFolder(const StagedFolder&) = delete;
    StagedFolder& operator=(const StagedFolder&) = delete;

    const std::string& staging_path() const { return staging_; }
    const std::string& target() const { return target_; }
    // Writes the folder's file `name` (a new file; no subfolders) with `write`; a write error
    // (ferror, a failed close) is reported even when `write` did not check.
    Status write_file(const std::string& name, const std::function<Status(std::FILE*)>& write);
    // Lists the files in the marker, syncs, and puts the folder in place. An earlier folder being
    // replaced is removed only after the new one stands under the name. A folder that is not ours
    // and appeared at the target meanwhile is never touched: commit refuses (kUsage).
    Status commit();

private:
    StagedFolder() = default;
    std::string given_, target_, staging_;
    bool overwrite_ = false;
    bool committed_ = false;
    bool kept_ = false;
};

// For tests: use plain rename() and link() instead of renameat2's RENAME_NOREPLACE and
// RENAME_EXCHANGE, as on file systems without them.
void safe_write_use_portable_renames(bool on);

}  // namespace ls
