// Export of captured tensors to a GGUF tensor dump (the reference-dump format) or to a folder of
// .npy files with manifest.json; both read back by ReferenceDump::open, never half-written.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/capture/dump_writer.h"
#include "engine/compare/reference.h"
#include "engine/forward/event.h"
#include "engine/session/capture_store.h"

namespace ls {

enum class ExportFormat { kGgufDump, kNpyFolder };
const char* export_format_name(ExportFormat format);  // "gguf", "npy"

// One tensor to export. The values are borrowed: `data` must stay valid while the export runs;
// `owner` is there to keep whatever holds them alive (a capture, a reference dump).
struct ExportTensor {
    std::string base_name;  // llama.cpp's name, "Qcur-0"
    int occurrence = 1;     // k-th tensor of that name in one graph evaluation
    int decode = 0, ubatch = 0;
    std::string op;         // "ROPE", ... ("" when unknown)
    std::string src0, src1; // the op's sources, when a dump recorded them
    RefKind kind = RefKind::kNode;
    int node_index = -1;    // position in its graph evaluation; -1 when unknown
    std::vector<int64_t> ne;          // ggml order (ne0 fastest), 1 to 4 positive sizes
    GgmlType type = GgmlType::F32;    // F32, I32 or I64 (dump inputs such as inp_tokens are ints)
    const void* data = nullptr;
    std::shared_ptr<const void> owner;

    std::string dump_name() const;  // "Qcur-0#3@1"
    int64_t n_elements() const;
    size_t n_bytes() const;
};

// What an export writes: tensors in execution order and the run's facts. `info` becomes the
// dump.* keys of a GGUF export and the prompt/generated tokens of a manifest.
struct ExportSet {
    std::vector<ExportTensor> tensors;
    DumpInfo info;
    // When converting a GGUF dump: its own dump.* keys (all but the per-tensor dump.tensor.*
    // arrays, which the export rewrites for its selection), written instead of `info`'s.
    std::vector<GgufKV> source_metadata;
    size_t skipped_partial = 0;  // reference tensors without full values (text logs), not exported
};

// Whether a tensor is selected by `globs` ('*', '?'), matched against its base name and its dump
// name as breakpoints are ("*-3" is every tensor of layer 3). No globs selects everything.
bool export_selected(const std::vector<std::string>& globs, const std::string& base_name, const std::string& dump_name);
// "attn_norm-*,Qcur-*" -> {"attn_norm-*", "Qcur-*"} (empty items dropped).
std::vector<std::string> split_export_globs(const std::string& comma_separated);

// A tensor from a dump name and f32 values: "Qcur-0#3@1" gives base "Qcur-0", occurrence 3,
// decode 1. The values are moved into `owner`.
ExportTensor make_export_tensor(const std::string& dump_name, std::vector<int64_t> ne, std::vector<float> values);
// The session's captures (execution order) selected by `globs`. The set shares the captures.
ExportSet export_set_from_captures(const CaptureMap& captures, const std::vector<std::string>& globs);
ExportSet export_set_from_captures(const std::vector<std::shared_ptr<const CapturedTensor>>& captures,
                                   const std::vector<std::string>& globs);
// A reference's complete tensors selected by `globs`, with its tokens (and, for a GGUF dump, its
// dump.* metadata). The set keeps `reference` alive.
ExportSet export_set_from_reference(std::shared_ptr<const ReferenceDump> reference, const std::vector<std::string>& globs);

// Collects host copies of the events of a forward pass that `globs` select, and the logits of
// each decode call (as "llama_logits", kind logits), for an export of a fresh run.
class ExportCollector : public EventSink {
public:
    explicit ExportCollector(std::vector<std::string> globs) : globs_(std::move(globs)) {}
    void on_event(const Event& event) override;
    void add_logits(int decode, const std::vector<float>& logits, int64_t n_vocab);
    std::vector<ExportTensor>& tensors() { return tensors_; }

private:
    std::vector<std::string> globs_;
    std::vector<ExportTensor> tensors_;
    int node_counter_ = 0, last_graph_ = -1;
};

struct ExportOptions {
    ExportFormat format = ExportFormat::kGgufDump;
    std::string path;        // the .gguf file or the folder to create
    bool overwrite = false;  // replace an existing file, or an existing export folder
    // Called with (tensors done, total) before each tensor and once at the end; returning false
    // cancels. Runs on the exporting thread.
    std::function<bool(size_t done, size_t total)> progress;
    const std::atomic<bool>* cancel = nullptr;  // another thread's cancel request
};

struct ExportSummary {
    std::string path;
    size_t n_tensors = 0;
    uint64_t bytes = 0;      // tensor data written
    bool cancelled = false;  // nothing was written and no temp file or folder is left
};

// Whether something (a file, a folder, a dangling link) already has this name: the GUI asks
// before it exports with overwrite = true.
bool export_target_exists(const std::string& path);

// Writes `set` to options.path through engine/util/safe_write.h: the export appears under its
// final name complete or not at all (a staging file or folder beside it is renamed into place).
// An existing target is refused (kUsage) unless overwrite; even then only a regular file (GGUF)
// or a folder an earlier export wrote (its marker, and nothing in it but what it wrote) is
// replaced, never anything else, and the old one is removed only once the new one stands. Errors:
// kUsage for an empty set, bad shapes or a refused target, kIo for the file system.
Result<ExportSummary> export_tensors(const ExportSet& set, const ExportOptions& options);

}  // namespace ls
