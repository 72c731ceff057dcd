// `layerscope compare`: a model run (or a dump) against a reference, event by event: a table, the
// first divergent event and the doctor's verdict. Exit 0: no divergence, 1: diverged.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/compare_models.h"
#include "app/compare_report.h"
#include "app/token_list.h"
#include "engine/compare/backend_ab.h"
#include "engine/compare/compare_run.h"
#include "engine/compare/doctor.h"
#include "engine/compare/local_error.h"
#include "engine/compare/model_pair.h"
#include "engine/compare/output_kl.h"
#include "engine/compare/pairing.h"
#include "engine/compare/tensor_names.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/util/quote.h"

namespace ls::app {
namespace {

int fail(const Error& e) {
    std::fprintf(stderr, "layerscope compare: %s\n", e.message.c_str());
    return exit_code_for(e);
}

Result<std::vector<int32_t>> prompt_tokens(const CompareOptions& o, const Model& model) {
    if (!o.tokens.empty()) return parse_token_list(o.tokens);
    if (o.prompt.empty()) return std::vector<int32_t>{};  // the reference's own prompt tokens
    if (!model.tokenizer()) return make_error(ErrorCode::kBadInput, o.model_path + " has no tokenizer; use --tokens");
    return model.tokenizer()->encode(o.prompt, true, true);
}

std::string status_cell(const EventComparison& c) { return compare_status_name(c.status); }

// Our event's name, with the engine's own first where a naming convention renamed it.
std::string shown_name(const EventComparison& c) {
    return c.source_name.empty() ? c.name : fmt::format("{} ({})", c.source_name, c.name);
}

void print_row(const EventComparison& c, const char* marker) {
    std::printf("%s %5lld  %-28s %-12s", marker, static_cast<long long>(c.event_index), shown_name(c).c_str(),
                status_cell(c).c_str());
    if (c.status == CompareStatus::kNoReference) {
        std::printf("\n");
        return;
    }
    if (c.status == CompareStatus::kUnusable) {
        std::printf(" (%s)\n", c.note.c_str());
        return;
    }
    if (std::isinf(c.metrics.nmse) && c.metrics.n == 0) std::printf(" shape/values cannot be paired");
    else std::printf(" nmse %-10.3g max_abs %-10.3g cos %-9.6f", c.metrics.nmse, c.metrics.max_abs, c.metrics.cosine);
    if (c.top_k_overlap >= 0) std::printf(" top-k %d ref-top1-rank %d", c.top_k_overlap, c.ref_top1_rank);
    // Local error: our op on the reference's inputs (engine/compare/local_error.h).
    if (c.local_origin == LocalOrigin::kUnknown) std::printf(" | local ? (%s)", c.local_why.c_str());
    else if (c.local_origin != LocalOrigin::kNotComputed)
        std::printf(" | local %-9.3g %-9s", c.local_nmse, local_origin_name(c.local_origin));
    if (!c.note.empty()) std::printf("  (%s)", c.note.c_str());
    std::printf("\n");
}

nlohmann::json to_json(const EventComparison& c) {
    nlohmann::json j = {{"index", c.event_index}, {"name", c.name}, {"status", compare_status_name(c.status)}};
    if (c.status != CompareStatus::kNoReference) j["reference"] = c.ref_name;
    if (!c.source_name.empty()) j["source_name"] = c.source_name;
    if (!c.ref_source_name.empty()) j["reference_source_name"] = c.ref_source_name;
    if (c.status != CompareStatus::kNoReference && c.status != CompareStatus::kUnusable) {
        j["nmse"] = c.metrics.nmse;
        j["max_abs"] = c.metrics.max_abs;
        j["mean_abs"] = c.metrics.mean_abs;
        j["rel_l2"] = c.metrics.rel_l2;
        j["cosine"] = c.metrics.cosine;
        j["pearson"] = c.metrics.pearson;
        j["n"] = c.metrics.n;
        j["n_finite"] = c.metrics.n_finite;  // what nmse, cosine, ... cover (null when nothing was)
        const Metrics& m = c.metrics;
        if (m.nan_ours + m.inf_ours + m.nan_ref + m.inf_ref > 0)
            j["nonfinite"] = {{"nan_ours", m.nan_ours}, {"inf_ours", m.inf_ours}, {"nan_reference", m.nan_ref},
                              {"inf_reference", m.inf_ref}, {"mismatched", m.n_nonfinite}};
        if (c.partial) j["partial"] = true, j["sum_rel_error"] = c.sum_rel_error;
        if (c.top_k_overlap >= 0) j["top_k_overlap"] = c.top_k_overlap, j["ref_top1_rank"] = c.ref_top1_rank;
        if (c.floor_nmse >= 0) j["floor_nmse"] = c.floor_nmse;
    }
    if (c.local_origin != LocalOrigin::kNotComputed) {
        const bool known = c.local_origin != LocalOrigin::kUnknown;
        j["local_nmse"] = known ? nlohmann::json(c.local_nmse) : nlohmann::json();
        j["origin"] = known ? nlohmann::json(local_origin_name(c.local_origin)) : nlohmann::json();
        if (!known) j["origin_why"] = c.local_why;
        if (!c.local_weight.empty()) j["weight"] = c.local_weight;  // what the recomputed op read rows of
    }
    if (!c.note.empty()) j["note"] = c.note;
    return j;
}

// Dump comparisons: how much was read and how fast (decimal GB/s, as disks are rated).
double gb_per_s(const CompareVolume& v) { return v.seconds > 0 ? static_cast<double>(v.bytes) / v.seconds / 1e9 : 0.0; }

// Up to `cap` names, quoted (they come from files), and how many more there are.
std::string name_list(const std::vector<std::string>& names, size_t cap = 8) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < cap; ++i) out += (i ? ", " : "") + quote_text(names[i], 60);
    if (names.size() > cap) out += fmt::format(" and {} more", names.size() - cap);
    return out.empty() ? "none" : out;
}

// Why a comparison that paired nothing with values says nothing, with the names on both sides.
std::string nothing_compared(const CompareRunResult& r) {
    std::vector<std::string> ours, theirs;
    for (const EventComparison& c : r.comparisons)
        if (c.status == CompareStatus::kNoReference) ours.push_back(c.name);
    for (const auto& [name, why] : r.unmatched) theirs.push_back(name);
    return fmt::format("nothing was compared: none of our {} events paired with a reference tensor that has values ({} "
                       "unusable). Ours without a reference tensor: {}. Reference tensors nothing paired with: {}. "
                       "Check that the reference was made from this model and names its tensors as llama.cpp does "
                       "(the README's reference formats)",
                       r.comparisons.size(), r.summary.unusable, name_list(ours), name_list(theirs));
}

// Why a comparison without a divergence still does not pass: events paired with a tensor that holds
// no values.
std::string unusable_events(const CompareRunResult& r) {
    std::string list;
    int listed = 0;
    for (const EventComparison& c : r.comparisons) {
        if (c.status != CompareStatus::kUnusable) continue;
        if (listed++ < 4) list += fmt::format("{}{}: {}", listed > 1 ? "; " : "", quote_text(c.name, 60), c.note);
    }
    if (listed > 4) list += fmt::format("; and {} more", listed - 4);
    return fmt::format("{} events could not be compared ({}); nothing diverged among the {} events compared",
                       r.summary.unusable, list, r.summary.compared());
}

// Why a comparison that paired too little does not pass, and what did not pair with suggestions.
std::string too_little_paired(const PairingReport& p) {
    const int smaller = std::min(p.ours, p.reference);
    std::string s = fmt::format("only {} of the {} tensors on the smaller side ({}) paired ({:.0f}%, below --min-paired "
                                "{:g}): a comparison that pairs so little proves nothing",
                                p.paired, smaller, p.side, 100 * p.share, p.min_share);
    return s;
}

std::string unpaired_lines(const PairingReport& p) {
    const std::string other = p.side == "ours" ? "the reference" : "ours";
    std::string s = fmt::format("{} {} tensors did not pair:", p.n_unpaired, p.side == "ours" ? "of our" : "reference");
    for (const UnpairedTensor& u : p.unpaired) s += "\n  " + unpaired_text(u, other);
    if (p.n_unpaired > static_cast<int>(p.unpaired.size()))
        s += fmt::format("\n  and {} more", p.n_unpaired - static_cast<int>(p.unpaired.size()));
    s += "\nName the tensors as llama.cpp does, or give --names hf, meta or a name map file (the README's \"Your engine's "
         "own tensor names\")";
    return s;
}

// `local_source` is the dump whose ops the local errors check: the reference for a model run, ours
// for two dumps; none for two backends (the local op would be the CPU's, the very thing compared).
int report(const CompareOptions& o, CompareRunResult& r, const ReferenceDump& reference, const Model* model,
           const CompareThresholds& th, const std::string& header, const nlohmann::json& names,
           const ForwardOptions& forward, const ReferenceDump* local_source) {
    const bool two_dumps = !o.files.empty();
    const double local_seconds =
        local_source ? compute_local_errors(model, *local_source, {forward, th, local_source == &reference ? "the reference" : "our dump"}, r)
                     : 0;
    const std::string local_line = local_summary_line(r.comparisons, !o.against_model.empty());
    const OutputKl kl = output_kl(r.captures, reference);
    LogitLens lens;
    if (o.logit_lens) {
        auto made = logit_lens(*model, r.captures, reference, forward.mode, r.llama_isa);
        if (!made) return fail(made.error());
        lens = std::move(made.value());
    }
    DoctorReport doctor;
    if (r.summary.first_divergent >= 0)
        doctor = diagnose(r, static_cast<size_t>(r.summary.first_divergent), reference, model, th);
    const int compared = r.summary.compared();
    const PairingReport pairing = check_pairing(r, reference, o.min_paired);
    const int code = compared == 0 || !pairing.enough ? kExitUsage
                     : r.summary.first_divergent >= 0  ? kExitDiverged
                     : r.summary.unusable > 0          ? kExitBadInput
                                                       : kExitOk;
    std::string problem;
    if (compared == 0) problem = nothing_compared(r);
    else if (!pairing.enough) problem = too_little_paired(pairing);
    else if (code == kExitBadInput) problem = unusable_events(r);
    if (!pairing.enough) problem += "\n" + unpaired_lines(pairing);
    if (!problem.empty()) std::fprintf(stderr, "layerscope compare: %s\n", problem.c_str());

    if (o.json) {
        nlohmann::json j;
        j["reference"] = reference.source();
        j["thresholds"] = {{"warn_nmse", th.warn_nmse}, {"diverged_nmse", th.diverged_nmse}};
        if (!r.llama_isa_why.empty()) j["llama_isa"] = {{"variant", llama_isa_name(r.llama_isa)}, {"why", r.llama_isa_why}};
        j["noise_floor"] = r.noise_floor.empty() ? nlohmann::json() : nlohmann::json(r.noise_floor);
        j["names"] = names;
        j["pairing"] = {{"paired", pairing.paired}, {"ours", pairing.ours}, {"reference", pairing.reference},
                        {"share", pairing.share}, {"min_paired", pairing.min_share}, {"enough", pairing.enough},
                        {"unpaired_side", pairing.side}, {"n_unpaired", pairing.n_unpaired}};
        j["unpaired"] = nlohmann::json::array();
        for (const UnpairedTensor& u : pairing.unpaired) {
            nlohmann::json e = {{"name", u.name}, {"ne", u.ne}, {"suggestions", nlohmann::json::array()}};
            if (!u.llama_name.empty()) e["llama_name"] = u.llama_name;
            for (const PairSuggestion& sg : u.suggestions) e["suggestions"].push_back({{"name", sg.name}, {"ne", sg.ne}});
            j["unpaired"].push_back(std::move(e));
        }
        j["events"] = nlohmann::json::array();
        for (const EventComparison& c : r.comparisons) j["events"].push_back(to_json(c));
        j["summary"] = {{"compared", compared}, {"ok", r.summary.ok}, {"warn", r.summary.warn},
                        {"diverged", r.summary.diverged}, {"no_reference", r.summary.no_reference},
                        {"unusable", r.summary.unusable}};
        if (!problem.empty()) j["error"] = problem;
        if (two_dumps)
            j["volume"] = {{"tensors", r.volume.tensors}, {"bytes", r.volume.bytes}, {"seconds", r.volume.seconds},
                           {"gb_per_s", gb_per_s(r.volume)}};
        j["first_divergence"] = r.summary.first_divergent >= 0 ? to_json(r.comparisons[r.summary.first_divergent]) : nlohmann::json();
        j["output_kl"] = kl.rows.empty() ? nlohmann::json() : output_kl_json(kl);
        if (o.logit_lens) j["logit_lens"] = logit_lens_json(lens, model->tokenizer());
        j["doctor"] = nlohmann::json::array();
        j["attribution"] = nlohmann::json::array();
        for (const EventComparison* c : attribution(r.comparisons))
            j["attribution"].push_back({{"tensor", c->local_weight}, {"event", c->name}, {"local_nmse", c->local_nmse}});
        if (!local_line.empty()) {
            const LocalSummary sum = summarize_local(r.comparisons);
            j["local_error"] = {{"summary", local_line}, {"origin", sum.origin >= 0 ? nlohmann::json(r.comparisons[sum.origin].name) : nlohmann::json()},
                                {"local", sum.local}, {"inherited", sum.inherited}, {"unknown", sum.unknown}, {"not_recomputed", sum.not_recomputed},
                                {"seconds", local_seconds}};
        }
        for (const DoctorFinding& f : doctor.findings)
            j["doctor"].push_back({{"transform", f.transform}, {"verdict", f.verdict}, {"nmse_before", f.nmse_before},
                                   {"nmse_after", f.nmse_after}, {"floor_nmse", f.floor_nmse}, {"from_rerun", f.from_rerun}});
        j["unmatched_reference"] = nlohmann::json::array();
        for (const auto& [name, why] : r.unmatched) j["unmatched_reference"].push_back({{"name", name}, {"why", why}});
        std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return code;
    }

    std::printf("%s", header.c_str());
    std::printf("thresholds: warn above nmse %g, diverged above %g\n\n", th.warn_nmse, th.diverged_nmse);
    const int64_t first = r.summary.first_divergent;
    int shown = 0;
    for (size_t i = 0; i < r.comparisons.size(); ++i) {
        const EventComparison& c = r.comparisons[i];
        const bool near_first = first >= 0 && std::llabs(static_cast<long long>(i) - first) <= 2;
        const bool interesting = c.status == CompareStatus::kWarn || c.status == CompareStatus::kDiverged;
        if (!o.all && !near_first && !(interesting && shown < 20)) continue;
        if (interesting && !near_first) ++shown;
        print_row(c, static_cast<int64_t>(i) == first ? ">" : " ");
    }
    if (!o.all) std::printf("  (rows shown: the first divergence with its neighbours and up to 20 warn/diverged rows; --all shows every event)\n");
    if (!r.noise_floor.empty()) std::printf("\nnoise floor: %s\n", r.noise_floor.c_str());
    std::printf("\nsummary: %zu events, %d compared: %d ok, %d warn, %d diverged; %d without a reference tensor, %d "
                "unusable; %zu reference tensors unmatched\n",
                r.comparisons.size(), compared, r.summary.ok, r.summary.warn, r.summary.diverged, r.summary.no_reference,
                r.summary.unusable, r.unmatched.size());
    std::printf("paired: %d of %d events of ours and %d reference tensors that could pair (%.0f%% of the smaller side; "
                "--min-paired %g)\n",
                pairing.paired, pairing.ours, pairing.reference, 100 * pairing.share, pairing.min_share);
    if (two_dumps)
        std::printf("compared %lld tensor pairs, %.1f MiB in %.3g s (%.2f GB/s)\n", static_cast<long long>(r.volume.tensors),
                    static_cast<double>(r.volume.bytes) / (1024.0 * 1024.0), r.volume.seconds, gb_per_s(r.volume));
    print_output_kl(kl, o.all, model ? model->tokenizer() : nullptr);
    if (o.logit_lens) print_logit_lens(lens, model->tokenizer(), o.all);
    if (o.all)
        for (const auto& [name, why] : r.unmatched) std::printf("  unmatched: %s%s\n", name.c_str(), why.empty() ? "" : (" (" + why + ")").c_str());
    if (first < 0) {
        std::printf("first divergence: %s\n", compared == 0      ? "unknown: nothing was compared"
                                               : !pairing.enough ? "none among the events compared, but too little paired to pass"
                                                                 : "none");
        return code;
    }
    const EventComparison& c = r.comparisons[first];
    const std::string theirs = c.ref_source_name.empty() ? "" : ", the reference's " + c.ref_source_name;
    std::printf("first divergence: %s (event %lld%s): nmse %.3g, max_abs %.3g, cosine %.6f%s\n", shown_name(c).c_str(),
                static_cast<long long>(c.event_index), theirs.c_str(), c.metrics.nmse, c.metrics.max_abs, c.metrics.cosine,
                c.note.empty() ? "" : (", " + c.note).c_str());
    if (doctor.findings.empty())
        std::printf("doctor: no known transform explains it (tried: %zu transforms)\n", doctor.tried.size());
    if (!local_line.empty()) std::printf("local error: %s\n", local_line.c_str());
    if (!o.against_model.empty()) {
        const std::vector<const EventComparison*> ranked = attribution(r.comparisons);
        if (!ranked.empty())
            std::printf("attribution: what each weight's format adds (its op on the reference's own inputs), worst first%s:\n",
                        ranked.size() > 10 && !o.all ? " (10 shown; --all or --json for every weight)" : "");
        for (size_t i = 0; i < ranked.size() && (o.all || i < 10); ++i)
            std::printf("  %-32s %-16s local nmse %.3g\n", ranked[i]->local_weight.c_str(), ranked[i]->name.c_str(),
                        ranked[i]->local_nmse);
    }
    for (const DoctorFinding& f : doctor.findings)
        std::printf("doctor: %s (nmse %.3g -> %.3g)\n", f.verdict.c_str(), f.nmse_before, f.nmse_after);
    return code;
}

}  // namespace

namespace {

nlohmann::json naming_json(const NamingReport& n) {
    return {{"convention", n.convention}, {"renamed", n.renamed}, {"relaid", n.relaid}};
}
nlohmann::json names_json(const NamingReport& ours, const NamingReport& reference) {
    nlohmann::json j = {{"reference", naming_json(reference)}};
    if (!ours.convention.empty()) j["ours"] = naming_json(ours);
    return j;
}
std::string naming_text(const NamingReport& n) {
    if (n.renamed == 0) return n.convention;
    return fmt::format("{} ({} renamed{})", n.convention, n.renamed,
                       n.relaid ? fmt::format(", {} re-laid", n.relaid) : std::string());
}
std::string names_line(const NamingReport& ours, const NamingReport& reference) {
    return ours.convention.empty() ? fmt::format("names:     reference {}\n", naming_text(reference))
                                   : fmt::format("names:     ours {}, reference {}\n", naming_text(ours), naming_text(reference));
}

// --mode and --fault of a model run.
Status run_flags(const CompareOptions& o, MathMode* mode, Fault* fault) {
    if (!math_mode_from_name(o.mode, mode)) return make_error(ErrorCode::kUsage, "--mode must be exact or llama");
    *fault = Fault::kNone;
    if (!o.fault.empty() && !fault_from_name(o.fault, fault))
        return make_error(ErrorCode::kUsage, fmt::format("--fault {}: unknown; known faults: {}", o.fault, fault_names()));
    return {};
}

// -m MODEL --backend A --against-backend B: the run on B is the reference.
int compare_backends(const CompareOptions& o, const CompareThresholds& th) {
    if (o.model_path.empty() || !o.reference_path.empty() || !o.files.empty())
        return fail(make_error(ErrorCode::kUsage, "--against-backend compares two backends on one model: give -m MODEL and "
                                                  "a prompt, without a reference or dumps"));
    MathMode mode;
    Fault fault;
    if (Status s = run_flags(o, &mode, &fault); !s) return fail(s.error());
    auto model = Model::open(o.model_path);
    if (!model) return fail(model.error());
    auto tokens = prompt_tokens(o, *model.value());
    if (!tokens) return fail(tokens.error());
    if (tokens.value().empty())
        return fail(make_error(ErrorCode::kUsage, "--against-backend needs the tokens to run: give -p TEXT or --tokens"));
    const int n_generate = o.n_decode > 0 ? o.n_decode - 1 : 0;  // decode calls: the prompt, then one per token

    ForwardOptions forward;
    forward.mode = mode;
    if (Status s = parse_llama_isa(o.llama_isa, &forward.llama_isa); !s) return fail(s.error());
    auto n_ctx = context_for_run(model.value()->config(), static_cast<int64_t>(tokens.value().size()), n_generate, 0, false);
    if (!n_ctx) return fail(n_ctx.error());
    forward.n_ctx = n_ctx.value();
    auto against = open_backend_for(*model.value(), o.against_backend, o.threads, forward);
    if (!against) return fail(against.error());
    auto reference = run_as_reference(*model.value(), *against.value().backend, forward, tokens.value(), n_generate,
                                      fmt::format("the {} run", o.against_backend));
    if (!reference) return fail(reference.error());
    const std::string against_name = against.value().backend->name();
    against.value().backend.reset();  // its memory back before the second run

    CompareRunOptions options;
    options.thresholds = th;
    options.prompt = tokens.value();
    options.forward = forward;
    options.forward.fault = fault;
    mla_form_from_name(o.mla, &options.forward.mla);
    options.forward.delta_chunked = o.delta_rule == "chunked";
    options.llama_isa = forward.llama_isa;
    auto ours = open_backend_for(*model.value(), o.backend, o.threads, options.forward);
    if (!ours) return fail(ours.error());
    auto run = compare_with_reference(*model.value(), *ours.value().backend, *reference.value(), options);
    if (!run) return fail(run.error());
    std::string header = fmt::format("model:     {} ({}), mode {}{}\nbackends:  ours {}, against {} (its run is the reference: "
                                     "{} tensors)\n",
                                     o.model_path, model.value()->config().arch_name, math_mode_name(mode),
                                     fault == Fault::kNone ? "" : fmt::format(", fault {}", fault_info(fault).name),
                                     ours.value().backend->name(), against_name,
                                     reference.value()->tensors().size());
    return report(o, run.value(), *reference.value(), model.value().get(), th, header, names_json({}, NamingReport{"llama"}),
                  options.forward, nullptr);
}

// -m MODEL --against-model OTHER: the same tokens through both files on one backend; OTHER's run
// is the reference, so every difference is what the two formats do, and an event's local error is
// what MODEL's weight adds on OTHER's own inputs.
int compare_models(const CompareOptions& o, const CompareThresholds& given) {
    // Our own run of the other file is the reference: nothing to reproduce, so no noise floor.
    CompareThresholds th = given;
    th.noise_floor = false;
    if (o.model_path.empty() || !o.reference_path.empty() || !o.files.empty() || !o.against_backend.empty())
        return fail(make_error(ErrorCode::kUsage, "--against-model compares two files of one model: give -m MODEL, "
                                                  "--against-model OTHER and a prompt, without a reference, dumps or "
                                                  "--against-backend"));
    MathMode mode;
    Fault fault;
    if (Status s = run_flags(o, &mode, &fault); !s) return fail(s.error());
    auto pair = open_model_pair(o);
    if (!pair) return fail(pair.error());
    std::unique_ptr<Model>& model = pair.value().model;
    std::unique_ptr<Model>& other = pair.value().other;
    const std::vector<int32_t>& tokens = pair.value().tokens;
    const int n_generate = o.n_decode > 0 ? o.n_decode - 1 : 0;  // decode calls: the prompt, then one per token

    ForwardOptions forward;
    forward.mode = mode;
    if (Status s = parse_llama_isa(o.llama_isa, &forward.llama_isa); !s) return fail(s.error());
    mla_form_from_name(o.mla, &forward.mla);
    forward.delta_chunked = o.delta_rule == "chunked";
    auto n_ctx = context_for_run(model->config(), static_cast<int64_t>(tokens.size()), n_generate, 0, false);
    if (!n_ctx) return fail(n_ctx.error());
    forward.n_ctx = n_ctx.value();
    forward.all_logits = true;  // every position's distribution, for the KL statistics
    std::unique_ptr<ReferenceDump> reference;
    {
        auto against = open_backend_for(*other, o.backend, o.threads, forward);
        if (!against) return fail(against.error());
        auto ran = run_as_reference(*other, *against.value().backend, forward, tokens, n_generate,
                                    fmt::format("the run of {}", o.against_model));
        if (!ran) return fail(ran.error());
        reference = std::move(ran.value());
    }  // its backend's memory back before the second run

    CompareRunOptions options;
    options.thresholds = th;
    options.prompt = tokens;
    options.forward = forward;
    options.forward.fault = fault;
    options.llama_isa = forward.llama_isa;
    auto ours = open_backend_for(*model, o.backend, o.threads, options.forward);
    if (!ours) return fail(ours.error());
    auto run = compare_with_reference(*model, *ours.value().backend, *reference, options);
    if (!run) return fail(run.error());
    const std::string header =
        fmt::format("model:     {} ({}), mode {}{}, on {}\n           tensors: {}\nagainst:   {} (its run is the reference: {} "
                    "tensors)\n           tensors: {}\n",
                    o.model_path, model->config().arch_name, math_mode_name(mode),
                    fault == Fault::kNone ? "" : fmt::format(", fault {}", fault_info(fault).name), ours.value().backend->name(),
                    tensor_type_mix(*model), o.against_model, reference->tensors().size(),
                    tensor_type_mix(*other));
    return report(o, run.value(), *reference, model.get(), th, header, names_json({}, NamingReport{"llama"}),
                  options.forward, reference.get());
}

}  // namespace

Result<ModelPair> open_model_pair(const CompareOptions& o) {
    ModelPair pair;
    auto model = Model::open(o.model_path);
    if (!model) return model.error();
    pair.model = std::move(model.value());
    auto other = Model::open(o.against_model);
    if (!other) return other.error();
    pair.other = std::move(other.value());
    if (Status s = check_same_model(*pair.model, *pair.other); !s) return s.error();
    auto tokens = prompt_tokens(o, *pair.model);
    if (!tokens) return tokens.error();
    if (tokens.value().empty())
        return make_error(ErrorCode::kUsage, "--against-model needs the tokens to run: give -p TEXT or --tokens");
    auto other_tokens = prompt_tokens(o, *pair.other);
    if (!other_tokens) return other_tokens.error();
    if (other_tokens.value() != tokens.value())
        return make_error(ErrorCode::kBadInput, fmt::format("{} and {} tokenize the prompt differently ({} and {} tokens): "
                                                            "their vocabularies differ; give --tokens",
                                                            o.model_path, o.against_model, tokens.value().size(),
                                                            other_tokens.value().size()));
    pair.tokens = std::move(tokens.value());
    return pair;
}

int run_compare(const CompareOptions& o) {
    if (!(o.min_paired >= 0 && o.min_paired <= 1))
        return fail(make_error(ErrorCode::kUsage, "--min-paired must be a share between 0 and 1"));
    auto conventions = name_conventions(o.names);
    if (!conventions) return fail(conventions.error());
    CompareThresholds th;
    th.warn_nmse = o.warn_nmse;
    th.noise_floor = !o.thresholds_given;
    th.diverged_nmse = o.diverged_nmse;
    if (!(th.warn_nmse <= th.diverged_nmse))
        return fail(make_error(ErrorCode::kUsage, "--warn must not be larger than --diverged"));

    if (!o.ablate.empty()) return run_ablation(o);
    if (o.ablate_restore) return fail(make_error(ErrorCode::kUsage, "--ablate-restore goes with --ablate"));
    if (!o.against_model.empty() && o.files.empty()) return compare_models(o, th);
    if (!o.against_backend.empty()) return compare_backends(o, th);
    if (o.model_path.empty() || !o.files.empty()) {
        // Two dumps; with --model, the doctor reads the model's weights and config too.
        if (o.files.size() != 2 || !o.reference_path.empty())
            return fail(make_error(ErrorCode::kUsage, "give --model M --reference DUMP, or two dumps: compare A.gguf B.gguf "
                                                      "[--model M]"));
        if (o.logit_lens)
            return fail(make_error(ErrorCode::kUsage, "--logit-lens reads our run's layer outputs: compare a run of the "
                                                      "model (-m MODEL with --reference, --against-model or "
                                                      "--against-backend), not two dumps"));
        if (!o.run_flags_given.empty()) {
            std::string flags;
            for (const std::string& f : o.run_flags_given)
                if (flags.find(f) == std::string::npos) flags += (flags.empty() ? "" : ", ") + f;
            return fail(make_error(ErrorCode::kUsage,
                                   fmt::format("{} apply to a model run (compare -m MODEL -r REFERENCE); comparing two dumps "
                                               "runs nothing (--model only gives the doctor the weights). Leave them out, or "
                                               "compare a run of the model with the reference", flags)));
        }
        auto a = ReferenceDump::open(o.files[0]);
        if (!a) return fail(a.error());
        auto b = ReferenceDump::open(o.files[1]);
        if (!b) return fail(b.error());
        std::unique_ptr<Model> model, other;
        if (!o.model_path.empty()) {
            auto opened = Model::open(o.model_path);
            if (!opened) return fail(opened.error());
            model = std::move(opened.value());
        }
        // Two dumps of two files of one model (the reference's made with --against-model): the
        // local errors are our model's ops on the reference's inputs, as for --against-model.
        if (!o.against_model.empty()) {
            if (!model)
                return fail(make_error(ErrorCode::kUsage, "--against-model with two dumps names the reference dump's model: "
                                                          "give -m with the first dump's model too"));
            auto opened = Model::open(o.against_model);
            if (!opened) return fail(opened.error());
            other = std::move(opened.value());
            if (Status s = check_same_model(*model, *other); !s) return fail(s.error());
        }
        auto na = apply_names(*a.value(), conventions.value(), biased_in(*b.value()));
        if (!na) return fail(na.error());
        auto nb = apply_names(*b.value(), conventions.value(), biased_in(*a.value()));
        if (!nb) return fail(nb.error());
        CompareRunResult r = compare_dumps(*a.value(), *b.value(), th, o.threads);
        if (model) load_doctor_inputs(r, *a.value());
        std::string header = fmt::format("ours:      {} ({} tensors)\nreference: {} ({} tensors)\n", o.files[0],
                                         a.value()->tensors().size(), o.files[1], b.value()->tensors().size());
        if (other)
            header += fmt::format("model:     {} ({}), the first dump's: its weights on the reference's inputs\n           "
                                  "tensors: {}\nagainst:   {}, the reference's\n           tensors: {}\n",
                                  o.model_path, model->config().arch_name, tensor_type_mix(*model), o.against_model,
                                  tensor_type_mix(*other));
        else if (model)
            header += fmt::format("model:     {} ({}), for the doctor\n", o.model_path, model->config().arch_name);
        header += names_line(na.value(), nb.value());
        // Our ops for the local errors, with the reference's numerics: its batch size, flash
        // attention and output rows, in llama.cpp's arithmetic.
        ForwardOptions forward;
        if (b.value()->n_ubatch() > 0) forward.n_ubatch = b.value()->n_ubatch();
        forward.flash_attn = b.value()->flash_attention();
        forward.all_logits = b.value()->all_logits();
        load_output_logits(r, *a.value());
        return report(o, r, *b.value(), model.get(), th, header, names_json(na.value(), nb.value()), forward,
                      other ? b.value().get() : a.value().get());
    }
    if (o.reference_path.empty()) return fail(make_error(ErrorCode::kUsage, "--reference DUMP is required with --model"));

    MathMode mode;
    Fault fault;
    if (Status s = run_flags(o, &mode, &fault); !s) return fail(s.error());

    auto model = Model::open(o.model_path);
    if (!model) return fail(model.error());
    auto reference = ReferenceDump::open(o.reference_path);
    if (!reference) return fail(reference.error());
    // A q/k/v projection "with its bias" is llama.cpp's ADD where the model has the bias.
    auto naming = apply_names(*reference.value(), conventions.value(), biased_in(*model.value()));
    if (!naming) return fail(naming.error());
    auto tokens = prompt_tokens(o, *model.value());
    if (!tokens) return fail(tokens.error());

    CompareRunOptions options;
    options.thresholds = th;
    options.prompt = tokens.value();
    options.n_decode = o.n_decode;
    options.forward.mode = mode;
    options.forward.fault = fault;
    mla_form_from_name(o.mla, &options.forward.mla);
    options.forward.delta_chunked = o.delta_rule == "chunked";
    // Numerics as the reference was made: its batch size, flash attention and output rows.
    options.forward.n_ubatch = reference.value()->n_ubatch();
    if (options.forward.n_ubatch <= 0)
        return fail(make_error(ErrorCode::kBadInput, fmt::format("{}: dump.n_ubatch is {}; it records the batch size the "
                                                                 "reference was made with, which is at least 1",
                                                                 o.reference_path, options.forward.n_ubatch)));
    options.forward.flash_attn = reference.value()->flash_attention();
    options.forward.all_logits = reference.value()->all_logits();
    if (o.llama_isa != "auto") {
        LlamaIsa isa{};
        if (Status s = parse_llama_isa(o.llama_isa, &isa); !s) return fail(s.error());
        options.llama_isa = isa;
    }
    auto chosen = open_backend_for(*model.value(), o.backend, o.threads, options.forward);
    if (!chosen) return fail(chosen.error());
    auto run = compare_with_reference(*model.value(), *chosen.value().backend, *reference.value(), options);
    if (!run) return fail(run.error());
    std::string header = fmt::format("model:     {} ({}), mode {}{}\nreference: {} ({} tensors)\n", o.model_path,
                                     model.value()->config().arch_name, math_mode_name(mode),
                                     fault == Fault::kNone ? "" : fmt::format(", fault {}", fault_info(fault).name),
                                     o.reference_path, reference.value()->tensors().size());
    if (mode == MathMode::kLlama)
        header += fmt::format("llama.cpp build reproduced: {} ({})\n", llama_isa_name(run.value().llama_isa),
                              run.value().llama_isa_why);
    header += names_line({}, naming.value());
    return report(o, run.value(), *reference.value(), model.value().get(), th, header, names_json({}, naming.value()),
                  options.forward, reference.value().get());
}

}  // namespace ls::app
