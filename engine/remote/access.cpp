#include "engine/remote/access.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "engine/remote/tls.h"

namespace ls::remote {
namespace fs = std::filesystem;

std::string default_token_path() {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) return std::string(xdg) + "/layerscope/serve-token";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.config/layerscope/serve-token";
}

Result<std::string> read_private_file(const std::string& path, const char* what, size_t max_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return make_error(ErrorCode::kBadInput, fmt::format("cannot open the {} file {}: {}", what, path, std::strerror(errno)));
    struct stat st {};
    std::string content;
    Status status;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        status = make_error(ErrorCode::kBadInput, fmt::format("the {} file {} is not a regular file", what, path));
    } else if ((st.st_mode & 077) != 0) {
        status = make_error(ErrorCode::kBadInput,
                            fmt::format("the {} file {} may be read or written by others (mode {:04o}); run: chmod 600 {}",
                                        what, path, st.st_mode & 07777, path));
    } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        status = make_error(ErrorCode::kBadInput, fmt::format("the {} file {} holds {} bytes; at most {} are expected", what,
                                                              path, static_cast<long long>(st.st_size), max_bytes));
    } else {
        content.resize(static_cast<size_t>(st.st_size));
        const ssize_t n = ::read(fd, content.data(), content.size());
        if (n != static_cast<ssize_t>(content.size()))
            status = make_error(ErrorCode::kBadInput, fmt::format("cannot read the {} file {}", what, path));
    }
    ::close(fd);
    if (!status) return status.error();
    return content;
}

Status create_private_file(const std::string& path, const std::string& content, const char* what) {
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::exists(parent, ec)) {
        fs::create_directories(parent, ec);
        if (ec) return make_error(ErrorCode::kIo, fmt::format("cannot make the folder {} for the {}: {}", parent.string(), what, ec.message()));
        fs::permissions(parent, fs::perms::owner_all, ec);
    }
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return make_error(ErrorCode::kIo, fmt::format("cannot create the {} file {}: {}", what, path, std::strerror(errno)));
    const bool written = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
        ::unlink(path.c_str());
        return make_error(ErrorCode::kIo, fmt::format("cannot write the {} file {}", what, path));
    }
    return {};
}

namespace {

// The token file: the token on its first line; then, for a server that speaks TLS, a line
// "tls-sha256 <its certificate's fingerprint>".
Result<Credentials> parse_token_file(const std::string& path, const std::string& content) {
    Credentials c;
    size_t line_no = 0;
    for (size_t pos = 0; pos < content.size();) {
        size_t end = content.find('\n', pos);
        if (end == std::string::npos) end = content.size();
        std::string line = content.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
        if (line.empty()) continue;
        if (c.token.empty() && line_no == 1) {
            c.token = line;
        } else if (line.rfind("tls-sha256 ", 0) == 0 && is_sha256_hex(line.substr(11))) {
            c.tls_sha256 = line.substr(11);
        } else {
            return make_error(ErrorCode::kBadInput,
                              fmt::format("the token file {}, line {}: expected \"tls-sha256\" and 64 lowercase hex digits", path, line_no));
        }
    }
    if (c.token.size() < 16)
        return make_error(ErrorCode::kBadInput, fmt::format("the token file {} holds a token of {} characters on its first line; "
                                                            "at least 16 are needed (delete it and the server makes a new one)",
                                                            path, c.token.size()));
    return c;
}

Result<Credentials> read_checked(const std::string& path) {
    auto content = read_private_file(path, "token", 1024);
    if (!content) return content.error();
    return parse_token_file(path, content.value());
}

}  // namespace

Result<std::string> load_or_create_token(const std::string& path, bool* created) {
    if (created) *created = false;
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) {
        auto c = read_checked(path);
        if (!c) return c.error();
        return c.value().token;
    }
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) return make_error(ErrorCode::kInternal, "OpenSSL could not generate a random token");
    std::string token;
    for (unsigned char b : raw) token += fmt::format("{:02x}", b);
    if (Status s = create_private_file(path, token + "\n", "token"); !s) return s.error();
    if (created) *created = true;
    return token;
}

Result<Credentials> read_credentials(const std::string& path) {
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() == fs::file_type::not_found)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("no token file at {}: copy the server's (`layerscope serve` prints where it is) "
                                      "to this path with mode 0600, or give --token-file", path));
    return read_checked(path);
}

Result<std::string> read_token(const std::string& path) {
    auto c = read_credentials(path);
    if (!c) return c.error();
    return c.value().token;
}

Status record_tls_fingerprint(const std::string& path, const std::string& sha256) {
    auto c = read_checked(path);
    if (!c) return c.error();
    if (c.value().tls_sha256 == sha256) return {};
    // A new file beside the old one, renamed over it: the token is never missing from the path.
    // (Not StagedFile: its staging file takes the umask's mode, and this one holds the token.)
    const std::string staging = fmt::format("{}.layerscope-staging.{}", path, ::getpid());
    ::unlink(staging.c_str());
    if (Status s = create_private_file(staging, fmt::format("{}\ntls-sha256 {}\n", c.value().token, sha256), "token"); !s) return s;
    if (::rename(staging.c_str(), path.c_str()) != 0) {
        const int e = errno;
        ::unlink(staging.c_str());
        return make_error(ErrorCode::kIo, fmt::format("cannot update the token file {}: {}", path, std::strerror(e)));
    }
    return {};
}

bool tokens_equal(const std::string& a, const std::string& b) {
    unsigned char da[SHA256_DIGEST_LENGTH], db[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(a.data()), a.size(), da);
    SHA256(reinterpret_cast<const unsigned char*>(b.data()), b.size(), db);
    return CRYPTO_memcmp(da, db, sizeof da) == 0;
}

Result<Roots> Roots::make(const std::vector<std::string>& folders) {
    Roots roots;
    for (const std::string& f : folders) {
        std::error_code ec;
        const fs::path canonical = fs::canonical(f, ec);
        if (ec || !fs::is_directory(canonical, ec))
            return make_error(ErrorCode::kUsage, fmt::format("--root {}: not a folder ({})", f, ec ? ec.message() : "not a directory"));
        roots.folders_.push_back(canonical.string());
    }
    if (roots.folders_.empty()) {
        std::error_code ec;
        roots.folders_.push_back(fs::current_path(ec).string());
    }
    return roots;
}

bool Roots::inside(const std::string& c) const {
    for (const std::string& root : folders_)
        if (c == root || (c.size() > root.size() && c.compare(0, root.size(), root) == 0 &&
                          (root.back() == '/' || c[root.size()] == '/')))
            return true;
    return false;
}

std::string Roots::list() const {
    std::string list;
    for (const std::string& root : folders_) list += (list.empty() ? "" : ", ") + root;
    return list;
}

Result<std::string> Roots::resolve_input(const std::string& path) const {
    if (path.empty()) return make_error(ErrorCode::kUsage, "an empty path");
    const fs::path given(path);
    const fs::path full = given.is_absolute() ? given : fs::path(folders_.front()) / given;
    std::error_code ec;
    const fs::path canonical = fs::canonical(full, ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("{}: {} on the server", path, ec.message()));
    if (inside(canonical.string())) return canonical.string();
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{} is outside the folders this server reads ({}); the server's --root decides them", path, list()));
}

Result<std::string> Roots::resolve_output(const std::string& path) const {
    if (path.empty()) return make_error(ErrorCode::kUsage, "an empty path");
    const fs::path given(path);
    const fs::path full = (given.is_absolute() ? given : fs::path(folders_.front()) / given).lexically_normal();
    const std::string name = full.filename().string();
    if (name.empty() || name == "." || name == "..")
        return make_error(ErrorCode::kUsage, fmt::format("{}: name a file or a folder to write, not a folder above", path));
    std::error_code ec;
    const fs::path folder = fs::canonical(full.parent_path(), ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("{}: its folder: {} on the server", path, ec.message()));
    if (!inside(folder.string()))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is outside the folders this server writes ({}); the server's --root decides them", path, list()));
    return (folder / name).string();
}

}  // namespace ls::remote
