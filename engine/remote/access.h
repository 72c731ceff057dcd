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
// The client's copy: the same checks, never created.
Result<std::string> read_token(const std::string& path);

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

private:
    std::vector<std::string> folders_;
};

}  // namespace ls::remote
