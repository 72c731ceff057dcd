// `layerscope serve`: holds the token, listens (loopback, or TLS elsewhere), and runs the headless commands
// clients send (run, compare, export) as this same program, with their input paths confined to
// the --root folders and their output files sent back to the client.
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <thread>

#include "app/cli.h"
#include "app/commands.h"
#include "engine/remote/connection.h"
#include "engine/remote/server.h"
#include "engine/remote/tls.h"

namespace ls::app {
namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope serve: %s\n", e.message.c_str());
    return exit_code_for(e);
}

std::string self_executable() {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::string() : p.string();
}

// "@out<N>" -> N, or -1.
int placeholder_index(const std::string& value) {
    if (value.size() < 5 || value.compare(0, 4, "@out") != 0 || value.size() > 6) return -1;
    int n = 0;
    for (size_t i = 4; i < value.size(); ++i) {
        if (value[i] < '0' || value[i] > '9') return -1;
        n = n * 10 + (value[i] - '0');
    }
    return n;
}

}  // namespace

remote::ExecPlan plan_remote_exec(const remote::Exec& exec, const remote::Roots& roots, const std::string& scratch,
                                  const std::string& program) {
    remote::ExecPlan plan;
    auto refuse = [&](int code, const std::string& message) {
        plan.refuse_code = code;
        plan.refuse_message = fmt::format("layerscope {}: {}", exec.command, message);
        return plan;
    };
    CLI::App app;
    RunOptions run;
    CompareOptions compare;
    ExportCmdOptions exp;
    std::vector<std::string*> inputs;
    struct Out { std::string* value; bool folder; };
    std::vector<Out> outputs;
    if (exec.command == "run") {
        add_run_command(app, run);
        inputs = {&run.model_path};
        outputs = {{&run.dump_path, false}};
    } else if (exec.command == "compare") {
        add_compare_command(app, compare);
        inputs = {&compare.model_path, &compare.reference_path, &compare.against_model};  // and the dumps, once parsed
    } else if (exec.command == "export") {
        add_export_command(app, exp);
        inputs = {&exp.model_path, &exp.from_path};
        outputs = {{&exp.gguf_path, false}, {&exp.npy_path, true}};
    } else {
        return refuse(kExitUsage, "is not a command a server runs; run, compare and export are");
    }
    std::vector<std::string> args(exec.args.rbegin(), exec.args.rend());
    args.push_back(exec.command);
    try {
        app.parse(args);
    } catch (const CLI::CallForHelp&) {
        return refuse(kExitUsage, "--help: ask for help without --remote");
    } catch (const CLI::ParseError& e) {
        return refuse(kExitUsage, e.what());
    }
    if (exec.command == "compare") {
        for (std::string& f : compare.files) inputs.push_back(&f);  // parsed now
        if (!compare.names.empty() && compare.names != "auto" && compare.names != "llama" && compare.names != "hf" &&
            compare.names != "meta")
            inputs.push_back(&compare.names);  // a name map file
    }
    for (std::string* in : inputs) {
        if (in->empty()) continue;
        auto resolved = roots.resolve_input(*in);
        if (!resolved) return refuse(kExitBadInput, resolved.error().message);
    }
    std::vector<std::pair<std::string, std::string>> rewrites;  // "@outN" -> the scratch path
    for (const Out& o : outputs) {
        if (o.value->empty()) continue;
        const int n = placeholder_index(*o.value);
        if (n < 0 || n >= 16)
            return refuse(kExitUsage, fmt::format("an output path of a remote command is the client's ({} is not one)", *o.value));
        if (static_cast<size_t>(n) >= plan.outputs.size()) plan.outputs.resize(static_cast<size_t>(n) + 1);
        plan.outputs[static_cast<size_t>(n)] = {fmt::format("{}/out{}", scratch, n), o.folder};
        rewrites.emplace_back(*o.value, plan.outputs[static_cast<size_t>(n)].path);
    }
    plan.argv = {program, exec.command};
    for (const std::string& a : exec.args) {
        std::string arg = a;
        for (const auto& [from, to] : rewrites) {
            if (arg == from) arg = to;
            else if (const size_t eq = arg.find('='); eq != std::string::npos && arg.compare(eq + 1, std::string::npos, from) == 0)
                arg = arg.substr(0, eq + 1) + to;
        }
        plan.argv.push_back(arg);
    }
    plan.cwd = roots.folders().front();
    plan.env = {"LAYERSCOPE_LINE_BUFFERED=1"};  // each line reaches the client as it is printed
    return plan;
}

int run_serve(const ServeOptions& o) {
    // SIGINT and SIGTERM stop the server from a thread of their own; every thread started later
    // inherits the blocked mask, so no other thread takes them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    ::signal(SIGPIPE, SIG_IGN);

    const std::string token_path = o.token_file.empty() ? remote::default_token_path() : o.token_file;
    bool created = false;
    auto token = remote::load_or_create_token(token_path, &created);
    if (!token) return fail(token.error());
    // TLS off loopback, or when asked: the identity made at first start, its fingerprint written
    // into the token file (the file the client copies).
    std::string tls_pem, tls_line;
    auto listen = remote::split_address(o.listen, true);
    if (!listen) return fail(listen.error());
    if (o.tls || !o.tls_identity.empty() || !remote::is_loopback_host(listen.value().first)) {
        const std::string identity_path = o.tls_identity.empty() ? remote::default_tls_identity_path(token_path) : o.tls_identity;
        bool made = false;
        auto identity = remote::load_or_create_tls_identity(identity_path, &made);
        if (!identity) return fail(identity.error());
        if (Status s = remote::record_tls_fingerprint(token_path, identity.value().sha256); !s) return fail(s.error());
        tls_pem = identity.value().pem;
        tls_line = fmt::format("tls:     TLS 1.3, certificate {}{} (sha256 {}, in the token file)\n", identity_path,
                               made ? ", new" : "", identity.value().sha256);
    }
    auto roots = remote::Roots::make(o.roots);
    if (!roots) return fail(roots.error());
    const std::string program = self_executable();
    if (program.empty()) return fail(make_error(ErrorCode::kInternal, "cannot find this program's own path (/proc/self/exe)"));

    std::mutex log_mu;
    remote::ServerOptions so;
    so.listen = o.listen;
    so.token = token.value();
    so.tls_identity_pem = tls_pem;
    so.roots = roots.value();
    so.max_connections = o.max_connections;
    so.name = "layerscope 0.1.0";
    so.log = [&log_mu](const std::string& line) {
        std::lock_guard<std::mutex> lock(log_mu);
        char when[32];
        const std::time_t now = std::time(nullptr);
        std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&now));
        std::fprintf(stderr, "%s %s\n", when, line.c_str());
    };
    so.policy = [program](const remote::Exec& exec, const remote::Roots& r, const std::string& scratch) {
        return plan_remote_exec(exec, r, scratch, program);
    };
    auto server = remote::Server::start(std::move(so));
    if (!server) return fail(server.error());

    std::string folders;
    for (const std::string& f : roots.value().folders()) folders += (folders.empty() ? "" : ", ") + f;
    std::printf("layerscope serve: listening on %s\n", server.value()->address().c_str());
    std::printf("token:   %s%s (clients need a copy, mode 0600)\n", token_path.c_str(), created ? ", new" : "");
    std::printf("folders: %s (inputs are read from these only)\n", folders.c_str());
    if (!tls_line.empty()) {
        std::fputs(tls_line.c_str(), stdout);
        std::printf("client:  layerscope run --remote %s --token-file COPY-OF-THE-TOKEN-FILE -m MODEL.gguf -p TEXT\n",
                    server.value()->address().c_str());
    } else {
        std::printf("client:  ssh -N -L 7070:%s GPU-BOX, then: layerscope run --remote 127.0.0.1:7070 -m MODEL.gguf -p TEXT\n",
                    server.value()->address().c_str());
    }
    std::fflush(stdout);

    remote::Server* s = server.value().get();
    std::thread waiter([s, stop_signals] {
        int sig = 0;
        sigwait(&stop_signals, &sig);
        s->stop();
    });
    s->run();
    waiter.join();
    std::fprintf(stderr, "layerscope serve: stopped\n");
    return kExitOk;
}

}  // namespace ls::app
