// Writes the fuzz targets' seed inputs from the fixtures: `make_seeds FIXTURES OUT` fills
// OUT/<target>/ with small inputs made from real files (models and dumps with every metadata key
// kept but arrays and tensors cut short, vocabularies cut to a few hundred tokens, log excerpts,
// the tokenizer test strings) and with .npy files and chat messages of every kind. Seeds are
// made at build time so that no large binary is kept in the repository.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "engine/compare/reference_formats.h"
#include "engine/remote/session_wire.h"
#include "engine/session/session.h"
#include "engine/gguf/gguf.h"
#include "engine/tokenizer/chat_template.h"

namespace {
namespace fs = std::filesystem;
using namespace ls;

std::string read_text(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_text(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// `v` with arrays cut to their first `cap` elements (nested arrays too).
GgufValue cut_array(const GgufValue& v, size_t cap) {
    if (!v.is_array()) return v;
    GgufValue out = v;
    if (out.strings.size() > cap) out.strings.resize(cap);
    if (out.arrays.size() > cap) out.arrays.resize(cap);
    for (GgufValue& inner : out.arrays) inner = cut_array(inner, cap);
    const size_t width = gguf_scalar_size(v.elem_type);
    if (width && out.packed.size() > cap * width) out.packed.resize(cap * width);
    return out;
}

// A copy of a GGUF file with at most `max_tensors` tensors, each cut to a few elements (the first
// bytes of its data, its number of dimensions kept), and metadata arrays cut to `max_array`
// elements; the dumps' per-tensor arrays (dump.tensor.*) to the tensors kept.
bool write_small_gguf(const fs::path& in, const fs::path& out, size_t max_tensors, size_t max_array,
                      const std::vector<GgufKV>& extra = {}) {
    auto file = GgufFile::open(in.string());
    if (!file) {
        std::fprintf(stderr, "make_seeds: %s\n", file.error().message.c_str());
        return false;
    }
    const GgufFile& f = *file.value();
    const size_t n_tensors = std::min(max_tensors, f.tensors().size());
    std::vector<GgufKV> metadata;
    for (const GgufKV& kv : f.metadata()) {
        if (kv.key == "general.alignment") continue;  // gguf_write writes its own
        const bool per_tensor = kv.key.rfind("dump.tensor.", 0) == 0;
        metadata.push_back({kv.key, cut_array(kv.value, per_tensor ? n_tensors : max_array)});
    }
    for (const GgufKV& kv : extra) {
        auto same = std::find_if(metadata.begin(), metadata.end(), [&](const GgufKV& m) { return m.key == kv.key; });
        if (same != metadata.end()) same->value = kv.value;
        else metadata.push_back(kv);
    }
    std::vector<GgufWriteTensor> tensors;
    for (size_t i = 0; i < n_tensors; ++i) {
        const GgufTensorInfo& t = f.tensors()[i];
        const GgmlTypeTraits* traits = ggml_type_traits(t.type);
        GgufWriteTensor w;
        w.name = t.name;
        w.type = t.type;
        for (uint32_t d = 0; d < std::max<uint32_t>(t.n_dims, 1); ++d) {
            const int64_t keep = d == 0 ? (traits->block_elems > 1 ? traits->block_elems : 8) : 2;
            w.ne.push_back(std::min(t.ne[d], keep));
        }
        uint64_t row = 0;
        if (!ggml_row_bytes(t.type, w.ne[0], &row)) continue;
        w.n_bytes = row;
        for (size_t d = 1; d < w.ne.size(); ++d) w.n_bytes *= static_cast<uint64_t>(w.ne[d]);
        if (w.n_bytes > t.n_bytes) continue;
        w.data = t.data;
        tensors.push_back(std::move(w));
    }
    Status st = gguf_write(out.string(), metadata, tensors);
    if (!st.ok()) std::fprintf(stderr, "make_seeds: %s\n", st.error().message.c_str());
    return st.ok();
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& suffix) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
            out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// Lines [first, first + count) of `text`.
std::string lines(const std::string& text, size_t first, size_t count) {
    std::istringstream in(text);
    std::string line, out;
    for (size_t i = 0; std::getline(in, line) && i < first + count; ++i)
        if (i >= first) out += line + "\n";
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: make_seeds FIXTURES_DIR OUT_DIR\n");
        return 2;
    }
    const fs::path fixtures = argv[1], out = argv[2];
    for (const char* target : {"gguf", "dump", "vocab", "npy", "eval_log", "tokenizer", "chat_template", "wire"})
        fs::create_directories(out / target);
    int n = 0;
    bool ok = true;

    // Models: every metadata key of every architecture, a few elements of each tensor.
    for (const fs::path& p : files_in(fixtures / "models", ".gguf"))
        ok &= write_small_gguf(p, out / "gguf" / p.filename(), 64, 64), ++n;
    // Tensors of every weight type (fixtures/quant).
    for (const fs::path& p : files_in(fixtures / "quant", ".gguf"))
        ok &= write_small_gguf(p, out / "gguf" / ("quant_" + p.filename().string()), 4, 16), ++n;
    // Dumps: the first tensors (inputs, embeddings, the first layer's start).
    for (const fs::path& p : files_in(fixtures / "dumps", ".gguf"))
        ok &= write_small_gguf(p, out / "dump" / p.filename(), 12, 16), ++n;
    // Vocabularies: the first 300 tokens and merges (byte tokens included), with a chat template.
    const char* templates[] = {
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}",
        "{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\\n\\n{{ message['content'] }}<|eot_id|>{% endfor %}",
        "{% if messages[0]['role'] == 'system' %}<<SYS>>\\n{{ messages[0]['content'] }}\\n<</SYS>>{% endif %}[INST] {{ content.strip() }} [/INST]",
    };
    size_t k = 0;
    for (const fs::path& p : files_in(fixtures / "tokenizer", ".gguf")) {
        const GgufKV tmpl{"tokenizer.chat_template", GgufValue::make_string(templates[k++ % 3])};
        ok &= write_small_gguf(p, out / "vocab" / p.filename(), 0, 300, {tmpl}), ++n;
    }

    // Tokenizer: llama.cpp's test strings, for each vocabulary (byte 0) with special tokens on.
    if (const auto inp = files_in(fixtures / "tokenizer", ".inp"); !inp.empty()) {
        const std::string text = read_text(inp[0]);
        const std::string sep = "\n__ggml_vocab_test__\n";
        size_t i = 0, at = 0;
        for (size_t next; (next = text.find(sep, at)) != std::string::npos; at = next + sep.size(), ++i)
            for (char vocab = 0; vocab < 7; ++vocab)
                write_text(out / "tokenizer" / ("test" + std::to_string(i) + "_" + std::to_string(int(vocab))),
                           std::string{vocab, '\x03'} + text.substr(at, next - at)), ++n;
    }

    // Eval-callback logs: the start and the end of each.
    for (const fs::path& p : files_in(fixtures / "logs", ".txt")) {
        if (p.filename().string().find("evalcb") == std::string::npos) continue;
        const std::string text = read_text(p);
        const size_t n_lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
        write_text(out / "eval_log" / (p.stem().string() + "_head.txt"), lines(text, 0, 120)), ++n;
        write_text(out / "eval_log" / (p.stem().string() + "_tail.txt"), lines(text, n_lines > 120 ? n_lines - 120 : 0, 120)), ++n;
    }

    // .npy: every dtype, several shapes, and the same array as format versions 2 and 3.
    const float f32[12] = {1, -2, 3.5f, 0, 1e-3f, -7, 8, 9, 10, 11, 12, 13};
    const int32_t i32[4] = {1, 403, 407, 261};
    const int64_t i64[3] = {0, -1, 1LL << 40};
    const double f64[2] = {0.25, -1e300};
    const uint16_t f16[4] = {0x3c00, 0xbc00, 0x7c00, 0x0001};
    ok &= write_npy((out / "npy" / "f4_2x6.npy").string(), "<f4", {2, 6}, f32).ok();
    ok &= write_npy((out / "npy" / "f4_1x1x3x4.npy").string(), "<f4", {1, 1, 3, 4}, f32).ok();
    ok &= write_npy((out / "npy" / "f4_scalar.npy").string(), "<f4", {}, f32).ok();
    ok &= write_npy((out / "npy" / "i4_4.npy").string(), "<i4", {4}, i32).ok();
    ok &= write_npy((out / "npy" / "i8_3.npy").string(), "<i8", {3}, i64).ok();
    ok &= write_npy((out / "npy" / "f8_2.npy").string(), "<f8", {2}, f64).ok();
    ok &= write_npy((out / "npy" / "f2_2x2.npy").string(), "<f2", {2, 2}, f16).ok();
    n += 7;
    const std::string v1 = read_text(out / "npy" / "f4_2x6.npy");
    for (char major : {'\x02', '\x03'}) {
        std::string v = v1.substr(0, 6) + major + '\0' + v1.substr(8, 2) + std::string(2, '\0') + v1.substr(10);
        write_text(out / "npy" / ("f4_2x6_v" + std::to_string(int(major)) + ".npy"), v), ++n;
    }

    // Chat templates: every family by name, with a system turn and two user turns.
    static const char kTurns[] = "\0system\0Be brief.\0user\0Hi!\0assistant\0Hello.\0user\0 Bye ";
    const std::string turns(kTurns, sizeof kTurns - 1);
    for (const std::string& name : chat_template_family_names())
        write_text(out / "chat_template" / name, "\x01" + name + turns), ++n;
    for (size_t i = 0; i < 3; ++i)
        write_text(out / "chat_template" / ("template" + std::to_string(i)), "\x01" + std::string(templates[i]) + turns), ++n;

    // Remote: a live session's snapshot deltas (the first, with its plan; then one after a step),
    // as the frames a client reads, each raw and compressed.
    if (auto session = Session::open((fixtures / "models" / "stories260K.gguf").string()); session) {
        Session& s = *session.value();
        s.set_tokens({1, 403, 407});
        s.wait_for_ticket(s.run_to_event(12), std::chrono::seconds(60));
        remote::SentState sent;
        const std::string first = remote::encode_snapshot_delta(*s.snapshot(), sent);
        s.wait_for_ticket(s.step_op(), std::chrono::seconds(60));
        const std::string next = remote::encode_snapshot_delta(*s.snapshot(), sent);
        for (const auto& [name, delta] : {std::pair<const char*, std::string>{"first", first}, {"next", next}}) {
            auto raw = remote::decompress_chunk(delta, 64u << 20);
            ok &= raw.ok();
            if (!raw) continue;
            write_text(out / "wire" / (std::string("snapshot_") + name), remote::make_frame(remote::MsgType::kSnapshot, raw.value())), ++n;
            write_text(out / "wire" / (std::string("snapshot_") + name + ".zst"), remote::make_frame(remote::MsgType::kSnapshot, delta)), ++n;
        }
        // The doctor's messages (a diagnosis carrying a record's comparison) and an upload's.
        remote::Diagnosis d;
        d.request = 3;
        d.event = 12;
        d.done = true;
        d.step = "rope";
        d.tried = 4;
        d.verdict = "adjacent pairs (NORM) instead of halves (NEOX)";
        d.has_local = true;
        if (const EventRecord* r = s.snapshot()->record(12)) {
            d.local.push_back(r->comparison);
            d.local.back().event_index = 12;
        }
        write_text(out / "wire" / "diagnosis", remote::make_frame(remote::MsgType::kDiagnosis, remote::encode(d))), ++n;
        write_text(out / "wire" / "diagnose", remote::make_frame(remote::MsgType::kDiagnose, remote::encode(remote::Diagnose{3, 12, false}))), ++n;
        write_text(out / "wire" / "upload", remote::make_frame(remote::MsgType::kUpload, remote::encode(remote::Upload{1, "ref/manifest.json", 4096}))), ++n;
        remote::LensResult lens;
        lens.request = 2;
        lens.lens.lens.top_k = 2;
        LensLayer layer;
        layer.layer = 1;
        layer.cells.push_back(LensCell{0, 3, {{5, 0.5}, {7, 0.25}}, {{5, 0.625}, {9, 0.125}}, 0.01});
        layer.kl.n = 1;
        layer.kl.mean = 0.01;
        lens.lens.lens.layers.push_back(layer);
        lens.lens.lens.arrivals.push_back(LensArrival{0, 3, 5, 5, 1, 1});
        lens.lens.events.push_back(LensEvent{1, 0, 3, 40});
        write_text(out / "wire" / "lens_result", remote::make_frame(remote::MsgType::kLensResult, remote::encode(lens))), ++n;
        write_text(out / "wire" / "lens", remote::make_frame(remote::MsgType::kLens, remote::encode(remote::Lens{2}))), ++n;
        write_text(out / "wire" / "fetch_weight",
                   remote::make_frame(remote::MsgType::kFetchWeight, remote::encode(remote::FetchWeight{"blk.0.attn_q.weight"}))), ++n;
        write_text(out / "wire" / "weight",
                   remote::make_frame(remote::MsgType::kWeight, remote::encode(remote::WeightHeader{"blk.0.attn_q.weight", 147456, ""}))), ++n;
        remote::Command fault;
        fault.kind = remote::CommandKind::kSetFault;
        fault.text = "rope-pairing";
        write_text(out / "wire" / "command_fault", remote::make_frame(remote::MsgType::kCommand, remote::encode(fault))), ++n;
        remote::Command ab;
        ab.kind = remote::CommandKind::kCompareBackend;
        ab.text = "cpu";
        write_text(out / "wire" / "command_backend_ab", remote::make_frame(remote::MsgType::kCommand, remote::encode(ab))), ++n;
    }

    std::printf("make_seeds: %d seeds in %s\n", n, out.string().c_str());
    return ok ? 0 : 1;
}
