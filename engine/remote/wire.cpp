#include "engine/remote/wire.h"

#include <fmt/format.h>
#include <zstd.h>

#include <cstring>

namespace ls::remote {

const char* msg_type_name(MsgType type) {
    switch (type) {
        case MsgType::kHello: return "hello";
        case MsgType::kWelcome: return "welcome";
        case MsgType::kRefused: return "refused";
        case MsgType::kExec: return "exec";
        case MsgType::kOutput: return "output";
        case MsgType::kFileBegin: return "file-begin";
        case MsgType::kFileChunk: return "file-chunk";
        case MsgType::kFileEnd: return "file-end";
        case MsgType::kExit: return "exit";
        case MsgType::kPing: return "ping";
        case MsgType::kOpen: return "open";
        case MsgType::kOpened: return "opened";
        case MsgType::kAttach: return "attach";
        case MsgType::kCommand: return "command";
        case MsgType::kCommandDone: return "command-done";
        case MsgType::kSnapshot: return "snapshot";
        case MsgType::kFetch: return "fetch";
        case MsgType::kTensor: return "tensor";
        case MsgType::kDiagnose: return "diagnose";
        case MsgType::kDiagnosis: return "diagnosis";
        case MsgType::kUpload: return "upload";
        case MsgType::kLens: return "lens";
        case MsgType::kLensResult: return "lens result";
        case MsgType::kFetchWeight: return "fetch-weight";
        case MsgType::kWeight: return "weight";
    }
    return "unknown";
}

Result<FrameHeader> parse_frame_header(const uint8_t* bytes, uint32_t limit) {
    if (std::memcmp(bytes, kMagic, sizeof kMagic) != 0)
        return make_error(ErrorCode::kBadInput, "not a Layerscope remote frame (wrong magic bytes): is this port a "
                                                "`layerscope serve`?");
    const uint8_t type = bytes[4];
    if (type < static_cast<uint8_t>(MsgType::kHello) || type > kLastMsgType)
        return make_error(ErrorCode::kBadInput, fmt::format("unknown message type {}", type));
    const uint32_t length = static_cast<uint32_t>(bytes[5]) | static_cast<uint32_t>(bytes[6]) << 8 |
                            static_cast<uint32_t>(bytes[7]) << 16 | static_cast<uint32_t>(bytes[8]) << 24;
    if (length > limit)
        return make_error(ErrorCode::kBadInput, fmt::format("a {} message of {} bytes, above the limit of {} bytes",
                                                            msg_type_name(static_cast<MsgType>(type)), length, limit));
    return FrameHeader{static_cast<MsgType>(type), length};
}

std::string make_frame(MsgType type, std::string_view payload) {
    std::string frame(kMagic, sizeof kMagic);
    frame.push_back(static_cast<char>(type));
    const uint32_t n = static_cast<uint32_t>(payload.size());
    for (int i = 0; i < 4; ++i) frame.push_back(static_cast<char>(n >> (8 * i)));
    frame.append(payload);
    return frame;
}

void PayloadWriter::u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}
void PayloadWriter::u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(v >> (8 * i)));
}
void PayloadWriter::f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    u32(bits);
}
void PayloadWriter::f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    u64(bits);
}
void PayloadWriter::str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
}

bool PayloadReader::take(void* out, size_t n) {
    if (!ok_ || p_.size() < n) {
        ok_ = false;
        std::memset(out, 0, n);
        return false;
    }
    std::memcpy(out, p_.data(), n);
    p_.remove_prefix(n);
    return true;
}
uint8_t PayloadReader::u8() {
    uint8_t v;
    take(&v, 1);
    return v;
}
uint32_t PayloadReader::u32() {
    uint8_t b[4];
    take(b, 4);
    return static_cast<uint32_t>(b[0]) | static_cast<uint32_t>(b[1]) << 8 | static_cast<uint32_t>(b[2]) << 16 |
           static_cast<uint32_t>(b[3]) << 24;
}
uint64_t PayloadReader::u64() {
    const uint64_t lo = u32();
    return lo | static_cast<uint64_t>(u32()) << 32;
}
float PayloadReader::f32() {
    const uint32_t bits = u32();
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
}
double PayloadReader::f64() {
    const uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, 8);
    return v;
}
std::string PayloadReader::str(size_t max_bytes) {
    const uint32_t n = u32();
    if (!ok_ || n > max_bytes || n > p_.size()) {
        ok_ = false;
        return {};
    }
    std::string s(p_.substr(0, n));
    p_.remove_prefix(n);
    return s;
}
size_t PayloadReader::count(size_t max_count, size_t min_item_bytes) {
    const uint32_t n = u32();
    if (!ok_ || n > max_count || (min_item_bytes > 0 && n > p_.size() / min_item_bytes)) {
        ok_ = false;
        return 0;
    }
    return n;
}

std::string encode(const Hello& m) {
    PayloadWriter w;
    w.u32(m.version);
    w.str(m.token);
    return w.take();
}
std::string encode(const Welcome& m) {
    PayloadWriter w;
    w.u32(m.version);
    w.str(m.server);
    w.u32(static_cast<uint32_t>(m.roots.size()));
    for (const std::string& r : m.roots) w.str(r);
    return w.take();
}
std::string encode(const Refused& m) {
    PayloadWriter w;
    w.str(m.reason);
    return w.take();
}
std::string encode(const Exec& m) {
    PayloadWriter w;
    w.str(m.command);
    w.u32(static_cast<uint32_t>(m.args.size()));
    for (const std::string& a : m.args) w.str(a);
    return w.take();
}
std::string encode(const Output& m) {
    PayloadWriter w;
    w.u8(m.stream);
    w.str(m.bytes);
    return w.take();
}
std::string encode(const FileBegin& m) {
    PayloadWriter w;
    w.u32(m.output);
    w.str(m.name);
    w.u64(m.size);
    return w.take();
}
std::string encode(const FileChunk& m) {
    PayloadWriter w;
    w.str(m.compressed);
    return w.take();
}
std::string encode(const Exit& m) {
    PayloadWriter w;
    w.i32(m.code);
    return w.take();
}

Result<Hello> decode_hello(std::string_view payload) {
    PayloadReader r(payload);
    Hello m;
    m.version = r.u32();
    m.token = r.str(1024);
    return finish_message(r, std::move(m), "hello");
}
Result<Welcome> decode_welcome(std::string_view payload) {
    PayloadReader r(payload);
    Welcome m;
    m.version = r.u32();
    m.server = r.str();
    const size_t n = r.count(kMaxArgs, 4);
    for (size_t i = 0; i < n && r.ok(); ++i) m.roots.push_back(r.str());
    return finish_message(r, std::move(m), "welcome");
}
Result<Refused> decode_refused(std::string_view payload) {
    PayloadReader r(payload);
    Refused m;
    m.reason = r.str();
    return finish_message(r, std::move(m), "refused");
}
Result<Exec> decode_exec(std::string_view payload) {
    PayloadReader r(payload);
    Exec m;
    m.command = r.str(64);
    const size_t n = r.count(kMaxArgs, 4);
    for (size_t i = 0; i < n && r.ok(); ++i) m.args.push_back(r.str());
    return finish_message(r, std::move(m), "exec");
}
Result<Output> decode_output(std::string_view payload) {
    PayloadReader r(payload);
    Output m;
    m.stream = r.u8();
    m.bytes = r.str(kMaxFrameBytes);
    if (r.ok() && m.stream != 1 && m.stream != 2)
        return make_error(ErrorCode::kBadInput, fmt::format("an output message for stream {} (only 1 and 2 exist)", m.stream));
    return finish_message(r, std::move(m), "output");
}
Result<FileBegin> decode_file_begin(std::string_view payload) {
    PayloadReader r(payload);
    FileBegin m;
    m.output = r.u32();
    m.name = r.str(255);
    m.size = r.u64();
    if (r.ok() && !m.name.empty() && !is_plain_file_name(m.name))
        return make_error(ErrorCode::kBadInput, "a file-begin message whose name is not a plain file name");
    return finish_message(r, std::move(m), "file-begin");
}
Result<FileChunk> decode_file_chunk(std::string_view payload) {
    PayloadReader r(payload);
    FileChunk m;
    m.compressed = r.str(kMaxFrameBytes);
    return finish_message(r, std::move(m), "file-chunk");
}
Result<Exit> decode_exit(std::string_view payload) {
    PayloadReader r(payload);
    Exit m;
    m.code = r.i32();
    if (r.ok() && (m.code < 0 || m.code > 255))
        return make_error(ErrorCode::kBadInput, fmt::format("an exit message with code {} (0 to 255)", m.code));
    return finish_message(r, std::move(m), "exit");
}

std::string compress_chunk(std::string_view bytes) {
    std::string out(ZSTD_compressBound(bytes.size()), '\0');
    const size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
    // The bound makes room for any input: an error here is a bug, not the input's fault.
    if (ZSTD_isError(n)) std::abort();
    out.resize(n);
    return out;
}

Result<std::string> decompress_chunk(std::string_view frame, size_t max_bytes) {
    const unsigned long long size = ZSTD_getFrameContentSize(frame.data(), frame.size());
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN)
        return make_error(ErrorCode::kBadInput, "a file chunk that is not a zstd frame saying its size");
    if (size > max_bytes)
        return make_error(ErrorCode::kBadInput, fmt::format("a file chunk of {} bytes, above the limit of {}", size, max_bytes));
    std::string out(static_cast<size_t>(size), '\0');
    const size_t n = ZSTD_decompress(out.data(), out.size(), frame.data(), frame.size());
    if (ZSTD_isError(n) || n != size)
        return make_error(ErrorCode::kBadInput, fmt::format("a file chunk that does not decompress: {}",
                                                            ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short"));
    return out;
}

bool is_plain_file_name(std::string_view name) {
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    for (char c : name)
        if (c == '/' || c == '\0') return false;
    return true;
}

}  // namespace ls::remote
