// Who may talk to a server and what it may read: the shared token (a file of mode 0600 on both
// machines) and the folders the server was started with.
#pragma once

#include <string>
#include <vector>

#include "engine/util/result.h"

namespace ls::remote {

// $XDG_CONFIG_HOME/layerscope/serve-token, or ~/.config/layerscope/serve-token.
std::string default_token_path();

// The server's token: read from `path`, or, when nothing is there, 32 random bytes (OpenSSL's
// RAND_bytes) written as hex to a new file of mode 0600 (its folder made 0700). Refuses a file
// that others may read or write, that is not a regular file, or whose token is shorter than 16
// characters.
Result<std::string> load_or_create_token(const std::string& path, bool* created = nullptr);
// What a client needs: the token (the file's first line) and, for a server that speaks TLS, its
// certificate's SHA-256 fingerprint (a line "tls-sha256 <64 hex digits>"; empty: no TLS).
struct Credentials {
    std::string token;
    std::string tls_sha256;
};
// The client's copy: the same checks, never created.
Result<Credentials> read_credentials(const std::string& path);
Result<std::string> read_token(const std::string& path);
// Puts "tls-sha256 <sha256>" in the token file (the server's, when it speaks TLS), keeping the
// token; the file is replaced by rename, so it is never found without its token.
Status record_tls_fingerprint(const std::string& path, const std::string& sha256);

// A file only its owner may read: refused when it is not a regular file, when others may read
// or write it (the message says how to fix it) or when it holds more than `max_bytes`. `what`
// names it in messages ("token").
Result<std::string> read_private_file(const std::string& path, const char* what, size_t max_bytes);
// A new file of mode 0600 holding `content` (its folder made 0700 when missing); never replaces
// anything.
Status create_private_file(const std::string& path, const std::string& content, const char* what);

// Equal tokens, in time that does not depend on where they differ or on their lengths (both are
// hashed with SHA-256 and the digests compared with CRYPTO_memcmp).
bool tokens_equal(const std::string& a, const std::string& b);

// The folders a server reads inputs from. Paths are canonical (symbolic links resolved), so a
// link inside a root that points outside it is outside.
class Roots {
public:
    static Result<Roots> make(const std::vector<std::string>& folders);
    const std::vector<std::string>& folders() const { return folders_; }
    // `path` (absolute, or relative to the first root) as a canonical path inside a root;
    // refused (kBadInput) when it does not exist or lies outside every root.
    Result<std::string> resolve_input(const std::string& path) const;
    // Where the server may write `path` (absolute, or relative to the first root): its folder
    // exists and lies inside a root (links resolved) and its name is a plain name. The canonical
    // folder joined with the name; refused (kBadInput) otherwise.
    Result<std::string> resolve_output(const std::string& path) const;

private:
    bool inside(const std::string& canonical) const;
    std::string list() const;
    std::vector<std::string> folders_;
};

}  // namespace ls::remote
