// Writes a run's events as a tensor dump in the format of llama.cpp's reference dumper (GGUF:
// one F32 tensor per event under its dump name, the dump.* metadata keys, the parallel
// dump.tensor.* arrays), so our dumps and llama.cpp's line up by name.
#pragma once

#include <string>
#include <vector>

#include "engine/forward/event.h"
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

// Collects host copies of every event (an EventSink) and the logits of each decode call, then
// writes them atomically.
class DumpWriter : public EventSink {
public:
    void on_event(const Event& event) override;
    // The logits llama.cpp returns after decode call `decode` (the last row, or every row).
    void add_logits(int decode, const std::vector<float>& logits, int64_t n_vocab);

    size_t n_tensors() const { return tensors_.size(); }
    uint64_t bytes() const { return bytes_; }
    // Through a staging file (engine/util/safe_write.h): an existing file is replaced only with
    // `overwrite`, and only a regular file.
    Status write(const std::string& path, const DumpInfo& info, bool overwrite = false) const;
    // The same dump's bytes in memory (a run compared with another without touching the disk).
    Result<std::vector<uint8_t>> to_bytes(const DumpInfo& info) const;

private:
    void layout(const DumpInfo& info, std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>& tensors) const;
    struct Captured {
        std::string name, orig_name, op;
        int decode = 0, ubatch = 0, kind = 0, node_index = -1;
        std::vector<int64_t> ne;
        std::vector<float> data;
    };
    std::vector<Captured> tensors_;
    uint64_t bytes_ = 0;
    int node_counter_ = 0, last_graph_ = -1;
};

}  // namespace ls
