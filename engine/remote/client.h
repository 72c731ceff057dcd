// The client side of a headless command run on a server: sends it, prints its output as it
// comes, and writes the output files it sends back where the user asked, each through a staging
// name renamed into place only once the command has finished (a cut connection leaves nothing).
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/remote/wire.h"
#include "engine/util/result.h"

namespace ls::remote {

struct ClientTarget {
    std::string path;     // on this machine
    bool folder = false;  // a folder of files (written as StagedFolder writes one)
    bool overwrite = false;
};

struct ExecOutcome {
    int exit_code = 0;
    uint64_t bytes_sent = 0, bytes_received = 0;
};

struct ClientOptions {
    std::chrono::milliseconds connect_timeout{10000};
    // Without a message for this long (the server pings every 5 s while a command is quiet), the
    // connection counts as lost.
    std::chrono::milliseconds silence_timeout{30000};
    // The server's TLS certificate fingerprint (the token file's tls-sha256 line): TLS, pinned to
    // it. Empty: plain, which only a loopback address may be (an SSH tunnel's end, say).
    std::string tls_sha256;
};

class Connection;

// Connects to `address` and presents `token`: the connection once the server has welcomed it,
// or why not (refused: wrong token, busy, another protocol version; nothing listening).
Result<std::unique_ptr<Connection>> connect_and_hello(const std::string& address, const std::string& token,
                                                      const ClientOptions& options);

// Runs `exec` on the server at `address`; the command's stdout and stderr go to `out` and `err`.
// `uploads` (a local file or folder, and its name) go first: the command's arguments call them
// "upload:NAME", and the server removes them when the connection ends.
// Errors (kBadInput): the connection refused or lost, the token refused, a malformed stream.
Result<ExecOutcome> remote_exec(const std::string& address, const std::string& token, const Exec& exec,
                                const std::vector<ClientTarget>& targets, std::FILE* out, std::FILE* err,
                                const ClientOptions& options = {},
                                const std::vector<std::pair<std::string, std::string>>& uploads = {});

// The name an upload of `local_path` goes by: its base name.
std::string upload_name(const std::string& local_path);
// Sends a file, or a folder's files (one level: a .npy reference), over `c` as `name` ("NAME/FILE"
// for a folder's), for session `session` (0: for this connection's commands). Each file waits for
// the server's go-ahead before its bytes, and for its answer after them.
Status upload_path(Connection& c, uint64_t session, const std::string& local_path, const std::string& name,
                   const std::function<void(uint64_t sent, uint64_t total)>& progress, std::chrono::milliseconds timeout);

}  // namespace ls::remote
