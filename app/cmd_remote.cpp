// run, compare and export with --remote HOST:PORT: the command runs on a `layerscope serve`,
// its output is printed here as it comes, its output files are written here, and its exit code is
// this process's.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "app/commands.h"
#include "engine/remote/access.h"
#include "engine/remote/client.h"
#include "engine/remote/session_wire.h"
#include "engine/util/safe_write.h"

namespace ls::app {

int run_remote(const std::string& command, const std::vector<std::string>& args, const RemoteFlags& flags,
               const std::vector<RemoteOutput>& outputs, const std::vector<std::string>& inputs) {
    auto fail = [&](const Error& e) {
        std::fprintf(stderr, "layerscope %s: %s\n", command.c_str(), e.message.c_str());
        return exit_code_for(e);
    };
    // Outputs are refused here, before anything runs, as the command refuses them locally.
    std::vector<remote::ClientTarget> targets;
    for (const RemoteOutput& o : outputs) {
        if (Status s = o.folder ? check_folder_target(o.path, o.force) : check_file_target(o.path, o.force); !s) return fail(s.error());
        targets.push_back({o.path, o.folder, o.force});
    }
    auto credentials = remote::read_credentials(flags.token_file.empty() ? remote::default_token_path() : flags.token_file);
    if (!credentials) return fail(credentials.error());
    remote::ClientOptions options;
    options.tls_sha256 = credentials.value().tls_sha256;

    // The output flags' values become "@out<N>": the server writes them to its scratch folder
    // and sends them back for targets[N].
    std::vector<std::string> sent;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        size_t n = outputs.size();
        for (size_t k = 0; k < outputs.size(); ++k) {
            if (a == outputs[k].flag && i + 1 < args.size()) {
                sent.push_back(a);
                sent.push_back(fmt::format("@out{}", k));
                ++i;
                n = k;
                break;
            }
            if (a.rfind(outputs[k].flag + "=", 0) == 0) {
                sent.push_back(fmt::format("{}=@out{}", outputs[k].flag, k));
                n = k;
                break;
            }
        }
        if (n == outputs.size()) sent.push_back(a);
    }
    // Inputs here (a reference, a dump) are uploaded for the command and named "upload:NAME" in
    // its arguments; "server:PATH", or a path not here, is the server's.
    std::vector<std::pair<std::string, std::string>> uploads;  // local path, name
    std::map<std::string, std::string> renamed;                  // argument -> what the server reads
    for (const std::string& in : inputs) {
        std::error_code ec;
        if (in.rfind("server:", 0) == 0) {
            renamed[in] = in.substr(7);
        } else if (!in.empty() && !renamed.count(in) && std::filesystem::exists(in, ec)) {
            std::string name = remote::upload_name(in);
            for (const auto& u : uploads)
                if (u.second == name) name = fmt::format("{}-{}", uploads.size() + 1, name);
            uploads.emplace_back(in, name);
            renamed[in] = remote::kUploadedPrefix + name;
        }
    }
    for (std::string& a : sent) {
        if (auto it = renamed.find(a); it != renamed.end()) {
            a = it->second;
        } else if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            if (auto v = renamed.find(a.substr(eq + 1)); v != renamed.end()) a = a.substr(0, eq + 1) + v->second;
        }
    }
    auto outcome = remote::remote_exec(flags.address, credentials.value().token, remote::Exec{command, sent}, targets,
                                       stdout, stderr, options, uploads);
    if (!outcome) return fail(outcome.error());
    return outcome.value().exit_code;
}

}  // namespace ls::app
