// Tensor dumps in the reference dumper's GGUF layout.
#include "engine/capture/dump_writer.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "kernels/backend.h"
#include "kernels/common/host_memory.h"
#include "engine/forward/memory_estimate.h"
#include "engine/gguf/gguf.h"

namespace ls {

DumpWriter::~DumpWriter() {
    if (stream_fd_ >= 0) ::close(stream_fd_);
}

Status DumpWriter::stream_to(const std::string& dump_path) {
    const std::filesystem::path target(dump_path);
    stream_dir_ = target.has_parent_path() ? target.parent_path().string() : ".";
    int fd = ::open(stream_dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        // A file system without unnamed files: a named one, unlinked at once.
        std::string name = (std::filesystem::path(stream_dir_) / ("." + target.filename().string() + ".layerscope-stream.XXXXXX")).string();
        fd = mkostemp(name.data(), O_CLOEXEC);
        if (fd >= 0) ::unlink(name.c_str());
    }
    if (fd < 0)
        return make_error(ErrorCode::kIo, fmt::format("{}: cannot make a file in {} to stream the dump's values to: {}",
                                                      dump_path, stream_dir_, std::strerror(errno)));
    stream_fd_ = fd;
    return {};
}

void DumpWriter::keep(Captured c, const float* values, size_t n) {
    const uint64_t n_bytes = n * sizeof(float);
    bytes_ += n_bytes;
    if (stream_fd_ < 0) {
        c.data.assign(values, values + n);
    } else if (stream_status_) {
        c.offset = streamed_;
        const char* p = reinterpret_cast<const char*>(values);
        for (uint64_t done = 0; done < n_bytes;) {
            const ssize_t k = ::pwrite(stream_fd_, p + done, n_bytes - done, static_cast<off_t>(streamed_ + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) {
                stream_status_ = make_error(ErrorCode::kIo, fmt::format("writing the dump's values to {} failed: {}", stream_dir_,
                                                                        k < 0 ? std::strerror(errno) : "nothing written"));
                break;
            }
            done += static_cast<uint64_t>(k);
        }
        streamed_ += n_bytes;
    }
    tensors_.push_back(std::move(c));
}

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
    const size_t n = static_cast<size_t>(e.tensor.n_elements());
    std::vector<float>& values = stream_fd_ >= 0 ? staging_ : c.data;
    values.resize(n);
    e.backend->download(values.data(), e.tensor.data, n * sizeof(float));
    if (stream_fd_ < 0) {
        bytes_ += n * sizeof(float);
        tensors_.push_back(std::move(c));
    } else {
        keep(std::move(c), staging_.data(), n);
    }
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
    keep(std::move(c), logits.data(), logits.size());
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

Status check_dump_room(const std::string& what, uint64_t n_events, uint64_t value_bytes, const BackendMemory& ram,
                       const BackendMemory& disk, const std::string& hint) {
    constexpr uint64_t kBytesPerEvent = 2048;  // measured: about 1.8 KiB (peak RSS of long dumps)
    MemoryEstimate records;
    records.add("event records", fmt::format("{} x about {} bytes", n_events, kBytesPerEvent), mul_sat(n_events, kBytesPerEvent));
    if (Status s = check_memory(what, records, ram, hint); !s) return s;
    MemoryEstimate values;
    values.add("the values streamed", fmt::format("{} tensors", n_events), value_bytes);
    values.add("the dump written from them", "the same bytes", value_bytes);
    return check_memory(what, values, disk, hint);
}

BackendMemory disk_room(const std::string& folder) {
    struct statvfs st {};
    if (statvfs(folder.c_str(), &st) != 0) return {false, 0, "", false};
    return {true, mul_sat(st.f_bavail, st.f_frsize), "the file system of " + folder, false};
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
        uint64_t n = 1;
        for (int64_t d : c.ne) n *= static_cast<uint64_t>(d);
        tensors.push_back({c.name, GgmlType::F32, c.ne, c.data.data(), n * sizeof(float)});
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
    if (stream_fd_ < 0) return gguf_write(path, kv, tensors, 32, overwrite);
    if (!stream_status_) return stream_status_;
    auto read_back = [&](size_t i, uint8_t* out) -> Status {
        const uint64_t n_bytes = tensors[i].n_bytes, offset = tensors_[i].offset;
        for (uint64_t done = 0; done < n_bytes;) {
            const ssize_t k = ::pread(stream_fd_, out + done, n_bytes - done, static_cast<off_t>(offset + done));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0)
                return make_error(ErrorCode::kIo, fmt::format("reading the dump's values back from {} failed: {}", stream_dir_,
                                                              k < 0 ? std::strerror(errno) : "the file is shorter"));
            done += static_cast<uint64_t>(k);
        }
        return {};
    };
    return gguf_write_streamed(path, kv, tensors, read_back, 32, overwrite);
}

Result<std::vector<uint8_t>> DumpWriter::to_bytes(const DumpInfo& info) const {
    if (stream_fd_ >= 0) return make_error(ErrorCode::kInternal, "a streamed dump is only written to its file");
    std::vector<GgufKV> kv;
    std::vector<GgufWriteTensor> tensors;
    layout(info, kv, tensors);
    return gguf_to_bytes(kv, tensors, 32);
}

}  // namespace ls
