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

namespace ls::remote {
namespace fs = std::filesystem;

std::string default_token_path() {
    const char* xdg = std::getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg) return std::string(xdg) + "/layerscope/serve-token";
    const char* home = std::getenv("HOME");
    return std::string(home && *home ? home : ".") + "/.config/layerscope/serve-token";
}

namespace {

Result<std::string> read_checked(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return make_error(ErrorCode::kBadInput, fmt::format("cannot open the token file {}: {}", path, std::strerror(errno)));
    struct stat st {};
    std::string token;
    Status status;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        status = make_error(ErrorCode::kBadInput, fmt::format("the token file {} is not a regular file", path));
    } else if ((st.st_mode & 077) != 0) {
        status = make_error(ErrorCode::kBadInput,
                            fmt::format("the token file {} may be read or written by others (mode {:04o}); run: chmod 600 {}",
                                        path, st.st_mode & 07777, path));
    } else if (st.st_size > 1024) {
        status = make_error(ErrorCode::kBadInput, fmt::format("the token file {} holds {} bytes; a token is at most 1024",
                                                              path, static_cast<long long>(st.st_size)));
    } else {
        token.resize(static_cast<size_t>(st.st_size));
        const ssize_t n = ::read(fd, token.data(), token.size());
        if (n != static_cast<ssize_t>(token.size()))
            status = make_error(ErrorCode::kBadInput, fmt::format("cannot read the token file {}", path));
    }
    ::close(fd);
    if (!status) return status.error();
    while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (token.size() < 16)
        return make_error(ErrorCode::kBadInput, fmt::format("the token file {} holds a token of {} characters; at least 16 "
                                                            "are needed (delete it and the server makes a new one)",
                                                            path, token.size()));
    return token;
}

}  // namespace

Result<std::string> load_or_create_token(const std::string& path, bool* created) {
    if (created) *created = false;
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() != fs::file_type::not_found) return read_checked(path);
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty() && !fs::exists(parent, ec)) {
        fs::create_directories(parent, ec);
        if (ec) return make_error(ErrorCode::kIo, fmt::format("cannot make the folder {} for the token: {}", parent.string(), ec.message()));
        fs::permissions(parent, fs::perms::owner_all, ec);
    }
    unsigned char raw[32];
    if (RAND_bytes(raw, sizeof raw) != 1) return make_error(ErrorCode::kInternal, "OpenSSL could not generate a random token");
    std::string token;
    for (unsigned char b : raw) token += fmt::format("{:02x}", b);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return make_error(ErrorCode::kIo, fmt::format("cannot create the token file {}: {}", path, std::strerror(errno)));
    const std::string line = token + "\n";
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) && ::fsync(fd) == 0;
    ::close(fd);
    if (!written) {
        ::unlink(path.c_str());
        return make_error(ErrorCode::kIo, fmt::format("cannot write the token file {}", path));
    }
    if (created) *created = true;
    return token;
}

Result<std::string> read_token(const std::string& path) {
    std::error_code ec;
    if (fs::symlink_status(path, ec).type() == fs::file_type::not_found)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("no token file at {}: copy the server's (`layerscope serve` prints where it is) "
                                      "to this path with mode 0600, or give --token-file", path));
    return read_checked(path);
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

Result<std::string> Roots::resolve_input(const std::string& path) const {
    if (path.empty()) return make_error(ErrorCode::kUsage, "an empty path");
    const fs::path given(path);
    const fs::path full = given.is_absolute() ? given : fs::path(folders_.front()) / given;
    std::error_code ec;
    const fs::path canonical = fs::canonical(full, ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("{}: {} on the server", path, ec.message()));
    const std::string c = canonical.string();
    for (const std::string& root : folders_) {
        if (c == root || (c.size() > root.size() && c.compare(0, root.size(), root) == 0 &&
                          (root.back() == '/' || c[root.size()] == '/')))
            return c;
    }
    std::string list;
    for (const std::string& root : folders_) list += (list.empty() ? "" : ", ") + root;
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{} is outside the folders this server reads ({}); the server's --root decides them", path, list));
}

}  // namespace ls::remote
