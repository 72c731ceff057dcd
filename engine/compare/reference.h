// A reference run loaded from a tensor dump (the GGUF dump format of llama.cpp's reference dumper
// and of `layerscope run --dump`): tensors by dump name with their llama.cpp provenance.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"

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
    const GgufTensorInfo* info = nullptr;  // stored data (F32 for floats, I32/I64 for ids)

    const int64_t* ne() const { return info->ne; }
    int64_t n_elements() const { return info->n_elements(); }
};

class ReferenceDump {
public:
    static Result<std::unique_ptr<ReferenceDump>> open(const std::string& path);

    const GgufFile& file() const { return *file_; }
    const std::vector<RefTensor>& tensors() const { return tensors_; }
    const RefTensor* find(const std::string& dump_name) const;

    // Values as f32 (F32 data copied, integer data converted).
    std::vector<float> values(const RefTensor& t) const;
    // The output rows llama.cpp kept in the last layer of (decode, ubatch): the `out_ids` input.
    // Empty when the dump has none.
    std::vector<int32_t> out_ids(int decode, int ubatch) const;

    std::vector<int32_t> prompt_tokens() const;
    std::vector<int32_t> generated_tokens() const;
    std::vector<int32_t> decode_n_tokens() const;
    std::string prompt() const { return file_->get_string("dump.prompt"); }
    bool flash_attention() const;  // "auto" or "on" in dump.flash_attn
    int64_t n_ubatch() const { return file_->get_int("dump.n_ubatch", 512); }

private:
    std::unique_ptr<GgufFile> file_;
    std::vector<RefTensor> tensors_;
    std::map<std::string, size_t> by_name_;
};

}  // namespace ls
