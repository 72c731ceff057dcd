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
#include <functional>
#include <future>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/capture/export.h"
#include "engine/compare/backend_ab.h"
#include "engine/compare/model_pair.h"
#include "engine/compare/reference.h"
#include "engine/compare/snapshot_diagnosis.h"
#include "engine/forward/faults.h"
#include "engine/forward/forward.h"
#include "engine/remote/connection.h"
#include "engine/remote/connection_impl.h"
#include "engine/remote/session_wire.h"
#include "engine/session/session.h"

extern char** environ;

namespace ls::remote {
namespace fs = std::filesystem;

struct Uploads;

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
    struct Held;
    std::mutex sessions_mu;
    std::map<uint64_t, std::shared_ptr<Held>> sessions;  // guarded by sessions_mu
    uint64_t next_session = 1;                            // guarded by sessions_mu

    void accept_next();
    void serve(const std::shared_ptr<Connection>& c, bool busy);
    // Runs a client's command; its arguments "upload:NAME" name files in `uploads`.
    bool serve_exec(Connection& c, const Exec& exec, Uploads& uploads);
    // Opens a session (or says why not, as a CommandDone with the error); then serves it.
    bool open_session(Connection& c, const Open& open);
    bool attach_session(Connection& c, const Attach& attach);
    // Commands and fetches in, snapshot deltas out, until the client closes the session (true) or
    // goes away (false).
    // `send_header`: the model's header follows kOpened (not for a client that holds it).
    bool serve_session(Connection& c, const std::shared_ptr<Held>& held, bool send_header = true);
    // `keepalive` pings the client while a long command (a backend's run) works; false once the
    // connection is gone.
    std::string run_command(Held& held, const Command& command, uint64_t* ticket, bool* close, std::string* note,
                            const std::function<bool()>& keepalive);
    // A reference for `held`: a path inside the roots, or "upload:NAME"; named as llama.cpp names.
    Result<std::shared_ptr<const ReferenceDump>> resolve_reference(Held& held, const std::string& text);
    std::string set_reference(Held& held, const std::string& text, uint64_t* ticket);
    // A new session with `options` in place of the one running, from the start: `tokens`, the
    // reference held, then `n_generate` decode calls (`forced` tokens first). Its tickets follow
    // the old one's; *ticket is the client's ticket of its last command.
    std::string restart_session(Held& held, const SessionOptions& options, std::vector<int32_t> tokens, int n_generate,
                                std::vector<int32_t> forced, uint64_t* ticket);
    std::string set_fault(Held& held, const std::string& name, uint64_t* ticket, std::string* note);
    // The clean run of the session's tokens on `backend` becomes the reference, as the Backends
    // panel does locally.
    std::string compare_backend(Held& held, const std::string& backend, uint64_t* ticket, std::string* note,
                                const std::function<bool()>& keepalive);
    // The same model in another format (a path inside the roots): its run is the reference.
    std::string compare_model(Held& held, const std::string& path, uint64_t* ticket, std::string* note,
                              const std::function<bool()>& keepalive);
    // Runs the session's tokens through `model` on `backend` (pinging the client meanwhile) and
    // restarts the session against that run.
    std::string restart_against_run(Held& held, const Model& model, Backend& backend, const ForwardOptions& forward,
                                    const std::string& label, uint64_t* ticket, const std::function<bool()>& keepalive);
    // A weight's bytes as the file stores them, or why not: false when the connection is lost.
    bool send_weight(Connection& c, const Held& held, const std::string& name);
    std::string export_on_server(Held& held, const Command& command, std::string* note);
    bool send_tensor(Connection& c, const SessionSnapshot& snap, int64_t index);
    // Bytes as file chunks (zstd, kChunkBytes before compression) and a file end.
    bool send_bytes(Connection& c, std::string_view bytes);
    // An Upload's file into its session's folder (a connection of its own): false when the
    // connection is lost.
    bool receive_upload(Connection& c, const Upload& upload, Uploads& for_connection);
    // The diagnosis's news since it was last sent, if any: false when the connection is lost.
    bool send_diagnosis(Connection& c, Held& held);
    // The logit lens asked for, once it is worked out: false when the connection is lost.
    bool send_lens(Connection& c, Held& held);
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

// Files a client uploaded (references): a folder made for the first, removed with the session or
// the connection they were sent for, and their bytes against the server's allowance.
struct Uploads {
    std::mutex mu;
    std::string folder;  // guarded by mu
    uint64_t bytes = 0;  // guarded by mu
    ~Uploads() {
        std::error_code ec;
        if (!folder.empty()) fs::remove_all(folder, ec);
    }
    std::string find_folder() {
        const std::lock_guard<std::mutex> lock(mu);
        return folder;
    }
    // The path of upload `name`, or "" when nothing of that name was uploaded.
    std::string find(const std::string& name) {
        std::error_code ec;
        const std::lock_guard<std::mutex> lock(mu);
        if (!is_upload_name(name) || folder.empty() || !fs::exists(folder + "/" + name, ec)) return {};
        return folder + "/" + name;
    }
};

// The doctor and the local errors of one session's snapshot, worked out on a thread of their own
// while the session goes on being served.
struct DiagnosisJob {
    std::atomic<bool> cancel{false};
    std::atomic<bool> finished{false};
    std::mutex mu;
    Diagnosis state;      // guarded by mu
    bool changed = true;  // guarded by mu: not sent since it changed
    std::thread thread;
};

// The logit lens of one session's snapshot, worked out on a thread of its own (the output head
// runs over every layer's output) while the session goes on being served.
struct LensJob {
    std::atomic<bool> finished{false};
    bool sent = false;  // by the connection's thread, after finished
    LensResult result;  // written by the job's thread before finished
    std::thread thread;
};

namespace {

// Joins the jobs of `jobs` whose threads finished (all of them, waiting: `wait`) and drops them.
template <class Job>
void join_finished(std::vector<std::shared_ptr<Job>>& jobs, bool wait) {
    for (auto it = jobs.begin(); it != jobs.end();) {
        if (!wait && !(*it)->finished) {
            ++it;
            continue;
        }
        (*it)->thread.join();
        it = jobs.erase(it);
    }
}

}  // namespace

struct Server::State::Held {
    uint64_t id = 0;
    std::shared_ptr<const Model> model;
    SessionOptions options;            // the session's, a reference's numerics included
    std::unique_ptr<Session> session;  // replaced when a reference asks for other numerics
    std::shared_ptr<const ReferenceDump> reference;
    uint64_t ticket_base = 0;  // the client's ticket is ticket_base + the session's
    uint64_t last_ticket = 0;  // the highest ticket the client was given
    int n_generate = 0;            // the session's decode calls, for a restart (a fault, a backend A/B)
    std::vector<int32_t> forced;   // and the tokens they were forced to
    Opened opened;
    bool attached = false;  // guarded by sessions_mu: one connection at a time
    std::shared_ptr<DiagnosisJob> diagnosis;             // the newest
    std::vector<std::shared_ptr<DiagnosisJob>> retired;  // stopped; joined once finished
    Uploads uploads;  // written by receive_upload, on other connections' threads
    std::shared_ptr<LensJob> lens;                     // the newest
    std::vector<std::shared_ptr<LensJob>> lens_retired;  // superseded; joined once finished

    ~Held() {
        stop_diagnosis(true);
        retire_lens(true);
    }
    // Retires the lens under way (it runs to its end; its answer is not sent) and joins the retired
    // ones that finished (all of them: `wait`).
    void retire_lens(bool wait) {
        if (lens) lens_retired.push_back(std::move(lens));
        join_finished(lens_retired, wait);
    }
    void start_lens(uint64_t request) {
        retire_lens(false);
        auto job = std::make_shared<LensJob>();
        job->result.request = request;
        lens = job;
        job->thread = std::thread([job, snap = session->snapshot(), model = model, reference = reference] {
            if (!reference)
                job->result.lens.error = "the session has no reference: the lens compares our layers' outputs with a reference's";
            else
                job->result.lens = snapshot_logit_lens(*snap, *model, *reference);
            job->finished = true;
        });
    }
    // Stops the diagnosis under way; joins the stopped ones that finished (all of them: `wait`).
    void stop_diagnosis(bool wait) {
        if (diagnosis) {
            diagnosis->cancel = true;
            retired.push_back(std::move(diagnosis));
        }
        join_finished(retired, wait);
    }
    // Local errors first (the panels show them), then the doctor's verdict on `request.event`,
    // on the session's snapshot as it stands now.
    void start_diagnosis(const Diagnose& request) {
        auto job = std::make_shared<DiagnosisJob>();
        job->state.request = request.request;
        job->state.event = request.event;
        job->state.step = "starting";
        diagnosis = job;
        job->thread = std::thread([job, snap = session->snapshot(), model = model, reference = reference,
                                   forward = options.forward, event = request.event] {
            auto progress = [&job](const std::string& step, size_t tried) {
                const std::lock_guard<std::mutex> lock(job->mu);
                job->state.step = step;
                job->state.tried = tried;
                job->changed = true;
                return !job->cancel.load();
            };
            std::vector<EventComparison> local;
            if (reference && progress("local errors", 0)) local = snapshot_local_errors(*snap, *model, *reference, forward);
            {
                const std::lock_guard<std::mutex> lock(job->mu);
                job->state.has_local = true;
                for (size_t i = 0; i < local.size(); ++i) {
                    const EventRecord* r = snap->record(static_cast<int64_t>(i));
                    if (!r || (r->comparison.status != CompareStatus::kWarn && r->comparison.status != CompareStatus::kDiverged)) continue;
                    job->state.local.push_back(local[i]);
                    job->state.local.back().event_index = static_cast<int64_t>(i);
                }
                job->changed = true;
            }
            std::string verdict;
            if (reference && !job->cancel) verdict = snapshot_doctor_verdict(*snap, event, *reference, model.get(), progress);
            {
                const std::lock_guard<std::mutex> lock(job->mu);
                job->state.done = true;
                job->state.verdict = verdict;
                job->changed = true;
            }
            job->finished = true;
        });
    }
};

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
    Uploads uploads;  // for this connection's commands
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
            if (!serve_exec(*c, exec.value(), uploads)) return;
        } else if (type == MsgType::kOpen) {
            auto open = decode_open(frame.value().payload);
            if (!open) return refuse(open.error().message);
            if (!open_session(*c, open.value())) return;
        } else if (type == MsgType::kAttach) {
            auto attach = decode_attach(frame.value().payload);
            if (!attach) return refuse(attach.error().message);
            if (!attach_session(*c, attach.value())) return;
        } else if (type == MsgType::kUpload) {
            auto upload = decode_upload(frame.value().payload);
            if (!upload) return refuse(upload.error().message);
            if (!receive_upload(*c, upload.value(), uploads)) return;
        } else {
            return refuse(fmt::format("unexpected {} message", msg_type_name(type)));
        }
    }
}

bool Server::State::serve_exec(Connection& c, const Exec& given, Uploads& uploads) {
    const std::string& peer = c.peer();
    const auto started = std::chrono::steady_clock::now();
    const uint64_t sent_before = c.bytes_sent();
    Scratch scratch;
    ExecPlan plan;
    // "upload:NAME" (a whole argument, or a flag's value after '=') becomes the uploaded file's
    // path, and the uploads' folder one the command may read.
    Exec exec = given;
    std::string missing;
    for (std::string& a : exec.args) {
        const size_t at = a.rfind(kUploadedPrefix, 0) == 0 ? 0 : a.find(std::string("=") + kUploadedPrefix);
        if (at == std::string::npos) continue;
        const size_t name_at = a.find(':', at) + 1;
        const std::string path = uploads.find(a.substr(name_at));
        if (path.empty()) missing = a.substr(name_at);
        else a = a.substr(0, at == 0 ? 0 : at + 1) + path;
    }
    Result<Roots> roots = opt.roots;
    const std::string uploaded_prefix = uploads.find_folder().empty() ? std::string() : uploads.find_folder() + "/";
    if (!uploads.find_folder().empty()) {
        std::vector<std::string> folders = opt.roots.folders();
        folders.push_back(uploads.find_folder());
        roots = Roots::make(folders);
    }
    if (scratch.path.empty() || !roots) {
        plan.refuse_code = 3;
        plan.refuse_message = fmt::format("layerscope {}: the server cannot make a scratch folder: {}", exec.command,
                                          roots ? std::strerror(errno) : roots.error().message);
    } else if (!missing.empty()) {
        plan.refuse_code = 3;
        plan.refuse_message = fmt::format("layerscope {}: {}: nothing of that name was uploaded on this connection", exec.command, missing);
    } else {
        plan = opt.policy(exec, roots.value(), scratch.path);
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
        // An uploaded input is named as the client named it ("upload:NAME" there becomes its path).
        for (size_t at = text.find(uploaded_prefix); !uploaded_prefix.empty() && at != std::string::npos;
             at = text.find(uploaded_prefix, at))
            text.replace(at, uploaded_prefix.size(), kUploadedPrefix);
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
        return static_cast<bool>(c.send(MsgType::kCommandDone, encode(CommandDone{0, why, {}})));
    };
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        if (sessions.size() >= static_cast<size_t>(opt.max_sessions))
            return fail(fmt::format("{} sessions are open on the server (at most {}); close one", sessions.size(), opt.max_sessions));
    }
    auto path = opt.roots.resolve_input(open.model);
    if (!path) return fail(path.error().message);
    auto model = Model::open(path.value());
    if (!model) return fail(model.error().message);
    auto held = std::make_shared<Held>();
    held->model = std::shared_ptr<const Model>(std::move(model.value()));
    held->options.backend = open.backend;
    if (!math_mode_from_name(open.mode, &held->options.forward.mode)) return fail("the mode must be exact or llama");
    if (open.capture_budget > 0) held->options.capture = CapturePolicy::memory_budget(open.capture_budget);
    // The reference first: the session runs with its numerics (batch size, flash attention, output
    // rows) as a local one does, and its prompt and decode calls are the default.
    if (!open.reference.empty()) {
        auto ref = resolve_reference(*held, open.reference);
        if (!ref) return fail(ref.error().message);
        held->reference = ref.value();
        if (Status s = use_reference_numerics(*held->reference, held->options.forward); !s) return fail(s.error().message);
    }
    auto session = Session::create(held->model, held->options);
    if (!session) return fail(session.error().message);
    held->session = std::move(session.value());
    const std::shared_ptr<const ReferenceDump>& reference = held->reference;
    if (reference) held->session->set_reference(reference);
    if (!open.tokens.empty()) held->session->set_tokens(open.tokens);
    else if (open.prompt.empty() && reference) held->session->set_tokens(reference->prompt_tokens());
    else held->session->set_prompt(open.prompt, true, false);
    const int n_generate = open.n_generate > 0 ? open.n_generate
                           : reference         ? std::max<int>(0, static_cast<int>(reference->decode_n_tokens().size()) - 1)
                                               : 0;
    held->n_generate = n_generate;
    if (reference) held->forced = reference->generated_tokens();
    if (n_generate > 0) held->session->generate(n_generate, held->forced);
    const ModelConfig& config = held->model->config();
    held->opened.model = fmt::format("{}: {}, {} layers, n_embd {}", open.model, config.arch_name, config.n_layer, config.n_embd);
    held->opened.backend = held->session->backend_description();
    held->opened.model_path = open.model;
    held->opened.file_bytes = held->model->file().file_size();
    held->opened.header_bytes = held->model->file().header_bytes().size();
    if (held->opened.header_bytes > kMaxModelHeaderBytes)
        return fail(fmt::format("{}: its header is {} bytes, more than a client takes ({})", open.model,
                                held->opened.header_bytes, kMaxModelHeaderBytes));
    {
        std::lock_guard<std::mutex> lock(sessions_mu);
        held->id = held->opened.session = next_session++;
        held->attached = true;
        sessions[held->id] = held;
    }
    opt.log(fmt::format("{}: session {} opened ({})", c.peer(), held->id, held->opened.model));
    return serve_session(c, held);
}

Result<std::shared_ptr<const ReferenceDump>> Server::State::resolve_reference(Held& held, const std::string& text) {
    std::string path;
    if (text.rfind(kUploadedPrefix, 0) == 0) {
        const std::string name = text.substr(sizeof kUploadedPrefix - 1);
        path = held.uploads.find(name);
        if (path.empty())
            return make_error(ErrorCode::kBadInput, fmt::format("{}: nothing of that name was uploaded for session {}", name, held.id));
    } else {
        auto resolved = opt.roots.resolve_input(text);
        if (!resolved) return resolved.error();
        path = resolved.value();
    }
    auto ref = ReferenceDump::open(path);
    if (!ref) return ref.error();
    // An engine's own tensor names pair with llama.cpp's, as in the GUI and `compare --names auto`.
    if (Status s = name_as_llama(*ref.value(), biased_in(*held.model)); !s) return s.error();
    return std::shared_ptr<const ReferenceDump>(std::move(ref.value()));
}

std::string Server::State::set_reference(Held& held, const std::string& text, uint64_t* ticket) {
    auto ref = resolve_reference(held, text);
    if (!ref) return ref.error().message;
    const std::shared_ptr<const ReferenceDump>& reference = ref.value();
    ForwardOptions forward = held.options.forward;
    if (Status s = use_reference_numerics(*reference, forward); !s) return s.error().message;
    const auto snap = held.session->snapshot();
    const std::vector<int32_t>& prompt = reference->prompt_tokens();
    held.reference = reference;
    if (forward.n_ubatch == held.options.forward.n_ubatch && forward.flash_attn == held.options.forward.flash_attn &&
        forward.all_logits == held.options.forward.all_logits && (prompt.empty() || prompt == snap->tokens)) {
        *ticket = held.ticket_base + held.session->set_reference(reference);  // compared where it stands
        return {};
    }
    // Other numerics, or another prompt: a new session runs as the reference was made, from the
    // start, as a local session loading it does.
    SessionOptions options = held.options;
    options.forward = forward;
    const int n_generate = std::max<int>(0, static_cast<int>(reference->decode_n_tokens().size()) - 1);
    return restart_session(held, options, prompt.empty() ? snap->tokens : prompt, n_generate, reference->generated_tokens(),
                           ticket);
}

std::string Server::State::restart_session(Held& held, const SessionOptions& options, std::vector<int32_t> tokens,
                                           int n_generate, std::vector<int32_t> forced, uint64_t* ticket) {
    auto session = Session::create(held.model, options);
    if (!session) return session.error().message;
    held.options = options;
    held.ticket_base = held.last_ticket;
    held.session = std::move(session.value());
    CommandTicket t = held.session->set_tokens(std::move(tokens));
    if (held.reference) t = held.session->set_reference(held.reference);
    held.n_generate = n_generate;
    held.forced = std::move(forced);
    if (n_generate > 0) t = held.session->generate(n_generate, held.forced);
    *ticket = held.ticket_base + t;
    return {};
}

std::string Server::State::set_fault(Held& held, const std::string& name, uint64_t* ticket, std::string* note) {
    Fault fault;
    if (!fault_from_name(name, &fault)) return fmt::format("unknown fault '{}'; known: none, {}", name, fault_names());
    SessionOptions options = held.options;
    options.forward.fault = fault;
    const std::string error = restart_session(held, options, held.session->snapshot()->tokens, held.n_generate, held.forced, ticket);
    if (error.empty())
        *note = fault == Fault::kNone ? "the session runs again without a fault"
                                      : fmt::format("the session runs again with the {} fault", name);
    return error;
}

std::string Server::State::compare_backend(Held& held, const std::string& backend, uint64_t* ticket, std::string* note,
                                           const std::function<bool()>& keepalive) {
    if (backend != "cpu" && backend != "cuda" && backend != "cuda-emulated")
        return fmt::format("unknown backend '{}' to compare with (cpu, cuda-emulated or cuda)", backend);
    // The other backend runs the session's tokens clean (no fault), as the local Backends panel's.
    ForwardOptions forward;
    auto n_ctx = context_for_run(held.model->config(), static_cast<int64_t>(held.session->snapshot()->tokens.size()),
                                 held.n_generate, 0, false);
    if (!n_ctx) return n_ctx.error().message;
    forward.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*held.model, backend, 0, forward);
    if (!chosen) return chosen.error().message;
    Backend& other = *chosen.value().backend;
    const std::string error = restart_against_run(held, *held.model, other, forward, fmt::format("the {} run", backend), ticket, keepalive);
    if (error.empty()) *note = fmt::format("the {} backend's run ({}) is the reference", backend, other.name());
    return error;
}

std::string Server::State::compare_model(Held& held, const std::string& path, uint64_t* ticket, std::string* note,
                                         const std::function<bool()>& keepalive) {
    auto resolved = opt.roots.resolve_input(path);
    if (!resolved) return resolved.error().message;
    auto other = Model::open(resolved.value());
    if (!other) return other.error().message;
    if (Status s = check_same_model(*held.model, *other.value()); !s) return s.error().message;
    // As the local one: every row's distribution kept (the KL per position), the session's backend.
    ForwardOptions forward;
    forward.all_logits = true;
    auto n_ctx = context_for_run(held.model->config(), static_cast<int64_t>(held.session->snapshot()->tokens.size()),
                                 held.n_generate, 0, false);
    if (!n_ctx) return n_ctx.error().message;
    forward.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*other.value(), held.options.backend, 0, forward);
    if (!chosen) return chosen.error().message;
    const std::string error = restart_against_run(held, *other.value(), *chosen.value().backend, forward,
                                                  fmt::format("the run of {}", path), ticket, keepalive);
    if (error.empty())
        *note = fmt::format("the run of {} (the same model: {}) is the reference", path, tensor_type_mix(*other.value()));
    return error;
}

std::string Server::State::restart_against_run(Held& held, const Model& model, Backend& backend, const ForwardOptions& forward,
                                               const std::string& label, uint64_t* ticket,
                                               const std::function<bool()>& keepalive) {
    const std::vector<int32_t> tokens = held.session->snapshot()->tokens;
    const int n_generate = held.n_generate;
    auto job = std::async(std::launch::async, [&] { return run_as_reference(model, backend, forward, tokens, n_generate, label); });
    for (bool alive = true; job.wait_for(opt.ping_interval) != std::future_status::ready;)
        if (alive) alive = keepalive();
    auto made = job.get();
    if (!made) return made.error().message;
    std::shared_ptr<const ReferenceDump> reference(std::move(made.value()));
    SessionOptions options = held.options;
    if (Status s = use_reference_numerics(*reference, options.forward); !s) return s.error().message;
    std::shared_ptr<const ReferenceDump> before = std::exchange(held.reference, reference);
    const std::string error = restart_session(held, options, tokens, n_generate, reference->generated_tokens(), ticket);
    if (!error.empty()) held.reference = std::move(before);  // the session running goes on as it was
    return error;
}

bool Server::State::send_weight(Connection& c, const Held& held, const std::string& name) {
    WeightHeader h;
    h.name = name;
    const GgufTensorInfo* t = held.model->file().find_tensor(name);
    if (!t) h.error = fmt::format("{}: no tensor of that name in {}", name, held.opened.model_path);
    else if (!t->data) h.error = fmt::format("{}: its data are not in the server's copy of the model", name);
    else h.bytes = t->n_bytes;
    if (!c.send(MsgType::kWeight, encode(h))) return false;
    if (!h.error.empty()) return true;
    return send_bytes(c, std::string_view(reinterpret_cast<const char*>(t->data), t->n_bytes));
}

std::string Server::State::export_on_server(Held& held, const Command& m, std::string* note) {
    auto path = opt.roots.resolve_output(m.text);
    if (!path) return path.error().message;
    if (m.arg != 0 && m.arg != 1) return "export: the format must be 0 (a GGUF dump) or 1 (a .npy folder)";
    const auto snap = held.session->snapshot();
    const std::set<std::string> wanted(m.names.begin(), m.names.end());
    std::vector<std::shared_ptr<const CapturedTensor>> picked;
    size_t missing = 0;
    for (size_t i = 0; i < snap->records.size(); ++i) {
        const EventRecord* r = snap->records[i].get();
        if (!r || (!wanted.empty() && !wanted.count(r->info.name))) continue;
        auto capture = snap->capture(static_cast<int64_t>(i));
        if (capture && capture->values) picked.push_back(std::move(capture));
        else ++missing;
    }
    if (picked.empty())
        return fmt::format("export: none of the {} events asked for has values on the server (not evaluated yet, or dropped "
                           "by the capture budget)", wanted.empty() ? snap->records.size() : wanted.size());
    ExportSet set = export_set_from_captures(picked, {});
    set.info.prompt_tokens = snap->tokens;
    set.info.prompt_token_pieces = snap->pieces;
    set.info.generated_tokens = snap->generated;
    set.info.model_path = held.model->path();
    set.info.model_desc = held.model->config().arch_name;
    ExportOptions options;
    options.format = m.arg == 1 ? ExportFormat::kNpyFolder : ExportFormat::kGgufDump;
    options.path = path.value();
    options.overwrite = m.arg2 != 0;
    auto written = export_tensors(set, options);
    if (!written) return written.error().message;
    *note = fmt::format("Wrote {} tensors ({:.2f} MiB) to {} on the server{}", written.value().n_tensors,
                        written.value().bytes / 1048576.0, written.value().path,
                        missing ? fmt::format(" ({} asked for had no values there)", missing) : "");
    return {};
}

bool Server::State::attach_session(Connection& c, const Attach& attach) {
    const uint64_t id = attach.session;
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
        return static_cast<bool>(c.send(MsgType::kCommandDone, encode(CommandDone{0, why, {}})));
    }
    opt.log(fmt::format("{}: session {} attached{}", c.peer(), id,
                        attach.have_header ? " (the client holds the model's header: not sent again)" : ""));
    return serve_session(c, held, !attach.have_header);
}

std::string Server::State::run_command(Held& held, const Command& m, uint64_t* ticket, bool* close, std::string* note,
                                       const std::function<bool()>& keepalive) {
    Session& s = *held.session;
    CommandTicket t = 0;  // a queued command's ticket, the client's once ticket_base is added
    switch (m.kind) {
        case CommandKind::kStepOp: t = s.step_op(); break;
        case CommandKind::kStepLayer: t = s.step_layer(); break;
        case CommandKind::kStepToken: t = s.step_token(); break;
        case CommandKind::kContinue: t = s.continue_run(); break;
        case CommandKind::kPause: t = s.pause(); break;
        case CommandKind::kRestart: t = s.restart(); break;
        case CommandKind::kGoTo: t = s.go_to(m.arg); break;
        case CommandKind::kRunToEvent: t = s.run_to_event(m.arg); break;
        case CommandKind::kGenerate:
            if (m.arg < 0 || m.arg > (1 << 20)) return "generate: n must be 0 to 1048576";
            t = s.generate(static_cast<int>(m.arg), m.ids);
            break;
        case CommandKind::kCancel: t = s.cancel(); break;
        case CommandKind::kSetPrompt: t = s.set_prompt(m.text, true, false); break;
        case CommandKind::kSetTokens: t = s.set_tokens(m.ids); break;
        case CommandKind::kSetReference:
        case CommandKind::kSetFault:
        case CommandKind::kCompareBackend:
        case CommandKind::kCompareModel: {
            const std::string error = m.kind == CommandKind::kSetReference   ? set_reference(held, m.text, ticket)
                                      : m.kind == CommandKind::kSetFault     ? set_fault(held, m.text, ticket, note)
                                      : m.kind == CommandKind::kCompareModel ? compare_model(held, m.text, ticket, note, keepalive)
                                                                             : compare_backend(held, m.text, ticket, note, keepalive);
            if (error.empty()) held.last_ticket = std::max(held.last_ticket, *ticket);
            return error;
        }
        case CommandKind::kAddBreakpoint: *ticket = static_cast<uint64_t>(s.add_breakpoint(m.breakpoint)); return {};
        case CommandKind::kRemoveBreakpoint:
            if (!s.remove_breakpoint(static_cast<int>(m.arg))) return fmt::format("no breakpoint {}", m.arg);
            return {};
        case CommandKind::kEnableBreakpoint:
            if (!s.enable_breakpoint(static_cast<int>(m.arg), m.arg2 != 0)) return fmt::format("no breakpoint {}", m.arg);
            return {};
        case CommandKind::kExport: return export_on_server(held, m, note);
        case CommandKind::kClose: *close = true; return {};
    }
    *ticket = held.ticket_base + t;
    held.last_ticket = std::max(held.last_ticket, *ticket);
    return {};
}

bool Server::State::send_bytes(Connection& c, std::string_view bytes) {
    for (size_t at = 0; at < bytes.size(); at += kChunkBytes)
        if (!c.send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(bytes.substr(at, kChunkBytes))}))) return false;
    return static_cast<bool>(c.send(MsgType::kFileEnd, {}));
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
    return send_bytes(c, std::string_view(reinterpret_cast<const char*>(capture->values->data()), h.bytes));
}

bool Server::State::serve_session(Connection& c, const std::shared_ptr<Held>& held, bool send_header) {
    const std::string& peer = c.peer();
    auto detach = [&] {
        std::lock_guard<std::mutex> lock(sessions_mu);
        held->attached = false;
    };
    if (!c.send(MsgType::kOpened, encode(held->opened)) || (send_header && !send_bytes(c, held->model->file().header_bytes()))) {
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
            std::shared_ptr<const SessionSnapshot> shown = snap;
            if (held->ticket_base > 0) {  // a session replaced by a reference's: the client's tickets go on
                auto copy = std::make_shared<SessionSnapshot>(*snap);
                copy->completed_ticket += held->ticket_base;
                shown = std::move(copy);
            }
            if (!c.send(MsgType::kSnapshot, encode_snapshot_delta(*shown, sent))) break;
            last_sent = std::chrono::steady_clock::now();
        } else if (std::chrono::steady_clock::now() - last_sent > opt.ping_interval) {
            if (!c.send(MsgType::kPing, {})) break;  // the client hears from us while nothing changes
            last_sent = std::chrono::steady_clock::now();
        }
        if (!send_diagnosis(c, *held) || !send_lens(c, *held)) break;
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
            std::string note;
            const Session* before = held->session.get();
            auto keepalive = [&c] { return static_cast<bool>(c.send(MsgType::kPing, {})); };
            const std::string error = run_command(*held, command.value(), &ticket, &close, &note, keepalive);
            if (held->session.get() != before) first = true;  // a new session: its snapshot goes out whole
            if (!c.send(MsgType::kCommandDone, encode(CommandDone{ticket, error, note}))) break;
            if (close) {
                std::lock_guard<std::mutex> lock(sessions_mu);
                sessions.erase(held->id);
                opt.log(fmt::format("{}: session {} closed", peer, held->id));
                return true;
            }
        } else if (frame.value().type == MsgType::kFetch) {
            auto fetch = decode_fetch(frame.value().payload);
            if (!fetch || !send_tensor(c, *held->session->snapshot(), fetch.value().index)) break;
        } else if (frame.value().type == MsgType::kFetchWeight) {
            auto weight = decode_fetch_weight(frame.value().payload);
            if (!weight || !send_weight(c, *held, weight.value().name)) break;
        } else if (frame.value().type == MsgType::kDiagnose) {
            auto diagnose = decode_diagnose(frame.value().payload);
            if (!diagnose) {
                opt.log(fmt::format("{}: session {}: {}", peer, held->id, diagnose.error().message));
                break;
            }
            held->stop_diagnosis(false);
            if (!diagnose.value().stop) held->start_diagnosis(diagnose.value());
        } else if (frame.value().type == MsgType::kLens) {
            auto lens = decode_lens(frame.value().payload);
            if (!lens) {
                opt.log(fmt::format("{}: session {}: {}", peer, held->id, lens.error().message));
                break;
            }
            held->start_lens(lens.value().request);
        } else {
            opt.log(fmt::format("{}: session {}: unexpected {} message", peer, held->id, msg_type_name(frame.value().type)));
            break;
        }
    }
    held->stop_diagnosis(false);  // nobody is left to read it
    held->retire_lens(false);
    detach();
    opt.log(fmt::format("{}: left session {}; it stays open for the next connection", peer, held->id));
    return false;
}

bool Server::State::send_diagnosis(Connection& c, Held& held) {
    if (!held.diagnosis) return true;
    Diagnosis news;
    {
        DiagnosisJob& job = *held.diagnosis;
        const std::lock_guard<std::mutex> lock(job.mu);
        if (!job.changed) return true;
        job.changed = false;
        news = job.state;
        job.state.has_local = false;  // the local errors go once
        job.state.local.clear();
    }
    return static_cast<bool>(c.send(MsgType::kDiagnosis, encode(news)));
}

bool Server::State::send_lens(Connection& c, Held& held) {
    if (!held.lens || !held.lens->finished || held.lens->sent) return true;
    held.lens->sent = true;
    std::string payload = encode(held.lens->result);
    if (payload.size() > kMaxFrameBytes) {  // a long run's grid: the client is told, the lens stays whole here
        const LogitLens& lens = held.lens->result.lens.lens;
        LensResult too_big;
        too_big.request = held.lens->result.request;
        too_big.lens.error = fmt::format("the lens of {} layers x {} positions is {:.1f} MiB, above the {} MiB a message may "
                                         "carry; `compare --logit-lens` on the server lists it",
                                         lens.layers.size(), lens.arrivals.size(), payload.size() / 1048576.0,
                                         kMaxFrameBytes >> 20);
        payload = encode(too_big);
    }
    return static_cast<bool>(c.send(MsgType::kLensResult, payload));
}

bool Server::State::receive_upload(Connection& c, const Upload& up, Uploads& for_connection) {
    const std::string& peer = c.peer();
    auto answer = [&](const std::string& error, const std::string& note) {
        return static_cast<bool>(c.send(MsgType::kCommandDone, encode(CommandDone{0, error, note})));
    };
    // A refused upload ends the connection: the client has nothing more to say on it.
    auto refuse = [&](const std::string& why) {
        opt.log(fmt::format("{}: upload {} refused: {}", peer, up.name, why));
        (void)answer(why, {});
        return false;
    };
    // Session 0: for the commands of this connection.
    std::shared_ptr<Held> held;
    if (up.session != 0) {
        std::lock_guard<std::mutex> lock(sessions_mu);
        auto it = sessions.find(up.session);
        if (it != sessions.end()) held = it->second;
        if (!held) return refuse(fmt::format("no session {} on this server", up.session));
    }
    Uploads& into = held ? held->uploads : for_connection;
    const std::string whose = held ? fmt::format("session {}'s", held->id) : "this connection's";
    std::string target, staging;
    {
        // The bytes are counted against the allowance before any arrives.
        const std::lock_guard<std::mutex> lock(into.mu);
        if (up.size > opt.max_upload_bytes || into.bytes > opt.max_upload_bytes - up.size)
            return refuse(fmt::format("{} bytes would take {} uploads beyond the server's {} bytes", up.size, whose, opt.max_upload_bytes));
        if (into.folder.empty()) {
            Scratch folder;  // kept: `into` removes it
            if (folder.path.empty()) return refuse(fmt::format("the server cannot make a folder for uploads: {}", std::strerror(errno)));
            into.folder = std::exchange(folder.path, std::string());
        }
        into.bytes += up.size;
        const fs::path path = fs::path(into.folder) / up.name;
        std::error_code ec;
        fs::create_directories(path.parent_path(), ec);
        target = path.string();
        staging = (path.parent_path() / ("." + path.filename().string() + ".part")).string();
    }
    auto release = [&] {
        std::error_code ec;
        fs::remove(staging, ec);
        const std::lock_guard<std::mutex> lock(into.mu);
        into.bytes -= up.size;
    };
    std::FILE* f = std::fopen(staging.c_str(), "wb");
    if (!f) {
        const std::string why = fmt::format("cannot write {} on the server: {}", up.name, std::strerror(errno));
        release();
        return refuse(why);
    }
    if (!answer({}, {})) {  // go ahead
        std::fclose(f);
        release();
        return false;
    }
    uint64_t written = 0;
    std::string error;
    for (;;) {
        auto frame = c.receive(kMaxFrameBytes, opt.idle_timeout);
        if (!frame) {
            error = frame.error().message;
            break;
        }
        if (frame.value().type == MsgType::kFileEnd) break;
        auto chunk = frame.value().type == MsgType::kFileChunk ? decode_file_chunk(frame.value().payload)
                                                                : Result<FileChunk>(make_error(ErrorCode::kBadInput, fmt::format(
                                                                      "an upload cut by a {} message", msg_type_name(frame.value().type))));
        auto data = chunk ? decompress_chunk(chunk.value().compressed, kChunkBytes) : Result<std::string>(chunk.error());
        if (!data) {
            error = data.error().message;
            break;
        }
        if (data.value().size() > up.size - written) {
            error = fmt::format("more than the {} bytes announced", up.size);
            break;
        }
        if (std::fwrite(data.value().data(), 1, data.value().size(), f) != data.value().size()) {
            error = fmt::format("cannot write {} on the server: {}", up.name, std::strerror(errno));
            break;
        }
        written += data.value().size();
    }
    if (std::fclose(f) != 0 && error.empty()) error = fmt::format("cannot write {} on the server: {}", up.name, std::strerror(errno));
    if (error.empty() && written != up.size) error = fmt::format("{} bytes of the {} announced", written, up.size);
    if (error.empty() && std::rename(staging.c_str(), target.c_str()) != 0) error = std::strerror(errno);
    if (!error.empty()) {
        release();
        return refuse(error);
    }
    opt.log(fmt::format("{}: uploaded {} ({} bytes) for {}", peer, up.name, up.size,
                        held ? fmt::format("session {}", held->id) : std::string("its commands")));
    return answer({}, fmt::format("{}{}", kUploadedPrefix, up.name));
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
