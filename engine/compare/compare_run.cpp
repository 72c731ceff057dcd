// Model-vs-reference and dump-vs-dump comparison runs.
#include "engine/compare/compare_run.h"

#include <fmt/format.h>

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

Result<CompareRunResult> compare_with_reference(const Model& model, Backend& backend, const ReferenceDump& reference,
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
    return result;
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
