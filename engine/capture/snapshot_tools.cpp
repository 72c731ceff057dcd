// Snapshot <-> dump and snapshot -> doctor input.
#include "engine/capture/snapshot_tools.h"

#include "kernels/backend.h"
#include "engine/forward/event.h"

namespace ls {

std::shared_ptr<const SessionSnapshot> snapshot_from_dump(const ReferenceDump& dump, const Tokenizer* tokenizer,
                                                          const ReferenceDump* reference,
                                                          const CompareThresholds& thresholds) {
    auto snap = std::make_shared<SessionSnapshot>();
    auto events = std::make_shared<std::vector<EventInfo>>();
    auto captures = std::make_shared<CaptureMap>();
    auto cpu = make_cpu_backend(1);
    std::unique_ptr<Comparator> comparator;
    if (reference) comparator = std::make_unique<Comparator>(*reference, thresholds);
    std::vector<EventInfo> roped_k;  // every roped K so far, for the reference's attention

    for (const RefTensor& t : dump.tensors()) {
        if (t.kind == RefKind::kInput || !t.complete() || t.stored_type != GgmlType::F32) continue;
        EventInfo info;
        info.index = static_cast<int64_t>(events->size());
        // llama_logits is result_output by another name; keep one of them.
        const bool logits = t.kind == RefKind::kLogits;
        info.name = logits ? event_dump_name("result_output", 1, t.decode, t.ubatch) : t.name;
        if (logits && !events->empty() && events->back().name == info.name) continue;
        info.base_name = logits ? "result_output" : t.base_name;
        info.occurrence = logits ? 1 : t.occurrence;
        info.op = op_from_name(t.op);
        info.decode = t.decode;
        info.ubatch = t.ubatch;
        for (int d = 0; d < 4; ++d) info.ne[d] = t.ne()[d];
        size_t dash = info.base_name.rfind('-');
        if (dash != std::string::npos && dash + 1 < info.base_name.size() &&
            info.base_name.find_first_not_of("0123456789", dash + 1) == std::string::npos)
            info.layer = std::stoi(info.base_name.substr(dash + 1));

        auto values = std::make_shared<const std::vector<float>>(dump.values(t));
        auto record = std::make_shared<EventRecord>();
        record->info = info;
        Tensor view = make_tensor(const_cast<float*>(values->data()), info.ne[0], info.ne[1], info.ne[2], info.ne[3]);
        cpu->stats(view, &record->stats);
        if (comparator) {
            HostTensor h{info.name, {info.ne[0], info.ne[1], info.ne[2], info.ne[3]}, values->data()};
            record->comparison = comparator->compare(info.index, h);
            record->compared = true;
            if (record->comparison.status == CompareStatus::kDiverged && snap->first_divergent < 0)
                snap->first_divergent = info.index;
        }
        if (info.base_name.rfind("kq_soft_max-", 0) == 0) record->attention = attention_from_softmax(info, values);
        if (is_roped_q(info) || is_roped_k(info) || is_roped_q_pe(info) || is_roped_k_pe(info)) {
            record->head_norms = head_norms(info, values->data());
            if (is_roped_k(info)) roped_k.push_back(info);
        }
        if (info.base_name == "result_output") {
            std::vector<float> ref_row = reference ? reference_last_logits(*reference, info) : std::vector<float>{};
            record->top_logits = top_logits(info, values->data(), 20, tokenizer, ref_row.empty() ? nullptr : ref_row.data(),
                                            static_cast<int64_t>(ref_row.size()));
        }
        auto captured = std::make_shared<CapturedTensor>();
        captured->info = info;
        captured->values = values;
        (*captures)[info.index] = captured;
        snap->capture_bytes += captured->bytes();
        events->push_back(info);
        snap->records.push_back(record);
    }
    snap->events = events;
    snap->captures = captures;
    snap->tokens = dump.prompt_tokens();
    if (tokenizer)
        for (int32_t id : snap->tokens) snap->pieces.push_back(tokenizer->valid(id) ? tokenizer->token_to_piece(id) : "?");
    snap->generated = dump.generated_tokens();
    snap->decode_calls_done = snap->planned_decode_calls = static_cast<int>(dump.decode_n_tokens().size());
    snap->cursor = static_cast<int64_t>(events->size()) - 1;
    snap->state = SessionState::kFinished;
    snap->has_reference = reference != nullptr;
    snap->thresholds = thresholds;
    snap->version = 1;
    snap->message = "capture " + dump.source();
    return snap;
}

CompareRunResult compare_run_from_snapshot(const SessionSnapshot& snapshot) {
    CompareRunResult run;
    run.prompt = snapshot.tokens;
    for (const auto& record : snapshot.records) {
        if (!record) continue;
        run.comparisons.push_back(record->comparison);
        run.comparisons.back().event_index = static_cast<int64_t>(run.captures.events.size());
        CapturedEvent c;
        c.name = record->info.name;
        c.base_name = record->info.base_name;
        c.op = record->info.op;
        c.layer = record->info.layer, c.decode = record->info.decode, c.ubatch = record->info.ubatch;
        c.occurrence = record->info.occurrence;
        for (int d = 0; d < 4; ++d) c.ne[d] = record->info.ne[d];
        if (auto captured = snapshot.capture(record->info.index)) c.data = *captured->values;
        run.captures.by_name[c.name] = run.captures.events.size();
        run.captures.events.push_back(std::move(c));
    }
    run.summary = summarize(run.comparisons);
    return run;
}

}  // namespace ls
