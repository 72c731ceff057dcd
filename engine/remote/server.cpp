#include "engine/remote/server.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "engine/compare/reference.h"
#include "engine/remote/connection.h"
#include "engine/remote/connection_impl.h"
#include "engine/remote/session_wire.h"
#include "engine/session/session.h"

extern char** environ;

namespace ls::remote {
namespace fs = std::filesystem;

struct Server::State {
    ServerOptions opt;
    asio::io_context io;
    asio::ip::tcp::acceptor acceptor{io};
    std::shared_ptr<TlsContext> tls;  // null: plain connections
    std::string address;
    struct Worker {
        std::thread thread;
        std::shared_ptr<Connection> connection;
        std::atomic<bool> done{false};
    };
    std::mutex mu;
    std::list<Worker> workers;  // guarded by mu
    std::atomic<bool> stopping{false};
    std::unique_ptr<Connection::Impl> pending;  // the socket the next accept fills

    // Live sessions outlive their connections: a client that reconnects attaches to its own.
    struct Held {
        uint64_t id = 0;
        std::unique_ptr<Session> session;
        Opened opened;
        bool attached = false;  // guarded by sessions_mu: one connection at a time
    };
    std::mutex sessions_mu;
    std::map<uint64_t, std::shared_ptr<Held>> sessions;  // guarded by sessions_mu
    uint64_t next_session = 1;                            // guarded by sessions_mu

    void accept_next();
    void serve(const std::shared_ptr<Connection>& c, bool busy);
    bool serve_exec(Connection& c, const Exec& exec);
    // Opens a session (or says why not, as a CommandDone with the error); then serves it.
    bool open_session(Connection& c, const Open& open);
    bool attach_session(Connection& c, uint64_t id);
    // Commands and fetches in, snapshot deltas out, until the client closes the session (true) or
    // goes away (false).
    bool serve_session(Connection& c, const std::shared_ptr<Held>& held);
    std::string run_command(Held& held, const Command& command, uint64_t* ticket, bool* close);
    bool send_tensor(Connection& c, const SessionSnapshot& snap, int64_t index);
    // Joins the threads of finished connections; the number still open.
    size_t reap();
};

namespace {

// A folder of its own for one command's outputs, removed with what is in it.
struct Scratch {
    std::string path;
    Scratch() {
        const char* tmp = std::getenv("TMPDIR");
        std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/layerscope-serve-XXXXXX";
        if (::mkdtemp(pattern.data())) path = pattern;
    }
    ~Scratch() {
        std::error_code ec;
        if (!path.empty()) fs::remove_all(path, ec);
    }
};

struct Child {
    pid_t pid = -1;
    int out = -1, err = -1;
};

Result<Child> spawn(const ExecPlan& plan) {
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return make_error(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(err, O_CLOEXEC) != 0) {
        ::close(out[0]), ::close(out[1]);
        return make_error(ErrorCode::kInternal, std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);  // no socket of the server's, no other pipe
    if (!plan.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, plan.cwd.c_str());
    std::vector<char*> argv;
    for (const std::string& a : plan.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (char** e = environ; *e; ++e) env.push_back(*e);
    for (const std::string& e : plan.env) env.push_back(const_cast<char*>(e.c_str()));
    env.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]), ::close(err[1]);
    if (rc != 0) {
        ::close(out[0]), ::close(err[0]);
        return make_error(ErrorCode::kInternal, fmt::format("cannot start {}: {}", plan.argv[0], std::strerror(rc)));
    }
    return Child{pid, out[0], err[0]};
}

int wait_exit(pid_t pid, std::string* note) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) *note = fmt::format("the command was killed by signal {} on the server\n", WTERMSIG(status));
    return 3;
}

// The output files of a finished command: a file output's one file (name ""), a folder output's
// regular files (the folder's own marker left out: the client writes its own).
std::vector<std::pair<std::string, std::string>> output_files(const ExecOutput& output) {
    std::vector<std::pair<std::string, std::string>> files;
    std::error_code ec;
    if (!output.folder) {
        if (fs::is_regular_file(fs::symlink_status(output.path, ec))) files.emplace_back("", output.path);
        return files;
    }
    for (const auto& entry : fs::directory_iterator(output.path, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(".layerscope", 0) == 0 || !entry.is_regular_file(ec) || entry.is_symlink(ec)) continue;
        files.emplace_back(name, entry.path().string());
    }
    std::sort(files.begin(), files.end());
    return files;
}

Status send_file(Connection& c, uint32_t output, const std::string& name, const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) return make_error(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    Status s = c.send(MsgType::kFileBegin, encode(FileBegin{output, name, size}));
    std::string buffer(kChunkBytes, '\0');
    uint64_t sent = 0;
    while (s && sent < size) {
        const size_t n = std::fread(buffer.data(), 1, buffer.size(), f);
        if (n == 0) break;
        sent += n;
        s = c.send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(std::string_view(buffer.data(), n))}));
    }
    std::fclose(f);
    if (s) s = c.send(MsgType::kFileEnd, {});
    return s;
}

}  // namespace

void Server::State::accept_next() {
    // Each connection has its own io_context (its thread's): the socket is accepted onto it.
    pending = std::make_unique<Connection::Impl>();
    acceptor.async_accept(pending->socket, [this](const asio::error_code& ec) {
        if (ec) {
            if (!stopping && ec != asio::error::operation_aborted) {
                opt.log(fmt::format("accept failed: {}", ec.message()));
                accept_next();
            }
            return;
        }
        std::unique_ptr<Connection::Impl> impl = std::move(pending);
        set_cloexec(impl->socket.native_handle());
        asio::error_code e;
        impl->peer = endpoint_text(impl->socket.remote_endpoint(e));
        impl->socket.set_option(asio::ip::tcp::no_delay(true), e);
        auto connection = std::make_shared<Connection>(std::move(impl));
        const bool busy = reap() >= static_cast<size_t>(opt.max_connections);
        {
            std::lock_guard<std::mutex> lock(mu);
            Worker& w = workers.emplace_back();
            w.connection = connection;
            w.thread = std::thread([this, busy, &w] {
                std::shared_ptr<Connection> c;
                {
                    std::lock_guard<std::mutex> hold(mu);
                    c = w.connection;
                }
                serve(c, busy);
                {
                    std::lock_guard<std::mutex> hold(mu);
                    w.connection.reset();
                }
                c.reset();  // the socket closes now, not when the thread is reaped
                w.done = true;
            });
        }
        if (!stopping) accept_next();
    });
}

size_t Server::State::reap() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = workers.begin(); it != workers.end();) {
        if (it->done) {
            it->thread.join();
            it = workers.erase(it);
        } else {
            ++it;
        }
    }
    return workers.size();
}

void Server::State::serve(const std::shared_ptr<Connection>& c, bool busy) {
    const std::string& peer = c->peer();
    auto refuse = [&](const std::string& reason) {
        opt.log(fmt::format("{}: refused: {}", peer, reason));
        (void)c->send(MsgType::kRefused, encode(Refused{reason}), std::chrono::seconds(5));
    };
    if (tls) {
        if (Status s = c->accept_tls(tls, opt.hello_timeout); !s) {
            opt.log(fmt::format("{}: refused: {}", peer, s.error().message));
            return;
        }
    }
    auto first = c->receive(kMaxHelloBytes, opt.hello_timeout);
    if (!first) {
        opt.log(fmt::format("{}: dropped before presenting a token: {}", peer, first.error().message));
        return;
    }
    if (first.value().type != MsgType::kHello) return refuse(fmt::format("the first message must be a hello, not {}", msg_type_name(first.value().type)));
    auto hello = decode_hello(first.value().payload);
    if (!hello) return refuse(hello.error().message);
    if (!tokens_equal(hello.value().token, opt.token)) return refuse("wrong token");
    if (hello.value().version != kProtocolVersion)
        return refuse(fmt::format("protocol version {}; this server speaks version {}: use the same Layerscope release on "
                                  "both sides", hello.value().version, kProtocolVersion));
    if (busy) return refuse(fmt::format("busy: {} connections are open (--max-connections)", opt.max_connections));
    Welcome welcome;
    welcome.server = opt.name;
    welcome.roots = opt.roots.folders();
    if (!c->send(MsgType::kWelcome, encode(welcome))) return;
    opt.log(fmt::format("{}: connected", peer));
    while (!stopping) {
        auto frame = c->receive(kMaxFrameBytes, opt.idle_timeout);
        if (!frame) {
            const std::string& why = frame.error().message;
            opt.log(why.find("the other side closed the connection") != std::string::npos ? fmt::format("{}: disconnected", peer)
                                                                                            : fmt::format("{}: dropped: {}", peer, why));
            return;
        }
        const MsgType type = frame.value().type;
        if (type == MsgType::kExec) {
            auto exec = decode_exec(frame.value().payload);
            if (!exec) return refuse(exec.error().message);
            if (!serve_exec(*c, exec.value())) return;
        } else if (type == MsgType::kOpen) {
            auto open = decode_open(frame.value().payload);
            if (!open) return refuse(open.error().message);
            if (!open_session(*c, open.value())) return;
        } else if (type == MsgType::kAttach) {
            auto attach = decode_attach(frame.value().payload);
            if (!attach) return refuse(attach.error().message);
            if (!attach_session(*c, attach.value().session)) return;
        } else {
            return refuse(fmt::format("unexpected {} message", msg_type_name(type)));
        }
    }
}

bool Server::State::serve_exec(Connection& c, const Exec& exec) {
    const std::string& peer = c.peer();
    const auto started = std::chrono::steady_clock::now();
    const uint64_t sent_before = c.bytes_sent();
    Scratch scratch;
    ExecPlan plan;
    if (scratch.path.empty()) {
        plan.refuse_code = 3;
        plan.refuse_message = fmt::format("layerscope {}: the server cannot make a scratch folder: {}", exec.command, std::strerror(errno));
    } else {
        plan = opt.policy(exec, opt.roots, scratch.path);
    }
    if (plan.refuse_code != 0) {
        opt.log(fmt::format("{}: {} refused: {}", peer, exec.command, plan.refuse_message));
        return c.send(MsgType::kOutput, encode(Output{2, plan.refuse_message + "\n"})) &&
               c.send(MsgType::kExit, encode(Exit{plan.refuse_code}));
    }
    auto child = spawn(plan);
    if (!child) {
        return c.send(MsgType::kOutput, encode(Output{2, fmt::format("layerscope {}: {}\n", exec.command, child.error().message)})) &&
               c.send(MsgType::kExit, encode(Exit{3}));
    }
    const Child ch = child.value();
    bool client_gone = false;
    pollfd fds[3] = {{ch.out, POLLIN, 0}, {ch.err, POLLIN, 0}, {c.native_handle(), POLLRDHUP, 0}};
    // Output goes line by line (a partial line when the command is quiet or ends), each output's
    // scratch path written as its placeholder: the client prints its own path there.
    std::string pending[2];
    auto flush = [&](int i, bool partial) {
        const size_t end = partial ? pending[i].size() : pending[i].rfind('\n') + 1;
        if (end == 0) return true;  // no complete line (rfind gave npos)
        std::string text = pending[i].substr(0, end);
        pending[i].erase(0, end);
        for (size_t k = 0; k < plan.outputs.size(); ++k) {
            const std::string& path = plan.outputs[k].path;
            for (size_t at = text.find(path); !path.empty() && at != std::string::npos; at = text.find(path, at))
                text.replace(at, path.size(), fmt::format("@out{}", k));
        }
        return static_cast<bool>(c.send(MsgType::kOutput, encode(Output{static_cast<uint8_t>(i + 1), std::move(text)})));
    };
    std::string buffer(64 << 10, '\0');
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        const int n = ::poll(fds, 3, static_cast<int>(opt.ping_interval.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n == 0) {
            if (!flush(0, true) || !flush(1, true) || !c.send(MsgType::kPing, {})) client_gone = true;
        }
        if (fds[2].revents != 0 || stopping) client_gone = true;
        for (int i = 0; i < 2 && !client_gone; ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) continue;
            const ssize_t got = ::read(fds[i].fd, buffer.data(), buffer.size());
            if (got > 0) {
                pending[i].append(buffer.data(), static_cast<size_t>(got));
                if (!flush(i, pending[i].size() > kChunkBytes)) client_gone = true;
            } else if (got == 0 || errno != EINTR) {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                if (!flush(i, true)) client_gone = true;
            }
        }
        if (client_gone) break;
    }
    for (int i = 0; i < 2; ++i)
        if (fds[i].fd >= 0) ::close(fds[i].fd);
    if (client_gone) ::kill(ch.pid, SIGKILL);
    std::string note;
    const int code = wait_exit(ch.pid, &note);
    if (client_gone) {
        opt.log(fmt::format("{}: went away during {}; the command was stopped", peer, exec.command));
        return false;
    }
    if (!note.empty() && !c.send(MsgType::kOutput, encode(Output{2, note}))) return false;
    for (size_t i = 0; i < plan.outputs.size(); ++i)
        for (const auto& [name, path] : output_files(plan.outputs[i]))
            if (Status s = send_file(c, static_cast<uint32_t>(i), name, path); !s) {
                opt.log(fmt::format("{}: {} output not sent: {}", peer, exec.command, s.error().message));
                return false;
            }
    if (!c.send(MsgType::kExit, encode(Exit{code}))) return false;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    opt.log(fmt::format("{}: {} exit {} ({:.2f} s, {} bytes sent)", peer, exec.command, code, seconds, c.bytes_sent() - sent_before));
    return true;
}

bool Server::State::open_session(Connection& c, const Open& open) {
    auto fail = [&](const std::string& why) {
        opt.log(fmt::format("{}: open refused: {}", c.peer(), why));
        return static_cast<bool>(c.send(MsgType::kCommandDone, encode(CommandDone{0, why})));
    };
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        if (sessions.size() >= static_cast<size_t>(opt.max_sessions))
            return fail(fmt::format("{} sessions are open on the server (at most {}); close one", sessions.size(), opt.max_sessions));
    }
    auto model = opt.roots.resolve_input(open.model);
    if (!model) return fail(model.error().message);
    // The reference first: the session evaluates ubatches as it did, and its prompt is the default.
    std::shared_ptr<const ReferenceDump> reference;
    if (!open.reference.empty()) {
        auto path = opt.roots.resolve_input(open.reference);
        if (!path) return fail(path.error().message);
        auto ref = ReferenceDump::open(path.value());
        if (!ref) return fail(ref.error().message);
        reference = std::move(ref.value());
    }
    SessionOptions so;
    so.backend = open.backend;
    if (!math_mode_from_name(open.mode, &so.forward.mode)) return fail("the mode must be exact or llama");
    if (open.capture_budget > 0) so.capture = CapturePolicy::memory_budget(open.capture_budget);
    if (reference && reference->n_ubatch() > 0) so.forward.n_ubatch = static_cast<int>(reference->n_ubatch());
    auto session = Session::open(model.value(), so);
    if (!session) return fail(session.error().message);
    auto held = std::make_shared<Held>();
    held->session = std::move(session.value());
    if (reference) held->session->set_reference(reference);
    if (!open.tokens.empty()) held->session->set_tokens(open.tokens);
    else if (open.prompt.empty() && reference) held->session->set_tokens(reference->prompt_tokens());
    else held->session->set_prompt(open.prompt, true, false);
    if (open.n_generate > 0) held->session->generate(open.n_generate);
    const ModelConfig& config = held->session->model().config();
    held->opened.model = fmt::format("{}: {}, {} layers, n_embd {}", open.model, config.arch_name, config.n_layer, config.n_embd);
    held->opened.backend = held->session->backend_description();
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        held->id = held->opened.session = next_session++;
        held->attached = true;
        sessions[held->id] = held;
    }
    opt.log(fmt::format("{}: session {} opened ({})", c.peer(), held->id, held->opened.model));
    return serve_session(c, held);
}

bool Server::State::attach_session(Connection& c, uint64_t id) {
    std::shared_ptr<Held> held;
    std::string why;
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        auto it = sessions.find(id);
        if (it == sessions.end()) why = fmt::format("no session {} on this server (it was closed, or the server restarted)", id);
        else if (it->second->attached) why = fmt::format("session {} is attached to another connection", id);
        else (held = it->second)->attached = true;
    }
    if (!held) {
        opt.log(fmt::format("{}: attach refused: {}", c.peer(), why));
        return static_cast<bool>(c.send(MsgType::kCommandDone, encode(CommandDone{0, why})));
    }
    opt.log(fmt::format("{}: session {} attached", c.peer(), id));
    return serve_session(c, held);
}

std::string Server::State::run_command(Held& held, const Command& m, uint64_t* ticket, bool* close) {
    Session& s = *held.session;
    switch (m.kind) {
        case CommandKind::kStepOp: *ticket = s.step_op(); break;
        case CommandKind::kStepLayer: *ticket = s.step_layer(); break;
        case CommandKind::kStepToken: *ticket = s.step_token(); break;
        case CommandKind::kContinue: *ticket = s.continue_run(); break;
        case CommandKind::kPause: *ticket = s.pause(); break;
        case CommandKind::kRestart: *ticket = s.restart(); break;
        case CommandKind::kGoTo: *ticket = s.go_to(m.arg); break;
        case CommandKind::kRunToEvent: *ticket = s.run_to_event(m.arg); break;
        case CommandKind::kGenerate:
            if (m.arg < 0 || m.arg > (1 << 20)) return "generate: n must be 0 to 1048576";
            *ticket = s.generate(static_cast<int>(m.arg), m.ids);
            break;
        case CommandKind::kCancel: *ticket = s.cancel(); break;
        case CommandKind::kSetPrompt: *ticket = s.set_prompt(m.text, true, false); break;
        case CommandKind::kSetTokens: *ticket = s.set_tokens(m.ids); break;
        case CommandKind::kSetReference: {
            auto path = opt.roots.resolve_input(m.text);
            if (!path) return path.error().message;
            auto ref = ReferenceDump::open(path.value());
            if (!ref) return ref.error().message;
            *ticket = s.set_reference(std::shared_ptr<const ReferenceDump>(std::move(ref.value())));
            break;
        }
        case CommandKind::kAddBreakpoint: *ticket = static_cast<uint64_t>(s.add_breakpoint(m.breakpoint)); break;
        case CommandKind::kRemoveBreakpoint:
            if (!s.remove_breakpoint(static_cast<int>(m.arg))) return fmt::format("no breakpoint {}", m.arg);
            break;
        case CommandKind::kEnableBreakpoint:
            if (!s.enable_breakpoint(static_cast<int>(m.arg), m.arg2 != 0)) return fmt::format("no breakpoint {}", m.arg);
            break;
        case CommandKind::kClose: *close = true; break;
    }
    return {};
}

bool Server::State::send_tensor(Connection& c, const SessionSnapshot& snap, int64_t index) {
    TensorHeader h;
    h.index = index;
    const auto capture = snap.capture(index);
    if (!capture || !capture->values) {
        h.error = index < 0 || !snap.events || index >= static_cast<int64_t>(snap.events->size())
                      ? fmt::format("there is no event {} in the plan", index)
                      : fmt::format("event {} has no full values on the server: not evaluated yet, or dropped by the "
                                    "capture budget (raise it, or go to the event again)", index);
        return static_cast<bool>(c.send(MsgType::kTensor, encode(h)));
    }
    for (int k = 0; k < 4; ++k) h.ne[k] = capture->info.ne[k];
    h.bytes = capture->values->size() * sizeof(float);
    if (!c.send(MsgType::kTensor, encode(h))) return false;
    const char* data = reinterpret_cast<const char*>(capture->values->data());
    for (uint64_t at = 0; at < h.bytes; at += kChunkBytes) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, h.bytes - at));
        if (!c.send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(std::string_view(data + at, n))}))) return false;
    }
    return static_cast<bool>(c.send(MsgType::kFileEnd, {}));
}

bool Server::State::serve_session(Connection& c, const std::shared_ptr<Held>& held) {
    const std::string& peer = c.peer();
    auto detach = [&] {
        std::lock_guard<std::mutex> lock(sessions_mu);
        held->attached = false;
    };
    if (!c.send(MsgType::kOpened, encode(held->opened))) {
        detach();
        return false;
    }
    SentState sent;
    bool first = true;
    auto last_sent = std::chrono::steady_clock::now();
    while (!stopping) {
        // A new snapshot goes out as soon as the session publishes it; the socket is looked at
        // between (a command waits at most a few milliseconds).
        auto snap = first ? held->session->snapshot()
                          : held->session->wait_for_version(sent.version + 1, std::chrono::milliseconds(4));
        if (!snap) snap = held->session->snapshot();
        if (first || snap->version != sent.version) {
            first = false;
            if (!c.send(MsgType::kSnapshot, encode_snapshot_delta(*snap, sent))) break;
            last_sent = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last_sent > opt.ping_interval) {
            if (!c.send(MsgType::kPing, {})) break;  // the client hears from us while nothing changes
            last_sent = std::chrono::steady_clock::now();
        }
        if (!c.has_buffered()) {
            pollfd p{c.native_handle(), POLLIN | POLLRDHUP, 0};
            const int n = ::poll(&p, 1, 1);
            if (n < 0 && errno != EINTR) break;
            if (n <= 0) continue;
            if ((p.revents & POLLIN) == 0) break;  // hung up
        }
        auto frame = c.receive(kMaxFrameBytes, std::chrono::seconds(30));
        if (!frame) break;
        if (frame.value().type == MsgType::kCommand) {
            auto command = decode_command(frame.value().payload);
            if (!command) {
                opt.log(fmt::format("{}: session {}: {}", peer, held->id, command.error().message));
                break;
            }
            uint64_t ticket = 0;
            bool close = false;
            const std::string error = run_command(*held, command.value(), &ticket, &close);
            if (!c.send(MsgType::kCommandDone, encode(CommandDone{ticket, error}))) break;
            if (close) {
                std::lock_guard<std::mutex> lock(sessions_mu);
                sessions.erase(held->id);
                opt.log(fmt::format("{}: session {} closed", peer, held->id));
                return true;
            }
        } else if (frame.value().type == MsgType::kFetch) {
            auto fetch = decode_fetch(frame.value().payload);
            if (!fetch || !send_tensor(c, *held->session->snapshot(), fetch.value().index)) break;
        } else {
            opt.log(fmt::format("{}: session {}: unexpected {} message", peer, held->id, msg_type_name(frame.value().type)));
            break;
        }
    }
    detach();
    opt.log(fmt::format("{}: left session {}; it stays open for the next connection", peer, held->id));
    return false;
}

Server::Server(std::unique_ptr<State> state) : state_(std::move(state)) {}

Result<std::unique_ptr<Server>> Server::start(ServerOptions options) {
    if (options.token.empty()) return make_error(ErrorCode::kUsage, "a server needs a token");
    if (!options.policy) return make_error(ErrorCode::kInternal, "a server needs an exec policy");
    auto parts = split_address(options.listen, true);
    if (!parts) return parts.error();
    const std::string host = parts.value().first;
    if (!is_loopback_host(host) && options.tls_identity_pem.empty())
        return make_error(ErrorCode::kUsage,
                          fmt::format("--listen {}: not a loopback address, and the connections would not be encrypted: "
                                      "serve it with TLS, or keep the default 127.0.0.1 and reach it through an SSH tunnel "
                                      "(ssh -N -L 7070:127.0.0.1:7070 GPU-BOX)", options.listen));
    auto state = std::make_unique<State>();
    if (!options.tls_identity_pem.empty()) {
        auto tls = make_server_tls(options.tls_identity_pem);
        if (!tls) return tls.error();
        state->tls = tls.value();
    }
    state->opt = std::move(options);
    asio::error_code ec;
    const asio::ip::address address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) return make_error(ErrorCode::kUsage, fmt::format("--listen {}: {}", state->opt.listen, ec.message()));
    const asio::ip::tcp::endpoint endpoint(address, parts.value().second);
    state->acceptor.open(endpoint.protocol(), ec);
    if (!ec) state->acceptor.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
    if (!ec) state->acceptor.bind(endpoint, ec);
    if (!ec) state->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return make_error(ErrorCode::kBadInput, fmt::format("cannot listen on {}: {}", state->opt.listen, ec.message()));
    set_cloexec(state->acceptor.native_handle());
    state->address = endpoint_text(state->acceptor.local_endpoint(ec));
    return std::unique_ptr<Server>(new Server(std::move(state)));
}

Server::~Server() {
    stop();
    std::list<State::Worker> workers;
    {
        std::lock_guard<std::mutex> lock(state_->mu);
        for (auto& w : state_->workers)
            if (w.connection) w.connection->shutdown();
        workers.swap(state_->workers);
    }
    for (auto& w : workers) w.thread.join();
}

std::string Server::address() const { return state_->address; }

void Server::run() {
    state_->accept_next();
    state_->io.run();
}

void Server::stop() {
    state_->stopping = true;
    asio::post(state_->io, [s = state_.get()] {
        asio::error_code ignored;
        s->acceptor.close(ignored);
    });
    std::lock_guard<std::mutex> lock(state_->mu);
    for (auto& w : state_->workers)
            if (w.connection) w.connection->shutdown();
}

}  // namespace ls::remote
