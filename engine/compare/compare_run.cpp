// Model-vs-reference and dump-vs-dump comparison runs.
#include "engine/compare/compare_run.h"

#include <fmt/format.h>

#include <cmath>

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

    ForwardOptions fo = options.forward;
    fo.n_ctx = std::max<int64_t>(fo.n_ctx, (static_cast<int64_t>(result.prompt.size()) + n_decode + 255) / 256 * 256);
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

// Re-judges `result` against per-event noise floors: how far `other` (the same run in the other
// math mode) lies from it.
void apply_noise_floors(CompareRunResult& result, const CompareRunResult& other, const CompareThresholds& thresholds) {
    const std::vector<CapturedEvent>& ours = result.captures.events;
    const std::vector<CapturedEvent>& alt = other.captures.events;
    for (size_t i = 0; i < result.comparisons.size() && i < alt.size(); ++i) {
        if (ours[i].data.size() != alt[i].data.size() || ours[i].name != alt[i].name) continue;
        const Metrics spread = compute_metrics(ours[i].data.data(), alt[i].data.data(), static_cast<int64_t>(ours[i].data.size()));
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
    const bool reproduced = llama && guess.cpu_build && 2 * fit(result).first >= paired_events(result);
    if (!options.thresholds.noise_floor || reproduced) return r;
    CompareRunOptions other = o;
    other.forward.mode = llama ? MathMode::kExact : MathMode::kLlama;
    auto shadow = run_and_compare(model, backend, reference, other);
    if (!shadow) return shadow.error();
    apply_noise_floors(result, shadow.value(), options.thresholds);
    result.noise_floor = fmt::format("per event, {}x (warn) and {}x (diverged) the NMSE between our exact and llama-mode "
                                     "runs, because {}",
                                     kFloorWarnFactor, kFloorDivergedFactor,
                                     !llama           ? "exact mode does not quantize activations as llama.cpp does"
                                     : guess.cpu_build ? "no CPU variant reproduces the reference"
                                                       : "a GPU build made the reference");
    return r;
}

CompareRunResult compare_dumps(const ReferenceDump& ours, const ReferenceDump& reference, const CompareThresholds& thresholds) {
    CompareRunResult result;
    Comparator comparator(reference, thresholds);
    for (const RefTensor& t : ours.tensors()) {
        if (t.kind == RefKind::kInput || !t.complete()) continue;
        CapturedEvent c;
        c.name = t.kind == RefKind::kLogits ? event_dump_name("result_output", 1, t.decode, t.ubatch) : t.name;
        c.base_name = t.base_name;
        c.op = op_from_name(t.op);
        c.decode = t.decode, c.ubatch = t.ubatch, c.occurrence = t.occurrence;
        for (int d = 0; d < 4; ++d) c.ne[d] = t.ne()[d];
        c.data = ours.values(t);
        if (t.kind == RefKind::kLogits && result.captures.find(c.name)) continue;  // result_output is there
        HostTensor h{c.name, {c.ne[0], c.ne[1], c.ne[2], c.ne[3]}, c.data.data()};
        result.comparisons.push_back(comparator.compare(static_cast<int64_t>(result.captures.events.size()), h));
        result.captures.by_name[c.name] = result.captures.events.size();
        result.captures.events.push_back(std::move(c));
    }
    result.summary = summarize(result.comparisons);
    result.unmatched = comparator.unmatched();
    return result;
}

}  // namespace ls
