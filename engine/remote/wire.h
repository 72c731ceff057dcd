// The remote protocol's bytes: frames (a 9-byte header, then the payload) and the messages they
// carry. Every length and count is checked against the frame before anything is allocated, and
// a frame longer than the limit of the connection's state is refused from its header alone.
// Nothing here touches a socket: the decoder is what the fuzz target feeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/util/result.h"

namespace ls::remote {

inline constexpr uint32_t kProtocolVersion = 5;  // 3: the model's header follows kOpened; 4: the logit lens;
                                                 // 5: weights fetched, faults and backend A/B on the server
inline constexpr char kMagic[4] = {'L', 'S', 'R', '1'};
inline constexpr size_t kHeaderBytes = 9;  // magic, type (u8), payload length (u32 little-endian)
// Before the token is checked a peer may send one small frame; after it, frames up to this size
// (a compressed chunk of a file is at most kChunkBytes before compression).
inline constexpr uint32_t kMaxHelloBytes = 4096;
inline constexpr uint32_t kMaxFrameBytes = 8u << 20;
inline constexpr uint32_t kChunkBytes = 4u << 20;
// Bounds on what one message may hold.
inline constexpr size_t kMaxArgs = 256;
inline constexpr size_t kMaxStringBytes = 64u << 10;

enum class MsgType : uint8_t {
    kHello = 1,      // client: protocol version and token
    kWelcome = 2,    // server: accepted; its version and the folders it serves
    kRefused = 3,    // server: not accepted, and why (then it closes)
    kExec = 4,       // client: run a headless command (run, compare, export) on the server
    kOutput = 5,     // server: bytes the command wrote to its stdout (1) or stderr (2)
    kFileBegin = 6,  // server: an output file follows (output index, name within it, size)
    kFileChunk = 7,  // server: the next bytes of that file, zstd-compressed
    kFileEnd = 8,    // server: that file is complete
    kExit = 9,       // server: the command's exit code; the last message of an exec
    kPing = 10,      // server: still working (sent while a command runs quietly)
    // Live sessions (engine/remote/session_wire.h):
    kOpen = 11,         // client: open a model in a new session
    kOpened = 12,       // server: the session's id and what it runs
    kAttach = 13,       // client: take up a session again (after a reconnect)
    kCommand = 14,      // client: step, run, seek, breakpoints, reference, prompt
    kCommandDone = 15,  // server: the command's ticket (or breakpoint id), or why it failed
    kSnapshot = 16,     // server: what changed in the session's snapshot (zstd)
    kFetch = 17,        // client: an event's full tensor, please
    kTensor = 18,       // server: that tensor follows as file chunks (or why not)
    kDiagnose = 19,     // client: the doctor and the local errors, please (or stop them)
    kDiagnosis = 20,    // server: their progress, and what they found
    kUpload = 21,       // client: a file for a session follows as file chunks (a connection of its own)
    kLens = 22,         // client: the logit lens of the session as it stands, please
    kLensResult = 23,   // server: that lens (or why there is none)
    kFetchWeight = 24,  // client: a weight of the session's model, as the file stores it, please
    kWeight = 25,       // server: that weight follows as file chunks (or why not)
};
inline constexpr uint8_t kLastMsgType = 25;
const char* msg_type_name(MsgType type);

struct FrameHeader {
    MsgType type;
    uint32_t length;
};

// The header's 9 bytes; refuses a wrong magic, an unknown type or a length above `limit`.
Result<FrameHeader> parse_frame_header(const uint8_t* bytes, uint32_t limit);
// A whole frame: header and payload.
std::string make_frame(MsgType type, std::string_view payload);

// Little-endian field encoding.
class PayloadWriter {
public:
    void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
    void u32(uint32_t v);
    void u64(uint64_t v);
    void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
    void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
    void f32(float v);
    void f64(double v);
    void str(std::string_view s);  // u32 length, then the bytes
    std::string take() { return std::move(out_); }

private:
    std::string out_;
};

// Reads fields back; the first read past the end (or a string over its bound) fails the reader,
// and every later read returns zeros.
class PayloadReader {
public:
    explicit PayloadReader(std::string_view bytes) : p_(bytes) {}
    uint8_t u8();
    uint32_t u32();
    uint64_t u64();
    int32_t i32() { return static_cast<int32_t>(u32()); }
    int64_t i64() { return static_cast<int64_t>(u64()); }
    float f32();
    double f64();
    std::string str(size_t max_bytes = kMaxStringBytes);
    // Marks the payload malformed (a field read fine but out of its range).
    void fail() { ok_ = false; }
    // A count of items of at least `min_item_bytes` each: refused when the rest cannot hold them
    // or when it is above `max_count`.
    size_t count(size_t max_count, size_t min_item_bytes);
    bool ok() const { return ok_; }
    bool at_end() const { return ok_ && p_.empty(); }
    std::string_view rest() const { return p_; }

private:
    bool take(void* out, size_t n);
    std::string_view p_;
    bool ok_ = true;
};

// A decoded message, or why its payload is malformed: short, beyond a bound, or longer than
// its fields. `what` names the message.
template <class T>
Result<T> finish_message(const PayloadReader& r, T value, const char* what) {
    if (!r.ok()) return make_error(ErrorCode::kBadInput, std::string("a malformed ") + what + " message (a field is cut short or beyond its bounds)");
    if (!r.at_end())
        return make_error(ErrorCode::kBadInput, std::string("a ") + what + " message with " + std::to_string(r.rest().size()) +
                                                    " bytes after its last field");
    return value;
}

struct Hello {
    uint32_t version = kProtocolVersion;
    std::string token;
};
struct Welcome {
    uint32_t version = kProtocolVersion;
    std::string server;              // "layerscope 0.1.0 on HOST"
    std::vector<std::string> roots;  // the folders the server reads from
};
struct Refused {
    std::string reason;
};
// A headless command as typed after its name, minus --remote and --token-file. Input paths are
// the server's (absolute, or relative to its first root); each output path is replaced by
// "@out<N>", N indexing the client's own targets.
struct Exec {
    std::string command;
    std::vector<std::string> args;
};
struct Output {
    uint8_t stream = 1;  // 1 stdout, 2 stderr
    std::string bytes;
};
struct FileBegin {
    uint32_t output = 0;  // N of "@out<N>"
    std::string name;     // "" for a file output; a file inside a folder output
    uint64_t size = 0;
};
struct FileChunk {
    std::string compressed;  // one zstd frame holding at most kChunkBytes
};
struct Exit {
    int32_t code = 0;
};

std::string encode(const Hello& m);
std::string encode(const Welcome& m);
std::string encode(const Refused& m);
std::string encode(const Exec& m);
std::string encode(const Output& m);
std::string encode(const FileBegin& m);
std::string encode(const FileChunk& m);
std::string encode(const Exit& m);

// Each refuses (kBadInput, naming the message and the field) a payload that is short, long, or
// holds a field beyond its bounds.
Result<Hello> decode_hello(std::string_view payload);
Result<Welcome> decode_welcome(std::string_view payload);
Result<Refused> decode_refused(std::string_view payload);
Result<Exec> decode_exec(std::string_view payload);
Result<Output> decode_output(std::string_view payload);
Result<FileBegin> decode_file_begin(std::string_view payload);
Result<FileChunk> decode_file_chunk(std::string_view payload);
Result<Exit> decode_exit(std::string_view payload);

// zstd, one frame per chunk. decompress refuses a frame that does not say its size, says more
// than `max_bytes`, or does not decode to exactly that size.
std::string compress_chunk(std::string_view bytes);
Result<std::string> decompress_chunk(std::string_view frame, size_t max_bytes);

// A file name inside a folder output: one plain component, no "/", "..", "." or NUL.
bool is_plain_file_name(std::string_view name);

}  // namespace ls::remote
