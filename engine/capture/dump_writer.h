// Writes a run's events as a tensor dump in the format of llama.cpp's reference dumper (GGUF:
// one F32 tensor per event under its dump name, the dump.* metadata keys, the parallel
// dump.tensor.* arrays), so our dumps and llama.cpp's line up by name.
#pragma once

#include <string>
#include <vector>

#include "engine/forward/event.h"
#include "kernels/backend.h"
#include "engine/gguf/gguf.h"
#include "engine/util/result.h"

namespace ls {

// Run-level facts written as dump.* keys.
struct DumpInfo {
    std::string tool = "layerscope run";
    std::string model_path, model_desc, prompt;
    bool add_special = true, add_bos = false;
    std::vector<int32_t> prompt_tokens;
    std::vector<std::string> prompt_token_pieces;
    int32_t n_predict = 0;
    std::vector<int32_t> generated_tokens;
    std::string generated_text;
    std::vector<int32_t> decode_n_tokens;
    uint32_t n_ctx = 0, n_ubatch = 0;
    int32_t n_threads = 0;
    bool flash_attn = false, all_logits = false;
    std::string system_info;  // backend and math mode
};

// The run-level dump.* keys for `info` (the per-tensor dump.tensor.* arrays are not included).
std::vector<GgufKV> dump_run_metadata(const DumpInfo& info);

// Whether a streamed dump of `n_events` tensors holding `value_bytes` of values can be made: its
// records (names, shapes; about 2 KiB a tensor) in `ram`, and its values twice on `disk` (streamed
// beside the dump, then in the dump while it is written). An error (kBadInput) with the numbers
// and `hint` when not; nothing is checked against a side that cannot tell its room.
Status check_dump_room(const std::string& what, uint64_t n_events, uint64_t value_bytes, const BackendMemory& ram,
                       const BackendMemory& disk, const std::string& hint);
// The room on the file system holding `folder`, for check_dump_room.
BackendMemory disk_room(const std::string& folder);

// Collects every event (an EventSink) and the logits of each decode call, then writes them
// atomically. By default their values are host copies; after stream_to, each is written to a file
// beside the dump as it comes (only its name, shape and offset stay in memory), and write() copies
// them from there into the dump.
class DumpWriter : public EventSink {
public:
    DumpWriter() = default;
    ~DumpWriter() override;
    DumpWriter(const DumpWriter&) = delete;
    DumpWriter& operator=(const DumpWriter&) = delete;

    // Streams the values to an unnamed file in the folder of `dump_path` (the dump's staging file
    // goes there too): it has no name, so nothing is left behind if the process dies. Call before
    // the first event.
    Status stream_to(const std::string& dump_path);
    // The first error writing the streamed values (a full disk), or OK; write() returns it too.
    const Status& stream_status() const { return stream_status_; }

    void on_event(const Event& event) override;
    // The logits llama.cpp returns after decode call `decode` (the last row, or every row).
    void add_logits(int decode, const std::vector<float>& logits, int64_t n_vocab);

    size_t n_tensors() const { return tensors_.size(); }
    uint64_t bytes() const { return bytes_; }
    // Through a staging file (engine/util/safe_write.h): an existing file is replaced only with
    // `overwrite`, and only a regular file.
    Status write(const std::string& path, const DumpInfo& info, bool overwrite = false) const;
    // The same dump's bytes in memory (a run compared with another without touching the disk);
    // not after stream_to.
    Result<std::vector<uint8_t>> to_bytes(const DumpInfo& info) const;

private:
    struct Captured {
        std::string name, orig_name, op;
        int decode = 0, ubatch = 0, kind = 0, node_index = -1;
        std::vector<int64_t> ne;
        std::vector<float> data;  // empty when streamed
        uint64_t offset = 0;      // streamed: where the values lie in the stream file
    };
    void layout(const DumpInfo& info, std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>& tensors) const;
    // Keeps `c` with `values`: copied into it, or appended to the stream file.
    void keep(Captured c, const float* values, size_t n);

    std::vector<Captured> tensors_;
    uint64_t bytes_ = 0;
    int node_counter_ = 0, last_graph_ = -1;
    int stream_fd_ = -1;
    std::string stream_dir_;
    uint64_t streamed_ = 0;       // bytes in the stream file
    Status stream_status_;
    std::vector<float> staging_;  // one event's values on their way to the stream file
};

}  // namespace ls
