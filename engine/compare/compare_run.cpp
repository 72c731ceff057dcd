// Model-vs-reference and dump-vs-dump comparison runs.
#include "engine/compare/compare_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include <fcntl.h>
#include <unistd.h>
#include <thread>

#include "engine/compare/llama_variant.h"

namespace ls {
namespace {

class CompareSink : public EventSink {
public:
    CompareSink(Comparator& comparator, CompareRunResult& result) : comparator_(comparator), result_(result) {}
    void on_event(const Event& e) override {
        CapturedEvent c;
        c.name = e.dump_name();
        c.base_name = e.name;
        c.op = e.op;
        c.layer = e.layer, c.decode = e.decode, c.ubatch = e.ubatch, c.occurrence = e.occurrence;
        for (int d = 0; d < 4; ++d) c.ne[d] = e.tensor.ne[d];
        c.data.resize(static_cast<size_t>(e.tensor.n_elements()));
        e.backend->download(c.data.data(), e.tensor.data, c.data.size() * sizeof(float));
        HostTensor h{c.name, {c.ne[0], c.ne[1], c.ne[2], c.ne[3]}, c.data.data()};
        result_.comparisons.push_back(comparator_.compare(static_cast<int64_t>(result_.captures.events.size()), h));
        result_.captures.by_name[c.name] = result_.captures.events.size();
        result_.captures.events.push_back(std::move(c));
    }

private:
    Comparator& comparator_;
    CompareRunResult& result_;
};

}  // namespace

namespace {

// Token ids the reference records must index the model's embedding rows; a bad one is the
// reference file's fault (bad input), not a flag's.
Status check_reference_tokens(const Model& model, const ReferenceDump& reference, const std::vector<int32_t>& ids,
                              const char* key) {
    const GgufTensorInfo* embd = model.find("token_embd.weight");
    const int64_t n_rows = embd ? embd->ne[1] : model.config().n_vocab;
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= n_rows)
            return make_error(ErrorCode::kBadInput,
                              fmt::format("{}: {} holds token id {} (entry {}), but {} has {} tokens; the reference was "
                                          "made with another model, or its file is damaged",
                                          reference.source(), key, ids[i], i, model.path(), n_rows));
    return {};
}

Result<CompareRunResult> run_and_compare(const Model& model, Backend& backend, const ReferenceDump& reference,
                                         const CompareRunOptions& options) {
    CompareRunResult result;
    result.prompt = options.prompt.empty() ? reference.prompt_tokens() : options.prompt;
    if (result.prompt.empty())
        return make_error(ErrorCode::kUsage, fmt::format("{} does not record its prompt tokens; give --prompt or --tokens",
                                                         reference.source()));
    const std::vector<int32_t> generated = reference.generated_tokens();
    int n_decode = options.n_decode >= 0 ? options.n_decode : std::max<int>(1, static_cast<int>(reference.decode_n_tokens().size()));
    n_decode = std::min<int>(n_decode, 1 + static_cast<int>(generated.size()));
    if (options.prompt.empty())
        if (Status s = check_reference_tokens(model, reference, result.prompt, "dump.prompt_tokens"); !s) return s.error();
    const std::vector<int32_t> fed(generated.begin(), generated.begin() + std::max(0, n_decode - 1));
    if (Status s = check_reference_tokens(model, reference, fed, "dump.generated_tokens"); !s) return s.error();

    ForwardOptions fo = options.forward;
    // The reference's context size when it records one (LongRoPE's factors depend on it), else ours.
    const int64_t needed = (static_cast<int64_t>(result.prompt.size()) + n_decode + 255) / 256 * 256;
    fo.n_ctx = std::max<int64_t>(reference.n_ctx() > 0 ? reference.n_ctx() : fo.n_ctx, needed);
    if (reference.n_threads() > 0) fo.llama_threads = reference.n_threads();
    auto forward = make_forward(model, backend, fo);
    if (!forward) return forward.error();

    Comparator comparator(reference, options.thresholds);
    CompareSink sink(comparator, result);
    std::vector<int32_t> input = result.prompt;
    for (int d = 0; d < n_decode; ++d) {
        if (Status s = forward.value()->eval(input, &sink); !s) return s.error();
        if (d < static_cast<int>(generated.size())) input = {generated[d]};
    }
    result.summary = summarize(result.comparisons);
    result.unmatched = comparator.unmatched();
    result.llama_isa = fo.llama_isa;
    return result;
}

// How well a run reproduces the reference: events bit for bit first, then the smaller total NMSE.
std::pair<int, double> fit(const CompareRunResult& r) {
    int exact = 0;
    double total = 0;
    for (const EventComparison& c : r.comparisons) {
        if (c.status == CompareStatus::kNoReference || c.partial) continue;
        exact += c.metrics.nmse == 0;
        if (std::isfinite(c.metrics.nmse)) total += c.metrics.nmse;
    }
    return {exact, -total};
}

// A reference whose first this-many paired events our llama mode reproduces bit for bit is
// reproduced (no other build gets through embeddings, norms, projections and RoPE to the bit).
constexpr int kReproducedPrefix = 16;

// How many paired events match exactly before the first that does not.
int exact_prefix(const CompareRunResult& r) {
    int n = 0;
    for (const EventComparison& c : r.comparisons) {
        if (c.status == CompareStatus::kNoReference || c.partial) continue;
        if (c.metrics.nmse != 0) break;
        ++n;
    }
    return n;
}

int paired_events(const CompareRunResult& r) {
    int n = 0;
    for (const EventComparison& c : r.comparisons) n += c.status != CompareStatus::kNoReference && !c.partial;
    return n;
}

// The llama-mode variant for `reference`: asked for, or the guess from its build facts, probed on
// the first two decode calls (the prompt and one generated token: where the variants' f16 and f32
// orders first differ) when that leaves a choice. `why` says how it was chosen.
Result<LlamaIsa> choose_llama_isa(const Model& model, Backend& backend, const ReferenceDump& reference,
                                  const CompareRunOptions& options, const LlamaIsaGuess& guess, std::string* why) {
    if (options.llama_isa) {
        *why = "as asked";
        return *options.llama_isa;
    }
    *why = guess.why;
    if (guess.candidates.size() == 1) return guess.candidates.front();
    CompareRunOptions probe = options;
    probe.forward.mode = MathMode::kLlama;
    probe.n_decode = options.n_decode >= 0 ? std::min(options.n_decode, 2) : 2;
    LlamaIsa chosen = guess.candidates.front();
    std::pair<int, double> best{-1, 0};
    std::string tried;
    for (LlamaIsa isa : guess.candidates) {
        probe.forward.llama_isa = isa;
        auto r = run_and_compare(model, backend, reference, probe);
        if (!r) return r.error();
        const std::pair<int, double> f = fit(r.value());
        tried += fmt::format("{}{} {} of {} events exact", tried.empty() ? "" : ", ", llama_isa_name(isa), f.first,
                             paired_events(r.value()));
        if (f > best) best = f, chosen = isa;
    }
    *why += fmt::format("; on the first decode calls {}", tried);
    return chosen;
}

// Re-judges `result` against per-event noise floors: how far runs `a` and `b` (the same run in
// the two math modes) lie apart.
void apply_noise_floors(CompareRunResult& result, const CompareRunResult& a, const CompareRunResult& b,
                        const CompareThresholds& thresholds) {
    const std::vector<CapturedEvent>& ours = result.captures.events;
    const std::vector<CapturedEvent>& x = a.captures.events;
    const std::vector<CapturedEvent>& y = b.captures.events;
    for (size_t i = 0; i < result.comparisons.size() && i < x.size() && i < y.size(); ++i) {
        if (x[i].data.size() != y[i].data.size() || ours[i].name != x[i].name || ours[i].name != y[i].name) continue;
        const Metrics spread = compute_metrics(x[i].data.data(), y[i].data.data(), static_cast<int64_t>(x[i].data.size()));
        apply_noise_floor(result.comparisons[i], std::isfinite(spread.nmse) ? spread.nmse : 0.0, thresholds);
    }
    result.summary = summarize(result.comparisons);
}

}  // namespace

Result<CompareRunResult> compare_with_reference(const Model& model, Backend& backend, const ReferenceDump& reference,
                                                const CompareRunOptions& options) {
    const LlamaIsaGuess guess = guess_llama_isa(reference);
    std::string why;
    auto isa = choose_llama_isa(model, backend, reference, options, guess, &why);
    if (!isa) return isa.error();
    CompareRunOptions o = options;
    o.forward.llama_isa = isa.value();
    auto r = run_and_compare(model, backend, reference, o);
    if (!r) return r;
    CompareRunResult& result = r.value();
    const bool llama = options.forward.mode == MathMode::kLlama;
    if (llama) result.llama_isa_why = why;
    // A reference llama mode does not reproduce (a GPU build, an unknown machine or version, or
    // our exact mode against any llama.cpp) is judged against the noise a correct engine shows:
    // per event, how far our llama-mode and exact-mode values lie apart (activations quantized for
    // the weight format, the f16 KV cache, summation orders), which bounds what another correct
    // build differs by.
    // Reproduced: most events bit-exact, or a long bit-exact run of them up to where something
    // else (a bug of ours) takes over; a bug's own divergence is no noise to be judged against.
    const bool reproduced = llama && guess.cpu_build &&
                            (2 * fit(result).first >= paired_events(result) || exact_prefix(result) >= kReproducedPrefix);
    if (!options.thresholds.noise_floor || reproduced) return r;
    CompareRunOptions other = o;
    other.forward.mode = llama ? MathMode::kExact : MathMode::kLlama;
    if (backend.kind() == BackendKind::kCpu) {
        auto shadow = run_and_compare(model, backend, reference, other);
        if (!shadow) return shadow.error();
        apply_noise_floors(result, result, shadow.value(), options.thresholds);
    } else {
        // A GPU backend's matmuls compute in f32 in both modes, so its two modes lie closer
        // together than a CPU build's: the floor is what the CPU's llama and exact modes leave.
        auto cpu = make_cpu_backend(0);
        CompareRunOptions cpu_llama = o;
        cpu_llama.forward.mode = MathMode::kLlama;
        other.forward.mode = MathMode::kExact;
        auto a = run_and_compare(model, *cpu, reference, cpu_llama);
        if (!a) return a.error();
        auto b = run_and_compare(model, *cpu, reference, other);
        if (!b) return b.error();
        apply_noise_floors(result, a.value(), b.value(), options.thresholds);
    }
    result.noise_floor = fmt::format("per event, {}x (warn) and {}x (diverged) the NMSE between our exact and llama-mode "
                                     "runs{}, because {}",
                                     kFloorWarnFactor, kFloorDivergedFactor,
                                     backend.kind() == BackendKind::kCpu ? "" : " on the CPU",
                                     !llama           ? "exact mode does not quantize activations as llama.cpp does"
                                     : guess.cpu_build ? "no CPU variant reproduces the reference"
                                                       : "a GPU build made the reference");
    return r;
}

namespace {

// Gives back the pages of compared tensors (MappedFile::release_behind) in batches of about
// kBatchBytes: once every pair up to one is compared, the spans of ours and of the reference's
// behind the last batch go back in one call each. One call per tensor cost more than the
// comparison itself (each is a TLB shootdown on every core); the batch keeps the pass's memory
// within a few of them. In a reference whose tensors lie in another order than ours, the span also
// covers tensors not compared yet: those not read yet have no pages to give back, and one being
// read meanwhile only maps its pages again.
class PageReturn {
public:
    static constexpr uint64_t kBatchBytes = uint64_t{8} << 20;

    PageReturn(const ReferenceDump& ours, const ReferenceDump& reference, size_t n_pairs)
        : ours_(ours.file()), reference_(reference.file()), pairs_(n_pairs) {}

    // Pair `index` is compared: its tensors' data (the reference's null when it has none in its file).
    void compared(size_t index, const RefTensor& ours, const RefTensor* reference) {
        std::vector<Span> due;
        {
            std::lock_guard<std::mutex> lock(mu_);
            pairs_[index] = {ours.data, ours.n_bytes(), reference ? reference->data : nullptr,
                             reference ? reference->n_bytes() : 0, true};
            while (done_ < pairs_.size() && pairs_[done_].compared) pending_ += pairs_[done_++].bytes();
            if (pending_ < kBatchBytes) return;
            due = take_due();
        }
        release(due);
    }

    // Everything compared: the rest goes back.
    void finish() {
        std::vector<Span> due;
        {
            std::lock_guard<std::mutex> lock(mu_);
            due = take_due();
        }
        release(due);
    }

private:
    struct Entry {
        const uint8_t* ours = nullptr;
        uint64_t ours_bytes = 0;
        const uint8_t* reference = nullptr;
        uint64_t reference_bytes = 0;
        bool compared = false;
        uint64_t bytes() const { return ours_bytes + reference_bytes; }
    };
    struct Span {
        const GgufFile* file;
        const uint8_t* begin;
        uint64_t n;
    };

    // The spans of pairs [returned_, done_), and the mark moved past them (under mu_).
    std::vector<Span> take_due() {
        std::vector<Span> due;
        const uint8_t *o_lo = nullptr, *o_hi = nullptr, *r_lo = nullptr, *r_hi = nullptr;
        for (size_t k = returned_; k < done_; ++k) {
            const Entry& e = pairs_[k];
            if (e.ours) o_lo = o_lo ? std::min(o_lo, e.ours) : e.ours, o_hi = std::max(o_hi, e.ours + e.ours_bytes);
            if (e.reference) {
                r_lo = r_lo ? std::min(r_lo, e.reference) : e.reference;
                r_hi = std::max(r_hi, e.reference + e.reference_bytes);
            }
        }
        if (ours_ && o_lo) due.push_back({ours_, o_lo, static_cast<uint64_t>(o_hi - o_lo)});
        if (reference_ && r_lo) due.push_back({reference_, r_lo, static_cast<uint64_t>(r_hi - r_lo)});
        returned_ = done_;
        pending_ = 0;
        return due;
    }

    static void release(const std::vector<Span>& due) {
        for (const Span& s : due) s.file->release_behind(s.begin, s.n);
    }

    const GgufFile* ours_;
    const GgufFile* reference_;
    std::mutex mu_;
    std::vector<Entry> pairs_;
    size_t done_ = 0;      // pairs [0, done_) are all compared
    size_t returned_ = 0;  // pairs [0, returned_) have their pages given back
    uint64_t pending_ = 0;  // bytes of pairs [returned_, done_)
};

// The two dumps' tensors read with pread into buffers of each thread's own (reused) instead of
// through the mapping: on some machines the loads from mapped page-cache pages stall (a
// hypervisor's page tables: `compare` at 2.3 GB/s there, the same files read by `dd` at 7.7 GB/s),
// while the kernel's copy into a buffer that stays in L2 runs at memory speed. The values are the
// same bytes, so the metrics are the same bits. Tensors above kMaxBytes, and files that cannot be
// opened again, are read through the mapping as before.
class DumpReader {
public:
    static constexpr uint64_t kMaxBytes = uint64_t{4} << 20;

    explicit DumpReader(const GgufFile* file) : file_(file) {
        if (file_ && file_->has_data()) fd_ = ::open(file_->path().c_str(), O_RDONLY | O_CLOEXEC);
    }
    ~DumpReader() {
        if (fd_ >= 0) ::close(fd_);
    }
    DumpReader(const DumpReader&) = delete;
    DumpReader& operator=(const DumpReader&) = delete;

    // A thread's buffer: grown as needed, never cleared (every value read is written first).
    struct Buffer {
        std::unique_ptr<float[]> values;
        uint64_t capacity = 0;
    };

    // `t`'s f32 values in `buffer` (read whole), or null: read them through the mapping.
    const float* read(const RefTensor& t, Buffer& buffer) const {
        const int64_t at = fd_ >= 0 && t.f32() && t.n_bytes() <= kMaxBytes ? file_->file_offset_of(t.data) : -1;
        if (at < 0) return nullptr;
        if (buffer.capacity < static_cast<uint64_t>(t.n_elements())) {
            buffer.values.reset(new float[static_cast<size_t>(t.n_elements())]);
            buffer.capacity = static_cast<uint64_t>(t.n_elements());
        }
        char* out = reinterpret_cast<char*>(buffer.values.get());
        for (uint64_t done = 0; done < t.n_bytes();) {
            const ssize_t n = ::pread(fd_, out + done, t.n_bytes() - done, static_cast<off_t>(at + done));
            if (n <= 0) return nullptr;  // the file changed under us: the mapping says what it holds now
            done += static_cast<uint64_t>(n);
        }
        return buffer.values.get();
    }

private:
    const GgufFile* file_;
    int fd_ = -1;
};

}  // namespace

CompareRunResult compare_dumps(const ReferenceDump& ours, const ReferenceDump& reference, const CompareThresholds& thresholds,
                               int n_threads) {
    const auto start = std::chrono::steady_clock::now();
    CompareRunResult result;
    Comparator comparator(reference, thresholds);
    // Our events and what each pairs with, in our tensor order (one thread: pairing marks the
    // reference's tensors used).
    struct Pair {
        const RefTensor* ours;
        const RefTensor* ref;  // nullptr: the reference has none
    };
    std::vector<Pair> pairs;
    for (const RefTensor& t : ours.tensors()) {
        if (t.kind == RefKind::kInput || !t.complete()) continue;
        CapturedEvent c;
        c.name = t.kind == RefKind::kLogits ? event_dump_name("result_output", 1, t.decode, t.ubatch) : t.name;
        c.base_name = t.base_name;
        c.op = op_from_name(t.op);
        c.decode = t.decode, c.ubatch = t.ubatch, c.occurrence = t.occurrence;
        for (int d = 0; d < 4; ++d) c.ne[d] = t.ne()[d];
        if (t.kind == RefKind::kLogits && result.captures.find(c.name)) continue;  // result_output is there
        pairs.push_back({&t, comparator.pair(c.name)});
        result.captures.by_name[c.name] = result.captures.events.size();
        result.captures.events.push_back(std::move(c));
    }

    // The metrics: threads take the pairs in file order, one at a time, so both files are read
    // front to back; the pages are given back in batches once compared (GGUF dumps).
    result.comparisons.resize(pairs.size());
    PageReturn page_return(ours, reference, pairs.size());
    const DumpReader ours_reader(ours.file()), reference_reader(reference.file());
    std::atomic<size_t> next{0};
    std::atomic<int64_t> tensors{0};
    std::atomic<uint64_t> bytes{0};
    std::mutex failure_mu;
    std::exception_ptr failure;
    auto work = [&] {
        int64_t my_tensors = 0;
        uint64_t my_bytes = 0;
        try {
            std::vector<float> converted;  // our values when they cannot be read in place (I32/I64)
            DumpReader::Buffer ours_buffer, reference_buffer;
            for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < pairs.size();) {
                const Pair& p = pairs[i];
                const CapturedEvent& e = result.captures.events[i];
                const float* values = p.ours->f32();
                if (!values && p.ref) {
                    converted = ours.values(*p.ours);
                    values = converted.data();
                }
                // Both sides read into this thread's buffers when both can be (see DumpReader).
                const RefTensor* ref = p.ref;
                RefTensor ref_here;
                if (values == p.ours->f32() && ref && ref->f32()) {
                    const float* o = ours_reader.read(*p.ours, ours_buffer);
                    const float* r = o ? reference_reader.read(*ref, reference_buffer) : nullptr;
                    if (o && r) {
                        values = o;
                        ref_here = *ref;
                        ref_here.data = reinterpret_cast<const uint8_t*>(r);
                        ref = &ref_here;
                    }
                }
                HostTensor h{e.name, {e.ne[0], e.ne[1], e.ne[2], e.ne[3]}, values};
                result.comparisons[i] = comparator.measure(static_cast<int64_t>(i), h, ref);
                result.comparisons[i].source_name = p.ours->source_name;
                page_return.compared(i, *p.ours, p.ref && p.ref->data ? p.ref : nullptr);
                if (!p.ref) continue;
                ++my_tensors;
                my_bytes += p.ours->n_bytes() + (p.ref->complete() ? p.ref->n_bytes() : 0);
            }
        } catch (...) {
            std::lock_guard<std::mutex> lock(failure_mu);
            if (!failure) failure = std::current_exception();
            next = pairs.size();
        }
        tensors += my_tensors;
        bytes += my_bytes;
    };
    if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    n_threads = static_cast<int>(std::min<size_t>(static_cast<size_t>(n_threads), std::max<size_t>(1, pairs.size())));
    std::vector<std::thread> helpers;
    for (int k = 1; k < n_threads; ++k) helpers.emplace_back(work);
    work();
    for (std::thread& t : helpers) t.join();
    page_return.finish();
    if (failure) std::rethrow_exception(failure);

    result.summary = summarize(result.comparisons);
    result.unmatched = comparator.unmatched();
    // The doctor transforms the first divergent event: its values, read again from the file.
    if (result.summary.first_divergent >= 0) {
        const size_t first = static_cast<size_t>(result.summary.first_divergent);
        result.captures.events[first].data = ours.values(*pairs[first].ours);
    }
    result.prompt = ours.prompt_tokens().empty() ? reference.prompt_tokens() : ours.prompt_tokens();
    result.volume.tensors = tensors;
    result.volume.bytes = bytes;
    result.volume.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

namespace {

// The layer of a llama.cpp base name ("Qcur-3" -> 3), -1 for tensors outside the layers.
int layer_of_name(const std::string& base) {
    const size_t dash = base.rfind('-');
    if (dash == std::string::npos || dash + 1 == base.size()) return -1;
    int layer = 0;
    for (size_t i = dash + 1; i < base.size(); ++i) {
        if (base[i] < '0' || base[i] > '9' || layer > 100000) return -1;
        layer = layer * 10 + (base[i] - '0');
    }
    return layer;
}

}  // namespace

void load_doctor_inputs(CompareRunResult& result, const ReferenceDump& ours) {
    if (result.summary.first_divergent < 0) return;
    std::vector<CapturedEvent>& events = result.captures.events;
    const size_t first = static_cast<size_t>(result.summary.first_divergent);
    if (first >= events.size()) return;
    const CapturedEvent& target = events[first];
    const int layer = layer_of_name(target.base_name);
    // The residual stream entering the layer: the latest l_out before it (or the embeddings).
    size_t layer_input = events.size();
    for (size_t i = first; i-- > 0;) {
        const CapturedEvent& e = events[i];
        if (e.decode != target.decode || e.ubatch != target.ubatch) break;
        if (e.base_name.rfind("l_out-", 0) == 0 && layer_of_name(e.base_name) != layer) {
            layer_input = i;
            break;
        }
    }
    for (size_t i = first; i-- > 0;) {
        CapturedEvent& e = events[i];
        if (e.decode != target.decode || e.ubatch != target.ubatch) break;
        const bool wanted = layer_of_name(e.base_name) == layer || e.base_name == "embd" || i == layer_input;
        if (!wanted || !e.data.empty()) continue;
        if (const RefTensor* t = ours.find(e.name); t && t->complete()) e.data = ours.values(*t);
    }
}

void load_output_logits(CompareRunResult& result, const ReferenceDump& ours) {
    // Named as compare_dumps names them: a logits tensor as the result_output event it is.
    for (const RefTensor& t : ours.tensors()) {
        if ((t.kind != RefKind::kLogits && t.base_name != "result_output") || !t.complete()) continue;
        auto it = result.captures.by_name.find(t.kind == RefKind::kLogits ? event_dump_name("result_output", 1, t.decode, t.ubatch)
                                                                          : t.name);
        if (it == result.captures.by_name.end()) continue;
        CapturedEvent& e = result.captures.events[it->second];
        if (e.data.empty()) e.data = ours.values(t);
    }
}

}  // namespace ls
