// Safe writes (see safe_write.h): target checks, staging names and their cleanup, and the renames
// that put a new file or folder in place without replacing anything it may not.
#include "engine/util/safe_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

namespace ls {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_portable_renames{false};
std::atomic<unsigned> g_staging_sequence{0};

constexpr const char* kStagingTag = ".layerscope-staging.";
constexpr const char* kMarkerFormat = "layerscope-folder";

Error usage(std::string message) { return make_error(ErrorCode::kUsage, std::move(message)); }
Error io(std::string message) { return make_error(ErrorCode::kIo, std::move(message)); }

PathKind kind_of_mode(mode_t mode) {
    if (S_ISREG(mode)) return PathKind::kRegular;
    if (S_ISDIR(mode)) return PathKind::kDirectory;
    if (S_ISFIFO(mode)) return PathKind::kFifo;
    if (S_ISCHR(mode)) return PathKind::kCharDevice;
    if (S_ISBLK(mode)) return PathKind::kBlockDevice;
    if (S_ISSOCK(mode)) return PathKind::kSocket;
    return PathKind::kOther;
}

// What the name itself is: a symbolic link is not followed.
PathKind entry_kind(const std::string& path) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0) return PathKind::kMissing;
    return S_ISLNK(st.st_mode) ? PathKind::kSymlink : kind_of_mode(st.st_mode);
}

// A target after its symbolic link (if it is one) is resolved: the staging entry goes beside the
// file or folder the link names, and the link stays.
struct Target {
    std::string given;  // as the user wrote it, for messages
    std::string path, dir, name;
    PathKind kind = PathKind::kMissing;
};

Result<Target> resolve(const std::string& given, bool folder) {
    Target t;
    t.given = given;
    t.path = given;
    if (folder)
        while (t.path.size() > 1 && t.path.back() == '/') t.path.pop_back();  // "out/" names the folder "out"
    if (t.path.empty()) return usage("no output path given");
    t.kind = path_kind(t.path);
    if (t.kind == PathKind::kBrokenLink)
        return usage(fmt::format("{} is a symbolic link to something that does not exist; nothing is written through it. "
                                 "Give the path of the file itself", given));
    struct stat st {};
    if (lstat(t.path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        char* real = realpath(t.path.c_str(), nullptr);
        if (!real) return io(fmt::format("cannot resolve the symbolic link {}: {}", given, std::strerror(errno)));
        t.path = real;
        std::free(real);
    }
    const fs::path p(t.path);
    t.name = p.filename().string();
    if (t.name.empty() || t.name == "." || t.name == "..")
        return usage(fmt::format("{} does not name a {}; give a name for the new one", given, folder ? "folder" : "file"));
    t.dir = p.parent_path().empty() ? "." : p.parent_path().string();
    const PathKind parent = path_kind(t.dir);
    if (parent == PathKind::kMissing)
        return io(fmt::format("cannot write {}: the folder {} does not exist", given, t.dir));
    if (parent != PathKind::kDirectory)
        return io(fmt::format("cannot write {}: {} is {}, not a folder", given, t.dir, path_kind_name(parent)));
    return t;
}

// The target create() resolved, at commit: the same path, even if a link changed since.
Target target_of(const std::string& given, const std::string& path) {
    Target t;
    t.given = given;
    t.path = path;
    const fs::path p(path);
    t.name = p.filename().string();
    t.dir = p.parent_path().empty() ? "." : p.parent_path().string();
    t.kind = entry_kind(path);
    return t;
}

Error exists_error(const std::string& given) {
    return usage(fmt::format("{} already exists; choose another name or allow overwriting (--force)", given));
}

Status check_file(const Target& t, bool overwrite) {
    if (t.kind == PathKind::kMissing) return {};
    if (t.kind != PathKind::kRegular)
        return usage(fmt::format("{} is {}, not a regular file; nothing was written to it (only regular files are "
                                 "written). Choose another name", t.given, path_kind_name(t.kind)));
    if (!overwrite) return exists_error(t.given);
    return {};
}

// The files a folder's marker lists, or nothing when `dir` has no readable marker of ours.
std::optional<std::set<std::string>> read_marker(const std::string& dir) {
    const std::string path = (fs::path(dir) / kFolderMarkerName).string();
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (64 << 20)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    const nlohmann::json m = nlohmann::json::parse(in, nullptr, false);
    if (!m.is_object() || !m.contains("format") || m["format"] != kMarkerFormat || !m.contains("files") ||
        !m["files"].is_array())
        return std::nullopt;
    std::set<std::string> files;
    for (const auto& f : m["files"]) {
        if (!f.is_string()) return std::nullopt;
        files.insert(f.get<std::string>());
    }
    return files;
}

// Why the folder at `path` is not one we may replace, or "" when it is: ours (the marker) and
// holding nothing but the regular files the marker lists.
std::string not_ours(const std::string& path) {
    const auto files = read_marker(path);
    if (!files)
        return fmt::format("it has no {} (the marker of a folder layerscope wrote), so it was not written by an export",
                           kFolderMarkerName);
    std::error_code ec;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name == kFolderMarkerName) continue;
        if (!files->count(name) || entry_kind(it->path().string()) != PathKind::kRegular)
            return fmt::format("it holds {}, which no export wrote (move it out to let the folder be replaced)", name);
    }
    if (ec) return fmt::format("it cannot be listed: {}", ec.message());
    return "";
}

Status check_folder(const Target& t, bool overwrite) {
    if (t.kind == PathKind::kMissing) return {};
    if (t.kind != PathKind::kDirectory)
        return usage(fmt::format("{} is {}, not a folder; it is not replaced by a folder. Choose another name", t.given,
                                 path_kind_name(t.kind)));
    if (!overwrite) return exists_error(t.given);
    if (const std::string why = not_ours(t.path); !why.empty())
        return usage(fmt::format("{} is not replaced, even with --force: {}. Choose another name", t.given, why));
    return {};
}

bool all_digits(const std::string& s) {
    return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string staging_prefix(const Target& t) { return "." + t.name + kStagingTag; }

std::string new_staging_path(const Target& t) {
    return (fs::path(t.dir) / fmt::format("{}{}.{}", staging_prefix(t), getpid(), g_staging_sequence++)).string();
}

bool is_empty_folder(const std::string& path) {
    std::error_code ec;
    return fs::is_empty(path, ec) && !ec;
}

// Removes the staging entries of this target that a process which is gone left behind: regular
// files, and folders with our marker (or empty). Entries of live processes, and anything that
// only resembles our names, stay.
void remove_stale_staging(const Target& t) {
    const std::string prefix = staging_prefix(t);
    std::vector<std::string> stale;
    std::error_code ec;
    for (fs::directory_iterator it(t.dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string rest = name.substr(prefix.size());  // "<pid>.<n>"
        const size_t dot = rest.find('.');
        if (dot == std::string::npos || !all_digits(rest.substr(0, dot)) || !all_digits(rest.substr(dot + 1))) continue;
        const long long pid = std::stoll(rest.substr(0, dot));
        if (pid <= 0 || pid > INT_MAX || pid == getpid()) continue;
        if (kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive, or another user's
        stale.push_back(it->path().string());
    }
    for (const std::string& path : stale) {
        const PathKind kind = entry_kind(path);
        if (kind == PathKind::kRegular) {
            unlink(path.c_str());
        } else if (kind == PathKind::kDirectory && (read_marker(path) || is_empty_folder(path))) {
            fs::remove_all(path, ec);
        }
    }
}

bool atomic_renames_unsupported(int err) { return err == EINVAL || err == ENOSYS || err == ENOTSUP; }

// Gives `from` the name `to` unless something has it: 0, or the errno (EEXIST, or ENOTEMPTY when a
// folder took the name).
int rename_noreplace(const std::string& from, const std::string& to, bool folder) {
    if (!g_portable_renames) {
        if (renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
        if (!atomic_renames_unsupported(errno)) return errno;
    }
    if (folder) {
        // An empty folder made here holds the name; rename() then replaces that one only (it
        // fails with ENOTEMPTY if anything was put into it meanwhile).
        if (mkdir(to.c_str(), 0700) != 0) return errno;
        if (std::rename(from.c_str(), to.c_str()) == 0) return 0;
        const int err = errno;
        rmdir(to.c_str());
        return err;
    }
    if (link(from.c_str(), to.c_str()) == 0) {
        unlink(from.c_str());
        return 0;
    }
    if (errno == EEXIST) return EEXIST;
    // No hard links on this file system: the check and the rename are two steps here.
    if (entry_kind(to) != PathKind::kMissing) return EEXIST;
    return std::rename(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

// Puts `staging` at the target's name and what had it at `*old`: 0 or an errno (ENOENT when the
// target is gone).
int swap_in(const std::string& staging, const Target& t, bool folder, std::string* old) {
    if (!g_portable_renames) {
        if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, t.path.c_str(), RENAME_EXCHANGE) == 0) {
            *old = staging;
            return 0;
        }
        if (!atomic_renames_unsupported(errno)) return errno;
    }
    // Without an atomic exchange: the old one moves to a staging name of its own, then the new
    // one takes the free name.
    const std::string aside = new_staging_path(t);
    if (std::rename(t.path.c_str(), aside.c_str()) != 0) return errno;
    if (const int err = rename_noreplace(staging, t.path, folder); err != 0) {
        if (rename_noreplace(aside, t.path, folder) != 0) {
            // Something took the name meanwhile: the old one is kept under a name no cleanup removes.
            const std::string kept = fmt::format("{}.previous.{}", t.path, getpid());
            *old = rename_noreplace(aside, kept, folder) == 0 ? kept : aside;
        }
        return err;
    }
    *old = aside;
    return 0;
}

// Undoes swap_in: the new one back to `staging`, the old one back to its name.
bool swap_back(const std::string& staging, const Target& t, bool folder, const std::string& old) {
    if (old == staging) return renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, t.path.c_str(), RENAME_EXCHANGE) == 0;
    return std::rename(t.path.c_str(), staging.c_str()) == 0 && rename_noreplace(old, t.path, folder) == 0;
}

// Whether what is at `path` (the target, or what was swapped out of it) may be replaced. A
// symbolic link that appeared there is not followed, and not replaced.
Status replaceable(const std::string& path, const Target& t, bool folder) {
    Target at = t;
    at.path = path;
    at.kind = entry_kind(path);
    return folder ? check_folder(at, true) : check_file(at, true);
}

void sync_folder(const std::string& dir) {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    fsync(fd);
    close(fd);
}

// Puts the complete `staging` file or folder at the target: into a free name, or (overwrite) in
// place of what may be replaced, which is removed only once the new one has the name. `*kept` is
// set when something that is not ours ended up at `staging` and must not be removed.
Status place(const std::string& staging, const Target& t, bool overwrite, bool folder, bool* kept) {
    for (int attempt = 0; attempt < 4; ++attempt) {
        int err = rename_noreplace(staging, t.path, folder);
        if (err == 0) {
            sync_folder(t.dir);
            return {};
        }
        if (err != EEXIST && err != ENOTEMPTY)
            return io(fmt::format("cannot rename {} to {}: {}", staging, t.given, std::strerror(err)));
        if (!overwrite)
            return usage(fmt::format("{} already exists (it appeared while this output was being written); it was left "
                                     "as it is and this output was discarded. Choose another name or allow "
                                     "overwriting (--force)", t.given));
        if (Status s = replaceable(t.path, t, folder); !s) return s;
        std::string old;
        err = swap_in(staging, t, folder, &old);
        if (err == ENOENT && old.empty()) continue;  // it went away meanwhile: take the free name
        if (err != 0) {
            if (old.empty()) return io(fmt::format("cannot replace {}: {}", t.given, std::strerror(err)));
            return io(fmt::format("cannot replace {}: {}; the earlier version is now {}", t.given, std::strerror(err), old));
        }
        // Something else may have taken the name between the check and the swap: what came out
        // is checked again, and put back if it is not ours to replace.
        if (Status s = replaceable(old, t, folder); !s) {
            if (!swap_back(staging, t, folder, old)) {
                *kept = true;
                return io(fmt::format("{} changed while it was being replaced; what was there is now {}", t.given, old));
            }
            return s;
        }
        std::error_code ec;
        if (folder) fs::remove_all(old, ec);
        else unlink(old.c_str());
        sync_folder(t.dir);
        return {};
    }
    return io(fmt::format("{} keeps changing while it is being written; try again", t.given));
}

}  // namespace

PathKind path_kind(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) return kind_of_mode(st.st_mode);
    struct stat lst {};
    if (lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) return PathKind::kBrokenLink;
    return PathKind::kMissing;
}

const char* path_kind_name(PathKind kind) {
    switch (kind) {
        case PathKind::kMissing: return "missing";
        case PathKind::kRegular: return "a regular file";
        case PathKind::kDirectory: return "a folder";
        case PathKind::kFifo: return "a FIFO (named pipe)";
        case PathKind::kCharDevice: return "a character device";
        case PathKind::kBlockDevice: return "a block device";
        case PathKind::kSocket: return "a socket";
        case PathKind::kBrokenLink: return "a symbolic link to nothing";
        case PathKind::kSymlink: return "a symbolic link";
        case PathKind::kOther: return "a special file";
    }
    return "unknown";
}

Status check_file_target(const std::string& path, bool overwrite) {
    auto t = resolve(path, false);
    if (!t) return t.error();
    return check_file(t.value(), overwrite);
}

Status check_folder_target(const std::string& path, bool overwrite) {
    auto t = resolve(path, true);
    if (!t) return t.error();
    return check_folder(t.value(), overwrite);
}

// ---- files -------------------------------------------------------------------------------------

Result<std::unique_ptr<StagedFile>> StagedFile::create(const std::string& path, bool overwrite) {
    auto resolved = resolve(path, false);
    if (!resolved) return resolved.error();
    const Target& t = resolved.value();
    if (Status s = check_file(t, overwrite); !s) return s.error();
    remove_stale_staging(t);

    std::unique_ptr<StagedFile> f(new StagedFile);
    f->given_ = path;
    f->target_ = t.path;
    f->overwrite_ = overwrite;
    f->staging_ = new_staging_path(t);
    const int fd = open(f->staging_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return io(fmt::format("cannot create {}: {}; check that the folder {} is writable", f->staging_,
                              std::strerror(errno), t.dir));
    struct stat old {};
    if (t.kind == PathKind::kRegular && stat(t.path.c_str(), &old) == 0) fchmod(fd, old.st_mode & 07777);  // keep its permissions
    f->file_ = fdopen(fd, "wb");
    if (!f->file_) {
        const int err = errno;
        close(fd);
        unlink(f->staging_.c_str());
        return io(fmt::format("cannot write {}: {}", f->staging_, std::strerror(err)));
    }
    return f;
}

StagedFile::~StagedFile() {
    if (file_) std::fclose(file_);
    if (!committed_ && !kept_) unlink(staging_.c_str());
}

Status StagedFile::commit() {
    if (!file_) return make_error(ErrorCode::kInternal, "StagedFile committed twice");
    bool ok = !std::ferror(file_) && std::fflush(file_) == 0 && fsync(fileno(file_)) == 0;
    int err = errno;
    if (std::fclose(file_) != 0 && ok) ok = false, err = errno;
    file_ = nullptr;
    if (!ok) return io(fmt::format("writing {} failed: {}", given_, std::strerror(err)));
    if (Status s = place(staging_, target_of(given_, target_), overwrite_, false, &kept_); !s) return s;
    committed_ = true;
    return {};
}

Status write_file_safely(const std::string& path, std::string_view bytes, bool overwrite) {
    auto f = StagedFile::create(path, overwrite);
    if (!f) return f.error();
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f.value()->file()) != bytes.size())
        return io(fmt::format("writing {} failed: {}", path, std::strerror(errno)));
    return f.value()->commit();
}

Result<std::FILE*> open_for_append(const std::string& path) {
    auto resolved = resolve(path, false);
    if (!resolved) return resolved.error();
    if (Status s = check_file(resolved.value(), true); !s) return s.error();
    // O_NONBLOCK: a FIFO put there since the check fails to open instead of waiting for a reader.
    const int fd = open(resolved.value().path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) return io(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return usage(fmt::format("{} is not a regular file; nothing was written to it", path));
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::FILE* f = fdopen(fd, "a");
    if (!f) {
        close(fd);
        return io(fmt::format("cannot open {}: {}", path, std::strerror(errno)));
    }
    return f;
}

// ---- folders -----------------------------------------------------------------------------------

namespace {

std::string marker_text(const std::vector<std::string>& files) {
    nlohmann::ordered_json m;
    m["format"] = kMarkerFormat;
    m["version"] = 1;
    m["files"] = files;
    return m.dump(1) + "\n";
}

}  // namespace

Result<std::unique_ptr<StagedFolder>> StagedFolder::create(const std::string& path, bool overwrite) {
    auto resolved = resolve(path, true);
    if (!resolved) return resolved.error();
    const Target& t = resolved.value();
    if (Status s = check_folder(t, overwrite); !s) return s.error();
    remove_stale_staging(t);

    std::unique_ptr<StagedFolder> f(new StagedFolder);
    f->given_ = path;
    f->target_ = t.path;
    f->overwrite_ = overwrite;
    f->staging_ = new_staging_path(t);
    if (mkdir(f->staging_.c_str(), 0777) != 0)
        return io(fmt::format("cannot create {}: {}; check that the folder {} is writable", f->staging_,
                              std::strerror(errno), t.dir));
    // The marker first: a staging folder left by a killed process is then recognisably ours.
    if (Status s = write_file_safely((fs::path(f->staging_) / kFolderMarkerName).string(), marker_text({}), false); !s)
        return s.error();  // the destructor removes the staging folder
    return f;
}

StagedFolder::~StagedFolder() {
    if (committed_ || kept_) return;
    std::error_code ec;
    if (read_marker(staging_) || is_empty_folder(staging_)) fs::remove_all(staging_, ec);
}

Status StagedFolder::write_file(const std::string& name, const std::function<Status(std::FILE*)>& write) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." || name == kFolderMarkerName ||
        name.find(kStagingTag) != std::string::npos)
        return make_error(ErrorCode::kInternal, fmt::format("{}: not a file name of its own in a folder", name));
    const std::string path = (fs::path(staging_) / name).string();
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return io(fmt::format("cannot create {}: {}", path, std::strerror(errno)));
    std::FILE* f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        return io(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
    Status s = write(f);
    const bool ok = !std::ferror(f);
    const int err = errno;
    if (std::fclose(f) != 0 && s && ok) return io(fmt::format("writing {} failed: {}", path, std::strerror(errno)));
    if (!s) return s;
    if (!ok) return io(fmt::format("writing {} failed: {}", path, std::strerror(err)));
    return {};
}

Status StagedFolder::commit() {
    if (committed_) return make_error(ErrorCode::kInternal, "StagedFolder committed twice");
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::directory_iterator it(staging_, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name != kFolderMarkerName) files.push_back(name);
    }
    if (ec) return io(fmt::format("cannot list {}: {}", staging_, ec.message()));
    std::sort(files.begin(), files.end());
    if (Status s = write_file_safely((fs::path(staging_) / kFolderMarkerName).string(), marker_text(files), true); !s)
        return s;
    // The files were written without a sync each; one syncfs covers them all before the swap.
    if (const int fd = open(staging_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
        const bool synced = syncfs(fd) == 0;
        const int err = errno;
        close(fd);
        if (!synced) return io(fmt::format("writing {} failed: {}", given_, std::strerror(err)));
    }
    if (Status s = place(staging_, target_of(given_, target_), overwrite_, true, &kept_); !s) return s;
    committed_ = true;
    return {};
}

void safe_write_use_portable_renames(bool on) { g_portable_renames = on; }

}  // namespace ls
