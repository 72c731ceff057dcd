// Export of captured tensors (see export.h): selection, and the GGUF dump and .npy folder writers,
// which write through engine/util/safe_write.h so that half-written exports stay out of sight.
#include "engine/capture/export.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "kernels/backend.h"
#include "engine/compare/reference_formats.h"
#include "engine/forward/event.h"
#include "engine/gguf/gguf.h"
#include "engine/session/breakpoint.h"
#include "engine/util/safe_write.h"

namespace ls {
namespace {

namespace fs = std::filesystem;

size_t element_size(GgmlType type) { return type == GgmlType::I64 ? 8 : 4; }

const char* npy_dtype(GgmlType type) {
    return type == GgmlType::I32 ? "<i4" : type == GgmlType::I64 ? "<i8" : "<f4";
}

const char* dump_type_name(GgmlType type) {
    return type == GgmlType::I32 ? "i32" : type == GgmlType::I64 ? "i64" : "f32";
}

const char* kind_name(RefKind kind) {
    return kind == RefKind::kInput ? "input" : kind == RefKind::kLogits ? "logits" : "node";
}

// ne without trailing 1s (at least one entry): dumps and manifests then agree on the shape.
std::vector<int64_t> trimmed(std::vector<int64_t> ne) {
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    return ne;
}

std::vector<int64_t> ne_of(const int64_t* ne4) { return trimmed(std::vector<int64_t>(ne4, ne4 + 4)); }

// Splits "Qcur-0#3@1.2" into its parts; malformed suffixes belong to the name, and so do "#0" and
// "#1", which no dump writes (the first tensor of a name has no '#').
void split_name(const std::string& name, ExportTensor* t) {
    DumpName parts;
    parse_dump_name(name, &parts);
    if (parts.occurrence < 2 && name.compare(parts.base.size(), 1, "#") == 0) {
        parts.base = name.substr(0, name.find('@', parts.base.size()));
        parts.occurrence = 1;
    }
    t->base_name = parts.base;
    t->occurrence = parts.occurrence;
    t->decode = parts.decode;
    t->ubatch = parts.ubatch;
}

ExportTensor from_capture(const std::shared_ptr<const CapturedTensor>& c) {
    ExportTensor t;
    t.base_name = c->info.base_name;
    t.occurrence = c->info.occurrence;
    t.decode = c->info.decode;
    t.ubatch = c->info.ubatch;
    t.op = op_name(c->info.op);
    t.kind = c->info.base_name == "llama_logits" ? RefKind::kLogits : RefKind::kNode;
    t.ne = ne_of(c->info.ne);
    t.data = c->values ? c->values->data() : nullptr;
    t.owner = c;
    return t;
}

DumpInfo export_info() {
    DumpInfo info;
    info.tool = "layerscope export";
    return info;
}

// A file name for a dump name: the characters a file system may dislike become '_', and a clash
// (two names that differ only there) gets a counter.
std::string npy_file_name(const std::string& dump_name, std::set<std::string>* used) {
    std::string stem;
    for (char c : dump_name) stem += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
    if (stem.empty() || stem[0] == '.') stem = "_" + stem;
    if (stem.size() > 180) stem.resize(180);
    std::string name = stem + ".npy";
    for (int k = 2; !used->insert(name).second; ++k) name = fmt::format("{}-{}.npy", stem, k);
    return name;
}

Error io_error(const std::string& msg) { return make_error(ErrorCode::kIo, msg); }

bool wants_cancel(const ExportOptions& o, size_t done, size_t total) {
    if (o.cancel && o.cancel->load()) return true;
    return o.progress && !o.progress(done, total);
}

std::vector<GgufKV> dump_metadata(const ExportSet& set) {
    return set.source_metadata.empty() ? dump_run_metadata(set.info) : set.source_metadata;
}

Result<ExportSummary> write_gguf(const ExportSet& set, const ExportOptions& o, const std::string& path) {
    std::vector<GgufKV> kv = dump_metadata(set);
    std::vector<std::string> orig, op, src0, src1, type;
    std::vector<GgufValue> decode, ubatch, node, kind;
    std::vector<GgufWriteTensor> tensors;
    ExportSummary summary;
    const size_t total = set.tensors.size();
    for (size_t i = 0; i < total; ++i) {
        if (wants_cancel(o, i, total)) return ExportSummary{path, 0, 0, true};
        const ExportTensor& t = set.tensors[i];
        orig.push_back(t.base_name);
        op.push_back(t.op);
        src0.push_back(t.src0);
        src1.push_back(t.src1);
        type.push_back(dump_type_name(t.type));
        decode.push_back(GgufValue::make_i32(t.decode));
        ubatch.push_back(GgufValue::make_i32(t.ubatch));
        node.push_back(GgufValue::make_i32(t.node_index));
        kind.push_back(GgufValue::make_i32(static_cast<int32_t>(t.kind)));
        tensors.push_back({t.dump_name(), t.type, trimmed(t.ne), t.data, t.n_bytes()});
        summary.bytes += t.n_bytes();
    }
    kv.push_back({"dump.tensor.orig_name", GgufValue::make_string_array(orig)});
    kv.push_back({"dump.tensor.op", GgufValue::make_string_array(op)});
    kv.push_back({"dump.tensor.src0", GgufValue::make_string_array(src0)});
    kv.push_back({"dump.tensor.src1", GgufValue::make_string_array(src1)});
    kv.push_back({"dump.tensor.orig_type", GgufValue::make_string_array(type)});
    kv.push_back({"dump.tensor.decode", GgufValue::make_array(GgufValueType::INT32, decode)});
    kv.push_back({"dump.tensor.ubatch", GgufValue::make_array(GgufValueType::INT32, ubatch)});
    kv.push_back({"dump.tensor.node_index", GgufValue::make_array(GgufValueType::INT32, node)});
    kv.push_back({"dump.tensor.kind", GgufValue::make_array(GgufValueType::INT32, kind)});
    // The last chance to cancel before the file appears: gguf_write itself is not interruptible.
    if (wants_cancel(o, total, total + 1)) return ExportSummary{path, 0, 0, true};
    if (Status s = gguf_write(path, kv, tensors, 32, o.overwrite); !s) return s.error();
    if (o.progress) o.progress(total, total);
    summary.path = path;
    summary.n_tensors = total;
    return summary;
}

Status write_manifest(const ExportSet& set, const std::vector<std::string>& files, StagedFolder& folder) {
    nlohmann::ordered_json m;  // keys in the order a reader expects them: format first
    m["format"] = "layerscope-npy";
    m["version"] = 1;
    m["tool"] = set.info.tool;
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (size_t i = 0; i < set.tensors.size(); ++i) {
        const ExportTensor& t = set.tensors[i];
        nlohmann::ordered_json e;
        e["name"] = t.dump_name();
        e["file"] = files[i];
        e["order"] = "ggml";
        e["ne"] = trimmed(t.ne);
        e["occurrence"] = t.occurrence;
        e["decode"] = t.decode;
        e["ubatch"] = t.ubatch;
        if (!t.op.empty()) e["op"] = t.op;
        e["kind"] = kind_name(t.kind);
        list.push_back(std::move(e));
    }
    m["tensors"] = std::move(list);
    m["prompt_tokens"] = set.info.prompt_tokens;
    m["generated_tokens"] = set.info.generated_tokens;
    if (!set.info.prompt.empty()) m["prompt"] = set.info.prompt;
    // Dump names may hold bytes that are not UTF-8; replace them rather than throw.
    const std::string text = m.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    return folder.write_file("manifest.json", [&](std::FILE* f) -> Status {
        if (std::fwrite(text.data(), 1, text.size(), f) != text.size())
            return io_error(fmt::format("writing {}/manifest.json failed: {}", folder.target(), std::strerror(errno)));
        return {};
    });
}

Result<ExportSummary> write_npy_folder(const ExportSet& set, const ExportOptions& o, const std::string& path) {
    // Written under a staging name, swapped in complete; the staging folder goes away with
    // `folder` on an error or a cancel.
    auto staged = StagedFolder::create(path, o.overwrite);
    if (!staged) return staged.error();
    StagedFolder& folder = *staged.value();

    ExportSummary summary;
    std::set<std::string> used;
    std::vector<std::string> files;
    const size_t total = set.tensors.size();
    for (size_t i = 0; i < total; ++i) {
        if (wants_cancel(o, i, total)) return ExportSummary{path, 0, 0, true};
        const ExportTensor& t = set.tensors[i];
        files.push_back(npy_file_name(t.dump_name(), &used));
        std::vector<int64_t> shape = trimmed(t.ne);
        std::reverse(shape.begin(), shape.end());  // numpy shows ggml's ne reversed
        const std::string what = (fs::path(path) / files.back()).string();
        Status s = folder.write_file(files.back(), [&](std::FILE* f) { return write_npy(f, what, npy_dtype(t.type), shape, t.data); });
        if (!s) return s.error();
        summary.bytes += t.n_bytes();
    }
    if (Status s = write_manifest(set, files, folder); !s) return s.error();
    if (wants_cancel(o, total, total + 1)) return ExportSummary{path, 0, 0, true};
    if (Status s = folder.commit(); !s) return s.error();
    if (o.progress) o.progress(total, total);
    summary.path = path;
    summary.n_tensors = total;
    return summary;
}

Status check_set(const ExportSet& set) {
    if (set.tensors.empty())
        return make_error(ErrorCode::kUsage, "nothing to export: no tensor is selected (check the event globs, or "
                                             "capture the events first)");
    std::set<std::string> names;
    for (const ExportTensor& t : set.tensors) {
        const std::string name = t.dump_name();
        if (t.base_name.empty()) return make_error(ErrorCode::kUsage, "a tensor to export has no name");
        if (!names.insert(name).second)
            return make_error(ErrorCode::kUsage, fmt::format("two tensors to export are both named {}", name));
        if (t.ne.empty() || t.ne.size() > 4)
            return make_error(ErrorCode::kUsage, fmt::format("{}: ne must have 1 to 4 sizes, got {}", name, t.ne.size()));
        for (int64_t d : t.ne)
            if (d < 1) return make_error(ErrorCode::kUsage, fmt::format("{}: ne holds a size {} < 1", name, d));
        if (!t.data) return make_error(ErrorCode::kUsage, fmt::format("{}: no values", name));
        if (t.type != GgmlType::F32 && t.type != GgmlType::I32 && t.type != GgmlType::I64)
            return make_error(ErrorCode::kUsage, fmt::format("{}: only F32, I32 and I64 tensors are exported", name));
    }
    return {};
}

}  // namespace

const char* export_format_name(ExportFormat format) { return format == ExportFormat::kGgufDump ? "gguf" : "npy"; }

std::string ExportTensor::dump_name() const { return event_dump_name(base_name, occurrence, decode, ubatch); }

int64_t ExportTensor::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

size_t ExportTensor::n_bytes() const { return static_cast<size_t>(n_elements()) * element_size(type); }

bool export_selected(const std::vector<std::string>& globs, const std::string& base_name, const std::string& dump_name) {
    if (globs.empty()) return true;
    for (const std::string& g : globs)
        if (glob_match(g, base_name) || glob_match(g, dump_name)) return true;
    return false;
}

std::vector<std::string> split_export_globs(const std::string& text) {
    std::vector<std::string> globs;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        if (b != std::string::npos) globs.push_back(item.substr(b, e - b + 1));
    }
    return globs;
}

ExportTensor make_export_tensor(const std::string& dump_name, std::vector<int64_t> ne, std::vector<float> values) {
    ExportTensor t;
    split_name(dump_name, &t);
    t.ne = std::move(ne);
    auto owned = std::make_shared<std::vector<float>>(std::move(values));
    t.data = owned->data();
    t.owner = owned;
    return t;
}

ExportSet export_set_from_captures(const CaptureMap& captures, const std::vector<std::string>& globs) {
    std::vector<std::shared_ptr<const CapturedTensor>> list;
    for (const auto& [index, c] : captures) list.push_back(c);  // the map is ordered by event index
    return export_set_from_captures(list, globs);
}

ExportSet export_set_from_captures(const std::vector<std::shared_ptr<const CapturedTensor>>& captures,
                                   const std::vector<std::string>& globs) {
    ExportSet set;
    set.info = export_info();
    for (const auto& c : captures)
        if (c && c->values && export_selected(globs, c->info.base_name, c->info.name)) set.tensors.push_back(from_capture(c));
    return set;
}

ExportSet export_set_from_reference(std::shared_ptr<const ReferenceDump> reference, const std::vector<std::string>& globs) {
    ExportSet set;
    set.info = export_info();
    set.info.prompt = reference->prompt();
    set.info.prompt_tokens = reference->prompt_tokens();
    set.info.generated_tokens = reference->generated_tokens();
    set.info.decode_n_tokens = reference->decode_n_tokens();
    // A source without dump.* keys (a .npy folder) records no context or batch size: the context
    // its tokens need (rounded up to 256 cells) and the prompt as one batch, which a compare of
    // the written dump runs with.
    const int64_t n_tokens = static_cast<int64_t>(set.info.prompt_tokens.size() + set.info.generated_tokens.size());
    set.info.n_ctx = static_cast<uint32_t>(std::max<int64_t>(256, (n_tokens + 255) / 256 * 256));
    set.info.n_ubatch = static_cast<uint32_t>(set.info.prompt_tokens.empty() ? 512 : set.info.prompt_tokens.size());
    if (const GgufFile* f = reference->file())
        for (const GgufKV& kv : f->metadata())
            if (kv.key.rfind("dump.", 0) == 0 && kv.key.rfind("dump.tensor.", 0) != 0) set.source_metadata.push_back(kv);
    for (const RefTensor& r : reference->tensors()) {
        if (!export_selected(globs, r.base_name, r.name)) continue;
        if (!r.complete()) {
            ++set.skipped_partial;
            continue;
        }
        ExportTensor t;
        t.base_name = r.base_name;
        t.occurrence = r.occurrence;
        t.decode = r.decode;
        t.ubatch = r.ubatch;
        t.op = r.op;
        t.src0 = r.src0;
        t.src1 = r.src1;
        t.kind = r.kind;
        t.node_index = r.node_index;
        t.ne = ne_of(r.ne());
        t.type = r.stored_type;
        t.data = r.data;
        t.owner = reference;
        set.tensors.push_back(std::move(t));
    }
    return set;
}

void ExportCollector::on_event(const Event& e) {
    // node_index counts every event of one graph evaluation, selected or not, as dumps do.
    const int graph = e.decode * 4096 + e.ubatch;
    if (graph != last_graph_) node_counter_ = 0, last_graph_ = graph;
    const int node_index = node_counter_++;
    if (!export_selected(globs_, e.name, e.dump_name())) return;
    ExportTensor t;
    t.base_name = e.name;
    t.occurrence = e.occurrence;
    t.decode = e.decode;
    t.ubatch = e.ubatch;
    t.op = op_name(e.op);
    t.node_index = node_index;
    t.ne = ne_of(e.tensor.ne);
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(e.tensor.n_elements()));
    e.backend->download(values->data(), e.tensor.data, values->size() * sizeof(float));
    t.data = values->data();
    t.owner = values;
    tensors_.push_back(std::move(t));
}

void ExportCollector::add_logits(int decode, const std::vector<float>& logits, int64_t n_vocab) {
    const std::string name = event_dump_name("llama_logits", 1, decode, 0);
    if (!export_selected(globs_, "llama_logits", name) || n_vocab <= 0) return;
    const int64_t rows = static_cast<int64_t>(logits.size()) / n_vocab;
    ExportTensor t = make_export_tensor(name, rows > 1 ? std::vector<int64_t>{n_vocab, rows} : std::vector<int64_t>{n_vocab},
                                        logits);
    t.op = "LLAMA_GET_LOGITS";
    t.kind = RefKind::kLogits;
    tensors_.push_back(std::move(t));
}

bool export_target_exists(const std::string& path) {
    std::error_code ec;
    return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

Result<ExportSummary> export_tensors(const ExportSet& set, const ExportOptions& o) {
    std::string path = o.path;
    while (path.size() > 1 && path.back() == '/') path.pop_back();  // "out/" names the folder "out"
    if (path.empty()) return make_error(ErrorCode::kUsage, "no output path given");
    if (Status s = check_set(set); !s) return s.error();

    // Refused before any work: an existing target without overwrite, a target that is not a
    // regular file (GGUF) or not an earlier export folder holding only what it wrote (npy).
    // The writers check again when they put the result in place.
    Status target = o.format == ExportFormat::kGgufDump ? check_file_target(path, o.overwrite)
                                                         : check_folder_target(path, o.overwrite);
    if (!target) return target.error();

    return o.format == ExportFormat::kGgufDump ? write_gguf(set, o, path) : write_npy_folder(set, o, path);
}

}  // namespace ls
