// The messages of a live session on a server: opening a model, commands, and the snapshot as it
// changes. A snapshot travels as a delta against what the client already holds: the event plan
// only when it changed, and of the records only those that are new or were replaced (a reference
// loaded re-compares them); statistics, comparisons, top logits and Q/K norms go with each record,
// full tensors only when fetched (and attention maps are rebuilt from a fetched kq_soft_max on the
// client). Every delta is zstd-compressed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/compare/snapshot_diagnosis.h"
#include "engine/remote/wire.h"
#include "engine/session/session.h"

namespace ls::remote {

struct Open {
    std::string model;    // the server's path (inside its roots)
    std::string backend = "auto";
    std::string mode = "llama";  // exact or llama
    std::string prompt;          // tokenized on the server ...
    std::vector<int32_t> tokens; // ... unless ids are given; neither: the reference's prompt
    int32_t n_generate = 0;      // decode calls after the prompt (generate(n)); the session waits at event -1
    std::string reference;       // a reference on the server (inside its roots), or ""
    uint64_t capture_budget = 0; // bytes of full tensors the session keeps; 0: its default
};
struct Opened {
    uint64_t session = 0;
    std::string model;    // "tiny.gguf: llama, 2 layers, n_embd 256"
    std::string backend;  // Session::backend_description()
    std::string model_path;  // the model's path on the server, as the client named it ("tiny.gguf")
    // The model file's size and its header's (metadata and tensor table, everything before the
    // data): the header follows this message as file chunks and a file end, before the first
    // snapshot (unless the client attached with have_header), and becomes the client's weightless
    // copy of the model (GgufFile::parse_header).
    uint64_t file_bytes = 0;
    uint64_t header_bytes = 0;
};
// The largest model header a client accepts (a 262k-token vocabulary with its merges is a few
// tens of MB).
inline constexpr uint64_t kMaxModelHeaderBytes = 256ull << 20;
struct Attach {
    uint64_t session = 0;
    // The client holds this session's model header already (it reconnects): the server does not
    // send it again after kOpened.
    bool have_header = false;
};

enum class CommandKind : uint8_t {
    kStepOp = 1, kStepLayer, kStepToken, kContinue, kPause, kRestart, kGoTo, kRunToEvent, kGenerate, kCancel,
    kSetPrompt, kSetTokens, kSetReference, kAddBreakpoint, kRemoveBreakpoint, kEnableBreakpoint, kClose, kExport,
    kSetFault,        // text: a fault's name ("none": the correct forward pass); the session restarts with it
    kCompareBackend,  // text: a backend (cpu, cuda-emulated, cuda) whose clean run of the session's tokens
                      // becomes the reference; the session restarts against it
    kCompareModel,    // text: the same model in another format, on the server (inside its folders), whose
                      // run of the session's tokens becomes the reference (every row's logits kept)
};
inline constexpr uint8_t kLastCommandKind = 21;
// kSetReference's text names a file uploaded for the session (Upload) with this prefix; any other
// text is a path on the server's disk.
inline constexpr char kUploadedPrefix[] = "upload:";
struct Command {
    CommandKind kind = CommandKind::kStepOp;
    int64_t arg = 0;             // go_to / run_to_event index, generate n, breakpoint id, enable flag; kExport: the format
    std::string text;            // prompt, reference path; kExport: the output path on the server
    std::vector<int32_t> ids;    // tokens
    BreakpointSpec breakpoint;   // kAddBreakpoint
    int64_t arg2 = 0;            // kEnableBreakpoint: 1 enable, 0 disable; kExport: 1 replaces an earlier export
    std::vector<std::string> names;  // kExport: the dump names of the events to write (execution order)
};
struct CommandDone {
    uint64_t ticket = 0;  // the session's ticket (queued commands), or a breakpoint id
    std::string error;    // "" when accepted
    std::string note;     // what an accepted command did, when it says ("wrote 12 tensors ...")
};
// The doctor's verdict on the first divergence and the local errors of the flagged events,
// worked out on the server (it has the model and the reference).
struct Diagnose {
    uint64_t request = 0;  // the client's number for it: a Diagnosis answers the newest
    int64_t event = -1;    // the first divergent event, as the client's snapshot says (-1: none)
    bool stop = false;     // stops the one under way instead
};
struct Diagnosis {
    uint64_t request = 0;
    int64_t event = -1;
    bool done = false;       // false: still working, `step` says on what
    std::string step;
    uint64_t tried = 0;
    std::string verdict;     // the doctor's line (when done; "" without a divergence with values)
    bool has_local = false;  // the local errors below are computed (sent once, with the first message after)
    std::vector<EventComparison> local;  // of the flagged events (event_index set)
};
// The logit lens of the session's snapshot as it stands, worked out on the server (it holds the
// output head's weights and the reference); a LensResult answers the newest request.
struct Lens {
    uint64_t request = 0;
};
inline constexpr size_t kMaxLensTop = 1024;     // tokens of each side of a cell
inline constexpr size_t kMaxLensLayers = 4096;
struct LensResult {
    uint64_t request = 0;
    SnapshotLens lens;
};
// Opens a connection's upload of a file for session `session` (FileChunk messages, then a
// FileEnd; the server answers with a CommandDone). `name` is a plain file name, or "folder/file"
// for a file of a reference folder (.npy files and manifest.json).
struct Upload {
    uint64_t session = 0;
    std::string name;
    uint64_t size = 0;
};
struct Fetch {
    int64_t index = 0;
};
// Followed by FileChunk messages and a FileEnd when `error` is empty.
struct TensorHeader {
    int64_t index = 0;
    int64_t ne[4] = {1, 1, 1, 1};
    uint64_t bytes = 0;
    std::string error;  // "not captured (the capture budget dropped it)", ...
};

// A weight of the session's model as the file stores it (the tensor panel's values and quant
// blocks): the client holds the tensor table; the bytes stay on the server until asked for.
struct FetchWeight {
    std::string name;
};
// Followed by FileChunk messages and a FileEnd when `error` is empty; `bytes` is the tensor's size
// in the file (the client checks it against its tensor table before reading).
struct WeightHeader {
    std::string name;
    uint64_t bytes = 0;
    std::string error;
};

std::string encode(const Open& m);
std::string encode(const Opened& m);
std::string encode(const Attach& m);
std::string encode(const Command& m);
std::string encode(const CommandDone& m);
std::string encode(const Fetch& m);
std::string encode(const TensorHeader& m);
std::string encode(const Diagnose& m);
std::string encode(const Diagnosis& m);
std::string encode(const Upload& m);
std::string encode(const Lens& m);
std::string encode(const LensResult& m);
std::string encode(const FetchWeight& m);
std::string encode(const WeightHeader& m);
Result<Open> decode_open(std::string_view payload);
Result<Opened> decode_opened(std::string_view payload);
Result<Attach> decode_attach(std::string_view payload);
Result<Command> decode_command(std::string_view payload);
Result<CommandDone> decode_command_done(std::string_view payload);
Result<Fetch> decode_fetch(std::string_view payload);
Result<TensorHeader> decode_tensor_header(std::string_view payload);
Result<Diagnose> decode_diagnose(std::string_view payload);
Result<Diagnosis> decode_diagnosis(std::string_view payload);
Result<Upload> decode_upload(std::string_view payload);
Result<Lens> decode_lens(std::string_view payload);
Result<LensResult> decode_lens_result(std::string_view payload);
Result<FetchWeight> decode_fetch_weight(std::string_view payload);
Result<WeightHeader> decode_weight_header(std::string_view payload);
// Whether `name` may name an uploaded file: "file" or "folder/file", each part of letters,
// digits, '.', '-' and '_', not starting with '.', at most 255 bytes.
bool is_upload_name(const std::string& name);

// What the server last sent a client of one session: the plan and each record, compared by
// identity (records are immutable; a replaced one is a new object).
struct SentState {
    const void* plan = nullptr;
    std::vector<std::weak_ptr<const EventRecord>> records;
    uint64_t version = 0;
};

// The delta from `sent` to `snap` (updating `sent`), zstd-compressed.
std::string encode_snapshot_delta(const SessionSnapshot& snap, SentState& sent);

// Applies a delta to the client's copy: `base` (null for the first) gives the plan and the
// records that did not change. The result has no captures (fetched tensors are the client's own
// to add) and no attention maps (rebuilt from fetched tensors). Refuses a malformed delta, one
// that names records beyond the plan, or one that needs a plan it does not carry.
Result<std::shared_ptr<SessionSnapshot>> apply_snapshot_delta(std::string_view compressed,
                                                              const std::shared_ptr<const SessionSnapshot>& base);

// The same on the delta's bytes as decompressed (the fuzz target's way in).
Result<std::shared_ptr<SessionSnapshot>> decode_snapshot_delta(std::string_view bytes,
                                                               const std::shared_ptr<const SessionSnapshot>& base);

// Bounds: a plan and a delta hold at most this many events.
inline constexpr size_t kMaxPlanEvents = 1u << 22;

}  // namespace ls::remote
