// Tensor dumps in the reference dumper's GGUF layout.
#include "engine/capture/dump_writer.h"

#include "kernels/backend.h"
#include "engine/gguf/gguf.h"

namespace ls {

void DumpWriter::on_event(const Event& e) {
    // node_index counts the events of one graph evaluation (decode call and physical batch).
    const int graph = e.decode * 4096 + e.ubatch;
    if (graph != last_graph_) node_counter_ = 0, last_graph_ = graph;
    Captured c;
    c.name = e.dump_name();
    c.orig_name = e.name;
    c.op = op_name(e.op);
    c.decode = e.decode;
    c.ubatch = e.ubatch;
    c.node_index = node_counter_++;
    int n_dims = 4;
    while (n_dims > 1 && e.tensor.ne[n_dims - 1] == 1) --n_dims;
    c.ne.assign(e.tensor.ne, e.tensor.ne + n_dims);
    c.data.resize(static_cast<size_t>(e.tensor.n_elements()));
    e.backend->download(c.data.data(), e.tensor.data, c.data.size() * sizeof(float));
    bytes_ += c.data.size() * sizeof(float);
    tensors_.push_back(std::move(c));
}

void DumpWriter::add_logits(int decode, const std::vector<float>& logits, int64_t n_vocab) {
    Captured c;
    c.name = event_dump_name("llama_logits", 1, decode, 0);
    c.orig_name = "llama_logits";
    c.op = "LLAMA_GET_LOGITS";
    c.decode = decode;
    c.kind = 2;
    const int64_t rows = static_cast<int64_t>(logits.size()) / n_vocab;
    c.ne = rows > 1 ? std::vector<int64_t>{n_vocab, rows} : std::vector<int64_t>{n_vocab};
    c.data = logits;
    bytes_ += c.data.size() * sizeof(float);
    tensors_.push_back(std::move(c));
}

std::vector<GgufKV> dump_run_metadata(const DumpInfo& info) {
    auto i32s = [](const std::vector<int32_t>& v) {
        std::vector<GgufValue> items;
        for (int32_t x : v) items.push_back(GgufValue::make_i32(x));
        return GgufValue::make_array(GgufValueType::INT32, std::move(items));
    };
    std::vector<GgufKV> kv = {
        {"dump.format_version", GgufValue::make_u32(1)},
        {"dump.tool", GgufValue::make_string(info.tool)},
        {"dump.model_path", GgufValue::make_string(info.model_path)},
        {"dump.model_desc", GgufValue::make_string(info.model_desc)},
        {"dump.prompt", GgufValue::make_string(info.prompt)},
        {"dump.add_special", GgufValue::make_bool(info.add_special)},
        {"dump.add_bos", GgufValue::make_bool(info.add_bos)},
        {"dump.prompt_tokens", i32s(info.prompt_tokens)},
        {"dump.prompt_token_pieces", GgufValue::make_string_array(info.prompt_token_pieces)},
        {"dump.n_predict", GgufValue::make_i32(info.n_predict)},
    };
    if (info.n_predict > 0 || !info.generated_tokens.empty()) {
        kv.push_back({"dump.generated_tokens", i32s(info.generated_tokens)});
        kv.push_back({"dump.generated_text", GgufValue::make_string(info.generated_text)});
    }
    kv.push_back({"dump.decode_n_tokens", i32s(info.decode_n_tokens)});
    kv.push_back({"dump.n_ctx", GgufValue::make_u32(info.n_ctx)});
    // 0: not known (a conversion of a .npy folder); a reader then takes llama.cpp's default, as for
    // any dump without the key, instead of a batch size no run can have.
    if (info.n_ubatch > 0) kv.push_back({"dump.n_ubatch", GgufValue::make_u32(info.n_ubatch)});
    kv.push_back({"dump.n_threads", GgufValue::make_i32(info.n_threads)});
    kv.push_back({"dump.flash_attn", GgufValue::make_string(info.flash_attn ? "on" : "off")});
    kv.push_back({"dump.all_logits", GgufValue::make_bool(info.all_logits)});
    kv.push_back({"dump.system_info", GgufValue::make_string(info.system_info)});
    kv.push_back({"dump.naming", GgufValue::make_string(
                                     "tensor = llama.cpp name; '#k' = k-th occurrence of that name within one graph eval; "
                                     "'@d' = decode call d >= 1; '@d.u' = ubatch u >= 1 of decode call d")});
    return kv;
}

void DumpWriter::layout(const DumpInfo& info, std::vector<GgufKV>& kv, std::vector<GgufWriteTensor>& tensors) const {
    kv = dump_run_metadata(info);

    std::vector<std::string> orig, op, src, type;
    std::vector<GgufValue> decode, ubatch, node, kind;
    tensors.clear();
    for (const Captured& c : tensors_) {
        orig.push_back(c.orig_name);
        op.push_back(c.op);
        src.push_back("");
        type.push_back("f32");
        decode.push_back(GgufValue::make_i32(c.decode));
        ubatch.push_back(GgufValue::make_i32(c.ubatch));
        node.push_back(GgufValue::make_i32(c.kind == 0 ? c.node_index : -1));
        kind.push_back(GgufValue::make_i32(c.kind));
        tensors.push_back({c.name, GgmlType::F32, c.ne, c.data.data(), c.data.size() * sizeof(float)});
    }
    kv.push_back({"dump.tensor.orig_name", GgufValue::make_string_array(orig)});
    kv.push_back({"dump.tensor.op", GgufValue::make_string_array(op)});
    kv.push_back({"dump.tensor.src0", GgufValue::make_string_array(src)});
    kv.push_back({"dump.tensor.src1", GgufValue::make_string_array(src)});
    kv.push_back({"dump.tensor.orig_type", GgufValue::make_string_array(type)});
    kv.push_back({"dump.tensor.decode", GgufValue::make_array(GgufValueType::INT32, decode)});
    kv.push_back({"dump.tensor.ubatch", GgufValue::make_array(GgufValueType::INT32, ubatch)});
    kv.push_back({"dump.tensor.node_index", GgufValue::make_array(GgufValueType::INT32, node)});
    kv.push_back({"dump.tensor.kind", GgufValue::make_array(GgufValueType::INT32, kind)});
}

Status DumpWriter::write(const std::string& path, const DumpInfo& info, bool overwrite) const {
    std::vector<GgufKV> kv;
    std::vector<GgufWriteTensor> tensors;
    layout(info, kv, tensors);
    return gguf_write(path, kv, tensors, 32, overwrite);
}

Result<std::vector<uint8_t>> DumpWriter::to_bytes(const DumpInfo& info) const {
    std::vector<GgufKV> kv;
    std::vector<GgufWriteTensor> tensors;
    layout(info, kv, tensors);
    return gguf_to_bytes(kv, tensors, 32);
}

}  // namespace ls
