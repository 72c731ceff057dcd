// Remote sessions: the wire format's bounds, the token and the folders a server reads, and a
// server on loopback driven by clients through commands, refusals and faults (a client gone
// mid-command, the server stopped mid-command, a frame above the limit). Threads: the server's
// accept loop and one thread per connection (this suite runs under ThreadSanitizer too).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "engine/capture/export.h"
#include "engine/compare/backend_ab.h"
#include "engine/compare/reference.h"
#include "engine/compare/snapshot_diagnosis.h"
#include "engine/forward/faults.h"
#include "engine/forward/forward.h"
#include "engine/forward/model.h"
#include "engine/model/model_summary.h"
#include "engine/model/quant_block.h"
#include "kernels/backend.h"
#include "engine/remote/access.h"
#include "engine/remote/remote_session.h"
#include "engine/remote/client.h"
#include "engine/remote/connection.h"
#include "engine/remote/server.h"
#include "engine/remote/tls.h"
#include "engine/remote/wire.h"
#include "tests/test_support.h"

namespace ls::remote {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// --- wire -------------------------------------------------------------------------------------

TEST(RemoteWire, EveryMessageDecodesToWhatWasEncoded) {
    auto hello = decode_hello(encode(Hello{kProtocolVersion, "secret-token-0123"}));
    ASSERT_TRUE(hello);
    EXPECT_EQ(hello.value().token, "secret-token-0123");
    auto welcome = decode_welcome(encode(Welcome{1, "srv", {"/a", "/b"}}));
    ASSERT_TRUE(welcome);
    EXPECT_EQ(welcome.value().roots, (std::vector<std::string>{"/a", "/b"}));
    auto exec = decode_exec(encode(Exec{"run", {"-m", "x.gguf", "", "--dump=@out0"}}));
    ASSERT_TRUE(exec);
    EXPECT_EQ(exec.value().command, "run");
    EXPECT_EQ(exec.value().args, (std::vector<std::string>{"-m", "x.gguf", "", "--dump=@out0"}));
    auto out = decode_output(encode(Output{2, std::string("a\0b", 3)}));
    ASSERT_TRUE(out);
    EXPECT_EQ(out.value().stream, 2);
    EXPECT_EQ(out.value().bytes, std::string("a\0b", 3));
    auto begin = decode_file_begin(encode(FileBegin{3, "t.npy", 1ull << 40}));
    ASSERT_TRUE(begin);
    EXPECT_EQ(begin.value().output, 3u);
    EXPECT_EQ(begin.value().size, 1ull << 40);
    Opened opened_msg;
    opened_msg.session = 9;
    opened_msg.model = "m.gguf: llama, 2 layers, n_embd 64";
    opened_msg.backend = "CPU";
    opened_msg.model_path = "m.gguf";
    opened_msg.file_bytes = 1ull << 34;
    opened_msg.header_bytes = 5u << 20;
    auto opened = decode_opened(encode(opened_msg));
    ASSERT_TRUE(opened);
    EXPECT_EQ(opened.value().model_path, "m.gguf");
    EXPECT_EQ(opened.value().file_bytes, 1ull << 34);
    EXPECT_EQ(opened.value().header_bytes, 5u << 20);
    // A header longer than its file, or than a client takes, is refused before anything is read.
    opened_msg.header_bytes = opened_msg.file_bytes + 1;
    EXPECT_FALSE(decode_opened(encode(opened_msg)));
    opened_msg.header_bytes = kMaxModelHeaderBytes + 1;
    EXPECT_FALSE(decode_opened(encode(opened_msg)));
    auto attach = decode_attach(encode(Attach{12, true}));
    ASSERT_TRUE(attach);
    EXPECT_EQ(attach.value().session, 12u);
    EXPECT_TRUE(attach.value().have_header);
    EXPECT_FALSE(decode_attach(encode(Attach{12, false})).value().have_header);
    auto exit = decode_exit(encode(Exit{3}));
    ASSERT_TRUE(exit);
    EXPECT_EQ(exit.value().code, 3);
    auto diagnose = decode_diagnose(encode(Diagnose{7, 42, true}));
    ASSERT_TRUE(diagnose);
    EXPECT_EQ(diagnose.value().request, 7u);
    EXPECT_EQ(diagnose.value().event, 42);
    EXPECT_TRUE(diagnose.value().stop);
    Diagnosis d;
    d.request = 7;
    d.event = 42;
    d.step = "rope";
    d.tried = 3;
    d.verdict = "halves";
    d.has_local = true;
    d.local.resize(2);
    d.local[0].event_index = 5;
    d.local[1].event_index = 40;
    d.local[1].local_origin = LocalOrigin::kLocal;
    d.local[1].local_nmse = 0.25;
    auto diagnosis = decode_diagnosis(encode(d));
    ASSERT_TRUE(diagnosis);
    EXPECT_EQ(diagnosis.value().verdict, "halves");
    ASSERT_EQ(diagnosis.value().local.size(), 2u);
    EXPECT_EQ(diagnosis.value().local[1].event_index, 40);
    EXPECT_EQ(diagnosis.value().local[1].local_origin, LocalOrigin::kLocal);
    EXPECT_EQ(diagnosis.value().local[1].local_nmse, 0.25);
    d.local[0].event_index = -1;  // an event index no snapshot has
    EXPECT_FALSE(decode_diagnosis(encode(d)));
    auto upload = decode_upload(encode(Upload{3, "npy_ref/manifest.json", 1ull << 33}));
    ASSERT_TRUE(upload);
    EXPECT_EQ(upload.value().name, "npy_ref/manifest.json");
    EXPECT_EQ(upload.value().size, 1ull << 33);
    // An uploaded file's name is a plain name, or one folder and a plain name: nothing else.
    for (const char* bad : {"", "../x", "a/../b", "/etc/passwd", ".hidden", "a/.b", "a/b/c", "a//b", "a/", "a b", "a\\b"}) {
        EXPECT_FALSE(is_upload_name(bad)) << bad;
        EXPECT_FALSE(decode_upload(encode(Upload{3, bad, 1}))) << bad;
    }
    for (const char* good : {"ref.gguf", "ref_npy/manifest.json", "a-1.b_2"}) EXPECT_TRUE(is_upload_name(good)) << good;
    EXPECT_FALSE(is_upload_name(std::string(256, 'a')));

    auto lens_ask = decode_lens(encode(Lens{11}));
    ASSERT_TRUE(lens_ask);
    EXPECT_EQ(lens_ask.value().request, 11u);
    LensResult lr;
    lr.request = 11;
    lr.lens.lens.top_k = 2;
    LensLayer layer;
    layer.layer = 3;
    layer.cells.push_back(LensCell{1, 7, {{5, 0.5}, {7, 0.25}}, {{5, 0.625}}, 0.03125});
    layer.kl = KlStats{1, 0.03125, 0.03125, 0.03125, 0.03125, 0.03125, 1.0};
    lr.lens.lens.layers.push_back(layer);
    lr.lens.lens.arrivals.push_back(LensArrival{1, 7, 5, 5, 3, -1});
    lr.lens.lens.first_divergent_layer = 3;
    lr.lens.lens.first_top1_change = -1;
    lr.lens.lens.why = "no reference logits";
    lr.lens.events.push_back(LensEvent{3, 1, 7, 99});
    auto lens = decode_lens_result(encode(lr));
    ASSERT_TRUE(lens) << lens.error().message;
    const SnapshotLens& got = lens.value().lens;
    EXPECT_EQ(lens.value().request, 11u);
    EXPECT_EQ(got.lens.top_k, 2);
    ASSERT_EQ(got.lens.layers.size(), 1u);
    EXPECT_EQ(got.lens.layers[0].layer, 3);
    ASSERT_EQ(got.lens.layers[0].cells.size(), 1u);
    const LensCell& cell = got.lens.layers[0].cells[0];
    EXPECT_EQ(cell.position, 7);
    ASSERT_EQ(cell.ours.size(), 2u);
    EXPECT_EQ(cell.ours[1].token, 7);
    EXPECT_EQ(cell.ours[1].p, 0.25);
    ASSERT_EQ(cell.reference.size(), 1u);
    EXPECT_EQ(cell.kl, 0.03125);
    EXPECT_EQ(got.lens.layers[0].kl.same_top1, 1.0);
    ASSERT_EQ(got.lens.arrivals.size(), 1u);
    EXPECT_EQ(got.lens.arrivals[0].reference_layer, -1);
    EXPECT_EQ(got.lens.first_divergent_layer, 3);
    EXPECT_EQ(got.lens.why, "no reference logits");
    ASSERT_EQ(got.events.size(), 1u);
    EXPECT_EQ(got.events[0].event, 99);
    // A token or an event no model has is refused; so is a count beyond the bytes that follow.
    lr.lens.events[0].event = -1;
    EXPECT_FALSE(decode_lens_result(encode(lr)));
    lr.lens.events[0].event = 99;
    lr.lens.lens.layers[0].cells[0].ours[0].token = -5;
    EXPECT_FALSE(decode_lens_result(encode(lr)));
    lr.lens.lens.layers[0].cells[0].ours[0].token = 5;
    std::string bytes = encode(lr);
    ASSERT_TRUE(decode_lens_result(bytes));
    EXPECT_FALSE(decode_lens_result(bytes.substr(0, bytes.size() - 1)));
    LensResult failed;
    failed.request = 12;
    failed.lens.error = "the session has no reference";
    auto refused = decode_lens_result(encode(failed));
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused.value().lens.error, "the session has no reference");

    // A weight asked for, and its header; a name longer than any tensor's is refused.
    auto fw = decode_fetch_weight(encode(FetchWeight{"blk.3.ffn_down.weight"}));
    ASSERT_TRUE(fw);
    EXPECT_EQ(fw.value().name, "blk.3.ffn_down.weight");
    EXPECT_FALSE(decode_fetch_weight(encode(FetchWeight{std::string(5000, 'x')})));
    auto wh = decode_weight_header(encode(WeightHeader{"output.weight", 123456789, ""}));
    ASSERT_TRUE(wh);
    EXPECT_EQ(wh.value().name, "output.weight");
    EXPECT_EQ(wh.value().bytes, 123456789u);
    auto whe = decode_weight_header(encode(WeightHeader{"x", 0, "x: no tensor of that name"}));
    ASSERT_TRUE(whe);
    EXPECT_EQ(whe.value().error, "x: no tensor of that name");
    const std::string header_bytes = encode(WeightHeader{"output.weight", 7, ""});
    EXPECT_FALSE(decode_weight_header(header_bytes.substr(0, header_bytes.size() - 1)));
    // The fault and backend A/B commands; a kind past the last is refused.
    Command fault;
    fault.kind = CommandKind::kSetFault;
    fault.text = "rope-pairing";
    auto f = decode_command(encode(fault));
    ASSERT_TRUE(f);
    EXPECT_EQ(f.value().kind, CommandKind::kSetFault);
    EXPECT_EQ(f.value().text, "rope-pairing");
    fault.kind = CommandKind::kCompareBackend;
    auto ab = decode_command(encode(fault));
    ASSERT_TRUE(ab);
    EXPECT_EQ(ab.value().kind, CommandKind::kCompareBackend);
    fault.kind = static_cast<CommandKind>(kLastCommandKind + 1);
    EXPECT_FALSE(decode_command(encode(fault)));
}

TEST(RemoteWire, HeadersAreRefusedBeforeTheirPayload) {
    std::string frame = make_frame(MsgType::kExec, std::string(100, 'x'));
    const auto* h = reinterpret_cast<const uint8_t*>(frame.data());
    ASSERT_TRUE(parse_frame_header(h, 100));
    auto over = parse_frame_header(h, 99);
    ASSERT_FALSE(over);
    EXPECT_NE(over.error().message.find("above the limit of 99 bytes"), std::string::npos) << over.error().message;
    frame[0] = 'X';
    EXPECT_FALSE(parse_frame_header(h, 100));
    frame[0] = 'L';
    frame[4] = 0;  // no message type 0
    EXPECT_FALSE(parse_frame_header(h, 100));
    frame[4] = kLastMsgType + 1;
    EXPECT_FALSE(parse_frame_header(h, 100));
}

TEST(RemoteWire, LengthsAndCountsAreCheckedAgainstThePayload) {
    // A count of 2^31 arguments in a 12-byte payload: refused, nothing reserved for them.
    PayloadWriter w;
    w.str("run");
    w.u32(0x80000000u);
    EXPECT_FALSE(decode_exec(w.take()));
    // A string longer than what follows.
    PayloadWriter s;
    s.u32(1);
    s.u32(1000);
    s.u8('a');
    EXPECT_FALSE(decode_hello(s.take()));
    // Every prefix of a valid message is refused, and so is one byte more.
    const std::string good = encode(Exec{"export", {"--gguf", "@out0", "-m", "m.gguf"}});
    for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(decode_exec(good.substr(0, n))) << n;
    EXPECT_FALSE(decode_exec(good + "x"));
    // Names inside a folder output are one plain component.
    EXPECT_FALSE(decode_file_begin(encode(FileBegin{0, "../x", 1})));
    EXPECT_FALSE(decode_file_begin(encode(FileBegin{0, "..", 1})));
    EXPECT_FALSE(decode_exit(encode(Exit{256})));
    EXPECT_FALSE(decode_output(encode(Output{3, "x"})));
}

TEST(RemoteWire, ChunksDecompressWithinTheirBound) {
    const std::string data(100000, 'q');
    const std::string z = compress_chunk(data);
    EXPECT_LT(z.size(), data.size() / 10);
    auto back = decompress_chunk(z, data.size());
    ASSERT_TRUE(back);
    EXPECT_EQ(back.value(), data);
    EXPECT_FALSE(decompress_chunk(z, data.size() - 1));  // says more than allowed
    EXPECT_FALSE(decompress_chunk("not zstd", 100));
    EXPECT_FALSE(decompress_chunk(z.substr(0, z.size() - 3), data.size()));
}

// --- token and folders ------------------------------------------------------------------------

unsigned mode_of(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 ? st.st_mode & 0777 : 0;
}
// A file of mode 0600 holding `text`.
void write_private(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0600);
}

TEST(RemoteAccess, TheTokenIsMadeOnceWithMode0600AndCheckedOnRead) {
    const std::string dir = test::make_temp_dir();
    const std::string path = dir + "/cfg/serve-token";
    bool created = false;
    auto token = load_or_create_token(path, &created);
    ASSERT_TRUE(token) << token.error().message;
    EXPECT_TRUE(created);
    EXPECT_EQ(token.value().size(), 64u);
    EXPECT_EQ(mode_of(path), 0600u);
    auto again = load_or_create_token(path, &created);
    ASSERT_TRUE(again);
    EXPECT_FALSE(created);
    EXPECT_EQ(again.value(), token.value());
    auto client = read_token(path);
    ASSERT_TRUE(client);
    EXPECT_TRUE(tokens_equal(client.value(), token.value()));
    EXPECT_FALSE(tokens_equal(client.value(), token.value().substr(1)));
    EXPECT_FALSE(tokens_equal(client.value(), ""));

    ::chmod(path.c_str(), 0644);
    auto open = read_token(path);
    ASSERT_FALSE(open);
    EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;
    EXPECT_FALSE(load_or_create_token(path));
    auto missing = read_token(dir + "/nothing");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("no token file at"), std::string::npos);
    write_private(dir + "/short", "abc\n");
    EXPECT_FALSE(read_token(dir + "/short"));
}

TEST(RemoteAccess, TheTlsIdentityIsMadeOnceAndItsFingerprintGoesInTheTokenFile) {
    const std::string dir = test::make_temp_dir();
    const std::string token_path = dir + "/cfg/serve-token";
    ASSERT_TRUE(load_or_create_token(token_path));
    const std::string path = default_tls_identity_path(token_path);
    EXPECT_EQ(path, dir + "/cfg/serve-tls.pem");
    bool created = false;
    auto identity = load_or_create_tls_identity(path, &created);
    ASSERT_TRUE(identity) << identity.error().message;
    EXPECT_TRUE(created);
    EXPECT_TRUE(is_sha256_hex(identity.value().sha256)) << identity.value().sha256;
    EXPECT_NE(identity.value().pem.find("PRIVATE KEY"), std::string::npos);
    EXPECT_NE(identity.value().pem.find("BEGIN CERTIFICATE"), std::string::npos);
    EXPECT_EQ(mode_of(path), 0600u);
    auto again = load_or_create_tls_identity(path, &created);
    ASSERT_TRUE(again);
    EXPECT_FALSE(created);
    EXPECT_EQ(again.value().sha256, identity.value().sha256);
    EXPECT_EQ(again.value().pem, identity.value().pem);
    // Another identity's certificate under this one's key is refused.
    auto other = load_or_create_tls_identity(dir + "/other.pem");
    ASSERT_TRUE(other);
    EXPECT_NE(other.value().sha256, identity.value().sha256);
    const std::string& pem = identity.value().pem;
    const std::string& other_pem = other.value().pem;
    write_private(dir + "/mixed.pem", pem.substr(0, pem.find("-----BEGIN CERTIFICATE")) +
                                          other_pem.substr(other_pem.find("-----BEGIN CERTIFICATE")));
    auto mixed = load_or_create_tls_identity(dir + "/mixed.pem");
    ASSERT_FALSE(mixed);
    EXPECT_NE(mixed.error().message.find("its certificate is not its key's"), std::string::npos) << mixed.error().message;
    ::chmod(path.c_str(), 0640);
    auto open = load_or_create_tls_identity(path);
    ASSERT_FALSE(open);
    EXPECT_NE(open.error().message.find("chmod 600"), std::string::npos) << open.error().message;

    // The fingerprint in the token file: the token stays, the mode stays 0600, a second record
    // with the same fingerprint changes nothing and a new one replaces the line.
    const std::string token = load_or_create_token(token_path).value();
    ASSERT_TRUE(record_tls_fingerprint(token_path, identity.value().sha256));
    auto credentials = read_credentials(token_path);
    ASSERT_TRUE(credentials) << credentials.error().message;
    EXPECT_EQ(credentials.value().token, token);
    EXPECT_EQ(credentials.value().tls_sha256, identity.value().sha256);
    EXPECT_EQ(load_or_create_token(token_path).value(), token);
    EXPECT_EQ(mode_of(token_path), 0600u);
    ASSERT_TRUE(record_tls_fingerprint(token_path, other.value().sha256));
    EXPECT_EQ(read_all(token_path), token + "\ntls-sha256 " + other.value().sha256 + "\n");
    // A line that is neither: refused with its number.
    write_private(dir + "/odd-token", token + "\ntls-sha256 XYZ\n");
    auto odd = read_credentials(dir + "/odd-token");
    ASSERT_FALSE(odd);
    EXPECT_NE(odd.error().message.find("line 2"), std::string::npos) << odd.error().message;
}

TEST(RemoteAccess, InputsMustLieInsideARoot) {
    const std::string dir = test::make_temp_dir();
    fs::create_directories(dir + "/root/sub");
    fs::create_directories(dir + "/rootx");
    std::ofstream(dir + "/root/sub/m.gguf") << "x";
    std::ofstream(dir + "/rootx/m.gguf") << "x";
    std::ofstream(dir + "/secret") << "x";
    fs::create_symlink(dir + "/secret", dir + "/root/link");
    auto roots = Roots::make({dir + "/root"});
    ASSERT_TRUE(roots);
    auto rel = roots.value().resolve_input("sub/m.gguf");
    ASSERT_TRUE(rel) << rel.error().message;
    EXPECT_EQ(rel.value(), fs::canonical(dir + "/root/sub/m.gguf").string());
    EXPECT_TRUE(roots.value().resolve_input(dir + "/root/sub/m.gguf"));
    auto up = roots.value().resolve_input("../secret");
    ASSERT_FALSE(up);
    EXPECT_NE(up.error().message.find("is outside the folders this server reads"), std::string::npos) << up.error().message;
    EXPECT_FALSE(roots.value().resolve_input("link"));               // a link out of the root
    EXPECT_FALSE(roots.value().resolve_input(dir + "/rootx/m.gguf"));  // a sibling sharing the prefix
    EXPECT_FALSE(roots.value().resolve_input("/etc/passwd"));
    EXPECT_FALSE(roots.value().resolve_input("sub/absent.gguf"));
    EXPECT_FALSE(Roots::make({dir + "/secret"}));  // a file is no root
}

// --- a server on loopback ----------------------------------------------------------------------

// A server whose "commands" are shell scripts: exec.command "sh" runs args[0] with /bin/sh in the
// first root; an argument "@out0" becomes the scratch path of output 0 (a file), "@dir0" of a
// folder output 0.
class LoopbackServer {
public:
    explicit LoopbackServer(int max_connections = 8, std::chrono::milliseconds ping = 5000ms, std::vector<std::string> more_roots = {},
                            std::string tls_identity_pem = {}, std::string listen = "127.0.0.1:0") {
        dir_ = test::make_temp_dir();
        fs::create_directories(dir_ + "/root");
        std::vector<std::string> roots = {dir_ + "/root"};
        roots.insert(roots.end(), more_roots.begin(), more_roots.end());
        token_ = "0123456789abcdef0123456789abcdef";
        ServerOptions o;
        o.listen = listen;
        o.token = token_;
        o.roots = Roots::make(roots).value();
        o.max_connections = max_connections;
        o.ping_interval = ping;
        o.tls_identity_pem = tls_identity_pem;
        o.log = [this](const std::string& line) {
            std::lock_guard<std::mutex> lock(mu_);
            log_ += line + "\n";
        };
        o.policy = [](const Exec& exec, const Roots& roots, const std::string& scratch) {
            ExecPlan plan;
            if (exec.command != "sh" || exec.args.empty()) {
                plan.refuse_code = 2;
                plan.refuse_message = "layerscope " + exec.command + ": not a command here";
                return plan;
            }
            plan.argv = {"/bin/sh", "-c", exec.args[0]};
            for (size_t i = 1; i < exec.args.size(); ++i) {
                const std::string& a = exec.args[i];
                if (a == "@out0" || a == "@dir0") {
                    plan.outputs = {{scratch + "/out0", a == "@dir0"}};
                    plan.argv.push_back(plan.outputs[0].path);
                } else {
                    plan.argv.push_back(a);
                }
            }
            if (plan.argv.size() > 3) plan.argv.insert(plan.argv.begin() + 3, "script");  // $0
            plan.cwd = roots.folders().front();
            return plan;
        };
        auto s = Server::start(std::move(o));
        EXPECT_TRUE(s) << (s ? "" : s.error().message);
        server_ = std::move(s.value());
        thread_ = std::thread([this] { server_->run(); });
    }
    ~LoopbackServer() { stop(); }
    void stop() {
        if (!server_) return;
        server_->stop();
        thread_.join();
        server_.reset();
    }
    std::string address() const { return server_->address(); }
    const std::string& token() const { return token_; }
    const std::string& dir() const { return dir_; }
    std::string log() {
        std::lock_guard<std::mutex> lock(mu_);
        return log_;
    }
    // Waits up to 10 s for `text` in the log.
    bool wait_for_log(const std::string& text) {
        for (int i = 0; i < 1000; ++i) {
            if (log().find(text) != std::string::npos) return true;
            std::this_thread::sleep_for(10ms);
        }
        return false;
    }

private:
    std::string dir_, token_;
    std::unique_ptr<Server> server_;
    std::thread thread_;
    std::mutex mu_;
    std::string log_;
};

// Runs `exec` with its stdout and stderr captured.
struct Captured {
    Result<ExecOutcome> outcome = make_error(ErrorCode::kInternal, "not run");
    std::string out, err;
};
Captured exec_on(const LoopbackServer& s, const std::string& token, Exec exec, std::vector<ClientTarget> targets = {},
                 ClientOptions options = {}) {
    Captured c;
    std::FILE* out = std::tmpfile();
    std::FILE* err = std::tmpfile();
    c.outcome = remote_exec(s.address(), token, exec, targets, out, err, options);
    auto slurp = [](std::FILE* f) {
        std::string text;
        std::rewind(f);
        char buf[4096];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
        std::fclose(f);
        return text;
    };
    c.out = slurp(out);
    c.err = slurp(err);
    return c;
}

TEST(RemoteServer, RelaysOutputExitCodeAndFiles) {
    LoopbackServer s;
    const std::string target = s.dir() + "/here.bin";
    // 9 MB of output file: three chunks.
    auto r = exec_on(s, s.token(),
                     Exec{"sh", {"printf 'to out\\n'; printf 'to err\\n' >&2; head -c 9000000 /dev/zero | tr '\\0' 'z' > \"$1\"; exit 3", "@out0"}},
                     {{target, false, false}});
    ASSERT_TRUE(r.outcome) << r.outcome.error().message;
    EXPECT_EQ(r.outcome.value().exit_code, 3);
    EXPECT_EQ(r.out, "to out\n");
    EXPECT_EQ(r.err, "to err\n");
    const std::string got = read_all(target);
    EXPECT_EQ(got.size(), 9000000u);
    EXPECT_EQ(got.find_first_not_of('z'), std::string::npos);
    EXPECT_LT(r.outcome.value().bytes_received, 100000u);  // compressed
    // A folder output: each file, written as a StagedFolder.
    const std::string folder = s.dir() + "/outdir";
    auto f = exec_on(s, s.token(), Exec{"sh", {"mkdir \"$1\" && echo a > \"$1\"/a.npy && echo bb > \"$1\"/b.npy", "@dir0"}},
                     {{folder, true, false}});
    ASSERT_TRUE(f.outcome) << f.outcome.error().message;
    EXPECT_EQ(f.outcome.value().exit_code, 0);
    EXPECT_EQ(read_all(folder + "/a.npy"), "a\n");
    EXPECT_EQ(read_all(folder + "/b.npy"), "bb\n");
    // The command runs in the first root.
    auto pwd = exec_on(s, s.token(), Exec{"sh", {"pwd"}});
    ASSERT_TRUE(pwd.outcome);
    EXPECT_EQ(pwd.out, fs::canonical(s.dir() + "/root").string() + "\n");
    // A refusal of the policy is the command's own stderr and exit code.
    auto refused = exec_on(s, s.token(), Exec{"rm", {"-rf", "/"}});
    ASSERT_TRUE(refused.outcome);
    EXPECT_EQ(refused.outcome.value().exit_code, 2);
    EXPECT_EQ(refused.err, "layerscope rm: not a command here\n");
}

TEST(RemoteServer, AWrongTokenIsRefusedAndLogged) {
    LoopbackServer s;
    auto r = exec_on(s, "0123456789abcdef0123456789abcdeX", Exec{"sh", {"echo hi"}});
    ASSERT_FALSE(r.outcome);
    EXPECT_NE(r.outcome.error().message.find("refused the connection: wrong token"), std::string::npos) << r.outcome.error().message;
    EXPECT_TRUE(s.wait_for_log("refused: wrong token")) << s.log();
    EXPECT_EQ(r.out, "");
}

TEST(RemoteServer, AFrameAboveTheLimitIsRefusedFromItsHeader) {
    LoopbackServer s;
    auto c = Connection::connect(s.address(), 5s);
    ASSERT_TRUE(c);
    // Before the token: a hello one byte above its limit.
    ASSERT_TRUE(c.value()->send(MsgType::kHello, std::string(kMaxHelloBytes + 1, 't')));
    EXPECT_TRUE(s.wait_for_log("above the limit of 4096 bytes")) << s.log();
    // The server goes on: a real client is served.
    auto r = exec_on(s, s.token(), Exec{"sh", {"echo still here"}});
    ASSERT_TRUE(r.outcome) << r.outcome.error().message;
    EXPECT_EQ(r.out, "still here\n");
    // After the token: an exec above the frame limit.
    auto c2 = Connection::connect(s.address(), 5s);
    ASSERT_TRUE(c2);
    ASSERT_TRUE(c2.value()->send(MsgType::kHello, encode(Hello{kProtocolVersion, s.token()})));
    auto welcome = c2.value()->receive(kMaxFrameBytes, 5s);
    ASSERT_TRUE(welcome);
    EXPECT_EQ(welcome.value().type, MsgType::kWelcome);
    (void)c2.value()->send(MsgType::kExec, std::string(kMaxFrameBytes + 1, 'x'), 5s);
    EXPECT_TRUE(s.wait_for_log("above the limit of 8388608 bytes")) << s.log();
}

TEST(RemoteServer, AClientGoneMidCommandStopsItAndTheServerGoesOn) {
    LoopbackServer s;
    // Another client's command runs meanwhile, undisturbed.
    std::thread other([&] {
        auto r = exec_on(s, s.token(), Exec{"sh", {"sleep 1; touch other-finished; echo other"}});
        ASSERT_TRUE(r.outcome) << r.outcome.error().message;
        EXPECT_EQ(r.out, "other\n");
    });
    // A client that vanishes (as a killed process does: its socket closes) mid-command.
    auto raw = Connection::connect(s.address(), 5s);
    ASSERT_TRUE(raw);
    ASSERT_TRUE(raw.value()->send(MsgType::kHello, encode(Hello{kProtocolVersion, s.token()})));
    ASSERT_TRUE(raw.value()->receive(kMaxFrameBytes, 5s));
    ASSERT_TRUE(raw.value()->send(MsgType::kExec, encode(Exec{"sh", {"echo raw; sleep 30; touch raw-finished"}})));
    auto first = raw.value()->receive(kMaxFrameBytes, 5s);
    ASSERT_TRUE(first);
    EXPECT_EQ(first.value().type, MsgType::kOutput);
    raw.value().reset();
    EXPECT_TRUE(s.wait_for_log("went away during sh; the command was stopped")) << s.log();
    other.join();
    EXPECT_TRUE(fs::exists(s.dir() + "/root/other-finished"));
    EXPECT_FALSE(fs::exists(s.dir() + "/root/raw-finished"));
    // The next connection is served.
    auto r = exec_on(s, s.token(), Exec{"sh", {"echo next"}});
    ASSERT_TRUE(r.outcome);
    EXPECT_EQ(r.out, "next\n");
}

TEST(RemoteServer, TheServerStoppedMidCommandLeavesNoOutputFile) {
    auto s = std::make_unique<LoopbackServer>();
    const std::string target = s->dir() + "/never.bin";
    std::thread stopper([&] {
        EXPECT_TRUE(s->wait_for_log("connected"));
        std::this_thread::sleep_for(300ms);
        s->stop();
    });
    auto r = exec_on(*s, s->token(), Exec{"sh", {"echo x > \"$1\"; sleep 20", "@out0"}}, {{target, false, false}});
    stopper.join();
    ASSERT_FALSE(r.outcome);
    EXPECT_NE(r.outcome.error().message.find("nothing was written here"), std::string::npos) << r.outcome.error().message;
    EXPECT_FALSE(fs::exists(target));
    for (const auto& e : fs::directory_iterator(s->dir())) EXPECT_EQ(e.path().filename().string().find(".never.bin"), std::string::npos);
    // Nothing listens any more: a client is told so.
    auto after = remote_exec("127.0.0.1:1", s->token(), Exec{"sh", {"true"}}, {}, stdout, stderr);
    ASSERT_FALSE(after);
    EXPECT_NE(after.error().message.find("cannot connect to 127.0.0.1:1"), std::string::npos) << after.error().message;
}

TEST(RemoteServer, QuietCommandsArePingedAndBusyServersSaySo) {
    LoopbackServer s(1, 100ms);
    std::thread first([&] {
        ClientOptions quick;
        quick.connect_timeout = 5s;
        quick.silence_timeout = 400ms;
        auto r = exec_on(s, s.token(), Exec{"sh", {"sleep 1; echo done"}}, {}, quick);
        ASSERT_TRUE(r.outcome) << r.outcome.error().message;  // 1 s of silence, pinged every 100 ms
        EXPECT_EQ(r.out, "done\n");
    });
    ASSERT_TRUE(s.wait_for_log("connected"));
    auto busy = exec_on(s, s.token(), Exec{"sh", {"true"}});
    ASSERT_FALSE(busy.outcome);
    EXPECT_NE(busy.outcome.error().message.find("busy: 1 connections are open"), std::string::npos) << busy.outcome.error().message;
    first.join();
}

TEST(RemoteServer, OnlyLoopbackIsServed) {
    ServerOptions o;
    o.listen = "0.0.0.0:0";
    o.token = "0123456789abcdef";
    o.roots = Roots::make({test::make_temp_dir()}).value();
    o.policy = [](const Exec&, const Roots&, const std::string&) { return ExecPlan{}; };
    auto s = Server::start(o);
    ASSERT_FALSE(s);
    EXPECT_NE(s.error().message.find("not a loopback address, and the connections would not be encrypted"), std::string::npos)
        << s.error().message;
    // With TLS it listens there.
    auto identity = load_or_create_tls_identity(test::make_temp_dir() + "/tls.pem");
    ASSERT_TRUE(identity);
    o.tls_identity_pem = identity.value().pem;
    auto tls = Server::start(o);
    ASSERT_TRUE(tls) << tls.error().message;
    EXPECT_EQ(tls.value()->address().rfind("0.0.0.0:", 0), 0u) << tls.value()->address();
    tls.value().reset();
    o.tls_identity_pem = "not a PEM";
    EXPECT_FALSE(Server::start(o));
    o.tls_identity_pem.clear();
    o.listen = "127.0.0.1:99999";
    EXPECT_FALSE(Server::start(o));
    o.listen = "127.0.0.1:0";
    o.token.clear();
    EXPECT_FALSE(Server::start(o));
}

TEST(RemoteServer, TlsConnectionsArePinnedToTheTokenFilesCertificate) {
    auto identity = load_or_create_tls_identity(test::make_temp_dir() + "/tls.pem");
    ASSERT_TRUE(identity);
    LoopbackServer s(8, 5000ms, {}, identity.value().pem);
    ClientOptions pinned;
    pinned.tls_sha256 = identity.value().sha256;
    // Output, exit code and a 9 MB file (many TLS records) as over a plain connection.
    const std::string target = s.dir() + "/here.bin";
    auto r = exec_on(s, s.token(), Exec{"sh", {"echo over tls; head -c 9000000 /dev/urandom > \"$1\"; exit 4", "@out0"}},
                     {{target, false, false}}, pinned);
    ASSERT_TRUE(r.outcome) << r.outcome.error().message;
    EXPECT_EQ(r.outcome.value().exit_code, 4);
    EXPECT_EQ(r.out, "over tls\n");
    EXPECT_EQ(fs::file_size(target), 9000000u);
    EXPECT_GT(r.outcome.value().bytes_received, 9000000u);  // random bytes do not compress
    // Another certificate's fingerprint: refused before the token goes out.
    ClientOptions wrong = pinned;
    wrong.tls_sha256[0] = wrong.tls_sha256[0] == '0' ? '1' : '0';
    auto w = exec_on(s, s.token(), Exec{"sh", {"echo no"}}, {}, wrong);
    ASSERT_FALSE(w.outcome);
    EXPECT_NE(w.outcome.error().message.find("is not the one the token file names"), std::string::npos) << w.outcome.error().message;
    // A plain client is refused, and told why.
    auto plain = exec_on(s, s.token(), Exec{"sh", {"echo no"}});
    ASSERT_FALSE(plain.outcome);
    EXPECT_NE(plain.outcome.error().message.find("this server speaks TLS only"), std::string::npos) << plain.outcome.error().message;
    EXPECT_TRUE(s.wait_for_log("a plain hello to a TLS server")) << s.log();
    EXPECT_EQ(s.log().find("wrong token"), std::string::npos) << s.log();
    // TLS asked of a plain server fails in the handshake, saying so.
    LoopbackServer clear;
    auto tls_to_plain = exec_on(clear, clear.token(), Exec{"sh", {"echo no"}}, {}, pinned);
    ASSERT_FALSE(tls_to_plain.outcome);
    EXPECT_NE(tls_to_plain.outcome.error().message.find("the TLS handshake with"), std::string::npos) << tls_to_plain.outcome.error().message;
    // Without a pinned certificate, only a loopback address is tried.
    auto off = remote_exec("192.0.2.1:7070", s.token(), Exec{"sh", {"true"}}, {}, stdout, stderr);
    ASSERT_FALSE(off);
    EXPECT_NE(off.error().message.find("is not a loopback address"), std::string::npos) << off.error().message;
}

// --- live sessions -----------------------------------------------------------------------------

std::string fixtures() { return fs::path(test::fixture_path("models")).parent_path().string(); }

Open stories_open(const std::vector<int32_t>& tokens) {
    Open o;
    o.model = fixtures() + "/models/stories260K.gguf";
    o.backend = "cpu";
    o.tokens = tokens;
    return o;
}

Command command(CommandKind kind, int64_t arg = 0) {
    Command c;
    c.kind = kind;
    c.arg = arg;
    return c;
}

std::shared_ptr<const SessionSnapshot> local_done(Session& s, CommandTicket t) {
    auto snap = s.wait_for_ticket(t, 60s);
    EXPECT_TRUE(snap && !snap->error);
    return snap;
}

bool same_stats(const TensorStats& a, const TensorStats& b) {
    return a.count == b.count && a.nan_count == b.nan_count && a.min == b.min && a.max == b.max && a.mean == b.mean &&
           a.rms == b.rms && std::equal(std::begin(a.hist), std::end(a.hist), std::begin(b.hist));
}

std::shared_ptr<const RemoteSession::LensState> wait_lens(RemoteSession& r) {
    for (int i = 0; i < 6000; ++i) {
        auto l = r.lens();
        if (l && l->done) return l;
        std::this_thread::sleep_for(10ms);
    }
    return nullptr;
}

TEST(RemoteSession, SteppingFetchingAReferenceAndAnExportAsLocally) {
    LS_REQUIRE_FIXTURES();
    auto ref = ReferenceDump::open(fixtures() + "/dumps/stories260K_once_n0_fa-off.gguf");
    ASSERT_TRUE(ref);
    const std::vector<int32_t> tokens = ref.value()->prompt_tokens();
    LoopbackServer server(8, 5000ms, {fixtures()});
    auto remote = RemoteSession::open(server.address(), server.token(), stories_open(tokens));
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();
    EXPECT_NE(r.opened().model.find("llama, 5 layers"), std::string::npos) << r.opened().model;
    EXPECT_EQ(r.snapshot()->cursor, -1);
    // The same session here, for what the remote one must show.
    SessionOptions so;
    so.backend = "cpu";
    auto local = Session::open(fixtures() + "/models/stories260K.gguf", so);
    ASSERT_TRUE(local);
    Session& l = *local.value();
    local_done(l, l.set_tokens(tokens));

    // The model as the panels read it here: the server's header (config, tokenizer, tensor table),
    // no weights.
    auto here = Model::open(fixtures() + "/models/stories260K.gguf");
    ASSERT_TRUE(here);
    const Model& m = *r.model();
    EXPECT_FALSE(m.has_weights());
    EXPECT_EQ(r.opened().header_bytes, here.value()->file().data_offset());
    EXPECT_EQ(m.file().file_size(), here.value()->file().file_size());
    EXPECT_EQ(m.config().n_layer, here.value()->config().n_layer);
    EXPECT_EQ(m.config().n_embd, here.value()->config().n_embd);
    ASSERT_TRUE(m.tokenizer() && here.value()->tokenizer());
    EXPECT_EQ(m.tokenizer()->encode("Once upon a time, a cat sat.", true, false),
              here.value()->tokenizer()->encode("Once upon a time, a cat sat.", true, false));
    ASSERT_EQ(m.tensors().size(), here.value()->tensors().size());
    for (size_t i = 0; i < m.tensors().size(); ++i) {
        const GgufTensorInfo &a = m.tensors()[i], &b = here.value()->tensors()[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type);
        EXPECT_TRUE(std::equal(a.ne, a.ne + 4, b.ne)) << a.name;
        EXPECT_EQ(a.offset, b.offset) << a.name;
        EXPECT_EQ(a.data, nullptr) << a.name;
    }
    auto weights = dequantize_tensor(*m.find("output_norm.weight"));
    ASSERT_FALSE(weights);
    EXPECT_NE(weights.error().message.find("not here"), std::string::npos) << weights.error().message;

    // Stepping: op, layer, token; every record's statistics as the local session's, bit for bit.
    for (CommandKind k : {CommandKind::kStepOp, CommandKind::kStepOp, CommandKind::kStepLayer}) {
        auto snap = r.run(command(k), 60s);
        ASSERT_TRUE(snap) << snap.error().message;
    }
    local_done(l, l.step_op());
    local_done(l, l.step_op());
    auto lsnap = local_done(l, l.step_layer());
    auto rsnap = r.snapshot();
    ASSERT_EQ(rsnap->cursor, lsnap->cursor);
    ASSERT_EQ(rsnap->events->size(), lsnap->events->size());
    for (int64_t i = 0; i <= rsnap->cursor; ++i) {
        ASSERT_TRUE(rsnap->record(i));
        EXPECT_EQ(rsnap->record(i)->info.name, lsnap->record(i)->info.name);
        EXPECT_TRUE(same_stats(rsnap->record(i)->stats, lsnap->record(i)->stats)) << i;
    }
    const uint64_t before = r.bytes_received();
    auto token = r.run(command(CommandKind::kStepToken), 60s);
    ASSERT_TRUE(token) << token.error().message;
    const uint64_t per_token = r.bytes_received() - before;
    lsnap = local_done(l, l.step_token());
    rsnap = token.value();
    ASSERT_EQ(rsnap->cursor, lsnap->cursor);
    std::printf("remote: a stepped token (the prompt's decode call, %lld events) cost %llu bytes\n",
                static_cast<long long>(rsnap->cursor + 1), static_cast<unsigned long long>(per_token));
    EXPECT_LT(per_token, 200u * static_cast<uint64_t>(rsnap->cursor + 1));  // statistics, not tensors
    // The top logits travel with their record.
    const EventRecord* logits = rsnap->latest("result_output");
    ASSERT_TRUE(logits && logits->top_logits);
    EXPECT_EQ(logits->top_logits->entries.front().token, lsnap->latest("result_output")->top_logits->entries.front().token);

    // Fetching: the values are the local session's; a kq_soft_max gives its attention map.
    const int64_t at = rsnap->cursor;
    auto fetched = r.fetch_wait(at, 60s);
    ASSERT_TRUE(fetched) << fetched.error().message;
    auto mine = lsnap->capture(at);
    ASSERT_TRUE(mine);
    ASSERT_EQ(fetched.value()->values->size(), mine->values->size());
    EXPECT_EQ(std::memcmp(fetched.value()->values->data(), mine->values->data(), mine->bytes()), 0);
    EXPECT_TRUE(r.snapshot()->capture(at));
    const TensorStats fetched_stats = r.snapshot()->record(at)->stats;
    const EventRecord* softmax = r.snapshot()->latest("kq_soft_max-0");
    ASSERT_TRUE(softmax);
    EXPECT_FALSE(softmax->attention);
    ASSERT_TRUE(r.fetch_wait(softmax->info.index, 60s));
    softmax = r.snapshot()->record(softmax->info.index);
    ASSERT_TRUE(softmax->attention);
    EXPECT_EQ(softmax->attention->n_head, lsnap->record(softmax->info.index)->attention->n_head);
    auto missing = r.fetch_wait(static_cast<int64_t>(rsnap->events->size()) + 5, 10s);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("no event"), std::string::npos) << missing.error().message;

    // No reference yet: the lens, which compares ours with a reference's, says so.
    r.ask_lens();
    auto no_lens = wait_lens(r);
    ASSERT_TRUE(no_lens);
    EXPECT_NE(no_lens->lens.error.find("no reference"), std::string::npos) << no_lens->lens.error;

    // A reference on the server's disk. It was made with another batch size (256): the session
    // runs again with its numerics, from the start, as a local session loading it does; back at
    // the event, every event compared, none diverged, as locally.
    Command set_ref;
    set_ref.kind = CommandKind::kSetReference;
    set_ref.text = "dumps/stories260K_once_n0_fa-off.gguf";  // relative: the first root's, which holds no dumps
    auto refused = r.wait_command(r.send(set_ref), 30s);
    ASSERT_FALSE(refused);
    set_ref.text = fixtures() + "/dumps/stories260K_once_n0_fa-off.gguf";
    auto compared = r.run(set_ref, 60s);
    ASSERT_TRUE(compared) << compared.error().message;
    EXPECT_TRUE(compared.value()->has_reference);
    EXPECT_EQ(compared.value()->cursor, -1);
    std::shared_ptr<const ReferenceDump> reference(std::move(ref.value()));
    SessionOptions ro;
    ro.backend = "cpu";
    ASSERT_TRUE(use_reference_numerics(*reference, ro.forward));
    EXPECT_EQ(ro.forward.n_ubatch, 256);
    auto with_ref = Session::open(fixtures() + "/models/stories260K.gguf", ro);
    ASSERT_TRUE(with_ref);
    Session& lr = *with_ref.value();
    lr.set_tokens(tokens);
    lr.set_reference(reference);
    lsnap = local_done(lr, lr.run_to_event(at));
    auto back_at = r.run(command(CommandKind::kRunToEvent, at), 60s);
    ASSERT_TRUE(back_at) << back_at.error().message;
    rsnap = back_at.value();
    ASSERT_EQ(rsnap->cursor, lsnap->cursor);
    EXPECT_EQ(rsnap->first_divergent, lsnap->first_divergent);
    int n_compared = 0;
    for (int64_t i = 0; i <= rsnap->cursor; ++i) {
        ASSERT_EQ(rsnap->record(i)->compared, lsnap->record(i)->compared);
        if (!rsnap->record(i)->compared) continue;
        ++n_compared;
        EXPECT_EQ(rsnap->record(i)->comparison.status, lsnap->record(i)->comparison.status) << i;
        EXPECT_EQ(rsnap->record(i)->comparison.metrics.nmse, lsnap->record(i)->comparison.metrics.nmse) << i;
        EXPECT_EQ(rsnap->record(i)->comparison.ref_name, lsnap->record(i)->comparison.ref_name) << i;
    }
    EXPECT_GT(n_compared, 20);
    // A fetched tensor stays while its record says the same values. (With the reference, llama
    // mode reproduces its llama.cpp build, which may change them: then the tensor goes.)
    EXPECT_EQ(static_cast<bool>(rsnap->capture(at)), same_stats(rsnap->record(at)->stats, fetched_stats));
    ASSERT_TRUE(r.fetch_wait(at, 60s));
    auto rerun = r.run(command(CommandKind::kGoTo, 3), 60s);  // back: a re-run from the start
    ASSERT_TRUE(rerun);
    EXPECT_FALSE(rerun.value()->capture(at));  // not evaluated again yet
    rerun = r.run(command(CommandKind::kRunToEvent, at), 60s);
    ASSERT_TRUE(rerun);
    EXPECT_TRUE(rerun.value()->capture(at));

    // Breakpoints: one on a name stops a continued run there.
    Command bp;
    bp.kind = CommandKind::kAddBreakpoint;
    bp.breakpoint = BreakpointSpec::name("ffn_out-3");
    auto id = r.wait_command(r.send(bp), 30s);
    ASSERT_TRUE(id) << id.error().message;
    auto restarted = r.run(command(CommandKind::kRestart), 60s);
    ASSERT_TRUE(restarted);
    auto hit = r.run(command(CommandKind::kContinue), 60s);
    ASSERT_TRUE(hit);
    ASSERT_TRUE(hit.value()->hit);
    EXPECT_EQ(hit.value()->hit->event_name.rfind("ffn_out-3", 0), 0u) << hit.value()->hit->event_name;
    EXPECT_EQ(hit.value()->breakpoints.size(), 1u);

    // Export to this machine's disk: what was fetched and what matches.
    const std::string out = test::make_temp_dir() + "/export.gguf";
    ExportOptions eo;
    eo.path = out;
    size_t skipped = 0;
    auto exported = export_remote(r, split_export_globs("attn_norm-*"), eo, &skipped);
    ASSERT_TRUE(exported) << exported.error().message;
    EXPECT_EQ(exported.value().n_tensors, 4u);  // layers 0-3 before the breakpoint in layer 3's FFN
    auto back = ReferenceDump::open(out);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back.value()->tensors().size(), 4u);
    EXPECT_TRUE(r.close());
}

// Over TLS, frames that arrive back to back (a command's answer, then its snapshot) are each read
// when they arrive: the server's pings are a minute apart here, so a frame left waiting in a
// buffer poll() cannot see would time the command out.
TEST(RemoteSession, OverTlsEveryFrameIsReadAsItArrives) {
    LS_REQUIRE_FIXTURES();
    auto identity = load_or_create_tls_identity(test::make_temp_dir() + "/tls.pem");
    ASSERT_TRUE(identity);
    LoopbackServer server(8, 60000ms, {fixtures()}, identity.value().pem);
    ClientOptions options;
    options.tls_sha256 = identity.value().sha256;
    const std::vector<int32_t> tokens = {1, 403, 407, 261};
    auto remote = RemoteSession::open(server.address(), server.token(), stories_open(tokens), options);
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();
    SessionOptions so;
    so.backend = "cpu";
    auto local = Session::open(fixtures() + "/models/stories260K.gguf", so);
    ASSERT_TRUE(local);
    Session& l = *local.value();
    local_done(l, l.set_tokens(tokens));
    for (int i = 0; i < 3; ++i) {
        auto snap = r.run(command(CommandKind::kStepOp), 20s);
        ASSERT_TRUE(snap) << snap.error().message;
        local_done(l, l.step_op());
    }
    auto token = r.run(command(CommandKind::kStepToken), 20s);
    ASSERT_TRUE(token) << token.error().message;
    auto lsnap = local_done(l, l.step_token());
    ASSERT_EQ(token.value()->cursor, lsnap->cursor);
    for (int64_t i = 0; i <= lsnap->cursor; ++i) EXPECT_TRUE(same_stats(token.value()->record(i)->stats, lsnap->record(i)->stats)) << i;
    // A fetched tensor (the logits) as the local session's, bit for bit.
    const int64_t at = lsnap->latest("result_output")->info.index;
    auto fetched = r.fetch_wait(at, 20s);
    ASSERT_TRUE(fetched) << fetched.error().message;
    auto mine = lsnap->capture(at);
    ASSERT_TRUE(mine);
    ASSERT_EQ(fetched.value()->values->size(), mine->values->size());
    EXPECT_EQ(std::memcmp(fetched.value()->values->data(), mine->values->data(), mine->bytes()), 0);
    // Every event's tensor asked at once: the answers come back to back, and each is read.
    for (int64_t i = 0; i <= lsnap->cursor; ++i) r.fetch(i);
    for (int64_t i = 0; i <= lsnap->cursor; ++i) {
        auto t = r.fetch_wait(i, 20s);
        ASSERT_TRUE(t) << i << ": " << t.error().message;
        auto want = lsnap->capture(i);
        ASSERT_TRUE(want) << i;
        ASSERT_EQ(t.value()->bytes(), want->bytes()) << i;
        EXPECT_EQ(std::memcmp(t.value()->values->data(), want->values->data(), want->bytes()), 0) << i;
    }
    auto next = r.run(command(CommandKind::kStepToken), 20s);
    ASSERT_TRUE(next) << next.error().message;
    EXPECT_TRUE(r.close());
}

// A reference our engine made with RoPE's pairing wrong (as `like` was made): the clean model's
// run diverges from it at the first rotated Q.
void write_faulted_reference(const std::string& path, const ReferenceDump& like) {
    auto model = Model::open(fixtures() + "/models/stories260K.gguf");
    ASSERT_TRUE(model) << model.error().message;
    auto backend = make_cpu_backend(0);
    ForwardOptions fo;
    fo.fault = Fault::kRopeWrongPairing;
    ASSERT_TRUE(use_reference_numerics(like, fo));
    auto forward = make_forward(*model.value(), *backend, fo);
    ASSERT_TRUE(forward) << forward.error().message;
    ExportCollector collector({});
    ASSERT_TRUE(forward.value()->eval(like.prompt_tokens(), &collector));
    ExportSet set;
    set.tensors = std::move(collector.tensors());
    set.info.tool = "an engine";
    set.info.prompt_tokens = like.prompt_tokens();
    set.info.decode_n_tokens = {static_cast<int32_t>(like.prompt_tokens().size())};
    set.info.n_ubatch = static_cast<uint32_t>(fo.n_ubatch);
    ExportOptions o;
    o.path = path;
    auto written = export_tensors(set, o);
    ASSERT_TRUE(written) << written.error().message;
}

size_t flagged_in(const SessionSnapshot& snap) {
    size_t n = 0;
    for (const auto& r : snap.records)
        n += r && (r->comparison.status == CompareStatus::kWarn || r->comparison.status == CompareStatus::kDiverged);
    return n;
}

std::shared_ptr<const Diagnosis> wait_diagnosis(RemoteSession& r) {
    for (int i = 0; i < 6000; ++i) {
        auto d = r.diagnosis();
        if (d && d->done) return d;
        std::this_thread::sleep_for(10ms);
    }
    return nullptr;
}

// A reference uploaded from the client's disk (the server does not serve it), compared on the
// server; the doctor's verdict and the local errors worked out there, as a local session's.
TEST(RemoteSession, AnUploadedReferenceAndTheDoctorOnTheServerAsLocally) {
    LS_REQUIRE_FIXTURES();
    auto like = ReferenceDump::open(fixtures() + "/dumps/stories260K_once_n0_fa-off.gguf");
    ASSERT_TRUE(like);
    const std::string here = test::make_temp_dir();  // this machine's folder: not one the server reads
    const std::string ref_path = here + "/faulted.gguf";
    write_faulted_reference(ref_path, *like.value());
    LoopbackServer server(8, 5000ms, {fixtures()});
    auto remote = RemoteSession::open(server.address(), server.token(), stories_open(like.value()->prompt_tokens()));
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();

    Command set_ref;
    set_ref.kind = CommandKind::kSetReference;
    set_ref.text = ref_path;
    auto not_served = r.wait_command(r.send(set_ref), 30s);
    ASSERT_FALSE(not_served);
    EXPECT_NE(not_served.error().message.find("is outside the folders this server reads"), std::string::npos);
    uint64_t last_sent = 0, last_total = 0;
    auto uploaded = r.upload(ref_path, [&](uint64_t sent, uint64_t total) { last_sent = sent, last_total = total; });
    ASSERT_TRUE(uploaded) << uploaded.error().message;
    EXPECT_EQ(uploaded.value(), "upload:faulted.gguf");
    EXPECT_EQ(last_sent, fs::file_size(ref_path));
    EXPECT_EQ(last_total, last_sent);
    EXPECT_TRUE(server.wait_for_log("uploaded faulted.gguf")) << server.log();
    set_ref.text = uploaded.value();
    ASSERT_TRUE(r.run(set_ref, 60s));
    auto ran = r.run(command(CommandKind::kContinue), 60s);
    ASSERT_TRUE(ran) << ran.error().message;
    const std::shared_ptr<const SessionSnapshot> rsnap = ran.value();
    ASSERT_TRUE(rsnap->has_reference);
    const int64_t first = rsnap->first_divergent;
    ASSERT_GE(first, 0);

    // The same run here.
    auto ref = ReferenceDump::open(ref_path);
    ASSERT_TRUE(ref);
    std::shared_ptr<const ReferenceDump> reference(std::move(ref.value()));
    auto opened = Model::open(fixtures() + "/models/stories260K.gguf");
    ASSERT_TRUE(opened);
    std::shared_ptr<const Model> model(std::move(opened.value()));
    SessionOptions so;
    so.backend = "cpu";
    ASSERT_TRUE(use_reference_numerics(*reference, so.forward));
    auto local = Session::create(model, so);
    ASSERT_TRUE(local);
    Session& l = *local.value();
    l.set_tokens(reference->prompt_tokens());
    l.set_reference(reference);
    auto lsnap = local_done(l, l.continue_run());
    ASSERT_EQ(lsnap->first_divergent, first);
    EXPECT_EQ(rsnap->record(first)->info.name, "Qcur-0#3");
    const std::string verdict = snapshot_doctor_verdict(*lsnap, first, *reference, model.get());
    EXPECT_FALSE(verdict.empty());
    EXPECT_NE(verdict, "no known transform explains it");
    const std::vector<EventComparison> local_errors = snapshot_local_errors(*lsnap, *model, *reference, so.forward);
    const size_t flagged = flagged_in(*lsnap);
    ASSERT_GT(flagged, 0u);

    r.diagnose(first);
    auto d = wait_diagnosis(r);
    ASSERT_TRUE(d) << "no diagnosis within a minute";
    EXPECT_EQ(d->event, first);
    EXPECT_EQ(d->verdict, verdict);
    ASSERT_TRUE(d->has_local);
    ASSERT_EQ(d->local.size(), flagged);
    size_t computed = 0;
    for (const EventComparison& c : d->local) {
        ASSERT_GE(c.event_index, 0);
        ASSERT_LT(c.event_index, static_cast<int64_t>(local_errors.size()));
        const EventComparison& want = local_errors[static_cast<size_t>(c.event_index)];
        EXPECT_EQ(c.name, want.name);
        EXPECT_EQ(c.local_origin, want.local_origin) << c.name;
        EXPECT_EQ(std::memcmp(&c.local_nmse, &want.local_nmse, sizeof want.local_nmse), 0) << c.name;
        EXPECT_EQ(c.local_why, want.local_why) << c.name;
        computed += c.local_origin != LocalOrigin::kNotComputed;
    }
    EXPECT_GT(computed, 0u);
    // Stopped: it says so at once, and what the stopped one still sends is not taken for an answer.
    r.diagnose(first);
    r.stop_diagnosis();
    d = r.diagnosis();
    ASSERT_TRUE(d && d->done);
    EXPECT_EQ(d->verdict.rfind("cancelled after", 0), 0u) << d->verdict;
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(r.diagnosis(), d);
    // The logit lens, worked out on the server: the local session's, to the bit, with the l_out
    // event each cell came from.
    const SnapshotLens want_lens = snapshot_logit_lens(*lsnap, *model, *reference);
    ASSERT_TRUE(want_lens.error.empty()) << want_lens.error;
    ASSERT_FALSE(want_lens.lens.layers.empty());
    EXPECT_GE(want_lens.lens.first_divergent_layer, 0);  // RoPE's pairing wrong from layer 0 on
    r.ask_lens();
    auto lens = wait_lens(r);
    ASSERT_TRUE(lens) << "no lens within a minute";
    ASSERT_TRUE(lens->lens.error.empty()) << lens->lens.error;
    EXPECT_EQ(encode(LensResult{0, lens->lens}), encode(LensResult{0, want_lens}));
    EXPECT_EQ(lens->lens.events.size(), want_lens.events.size());
    // Asked twice: only the newest answer is taken.
    r.ask_lens();
    r.ask_lens();
    auto again = wait_lens(r);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->request, lens->request + 2);
    EXPECT_EQ(encode(LensResult{0, again->lens}), encode(LensResult{0, want_lens}));
    EXPECT_TRUE(r.close());
    EXPECT_TRUE(fs::exists(ref_path));  // the user's file is the user's
}

// Exports written on the server's disk land inside its folders only, never half-written; uploads
// are bounded, and one cut short leaves nothing the session could take for a reference.
TEST(RemoteSession, ServerExportsStayInsideItsFoldersAndUploadsAreBounded) {
    LS_REQUIRE_FIXTURES();
    LoopbackServer server(8, 5000ms, {fixtures()});
    auto remote = RemoteSession::open(server.address(), server.token(), stories_open({1, 403, 407}));
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();
    auto snap = r.run(command(CommandKind::kRunToEvent, 20), 60s);
    ASSERT_TRUE(snap) << snap.error().message;

    auto all = r.export_on_server({}, ExportFormat::kGgufDump, "all.gguf", false);
    ASSERT_TRUE(all) << all.error().message;
    EXPECT_EQ(all.value().rfind("Wrote 21 tensors", 0), 0u) << all.value();
    auto back = ReferenceDump::open(server.dir() + "/root/all.gguf");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back.value()->tensors().size(), 21u);
    EXPECT_EQ(back.value()->prompt_tokens(), (std::vector<int32_t>{1, 403, 407}));
    const std::vector<std::string> two = {snap.value()->record(3)->info.name, snap.value()->record(7)->info.name};
    auto npy = r.export_on_server(two, ExportFormat::kNpyFolder, server.dir() + "/root/two", false);
    ASSERT_TRUE(npy) << npy.error().message;
    auto two_back = ReferenceDump::open(server.dir() + "/root/two");
    ASSERT_TRUE(two_back) << two_back.error().message;
    EXPECT_EQ(two_back.value()->tensors().size(), 2u);
    auto again = r.export_on_server({}, ExportFormat::kGgufDump, "all.gguf", false);
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("exists"), std::string::npos) << again.error().message;
    EXPECT_TRUE(r.export_on_server(two, ExportFormat::kGgufDump, "all.gguf", true));
    EXPECT_EQ(ReferenceDump::open(server.dir() + "/root/all.gguf").value()->tensors().size(), 2u);
    for (const std::string& outside : {std::string("../escaped.gguf"), server.dir() + "/escaped.gguf", std::string("/etc/escaped.gguf")}) {
        auto refused = r.export_on_server({}, ExportFormat::kGgufDump, outside, false);
        ASSERT_FALSE(refused) << outside;
        EXPECT_NE(refused.error().message.find("is outside the folders this server writes"), std::string::npos) << refused.error().message;
    }
    EXPECT_FALSE(fs::exists(server.dir() + "/escaped.gguf"));
    auto no_folder = r.export_on_server({}, ExportFormat::kGgufDump, "absent/x.gguf", false);
    ASSERT_FALSE(no_folder);
    EXPECT_NE(no_folder.error().message.find("its folder"), std::string::npos) << no_folder.error().message;

    // Uploads: to a session that is not there, beyond the allowance, cut short, or longer than said.
    auto upload = [&](const Upload& u) -> std::pair<std::unique_ptr<Connection>, std::string> {
        auto c = connect_and_hello(server.address(), server.token(), {});
        EXPECT_TRUE(c);
        if (!c) return {};
        EXPECT_TRUE(c.value()->send(MsgType::kUpload, encode(u)));
        auto answer = c.value()->receive(kMaxFrameBytes, 10s);
        EXPECT_TRUE(answer && answer.value().type == MsgType::kCommandDone);
        if (!answer) return {};
        return {std::move(c.value()), decode_command_done(answer.value().payload).value().error};
    };
    EXPECT_NE(upload(Upload{999, "a.gguf", 10}).second.find("no session 999"), std::string::npos);
    EXPECT_NE(upload(Upload{r.session_id(), "a.gguf", 1ull << 40}).second.find("beyond the server's"), std::string::npos);
    {
        auto [c, error] = upload(Upload{r.session_id(), "cut.gguf", 100});
        ASSERT_TRUE(c);
        EXPECT_EQ(error, "");  // go ahead
        EXPECT_TRUE(c->send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(std::string(10, 'x'))})));
    }  // gone after 10 of 100 bytes
    EXPECT_TRUE(server.wait_for_log("upload cut.gguf refused")) << server.log();
    {
        auto [c, error] = upload(Upload{r.session_id(), "long.gguf", 4});
        ASSERT_TRUE(c);
        EXPECT_TRUE(c->send(MsgType::kFileChunk, encode(FileChunk{compress_chunk(std::string(10, 'x'))})));
        auto answer = c->receive(kMaxFrameBytes, 10s);
        ASSERT_TRUE(answer);
        EXPECT_NE(decode_command_done(answer.value().payload).value().error.find("more than the 4 bytes announced"), std::string::npos);
    }
    for (const char* name : {"upload:cut.gguf", "upload:long.gguf", "upload:../all.gguf"}) {
        Command set_ref;
        set_ref.kind = CommandKind::kSetReference;
        set_ref.text = name;
        auto refused = r.wait_command(r.send(set_ref), 30s);
        ASSERT_FALSE(refused) << name;
        EXPECT_NE(refused.error().message.find("nothing of that name was uploaded"), std::string::npos) << refused.error().message;
    }
    EXPECT_TRUE(r.close());
}

// The weight inspector's bytes, a fault and a backend A/B of a server's session: the bytes are the
// file's, and each restarted session computes what a local one with the same option computes.
TEST(RemoteSession, WeightsFaultsAndBackendABOnTheServerAsLocally) {
    LS_REQUIRE_FIXTURES();
    LoopbackServer server(8, 5000ms, {fixtures()});
    const std::vector<int32_t> tokens = {1, 403, 407, 261};
    auto remote = RemoteSession::open(server.address(), server.token(), stories_open(tokens));
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();

    // A Q4_K weight of another session on the server: its bytes are the file's, so its values and
    // quant blocks are the local file's.
    {
        Open q = stories_open({1, 2});
        q.model = fixtures() + "/models/llama-gqa-mini-Q4_K_M.gguf";
        auto qs = RemoteSession::open(server.address(), server.token(), q);
        ASSERT_TRUE(qs) << qs.error().message;
        auto here = Model::open(q.model);
        ASSERT_TRUE(here);
        const GgufTensorInfo* local = here.value()->file().find_tensor("blk.0.attn_q.weight");
        ASSERT_TRUE(local);
        ASSERT_EQ(local->type, GgmlType::Q4_K);
        auto bytes = qs.value()->fetch_weight_wait("blk.0.attn_q.weight", 60s);
        ASSERT_TRUE(bytes) << bytes.error().message;
        ASSERT_EQ(bytes.value()->size(), local->n_bytes);
        EXPECT_EQ(std::memcmp(bytes.value()->data(), local->data, local->n_bytes), 0);
        GgufTensorInfo fetched = *qs.value()->model()->file().find_tensor("blk.0.attn_q.weight");
        EXPECT_EQ(fetched.data, nullptr);
        fetched.data = reinterpret_cast<const uint8_t*>(bytes.value()->data());
        auto a = dequantize_tensor(fetched), b = dequantize_tensor(*local);
        ASSERT_TRUE(a && b);
        EXPECT_EQ(a.value(), b.value());
        const int64_t last = quant_block_count(*local) - 1;
        auto ba = describe_quant_block(fetched, qs.value()->model()->file().data_offset(), last);
        auto bb = describe_quant_block(*local, here.value()->file().data_offset(), last);
        ASSERT_TRUE(ba && bb);
        EXPECT_EQ(ba.value().file_offset, bb.value().file_offset);
        ASSERT_EQ(ba.value().fields.size(), bb.value().fields.size());
        for (size_t i = 0; i < ba.value().fields.size(); ++i) EXPECT_EQ(ba.value().fields[i].value, bb.value().fields[i].value);
        // Asked again: already here, nothing travels.
        const uint64_t received = qs.value()->bytes_received();
        auto again = qs.value()->fetch_weight_wait("blk.0.attn_q.weight", 60s);
        ASSERT_TRUE(again);
        EXPECT_EQ(again.value(), bytes.value());
        EXPECT_EQ(qs.value()->bytes_received(), received);
        auto missing = qs.value()->fetch_weight_wait("blk.99.attn_q.weight", 60s);
        ASSERT_FALSE(missing);
        EXPECT_NE(missing.error().message.find("no tensor of that name"), std::string::npos) << missing.error().message;

        // The same model in another format on the server: its run is the reference, as locally.
        Command other;
        other.kind = CommandKind::kCompareModel;
        other.text = fixtures() + "/models/llama-gqa-mini-F16.gguf";
        auto done = qs.value()->wait_command(qs.value()->send(other), 120s);
        ASSERT_TRUE(done) << done.error().message;
        EXPECT_NE(done.value().note.find("the run of " + other.text + " (the same model: "), std::string::npos)
            << done.value().note;
        auto ran = qs.value()->run(command(CommandKind::kContinue), 120s);
        ASSERT_TRUE(ran) << ran.error().message;
        auto f16 = Model::open(fixtures() + "/models/llama-gqa-mini-F16.gguf");
        ASSERT_TRUE(f16);
        auto cpu = open_backend("cpu", 0);
        ASSERT_TRUE(cpu);
        ForwardOptions forward;
        forward.all_logits = true;
        forward.n_ctx = 256;
        auto made = run_as_reference(*f16.value(), *cpu.value().backend, forward, {1, 2}, 0, "f16");
        ASSERT_TRUE(made) << made.error().message;
        std::shared_ptr<const ReferenceDump> reference(std::move(made.value()));
        SessionOptions so;
        so.backend = "cpu";
        ASSERT_TRUE(use_reference_numerics(*reference, so.forward));
        auto l = Session::open(q.model, so);
        ASSERT_TRUE(l);
        l.value()->set_tokens({1, 2});
        l.value()->set_reference(reference);
        auto lsnap = local_done(*l.value(), l.value()->continue_run());
        const SessionSnapshot& rsnap = *ran.value();
        ASSERT_EQ(rsnap.records.size(), lsnap->records.size());
        EXPECT_EQ(rsnap.first_divergent, lsnap->first_divergent);
        size_t compared = 0;
        for (size_t i = 0; i < rsnap.records.size(); ++i) {
            ASSERT_TRUE(rsnap.records[i] && lsnap->records[i]);
            EXPECT_EQ(rsnap.records[i]->comparison.status, lsnap->records[i]->comparison.status) << rsnap.records[i]->info.name;
            EXPECT_EQ(rsnap.records[i]->comparison.metrics.nmse, lsnap->records[i]->comparison.metrics.nmse) << rsnap.records[i]->info.name;
            compared += rsnap.records[i]->comparison.status != CompareStatus::kNoReference;
        }
        EXPECT_GT(compared, 10u);
        // Another model is refused by name; so is a path outside the server's folders.
        other.text = fixtures() + "/models/stories260K.gguf";
        auto unlike = qs.value()->wait_command(qs.value()->send(other), 60s);
        ASSERT_FALSE(unlike);
        other.text = "/etc/hostname";
        auto outside = qs.value()->wait_command(qs.value()->send(other), 60s);
        ASSERT_FALSE(outside);
        EXPECT_NE(outside.error().message.find("is outside the folders this server reads"), std::string::npos)
            << outside.error().message;
        ASSERT_TRUE(qs.value()->close());
    }

    // What a local session with `fault`, against `reference` (or none), computes.
    auto local_run = [&](Fault fault, std::shared_ptr<const ReferenceDump> reference) {
        SessionOptions so;
        so.backend = "cpu";
        so.forward.fault = fault;
        if (reference) {
            EXPECT_TRUE(use_reference_numerics(*reference, so.forward));
        }
        auto l = Session::open(fixtures() + "/models/stories260K.gguf", so);
        EXPECT_TRUE(l);
        l.value()->set_tokens(tokens);
        if (reference) l.value()->set_reference(reference);
        return local_done(*l.value(), l.value()->continue_run());
    };
    auto remote_run = [&](const Command& c, std::string* note) -> std::shared_ptr<const SessionSnapshot> {
        auto done = r.wait_command(r.send(c), 120s);
        EXPECT_TRUE(done) << done.error().message;
        if (!done) return nullptr;
        *note = done.value().note;
        auto snap = r.run(command(CommandKind::kContinue), 120s);
        EXPECT_TRUE(snap) << snap.error().message;
        return snap ? snap.value() : nullptr;
    };
    auto same_run = [](const SessionSnapshot& a, const SessionSnapshot& b) {
        ASSERT_EQ(a.records.size(), b.records.size());
        EXPECT_EQ(a.first_divergent, b.first_divergent);
        for (size_t i = 0; i < a.records.size(); ++i) {
            ASSERT_TRUE(a.records[i] && b.records[i]) << i;
            EXPECT_TRUE(same_stats(a.records[i]->stats, b.records[i]->stats)) << a.records[i]->info.name;
            EXPECT_EQ(a.records[i]->comparison.status, b.records[i]->comparison.status) << a.records[i]->info.name;
        }
    };

    // A fault: the server's session restarts with it.
    Command fault;
    fault.kind = CommandKind::kSetFault;
    fault.text = "rope-pairing";
    std::string note;
    auto faulted = remote_run(fault, &note);
    ASSERT_TRUE(faulted);
    EXPECT_EQ(note, "the session runs again with the rope-pairing fault");
    EXPECT_EQ(faulted->tokens, tokens);
    Fault rope = Fault::kNone;
    ASSERT_TRUE(fault_from_name("rope-pairing", &rope));
    same_run(*faulted, *local_run(rope, nullptr));

    // Backend A/B: the clean cpu run of the same tokens is the reference; the fault stays, so the
    // session diverges where the local one does.
    Command ab;
    ab.kind = CommandKind::kCompareBackend;
    ab.text = "cpu";
    auto compared = remote_run(ab, &note);
    ASSERT_TRUE(compared);
    EXPECT_NE(note.find("the cpu backend's run"), std::string::npos) << note;
    auto here = Model::open(fixtures() + "/models/stories260K.gguf");
    ASSERT_TRUE(here);
    auto cpu = open_backend("cpu", 0);
    ASSERT_TRUE(cpu);
    ForwardOptions forward;
    forward.n_ctx = 256;
    auto made = run_as_reference(*here.value(), *cpu.value().backend, forward, tokens, 0, "the cpu run");
    ASSERT_TRUE(made) << made.error().message;
    std::shared_ptr<const ReferenceDump> reference(std::move(made.value()));
    auto local_ab = local_run(rope, reference);
    EXPECT_GE(local_ab->first_divergent, 0);
    same_run(*compared, *local_ab);
    // Without the fault the two runs of the cpu backend agree on every event.
    fault.text = "none";
    auto clean = remote_run(fault, &note);
    ASSERT_TRUE(clean);
    EXPECT_EQ(note, "the session runs again without a fault");
    EXPECT_EQ(clean->first_divergent, -1);
    same_run(*clean, *local_run(Fault::kNone, reference));

    // Refused by name.
    fault.text = "no-such-fault";
    auto unknown = r.wait_command(r.send(fault), 60s);
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("unknown fault 'no-such-fault'"), std::string::npos) << unknown.error().message;
    ab.text = "tpu";
    auto other = r.wait_command(r.send(ab), 60s);
    ASSERT_FALSE(other);
    EXPECT_NE(other.error().message.find("unknown backend 'tpu'"), std::string::npos) << other.error().message;
    ASSERT_TRUE(r.close());
}

TEST(RemoteSession, AClientGoneLeavesTheSessionForTheNextConnection) {
    LS_REQUIRE_FIXTURES();
    LoopbackServer server(8, 5000ms, {fixtures()});
    uint64_t id = 0;
    int64_t cursor = -1;
    {
        auto remote = RemoteSession::open(server.address(), server.token(), stories_open({1, 403, 407}));
        ASSERT_TRUE(remote) << remote.error().message;
        auto snap = remote.value()->run(command(CommandKind::kRunToEvent, 17), 60s);
        ASSERT_TRUE(snap) << snap.error().message;
        cursor = snap.value()->cursor;
        id = remote.value()->session_id();
    }  // the client goes away without closing
    EXPECT_TRUE(server.wait_for_log("it stays open for the next connection")) << server.log();
    auto again = RemoteSession::attach(server.address(), server.token(), id);
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again.value()->snapshot()->cursor, cursor);
    EXPECT_EQ(cursor, 17);
    // Attached once only.
    auto twice = RemoteSession::attach(server.address(), server.token(), id);
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message.find("attached to another connection"), std::string::npos) << twice.error().message;
    auto step = again.value()->run(command(CommandKind::kStepOp), 60s);
    ASSERT_TRUE(step);
    EXPECT_EQ(step.value()->cursor, 18);
    auto unknown = RemoteSession::attach(server.address(), server.token(), 999);
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("no session 999"), std::string::npos);
    // Opening a model outside the served folders is refused by name.
    Open outside = stories_open({1});
    outside.model = "/etc/hostname";
    auto refused = RemoteSession::open(server.address(), server.token(), outside);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("is outside the folders this server reads"), std::string::npos) << refused.error().message;
}

TEST(RemoteSession, TheServerGoneLeavesWhatWasFetchedAndReconnectSaysWhy) {
    LS_REQUIRE_FIXTURES();
    auto server = std::make_unique<LoopbackServer>(8, 5000ms, std::vector<std::string>{fixtures()});
    const std::string address = server->address();
    auto remote = RemoteSession::open(server->address(), server->token(), stories_open({1, 403, 407}));
    ASSERT_TRUE(remote) << remote.error().message;
    RemoteSession& r = *remote.value();
    ASSERT_TRUE(r.run(command(CommandKind::kRunToEvent, 10), 60s));
    ASSERT_TRUE(r.fetch_wait(10, 60s));
    server->stop();
    for (int i = 0; i < 500 && r.connected(); ++i) std::this_thread::sleep_for(10ms);
    EXPECT_FALSE(r.connected());
    EXPECT_FALSE(r.lost_reason().empty());
    // Everything already here stays.
    auto snap = r.snapshot();
    EXPECT_EQ(snap->cursor, 10);
    EXPECT_TRUE(snap->capture(10));
    // Commands say they cannot go; reconnecting says why not.
    auto refused = r.wait_command(r.send(command(CommandKind::kStepOp)), 5s);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("not connected"), std::string::npos) << refused.error().message;
    Status again = r.reconnect();
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("cannot connect"), std::string::npos) << again.error().message;

    // A server started again at that address, whose session 1 (left by another client) runs
    // another model: reconnecting says so and takes nothing from it.
    server.reset();
    server = std::make_unique<LoopbackServer>(8, 5000ms, std::vector<std::string>{fixtures()}, std::string{}, address);
    Open other = stories_open({1, 403});
    other.model = fixtures() + "/models/llama-gqa-mini-F16.gguf";
    {
        auto someone = RemoteSession::open(server->address(), server->token(), other);
        ASSERT_TRUE(someone) << someone.error().message;
        ASSERT_EQ(someone.value()->session_id(), r.session_id());
    }
    ASSERT_TRUE(server->wait_for_log("it stays open for the next connection")) << server->log();
    again = r.reconnect();
    ASSERT_FALSE(again);
    EXPECT_NE(again.error().message.find("now runs"), std::string::npos) << again.error().message;
    EXPECT_EQ(r.snapshot()->cursor, 10);

    // Once more with the same model: taken up, the model's header not sent again (the one here
    // stays), and the session's snapshot caught up.
    server.reset();
    server = std::make_unique<LoopbackServer>(8, 5000ms, std::vector<std::string>{fixtures()}, std::string{}, address);
    {
        auto someone = RemoteSession::open(server->address(), server->token(), stories_open({1, 403, 407}));
        ASSERT_TRUE(someone) << someone.error().message;
        ASSERT_TRUE(someone.value()->run(command(CommandKind::kRunToEvent, 5), 60s));
    }
    ASSERT_TRUE(server->wait_for_log("it stays open for the next connection")) << server->log();
    const Model* model = r.model().get();
    again = r.reconnect();
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_TRUE(server->wait_for_log("attached (the client holds the model's header: not sent again)")) << server->log();
    EXPECT_EQ(r.model().get(), model);
    EXPECT_EQ(r.snapshot()->cursor, 5);
    auto step = r.run(command(CommandKind::kStepOp), 60s);
    ASSERT_TRUE(step) << step.error().message;
    EXPECT_EQ(step.value()->cursor, 6);
}

}  // namespace
}  // namespace ls::remote
