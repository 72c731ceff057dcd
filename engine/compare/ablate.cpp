// One tensor of one format at a time in a model of the other (ablate.h).
#include "engine/compare/ablate.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <map>

namespace ls {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Keeps each batch's last result_output (after the bias or the soft cap where there is one).
class FinalLogitsSink final : public EventSink {
public:
    explicit FinalLogitsSink(const std::atomic<bool>* cancel) : cancel_(cancel) {}
    void on_event(const Event& e) override {
        if (cancel_ && cancel_->load()) throw EvalCancelled{};
        if (e.name != "result_output") return;
        std::vector<float>& v = batches_[e.ubatch];
        v.resize(static_cast<size_t>(e.tensor.n_elements()));
        e.backend->download(v.data(), e.tensor.data, v.size() * sizeof(float));
        n_logits_ = e.tensor.ne[0];
    }
    FinalLogits take() {
        FinalLogits out;
        out.n_logits = n_logits_;
        for (auto& [ubatch, v] : batches_) out.values.insert(out.values.end(), v.begin(), v.end());
        return out;
    }

private:
    const std::atomic<bool>* cancel_;
    std::map<int, std::vector<float>> batches_;
    int64_t n_logits_ = 0;
};

// "blk.12.ffn_down.weight" -> 12; -1 outside the layers.
int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::atoi(name.c_str() + 4);
}

}  // namespace

std::vector<AblationUnit> ablation_units(const Model& base, const Model& donor, bool by_layer) {
    std::vector<AblationUnit> units;
    std::map<int, size_t> layer_unit;
    for (const GgufTensorInfo& t : base.tensors()) {
        const GgufTensorInfo* d = donor.find(t.name);
        if (!d || (d->type == t.type && d->n_bytes == t.n_bytes && std::memcmp(d->data, t.data, t.n_bytes) == 0)) continue;
        const int layer = by_layer ? layer_of(t.name) : -1;
        if (layer < 0) {
            units.push_back({t.name, {t.name}});
            continue;
        }
        auto [it, fresh] = layer_unit.emplace(layer, units.size());
        if (fresh) units.push_back({fmt::format("layer {}", layer), {}});
        units[it->second].tensors.push_back(t.name);
    }
    return units;
}

Result<FinalLogits> run_final_logits(const Model& model, const std::string& backend, int n_threads, ForwardOptions options,
                                     const std::vector<int32_t>& tokens, const std::atomic<bool>* cancel) {
    options.all_logits = true;
    auto chosen = open_backend_for(model, backend, n_threads, options);
    if (!chosen) return chosen.error();
    auto forward = make_forward(model, *chosen.value().backend, options);
    if (!forward) return forward.error();
    FinalLogitsSink sink(cancel);
    try {
        if (Status s = forward.value()->eval(tokens, &sink); !s) return s.error();
    } catch (const EvalCancelled&) {
        FinalLogits cancelled;
        cancelled.cancelled = true;
        return cancelled;
    }
    return sink.take();
}

std::vector<PositionKl> compare_final_logits(const FinalLogits& reference, const FinalLogits& ours) {
    std::vector<PositionKl> rows;
    const int64_t n = reference.n_logits;
    for (int64_t r = 0; r < reference.rows() && r < ours.rows() && ours.n_logits == n; ++r) {
        PositionKl k = compare_distributions(reference.values.data() + r * n, ours.values.data() + r * n, n);
        k.position = r;
        rows.push_back(k);
    }
    return rows;
}

Result<Ablation> ablate(const Model& base, const Model& donor, const std::vector<AblationUnit>& units,
                        const AblationOptions& o) {
    const Clock::time_point start = Clock::now();
    Ablation out;
    auto run = [&](const Model& model) { return run_final_logits(model, o.backend, o.n_threads, o.forward, o.tokens, o.cancel); };
    const Model& reference_model = o.restore ? donor : base;
    auto reference = run(reference_model);
    if (!reference) return reference.error();
    auto whole = reference.value().cancelled ? reference : run(o.restore ? base : donor);
    if (!whole) return whole.error();
    out.cancelled = whole.value().cancelled;
    if (!out.cancelled) out.all = kl_stats(compare_final_logits(reference.value(), whole.value()));
    for (size_t i = 0; i < units.size() && !out.cancelled; ++i) {
        const Clock::time_point t0 = Clock::now();
        auto mixed = base.with_tensors_from(donor, units[i].tensors);
        if (!mixed) return mixed.error();
        auto logits = run(*mixed.value());
        if (!logits) return logits.error();
        if (logits.value().cancelled) {
            out.cancelled = true;
            break;
        }
        AblationRun r{units[i], kl_stats(compare_final_logits(reference.value(), logits.value())), seconds_since(t0)};
        out.runs.push_back(r);
        if (o.progress) o.progress(i + 1, units.size(), out.runs.back());
    }
    out.seconds = seconds_since(start);
    return out;
}

}  // namespace ls
