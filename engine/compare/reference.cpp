// Loading reference dumps: tensor provenance from the parallel dump.tensor.* arrays.
#include "engine/compare/reference.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/compare/reference_formats.h"
#include "engine/forward/event.h"
#include "engine/util/quote.h"
#include "engine/util/input_file.h"

namespace ls {
namespace {

std::vector<int32_t> int_array(const GgufFile& f, const char* key) {
    std::vector<int32_t> out;
    if (const GgufValue* v = f.find(key); v && v->is_array())
        for (size_t i = 0; i < v->array_size(); ++i) {
            int64_t x = 0;
            if (v->item_int(i, &x)) out.push_back(static_cast<int32_t>(x));
        }
    return out;
}

// The occurrence in "Qcur-0#3@1.2" (3). Decode and ubatch come from their own arrays, so the '@'
// part is cut off unchecked; a malformed '#' suffix, "#0" or "#1" mean the first occurrence.
int occurrence_of(const std::string& dump_name) {
    DumpName parts;
    const bool ok = parse_dump_name(dump_name.substr(0, dump_name.rfind('@')), &parts);
    return ok && parts.occurrence >= 2 ? parts.occurrence : 1;
}

}  // namespace

Result<std::unique_ptr<ReferenceDump>> ReferenceDump::open_gguf(const std::string& path) {
    auto file = GgufFile::open(path);
    if (!file) return file.error();
    return from_gguf(std::move(file.value()));
}

Result<std::unique_ptr<ReferenceDump>> ReferenceDump::from_gguf(std::unique_ptr<GgufFile> file) {
    std::unique_ptr<ReferenceDump> d(new ReferenceDump());
    d->file_ = std::move(file);
    const GgufFile& f = *d->file_;
    const std::string& path = f.path();
    if (!f.find("dump.format_version"))
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: not a tensor dump (no dump.format_version key); expected a dump written by "
                                      "`layerscope run --dump` or llama.cpp's reference dumper",
                                      path));
    const size_t n = f.tensors().size();
    auto strings = [&](const char* key) -> Result<const std::vector<std::string>*> {
        const GgufValue* v = f.find(key);
        if (!v) return static_cast<const std::vector<std::string>*>(nullptr);
        if (v->elem_type != GgufValueType::STRING || v->strings.size() != n)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: {} must be a string array with one entry per tensor ({}), "
                                                                "got {}", path, key, n, v->to_string(2)));
        return &v->strings;
    };
    auto ints = [&](const char* key) -> Result<std::vector<int32_t>> {
        std::vector<int32_t> a = int_array(f, key);
        if (f.find(key) && a.size() != n)
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{}: {} has {} entries, expected one per tensor ({})", path, key, a.size(), n));
        return a;
    };
    auto orig = strings("dump.tensor.orig_name");
    auto op = strings("dump.tensor.op");
    auto src0 = strings("dump.tensor.src0");
    auto src1 = strings("dump.tensor.src1");
    auto decode = ints("dump.tensor.decode");
    auto ubatch = ints("dump.tensor.ubatch");
    auto kind = ints("dump.tensor.kind");
    auto node = ints("dump.tensor.node_index");
    for (const Error* e : {orig ? nullptr : &orig.error(), op ? nullptr : &op.error(), src0 ? nullptr : &src0.error(),
                           src1 ? nullptr : &src1.error(), decode ? nullptr : &decode.error(),
                           ubatch ? nullptr : &ubatch.error(), kind ? nullptr : &kind.error(),
                           node ? nullptr : &node.error()})
        if (e) return *e;

    d->source_ = path;
    d->tensors_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const GgufTensorInfo& info = f.tensors()[i];
        RefTensor& t = d->tensors_[i];
        for (int k = 0; k < 4; ++k) t.ne_[k] = info.ne[k];
        t.stored_type = info.type;
        t.data = info.data;
        t.name = info.name;
        t.occurrence = occurrence_of(info.name);
        size_t cut = info.name.find_first_of("#@");
        t.base_name = orig.value() ? (*orig.value())[i] : info.name.substr(0, cut);
        if (op.value()) t.op = (*op.value())[i];
        if (src0.value()) t.src0 = (*src0.value())[i];
        if (src1.value()) t.src1 = (*src1.value())[i];
        if (!decode->empty()) t.decode = decode.value()[i];
        if (!ubatch->empty()) t.ubatch = ubatch.value()[i];
        if (!kind->empty()) t.kind = static_cast<RefKind>(kind.value()[i]);
        if (!node->empty()) t.node_index = node.value()[i];
        if (info.type != GgmlType::F32 && info.type != GgmlType::I32 && info.type != GgmlType::I64)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: tensor {} is stored as {}; dumps store F32, I32 or I64",
                                                                path, quote_text(info.name), ggml_type_name(info.type)));
    }
    d->index();
    return d;
}

std::unique_ptr<ReferenceDump> ReferenceDump::from_tensors(std::string source, std::vector<RefTensor> tensors,
                                                           std::vector<std::vector<uint8_t>> storage,
                                                           std::vector<std::shared_ptr<const void>> owners) {
    std::unique_ptr<ReferenceDump> d(new ReferenceDump());
    d->source_ = std::move(source);
    d->tensors_ = std::move(tensors);
    d->storage_ = std::move(storage);
    d->owners_ = std::move(owners);
    d->index();
    return d;
}

void ReferenceDump::index() {
    by_name_.clear();
    for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
}

const RefTensor* ReferenceDump::find(const std::string& dump_name) const {
    auto it = by_name_.find(dump_name);
    return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

std::vector<float> ReferenceDump::values(const RefTensor& t) const { return values(t, 0, t.n_elements()); }

std::vector<float> ReferenceDump::values(const RefTensor& t, int64_t first, int64_t count) const {
    if (!t.complete() || first < 0 || count < 0 || count > t.n_elements() - first) return {};
    const int64_t n = count;
    std::vector<float> out(static_cast<size_t>(n));
    const uint8_t* p = t.data + static_cast<uint64_t>(first) * (t.stored_type == GgmlType::I64 ? 8 : 4);
    for (int64_t i = 0; i < n; ++i) {
        switch (t.stored_type) {
            case GgmlType::F32: std::memcpy(&out[i], p + 4 * i, 4); break;
            case GgmlType::I32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); out[i] = static_cast<float>(v); break; }
            default: { int64_t v; std::memcpy(&v, p + 8 * i, 8); out[i] = static_cast<float>(v); break; }
        }
    }
    return out;
}

std::vector<int32_t> ReferenceDump::out_ids(int decode, int ubatch) const {
    for (const RefTensor& t : tensors_) {
        if (t.kind == RefKind::kInput && t.base_name == "out_ids" && t.decode == decode && t.ubatch == ubatch &&
            t.stored_type == GgmlType::I32 && t.complete()) {
            std::vector<int32_t> ids(static_cast<size_t>(t.n_elements()));
            std::memcpy(ids.data(), t.data, ids.size() * 4);
            return ids;
        }
    }
    return {};
}

std::vector<int32_t> ReferenceDump::prompt_tokens() const {
    return file_ ? int_array(*file_, "dump.prompt_tokens") : prompt_tokens_;
}
std::vector<int32_t> ReferenceDump::generated_tokens() const {
    return file_ ? int_array(*file_, "dump.generated_tokens") : generated_tokens_;
}

void ReferenceDump::set_tokens(std::vector<int32_t> prompt, std::vector<int32_t> generated) {
    prompt_tokens_ = std::move(prompt);
    generated_tokens_ = std::move(generated);
}

const uint8_t* ReferenceDump::keep(std::vector<uint8_t> bytes) {
    storage_.push_back(std::move(bytes));
    return storage_.back().data();  // the buffer does not move when `storage_` grows
}
std::vector<int32_t> ReferenceDump::decode_n_tokens() const {
    return file_ ? int_array(*file_, "dump.decode_n_tokens") : std::vector<int32_t>{};
}

bool ReferenceDump::flash_attention() const {
    if (!file_) return false;
    std::string fa = file_->get_string("dump.flash_attn", "off");
    return fa == "auto" || fa == "on" || fa == "enabled";
}

}  // namespace ls

namespace ls {

// Dispatch on what `path` is: a folder (npy + manifest), a GGUF file, else an eval-callback log.
Result<std::unique_ptr<ReferenceDump>> ReferenceDump::open(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        if (!std::filesystem::exists(std::filesystem::path(path) / "manifest.json", ec))
            return make_error(ErrorCode::kBadInput, fmt::format("{}: a folder without manifest.json; a folder "
                                                                "reference holds .npy files and a manifest.json", path));
        return open_npy_folder(path);
    }
    if (Status s = check_input_file(path); !s) return s.error();  // a FIFO would block the read below
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kBadInput, fmt::format("{}: cannot open", path));
    char magic[6] = {};
    in.read(magic, 6);
    if (in.gcount() >= 4 && std::memcmp(magic, "GGUF", 4) == 0) return open_gguf(path);
    if (in.gcount() == 6 && std::memcmp(magic, "\x93NUMPY", 6) == 0)
        return make_error(ErrorCode::kBadInput, fmt::format("{}: a single .npy file; a .npy reference is a folder of "
                                                            ".npy files with a manifest.json naming them", path));
    return open_eval_log(path);
}

}  // namespace ls
