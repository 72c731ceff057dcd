// `layerscope compare -m Q.gguf --against-model F16.gguf --ablate tensors|layers`: which tensors
// make the quantized file answer differently. F16 is run with one tensor (or one layer's tensors)
// of Q at a time; each run's final distributions against F16's own run give the KL it causes.
// With --ablate-restore, Q is run with one of F16's at a time instead. Ctrl-C stops after the run
// under way and reports what was measured.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/compare_models.h"
#include "engine/compare/ablate.h"
#include "engine/compare/model_pair.h"

namespace ls::app {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_interrupt(int) { g_interrupted.store(true); }

// SIGINT sets g_interrupted while it lives (the run under way is abandoned at its next event).
class InterruptScope {
public:
    InterruptScope() {
        g_interrupted.store(false);
        struct sigaction sa = {};
        sa.sa_handler = on_interrupt;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, &old_);
    }
    ~InterruptScope() { sigaction(SIGINT, &old_, nullptr); }
    InterruptScope(const InterruptScope&) = delete;
    InterruptScope& operator=(const InterruptScope&) = delete;

private:
    struct sigaction old_ = {};
};

constexpr int kExitInterrupted = 130;  // as a shell reports SIGINT

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope compare: %s\n", e.message.c_str());
    return exit_code_for(e);
}

// The unit's formats in each file: "Q2_K" for one tensor, "Q4_K 7, F32 2" for a layer.
std::string unit_types(const Model& model, const AblationUnit& u) {
    std::vector<std::pair<std::string, int>> counts;
    for (const std::string& name : u.tensors) {
        const std::string type = ggml_type_name(model.find(name)->type);
        auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == type; });
        if (it == counts.end()) counts.push_back({type, 1});
        else ++it->second;
    }
    std::string s;
    for (const auto& [type, n] : counts) s += (s.empty() ? "" : ", ") + (u.tensors.size() == 1 ? type : fmt::format("{} {}", type, n));
    return s;
}

nlohmann::json stats_json(const KlStats& s) {
    return {{"mean", s.mean}, {"median", s.median}, {"p99", s.p99}, {"max", s.max}, {"same_top1", s.same_top1}};
}

}  // namespace

int run_ablation(const CompareOptions& o) {
    if (o.against_model.empty() || o.model_path.empty() || !o.reference_path.empty() || !o.files.empty() ||
        !o.against_backend.empty())
        return fail(make_error(ErrorCode::kUsage, "--ablate ranks the tensors of two files of one model: give -m MODEL, "
                                                  "--against-model OTHER and a prompt, without a reference, dumps or "
                                                  "--against-backend"));
    if (o.n_decode >= 0)
        return fail(make_error(ErrorCode::kUsage, "--ablate measures the prompt's own positions (every one of them): "
                                                  "-n does not apply"));
    if (!o.fault.empty()) return fail(make_error(ErrorCode::kUsage, "--fault does not apply to --ablate"));
    ForwardOptions forward;
    if (!math_mode_from_name(o.mode, &forward.mode)) return fail(make_error(ErrorCode::kUsage, "--mode must be exact or llama"));
    if (Status s = parse_llama_isa(o.llama_isa, &forward.llama_isa); !s) return fail(s.error());
    mla_form_from_name(o.mla, &forward.mla);
    auto pair = open_model_pair(o);
    if (!pair) return fail(pair.error());
    const Model& quantized = *pair.value().model;  // -m: the format whose cost is measured
    const Model& source = *pair.value().other;     // --against-model: the reference
    auto n_ctx = context_for_run(source.config(), static_cast<int64_t>(pair.value().tokens.size()), 0, 0, false);
    if (!n_ctx) return fail(n_ctx.error());
    forward.n_ctx = n_ctx.value();

    const bool by_layer = o.ablate == "layers";
    const Model& base = o.ablate_restore ? quantized : source;
    const Model& donor = o.ablate_restore ? source : quantized;
    const std::vector<AblationUnit> units = ablation_units(base, donor, by_layer);
    if (units.empty())
        return fail(make_error(ErrorCode::kBadInput, fmt::format("{} and {} hold the same bytes in every tensor: nothing "
                                                                 "to ablate", o.model_path, o.against_model)));
    AblationOptions options;
    options.forward = forward;
    options.backend = o.backend;
    options.n_threads = o.threads;
    options.tokens = pair.value().tokens;
    options.restore = o.ablate_restore;
    options.cancel = &g_interrupted;
    const std::string verb = o.ablate_restore ? "restored from" : "from";
    std::fprintf(stderr, "ablate: %zu runs of %s with one %s at a time %s %s, %zu positions (Ctrl-C stops and reports)\n",
                 units.size(), base.path().c_str(), by_layer ? "layer" : "tensor", verb.c_str(), donor.path().c_str(),
                 options.tokens.size());
    options.progress = [&](size_t done, size_t total, const AblationRun& r) {
        std::fprintf(stderr, "ablate %zu/%zu %-32s mean KL %-10.4g (%.2f s)\n", done, total, r.unit.label.c_str(), r.kl.mean,
                     r.seconds);
    };
    Result<Ablation> result = [&] {
        InterruptScope interrupt;
        return ablate(base, donor, units, options);
    }();
    if (!result) return fail(result.error());
    Ablation& a = result.value();

    // Quantizing one: the largest KL first. Restoring one: the smallest KL left first (the unit
    // whose restoration recovers the most).
    std::vector<const AblationRun*> ranked;
    for (const AblationRun& r : a.runs) ranked.push_back(&r);
    std::stable_sort(ranked.begin(), ranked.end(), [&](const AblationRun* x, const AblationRun* y) {
        return o.ablate_restore ? x->kl.mean < y->kl.mean : x->kl.mean > y->kl.mean;
    });
    const double per_run = a.runs.empty() ? 0 : a.seconds / static_cast<double>(a.runs.size() + 2);
    const int code = a.cancelled ? kExitInterrupted : kExitOk;
    if (a.cancelled)
        std::fprintf(stderr, "layerscope compare: interrupted after %zu of %zu runs; the ranking covers those\n",
                     a.runs.size(), units.size());
    if (o.json) {
        nlohmann::json j = {{"model", o.model_path}, {"against_model", o.against_model}, {"units", o.ablate},
                            {"direction", o.ablate_restore ? "restore" : "quantize"}, {"base", base.path()},
                            {"donor", donor.path()}, {"positions", options.tokens.size()}, {"mode", math_mode_name(forward.mode)},
                            {"whole", stats_json(a.all)}, {"runs", a.runs.size()}, {"of", units.size()},
                            {"cancelled", a.cancelled}, {"seconds", a.seconds}};
        j["ranking"] = nlohmann::json::array();
        for (const AblationRun* r : ranked) {
            nlohmann::json e = stats_json(r->kl);
            e["unit"] = r->unit.label;
            e["tensors"] = r->unit.tensors;
            e["types"] = unit_types(donor, r->unit);
            e["seconds"] = r->seconds;
            j["ranking"].push_back(std::move(e));
        }
        std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return code;
    }
    std::printf("model:     %s (%s): %s\nagainst:   %s (its run is the reference): %s\n", o.model_path.c_str(),
                quantized.config().arch_name.c_str(), tensor_type_mix(quantized).c_str(), o.against_model.c_str(),
                tensor_type_mix(source).c_str());
    std::printf("ablate:    %s with one %s at a time %s %s (%zu differ), mode %s, KL over %zu positions\n",
                base.path().c_str(), by_layer ? "layer" : "tensor", verb.c_str(), donor.path().c_str(), units.size(),
                math_mode_name(forward.mode), options.tokens.size());
    std::printf("whole:     %s against %s: %s\n\n", o.model_path.c_str(), o.against_model.c_str(), kl_stats_text(a.all).c_str());
    std::printf("%4s  %-32s %-16s %12s %12s %12s %11s\n", "rank", by_layer ? "layer or tensor" : "tensor",
                o.ablate_restore ? "restored from" : "type", o.ablate_restore ? "mean KL left" : "mean KL", "p99 KL",
                "max KL", "same top-1");
    for (size_t i = 0; i < ranked.size(); ++i) {
        const AblationRun& r = *ranked[i];
        std::printf("%4zu  %-32s %-16s %12.4g %12.4g %12.4g %10.1f%%\n", i + 1, r.unit.label.c_str(),
                    unit_types(donor, r.unit).c_str(), r.kl.mean, r.kl.p99, r.kl.max, 100 * r.kl.same_top1);
    }
    std::printf("\ntime:      %zu runs in %.1f s (%.2f s a run, the two whole files' included)%s\n", a.runs.size() + 2,
                a.seconds, per_run, a.cancelled ? "; interrupted" : "");
    return code;
}

}  // namespace ls::app
