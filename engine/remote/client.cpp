#include "engine/remote/client.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>

#include "engine/remote/connection.h"
#include "engine/remote/session_wire.h"
#include "engine/util/safe_write.h"

namespace ls::remote {
namespace {

// One output's staging: a file, or a folder filled file by file.
struct Staged {
    std::unique_ptr<StagedFile> file;
    std::unique_ptr<StagedFolder> folder;
};

Error lost(const Error& e) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}; nothing was written here", e.message));
}

}  // namespace

Result<std::unique_ptr<Connection>> connect_and_hello(const std::string& address, const std::string& token,
                                                      const ClientOptions& options) {
    auto parts = split_address(address, false);
    if (!parts) return parts.error();
    if (options.tls_sha256.empty() && !is_loopback_host(parts.value().first))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{} is not a loopback address, and the token file names no TLS certificate "
                                      "(a line tls-sha256): the token would cross the network in the clear. Copy the "
                                      "token file of a server started on that address (it speaks TLS), or reach the "
                                      "server through an SSH tunnel and --remote 127.0.0.1:PORT", address));
    auto connected = Connection::connect(address, options.connect_timeout, options.tls_sha256);
    if (!connected) return connected.error();
    Connection& c = *connected.value();
    if (Status s = c.send(MsgType::kHello, encode(Hello{kProtocolVersion, token})); !s) return s.error();
    auto first = c.receive(kMaxFrameBytes, options.silence_timeout);
    if (!first) return first.error();
    if (first.value().type == MsgType::kRefused) {
        auto refused = decode_refused(first.value().payload);
        return make_error(ErrorCode::kBadInput, fmt::format("the server at {} refused the connection: {}", address,
                                                            refused ? refused.value().reason : refused.error().message));
    }
    if (first.value().type != MsgType::kWelcome)
        return make_error(ErrorCode::kBadInput, fmt::format("{} answered the hello with a {} message", address, msg_type_name(first.value().type)));
    if (auto welcome = decode_welcome(first.value().payload); !welcome) return welcome.error();
    return std::move(connected.value());
}

std::string upload_name(const std::string& local_path) {
    const std::filesystem::path p(local_path);
    return p.filename().empty() ? p.parent_path().filename().string() : p.filename().string();
}

Status upload_path(Connection& c, uint64_t session, const std::string& local_path, const std::string& name,
                   const std::function<void(uint64_t sent, uint64_t total)>& progress, std::chrono::milliseconds timeout) {
    namespace fs = std::filesystem;
    std::error_code ec;
    // What goes: the file, or the folder's regular files (one level: a .npy reference folder).
    std::vector<std::pair<std::string, std::string>> files;  // upload name, local path
    if (fs::is_directory(local_path, ec)) {
        for (const auto& entry : fs::directory_iterator(local_path, ec))
            if (entry.is_regular_file(ec) && entry.path().filename().string().front() != '.')
                files.emplace_back(name + "/" + entry.path().filename().string(), entry.path().string());
        std::sort(files.begin(), files.end());
        if (files.empty()) return make_error(ErrorCode::kBadInput, fmt::format("{}: a folder without files to upload", local_path));
    } else if (fs::is_regular_file(local_path, ec)) {
        files.emplace_back(name, local_path);
    } else {
        return make_error(ErrorCode::kBadInput, fmt::format("{}: no such file or folder here", local_path));
    }
    uint64_t total = 0, sent = 0;
    for (const auto& f : files) {
        if (!is_upload_name(f.first))
            return make_error(ErrorCode::kBadInput, fmt::format("{}: the server takes names of letters, digits, '.', '-' and '_' "
                                                                "(not starting with '.'); rename it to upload it", f.second));
        total += fs::file_size(f.second, ec);
    }
    auto answer = [&](const char* what) -> Status {
        auto frame = c.receive(kMaxFrameBytes, timeout);
        if (!frame) return frame.error();
        if (frame.value().type != MsgType::kCommandDone)
            return make_error(ErrorCode::kBadInput, fmt::format("the server answered an upload with a {} message", msg_type_name(frame.value().type)));
        auto done = decode_command_done(frame.value().payload);
        if (!done) return done.error();
        if (!done.value().error.empty())
            return make_error(ErrorCode::kBadInput, fmt::format("{}: {}: {}", local_path, what, done.value().error));
        return {};
    };
    std::string buffer(kChunkBytes, '\0');
    for (const auto& [file_name, path] : files) {
        std::FILE* f = std::fopen(path.c_str(), "rb");
        if (!f) return make_error(ErrorCode::kBadInput, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
        const uint64_t size = fs::file_size(path, ec);
        Status s = c.send(MsgType::kUpload, encode(Upload{session, file_name, size}));
        if (s) s = answer("refused by the server");  // its go-ahead
        for (uint64_t done = 0; s && done < size;) {
            const size_t n = std::fread(buffer.data(), 1, static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - done)), f);
            if (n == 0) {
                s = make_error(ErrorCode::kBadInput, fmt::format("{}: shorter than its {} bytes (changed while uploading?)", path, size));
                break;
            }
            s = c.send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(std::string_view(buffer.data(), n))}));
            done += n;
            sent += n;
            if (progress) progress(sent, total);
        }
        std::fclose(f);
        if (s) s = c.send(MsgType::kFileEnd, {});
        if (s) s = answer("the upload failed");
        if (!s) return s;
    }
    return {};
}

Result<ExecOutcome> remote_exec(const std::string& address, const std::string& token, const Exec& exec,
                                const std::vector<ClientTarget>& targets, std::FILE* out, std::FILE* err,
                                const ClientOptions& options, const std::vector<std::pair<std::string, std::string>>& uploads) {
    auto connected = connect_and_hello(address, token, options);
    if (!connected) return connected.error();
    Connection& c = *connected.value();
    for (const auto& [path, name] : uploads)
        if (Status s = upload_path(c, 0, path, name, {}, options.silence_timeout); !s) return s.error();
    if (Status s = c.send(MsgType::kExec, encode(exec)); !s) return s.error();
    std::map<uint32_t, Staged> staged;
    for (;;) {
        auto frame = c.receive(kMaxFrameBytes, options.silence_timeout);
        if (!frame) return lost(frame.error());
        const std::string& payload = frame.value().payload;
        switch (frame.value().type) {
            case MsgType::kPing: break;
            case MsgType::kOutput: {
                auto o = decode_output(payload);
                if (!o) return o.error();
                std::FILE* to = o.value().stream == 1 ? out : err;
                // The server writes each output's path on its side as "@out<N>": ours goes there.
                std::string text = std::move(o.value().bytes);
                for (size_t k = 0; k < targets.size(); ++k) {
                    const std::string mark = fmt::format("@out{}", k);
                    for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + targets[k].path.size()))
                        text.replace(at, mark.size(), targets[k].path);
                }
                // And an uploaded input's, "upload:NAME", is the path given here.
                for (const auto& [path, name] : uploads) {
                    const std::string mark = kUploadedPrefix + name;
                    for (size_t at = text.find(mark); at != std::string::npos; at = text.find(mark, at + path.size()))
                        text.replace(at, mark.size(), path);
                }
                std::fwrite(text.data(), 1, text.size(), to);
                std::fflush(to);
                break;
            }
            case MsgType::kFileBegin: {
                auto b = decode_file_begin(payload);
                if (!b) return b.error();
                const FileBegin& fb = b.value();
                if (fb.output >= targets.size())
                    return make_error(ErrorCode::kBadInput, fmt::format("{} sent output {}, of {} asked for", address, fb.output, targets.size()));
                const ClientTarget& t = targets[fb.output];
                if (t.folder == fb.name.empty())
                    return make_error(ErrorCode::kBadInput, fmt::format("{} sent {} for the {} {}", address,
                                                                        fb.name.empty() ? "a file" : "a named file",
                                                                        t.folder ? "folder" : "file", t.path));
                Staged& st = staged[fb.output];
                // Chunks until the file's end, written to `f`; the count must be the announced size.
                auto receive_into = [&](std::FILE* f) -> Status {
                    uint64_t written = 0;
                    for (;;) {
                        auto part = c.receive(kMaxFrameBytes, options.silence_timeout);
                        if (!part) return lost(part.error());
                        if (part.value().type == MsgType::kPing) continue;
                        if (part.value().type == MsgType::kFileEnd) break;
                        if (part.value().type != MsgType::kFileChunk)
                            return make_error(ErrorCode::kBadInput, fmt::format("{} sent a {} message inside a file", address,
                                                                                msg_type_name(part.value().type)));
                        auto chunk = decode_file_chunk(part.value().payload);
                        if (!chunk) return chunk.error();
                        auto bytes = decompress_chunk(chunk.value().compressed, kChunkBytes);
                        if (!bytes) return bytes.error();
                        written += bytes.value().size();
                        if (written > fb.size)
                            return make_error(ErrorCode::kBadInput, fmt::format("{} sent more than the {} bytes it announced", address, fb.size));
                        if (std::fwrite(bytes.value().data(), 1, bytes.value().size(), f) != bytes.value().size())
                            return make_error(ErrorCode::kIo, fmt::format("cannot write {}", t.path));
                    }
                    if (written != fb.size)
                        return make_error(ErrorCode::kBadInput, fmt::format("{} sent {} of the {} bytes it announced", address, written, fb.size));
                    return {};
                };
                if (!t.folder) {
                    if (st.file) return make_error(ErrorCode::kBadInput, fmt::format("{} sent {} twice", address, t.path));
                    auto file = StagedFile::create(t.path, t.overwrite);
                    if (!file) return file.error();
                    st.file = std::move(file.value());
                    if (Status s = receive_into(st.file->file()); !s) return s.error();
                } else {
                    if (!st.folder) {
                        auto folder = StagedFolder::create(t.path, t.overwrite);
                        if (!folder) return folder.error();
                        st.folder = std::move(folder.value());
                    }
                    if (Status s = st.folder->write_file(fb.name, receive_into); !s) return s.error();
                }
                break;
            }
            case MsgType::kExit: {
                auto e = decode_exit(payload);
                if (!e) return e.error();
                for (auto& [index, st] : staged) {
                    Status s = st.file ? st.file->commit() : st.folder->commit();
                    if (!s) return s.error();
                }
                return ExecOutcome{e.value().code, c.bytes_sent(), c.bytes_received()};
            }
            default:
                return make_error(ErrorCode::kBadInput, fmt::format("{} sent an unexpected {} message", address, msg_type_name(frame.value().type)));
        }
    }
}

}  // namespace ls::remote
