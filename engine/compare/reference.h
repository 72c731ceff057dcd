// A reference run: tensors by dump name with their llama.cpp provenance. Sources: GGUF tensor
// dumps (llama.cpp's reference dumper and `layerscope run --dump`), folders of .npy files with a
// manifest.json, and llama-eval-callback / llama-debug text logs (partial values and sums).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/gguf/gguf.h"

namespace ls {

enum class RefKind { kNode = 0, kInput = 1, kLogits = 2 };

struct RefTensor {
    std::string name;       // dump name, e.g. "Qcur-0#3@1"
    std::string base_name;  // llama.cpp's name without suffixes, e.g. "Qcur-0"
    int occurrence = 1;     // from "#k"
    int decode = 0;
    int ubatch = 0;
    RefKind kind = RefKind::kNode;
    std::string op, src0, src1;
    int node_index = -1;
    int64_t ne_[4] = {1, 1, 1, 1};  // ggml order
    // The engine's own name when a naming convention (tensor_names.h) gave it llama.cpp's, e.g.
    // "model.layers.0.self_attn.q_proj" for "Qcur-0"; "" when it had llama.cpp's name already.
    std::string source_name;
    // Whether the source fixed the element order (a GGUF dump, or a manifest entry with "order"):
    // else a naming convention's layout may re-lay the values.
    bool order_given = true;

    // Complete data: `data` points at n_elements values of `stored_type` (F32, I32 or I64), in
    // ggml element order. nullptr for a partial tensor (a text log).
    GgmlType stored_type = GgmlType::F32;
    const uint8_t* data = nullptr;
    // Partial tensors: the values the source printed, by flat ggml index, and its sum if given.
    std::vector<std::pair<int64_t, float>> samples;
    bool has_sum = false;
    double sum = 0;

    const int64_t* ne() const { return ne_; }
    int64_t n_elements() const { return ne_[0] * ne_[1] * ne_[2] * ne_[3]; }
    bool complete() const { return data != nullptr; }
    // Bytes of `data`: 4 per value for F32 and I32, 8 for I64.
    uint64_t n_bytes() const { return static_cast<uint64_t>(n_elements()) * (stored_type == GgmlType::I64 ? 8 : 4); }
    // The values in place when they are F32 and aligned for float reads (a view into the mapped
    // file or the loader's storage, nothing copied); nullptr otherwise (then use values()).
    const float* f32() const {
        return data && stored_type == GgmlType::F32 && reinterpret_cast<uintptr_t>(data) % alignof(float) == 0
                   ? reinterpret_cast<const float*>(data)
                   : nullptr;
    }
};

class ReferenceDump {
public:
    // Opens a GGUF dump, a folder with manifest.json, or an eval-callback / llama-debug log,
    // whichever `path` is.
    static Result<std::unique_ptr<ReferenceDump>> open(const std::string& path);
    static Result<std::unique_ptr<ReferenceDump>> open_gguf(const std::string& path);
    // A GGUF dump already opened or parsed (GgufFile::parse reads one from memory).
    static Result<std::unique_ptr<ReferenceDump>> from_gguf(std::unique_ptr<GgufFile> file);

    // For loaders of other formats: tensors whose `data` points into `storage` or into what
    // `owners` keep alive (mapped files).
    static std::unique_ptr<ReferenceDump> from_tensors(std::string source, std::vector<RefTensor> tensors,
                                                       std::vector<std::vector<uint8_t>> storage,
                                                       std::vector<std::shared_ptr<const void>> owners = {});

    const std::string& source() const { return source_; }
    const std::vector<RefTensor>& tensors() const { return tensors_; }
    const RefTensor* find(const std::string& dump_name) const;
    // The GGUF file of a GGUF dump (its dump.* metadata); nullptr for other sources.
    const GgufFile* file() const { return file_.get(); }

    // Values as f32 (F32 data copied, integer data converted); empty for a partial tensor.
    std::vector<float> values(const RefTensor& t) const;
    // Values [first, first + count) only, so that a huge tensor (a mapped .npy file) is read where
    // needed and never copied whole; empty for a partial tensor or a range outside it.
    std::vector<float> values(const RefTensor& t, int64_t first, int64_t count) const;
    // The output rows llama.cpp kept in the last layer of (decode, ubatch): the `out_ids` input.
    // Empty when the dump has none.
    std::vector<int32_t> out_ids(int decode, int ubatch) const;

    // From the dump.* keys of a GGUF dump, or from a manifest (set_tokens).
    std::vector<int32_t> prompt_tokens() const;
    std::vector<int32_t> generated_tokens() const;
    std::vector<int32_t> decode_n_tokens() const;
    std::string prompt() const { return file_ ? file_->get_string("dump.prompt") : ""; }
    bool flash_attention() const;  // "auto" or "on" in dump.flash_attn
    bool all_logits() const { return file_ && file_->get_bool("dump.all_logits", false); }
    int64_t n_ubatch() const { return file_ ? file_->get_int("dump.n_ubatch", 512) : 512; }
    // The context size the reference ran with (dump.n_ctx), 0 when it does not say. It chooses
    // phi3's LongRoPE factors, so a run compared with it takes the same.
    int64_t n_ctx() const { return file_ ? file_->get_int("dump.n_ctx", 0) : 0; }
    // The threads it ran with (dump.n_threads), 0 when it does not say: ggml's flash attention
    // splits a decode call's cells per thread.
    int n_threads() const { return file_ ? static_cast<int>(file_->get_int("dump.n_threads", 0)) : 0; }
    // What the build that made it says of itself: llama.cpp's system_info ("CPU : SSE3 = 1 | ...
    // AVX512 = 1 | ..."), the processor's flags (dump.cpu_flags: "avx2 avx512f avx512fp16 ...") and
    // the devices it ran on (dump.backend: "CPU", "CUDA0"). Empty when not recorded.
    std::string system_info() const { return file_ ? file_->get_string("dump.system_info") : ""; }
    std::string cpu_flags() const { return file_ ? file_->get_string("dump.cpu_flags") : ""; }
    std::string backend() const { return file_ ? file_->get_string("dump.backend") : ""; }

    // For sources whose tokens are not in GGUF keys (a manifest's prompt_tokens, generated_tokens).
    void set_tokens(std::vector<int32_t> prompt, std::vector<int32_t> generated);

    // For naming conventions (tensor_names.h): tensors renamed or re-laid in place, then reindex().
    std::vector<RefTensor>& mutable_tensors() { return tensors_; }
    // Keeps `bytes` alive as long as the dump and returns where they are (re-laid values).
    const uint8_t* keep(std::vector<uint8_t> bytes);
    void reindex() { index(); }

private:
    void index();

    std::string source_;
    std::unique_ptr<GgufFile> file_;
    std::vector<std::vector<uint8_t>> storage_;
    std::vector<std::shared_ptr<const void>> owners_;
    std::vector<RefTensor> tensors_;
    std::map<std::string, size_t> by_name_;
    std::vector<int32_t> prompt_tokens_, generated_tokens_;  // sources without GGUF keys
};

}  // namespace ls
