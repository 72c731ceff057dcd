#include "engine/compare/snapshot_diagnosis.h"

#include <fmt/format.h>

#include "engine/capture/snapshot_tools.h"
#include "engine/compare/local_error.h"
#include "engine/compare/output_kl.h"

namespace ls {

Status name_as_llama(ReferenceDump& dump, const BiasedProjection& biased) {
    auto conventions = name_conventions("auto");
    if (!conventions) return conventions.error();
    auto named = apply_names(dump, conventions.value(), biased);
    if (!named) return named.error();
    return {};
}

Status use_reference_numerics(const ReferenceDump& reference, ForwardOptions& forward) {
    if (reference.n_ubatch() <= 0)
        return make_error(ErrorCode::kBadInput, fmt::format("{}: dump.n_ubatch is {}; it records the batch size the "
                                                            "reference was made with, which is at least 1",
                                                            reference.source(), reference.n_ubatch()));
    forward.n_ubatch = reference.n_ubatch();
    forward.flash_attn = reference.flash_attention();
    forward.all_logits = reference.all_logits();
    return {};
}

bool has_flagged_records(const SessionSnapshot& snap) {
    for (const auto& r : snap.records)
        if (r && (r->comparison.status == CompareStatus::kWarn || r->comparison.status == CompareStatus::kDiverged)) return true;
    return false;
}

std::vector<EventComparison> snapshot_local_errors(const SessionSnapshot& snap, const Model& model,
                                                   const ReferenceDump& checked, const ForwardOptions& forward,
                                                   const std::string& source) {
    std::vector<EventComparison> by_event;
    if (!has_flagged_records(snap)) return by_event;
    LocalErrorOptions options;
    options.forward = forward;
    options.source = source;
    options.thresholds = snap.thresholds;
    CompareRunResult run = compare_run_from_snapshot(snap);
    run.llama_isa = options.forward.llama_isa;
    compute_local_errors(&model, checked, options, run);
    by_event.resize(snap.records.size());
    size_t k = 0;
    for (size_t i = 0; i < snap.records.size(); ++i)
        if (snap.records[i]) by_event[i] = run.comparisons[k++];
    return by_event;
}

std::string snapshot_doctor_verdict(const SessionSnapshot& snap, int64_t first, const ReferenceDump& reference,
                                    const Model* model, const DoctorProgress& progress) {
    if (first < 0 || !snap.capture(first)) return {};
    const CompareRunResult run = compare_run_from_snapshot(snap);
    const DoctorReport report = diagnose(run, static_cast<size_t>(first), reference, model, CompareThresholds{}, progress);
    if (report.cancelled) return fmt::format("cancelled after {} transforms", report.tried.size());
    return report.findings.empty() ? "no known transform explains it" : report.findings.front().verdict;
}

SnapshotLens snapshot_logit_lens(const SessionSnapshot& snap, const Model& model, const ReferenceDump& reference) {
    SnapshotLens out;
    const CompareRunResult run = compare_run_from_snapshot(snap);
    auto made = logit_lens(model, run.captures, reference, MathMode::kLlama, host_llama_isa());
    if (!made) {
        out.error = made.error().message;
        return out;
    }
    out.lens = std::move(made.value());
    if (!snap.events) return out;
    // The l_out event each cell came from: the layer's event of that decode call whose rows cover
    // the position (a batch's rows end at the batch's last position).
    const auto spans = batch_spans(run.captures);
    for (const EventInfo& e : *snap.events) {
        if (e.base_name.rfind("l_out-", 0) != 0 || e.occurrence != 1) continue;
        auto span = spans.find({e.decode, e.ubatch});
        if (span == spans.end()) continue;
        const int64_t rows = e.ne[1] * e.ne[2] * e.ne[3];
        for (int64_t r = 0; r < rows; ++r)
            out.events.push_back({e.layer, e.decode, row_position(spans, e.decode, e.ubatch, rows, r), e.index});
    }
    return out;
}

}  // namespace ls
