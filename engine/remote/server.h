// `layerscope serve`'s core: accepts connections, checks each one's token, and runs the headless
// commands clients send as child processes, relaying their output as it comes and their output
// files (zstd-compressed) when they finish. Each connection has a thread of its own; a client
// that goes away mid-command has its command stopped and its scratch files removed, and the server
// goes on serving the others.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/remote/access.h"
#include "engine/remote/wire.h"

namespace ls::remote {

// What a command writes on the server for the client's output N: a file or a folder of files.
struct ExecOutput {
    std::string path;
    bool folder = false;
};

// How the server runs a client's Exec, or why it will not.
struct ExecPlan {
    std::vector<std::string> argv;  // argv[0]: the program
    std::string cwd;
    std::vector<std::string> env;  // NAME=VALUE added to the server's environment
    std::vector<ExecOutput> outputs;
    // A refusal instead: the command's exit code and its stderr line.
    int refuse_code = 0;
    std::string refuse_message;
};
// `scratch` is a new folder for this command's outputs, removed afterwards.
using ExecPolicy = std::function<ExecPlan(const Exec& exec, const Roots& roots, const std::string& scratch)>;

struct ServerOptions {
    std::string listen = "127.0.0.1:7070";
    std::string token;
    // The key and certificate (engine/remote/tls.h) when connections speak TLS; empty: plain,
    // which only a loopback address may be.
    std::string tls_identity_pem;
    Roots roots;
    ExecPolicy policy;
    std::string name = "layerscope";  // sent in the welcome
    int max_connections = 8;
    int max_sessions = 4;  // live sessions held at once (each holds a model)
    // Bytes of files a session's clients may upload (references), kept until the session closes.
    uint64_t max_upload_bytes = uint64_t{64} << 30;
    std::chrono::milliseconds hello_timeout{10000};  // to present the token
    std::chrono::milliseconds idle_timeout{600000};  // between commands
    std::chrono::milliseconds ping_interval{5000};   // while a command is quiet
    std::function<void(const std::string&)> log = [](const std::string&) {};
};

class Server {
public:
    // Binds the address; refuses an empty token, and a non-loopback address without TLS.
    static Result<std::unique_ptr<Server>> start(ServerOptions options);
    ~Server();  // stops and joins every connection's thread
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;

    std::string address() const;  // as bound: "127.0.0.1:40123"
    void run();                   // accepts until stop()
    void stop();                  // from any thread (a signal handler's thread included)

    struct State;

private:
    explicit Server(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
};

}  // namespace ls::remote
