// Opening models, captures, references and the demo for the GUI.
#include "app/debug_document.h"

#include "engine/remote/access.h"

#include <fmt/format.h>

#include <chrono>
#include <filesystem>

#include "engine/capture/snapshot_tools.h"
#include "engine/compare/backend_ab.h"
#include "engine/compare/model_pair.h"
#include "engine/compare/snapshot_diagnosis.h"
#include "engine/compare/tensor_names.h"
#include "kernels/common/host_memory.h"
#include "app/demo.h"

namespace ls::app {
namespace {

bool is_dump(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return std::filesystem::is_regular_file(path + "/manifest.json", ec);
    auto f = GgufFile::open(path);
    return f.ok() && f.value()->find("dump.format_version") != nullptr;
}

// The export panel's view of a server's session: fetched here, or written there.
class ServerEvents : public views::RemoteEvents {
public:
    explicit ServerEvents(std::shared_ptr<remote::RemoteSession> session) : session_(std::move(session)) {}
    Result<ExportSummary> export_here(const std::vector<int64_t>& events, const ExportOptions& options, size_t* skipped) override {
        return remote::export_remote_events(*session_, events, options, skipped);
    }
    Result<std::string> export_on_server(const std::vector<std::string>& names, const ExportOptions& options) override {
        return session_->export_on_server(names, options.format, options.path, options.overwrite);
    }
    void ask_lens() override { session_->ask_lens(); }
    std::shared_ptr<const SnapshotLens> lens(bool* pending) const override {
        auto state = session_->lens();
        *pending = state && !state->done;
        if (!state || !state->done) return nullptr;
        return std::shared_ptr<const SnapshotLens>(state, &state->lens);
    }
    void fetch_weight(const std::string& name) override { session_->fetch_weight(name); }
    std::shared_ptr<const std::string> weight(const std::string& name, bool* pending, std::string* error) const override {
        auto state = session_->weight(name);
        *pending = state && !state->done;
        *error = state && state->done ? state->error : std::string();
        return state && state->done ? state->bytes : nullptr;
    }

private:
    std::shared_ptr<remote::RemoteSession> session_;
};

BiasedProjection no_bias() {
    return [](const std::string&) { return false; };
}

}  // namespace

Status DebugDocument::open(const std::string& path, const std::string& prompt) {
    path_ = path;
    if (is_dump(path)) {
        // A capture without its model: every panel works from the dump's tensors.
        auto dump = ReferenceDump::open(path);
        if (!dump) return dump.error();
        const std::shared_ptr<const Model>& known = model_ ? model_ : doctor_model_;
        if (Status s = name_as_llama(*dump.value(), known       ? biased_in(*known)
                                                    : reference_ ? biased_in(*reference_)
                                                                 : no_bias());
            !s)
            return s;
        session_.reset();
        // A model opened before stays for the doctor: a capture of another engine against a
        // reference is then diagnosed with the model's weights and config.
        if (model_) doctor_model_ = model_;
        model_.reset();
        model_doc_.reset();
        capture_ = std::move(dump.value());
        capture_snapshot_ = snapshot_from_dump(*capture_, nullptr, reference_.get());
        title_ = "capture " + path;
        demo_ = false;
        doctor_event_ = -2;
        return {};
    }
    auto model = Model::open(path);
    if (!model) return model.error();
    auto doc = views::ModelDocument::load(path);
    if (!doc) return doc.error();
    model_ = std::shared_ptr<const Model>(std::move(model.value()));
    model_doc_ = doc.value();
    capture_.reset();
    capture_snapshot_.reset();
    demo_ = false;
    title_ = path;
    std::vector<int32_t> tokens = model_->tokenizer() ? model_->tokenizer()->encode(prompt, true, true) : std::vector<int32_t>{1};
    return start_session(std::move(tokens), 0);
}

Status DebugDocument::start_session(std::vector<int32_t> tokens, int n_generate) {
    SessionOptions options;
    options.backend = backend_;
    auto budget = capture_budget_bytes(capture_budget_, available_host_memory().available_bytes);
    if (!budget) return budget.error();
    options.capture = CapturePolicy::memory_budget(budget.value());
    options.forward.fault = fault_;
    if (reference_)
        if (Status s = use_reference_numerics(*reference_, options.forward); !s) return s;
    auto session = Session::create(model_, options);
    if (!session) return session.error();
    session_ = std::move(session.value());
    tokens_ = tokens;
    n_generate_ = n_generate;
    session_->set_tokens(std::move(tokens));
    if (reference_) session_->set_reference(reference_);
    if (n_generate > 0) session_->generate(n_generate, reference_ ? reference_->generated_tokens() : std::vector<int32_t>{});
    doctor_event_ = -2;
    return {};
}

Status DebugDocument::load_reference(const std::string& path) {
    auto ref = ReferenceDump::open(path);
    if (!ref) return ref.error();
    const std::shared_ptr<const Model>& known = model_ ? model_ : doctor_model_;
    if (Status s = name_as_llama(*ref.value(), known ? biased_in(*known) : capture_ ? biased_in(*capture_) : no_bias()); !s)
        return s;
    reference_ = std::shared_ptr<const ReferenceDump>(std::move(ref.value()));
    reference_path_ = path;
    against_.clear();
    against_model_.clear();
    doctor_event_ = -2;
    if (capture_) {
        capture_snapshot_ = snapshot_from_dump(*capture_, nullptr, reference_.get());
        return {};
    }
    if (!session_) return {};
    // The reference decides the numerics (batch size, flash attention, output rows) and the
    // prompt when it records one: restart the session that way.
    std::vector<int32_t> tokens = reference_->prompt_tokens().empty() ? tokens_ : reference_->prompt_tokens();
    const int n_generate = std::max<int>(0, static_cast<int>(reference_->decode_n_tokens().size()) - 1);
    return start_session(std::move(tokens), n_generate);
}

Status DebugDocument::compare_against_backend(const std::string& backend) {
    if (!model_ || !session_) return make_error(ErrorCode::kUsage, "open a model to compare two backends on it");
    // The other backend runs the session's tokens clean (no fault), with the session's numerics.
    ForwardOptions forward;
    auto n_ctx = context_for_run(model_->config(), static_cast<int64_t>(tokens_.size()), n_generate_, 0, false);
    if (!n_ctx) return n_ctx.error();
    forward.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*model_, backend, 0, forward);
    if (!chosen) return chosen.error();
    auto reference = run_as_reference(*model_, *chosen.value().backend, forward, tokens_, n_generate_,
                                      fmt::format("the {} run", backend));
    if (!reference) return reference.error();
    reference_ = std::shared_ptr<const ReferenceDump>(std::move(reference.value()));
    reference_path_ = fmt::format("the {} backend's run ({})", backend, chosen.value().backend->name());
    against_ = backend;
    against_model_.clear();
    return start_session(tokens_, n_generate_);
}

Status DebugDocument::compare_against_model(const std::string& path) {
    if (!model_ || !session_) return make_error(ErrorCode::kUsage, "open a model to compare it with another format of it");
    auto other = Model::open(path);
    if (!other) return other.error();
    if (Status s = check_same_model(*model_, *other.value()); !s) return s;
    ForwardOptions forward;
    forward.all_logits = true;  // every position's distribution, for the KL per position
    auto n_ctx = context_for_run(model_->config(), static_cast<int64_t>(tokens_.size()), n_generate_, 0, false);
    if (!n_ctx) return n_ctx.error();
    forward.n_ctx = n_ctx.value();
    auto chosen = open_backend_for(*other.value(), backend_, 0, forward);
    if (!chosen) return chosen.error();
    auto reference = run_as_reference(*other.value(), *chosen.value().backend, forward, tokens_, n_generate_,
                                      fmt::format("the run of {}", path));
    if (!reference) return reference.error();
    reference_ = std::shared_ptr<const ReferenceDump>(std::move(reference.value()));
    reference_path_ = fmt::format("the run of {} (the same model: {})", path, tensor_type_mix(*other.value()));
    against_.clear();
    against_model_ = path;
    return start_session(tokens_, n_generate_);
}

Status DebugDocument::open_quant_demo() {
    auto demo = prepare_quant_demo(demo_directory());
    if (!demo) return demo.error();
    fault_ = Fault::kNone;
    reference_.reset();
    if (Status s = open(demo.value().quantized_path, demo.value().prompt); !s) return s;
    if (Status s = compare_against_model(demo.value().source_path); !s) return s;
    session_->continue_run();
    demo_ = true;
    title_ = "demo: what does Q4_K cost? The demo model in Q4_K against its F16 run";
    return {};
}

Status DebugDocument::set_fault(Fault fault) {
    fault_ = fault;
    if (!model_) return make_error(ErrorCode::kUsage, "open a model to inject a fault");
    return start_session(tokens_, n_generate_);
}

Status DebugDocument::open_demo() {
    auto demo = prepare_demo(demo_directory());
    if (!demo) return demo.error();
    fault_ = demo.value().fault;
    reference_.reset();
    if (Status s = open(demo.value().model_path, demo.value().prompt); !s) return s;
    if (Status s = load_reference(demo.value().reference_path); !s) return s;
    // Stop at the first divergence so the user lands on it.
    session_->add_breakpoint(BreakpointSpec::divergence_above(CompareThresholds{}.diverged_nmse));
    session_->run_to_breakpoint();
    demo_ = true;
    title_ = fmt::format("demo: generated model with the '{}' fault against the clean engine's reference",
                         fault_info(fault_).name);
    return {};
}

std::shared_ptr<const SessionSnapshot> DebugDocument::snapshot() {
    if (session_) return session_->snapshot();
    if (remote_) return remote_->snapshot();
    if (capture_snapshot_) return capture_snapshot_;
    return empty_;
}

const std::vector<EventComparison>& DebugDocument::local_errors(const SessionSnapshot& snap) {
    if (remote_) {
        // Worked out on the server with the doctor (remote_verdict asks for them).
        auto d = remote_->diagnosis();
        if (divergence_key(snap) != remote_asked_) d.reset();  // the answer is to another state of the run
        if (d == local_diagnosis_ && snap.records.size() == local_errors_.size()) return local_errors_;
        local_diagnosis_ = d;
        local_errors_.clear();
        ++local_generation_;
        if (!d || !d->has_local || d->local.empty()) return local_errors_;
        local_errors_.resize(snap.records.size());
        for (const EventComparison& c : d->local)
            if (c.event_index >= 0 && c.event_index < static_cast<int64_t>(local_errors_.size()))
                local_errors_[static_cast<size_t>(c.event_index)] = c;
        return local_errors_;
    }
    if (local_source_.is(&snap)) return local_errors_;
    local_source_.set(&snap);
    local_errors_.clear();
    ++local_generation_;
    // A session checks our ops against the reference; a capture with a model checks the
    // capture's own ops (the model's op on its inputs), as `compare OURS REF -m MODEL` does.
    const bool checks_capture = !session_ && capture_ && doctor_model_;
    if (!reference_ || (!(model_ && session_) && !checks_capture)) return local_errors_;
    // Our op as the session runs it (start_session): llama mode, the reference's numerics, the fault.
    ForwardOptions forward;
    forward.fault = checks_capture ? Fault::kNone : fault_;
    if (!use_reference_numerics(*reference_, forward)) return local_errors_;
    if (checks_capture) local_errors_ = snapshot_local_errors(snap, *doctor_model_, *capture_, forward, "our dump");
    else local_errors_ = snapshot_local_errors(snap, *model_, *reference_, forward);
    return local_errors_;
}

Status DebugDocument::connect(const std::string& address, const std::string& token_file, const std::string& model,
                              const std::string& reference, const std::string& prompt) {
    auto credentials = remote::read_credentials(token_file.empty() ? remote::default_token_path() : token_file);
    if (!credentials) return credentials.error();
    remote::ClientOptions options;
    options.tls_sha256 = credentials.value().tls_sha256;
    // A reference here is uploaded once the session is open; "server:PATH", or a path not here,
    // is opened from the server's disk.
    std::error_code ec;
    const bool on_server = reference.rfind("server:", 0) == 0;
    const bool here = !reference.empty() && !on_server && std::filesystem::exists(reference, ec);
    remote::Open open;
    open.model = model;
    open.backend = backend_;
    open.prompt = reference.empty() ? prompt : "";  // with a reference, its prompt
    open.reference = here ? "" : on_server ? reference.substr(7) : reference;
    auto session = remote::RemoteSession::open(address, credentials.value().token, open, options);
    if (!session) return session.error();
    remote_ = std::move(session.value());
    model_doc_ = views::ModelDocument::from_file(remote_->model()->file_ptr());
    if (here) {
        auto uploaded = remote_->upload(reference);
        if (!uploaded) return uploaded.error();
        remote::Command c;
        c.kind = remote::CommandKind::kSetReference;
        c.text = uploaded.value();
        if (auto set = remote_->wait_command(remote_->send(c), std::chrono::minutes(10)); !set) return set.error();
    }
    path_ = model;
    title_ = fmt::format("{} on {}", model, address);
    if (Status s = use_uploaded_reference(here ? reference : ""); !s) return s;
    reference_path_ = reference;
    remote_events_ = std::make_shared<ServerEvents>(remote_);
    path_ = model;
    title_ = fmt::format("{} on {}", model, address);
    reference_path_ = reference;
    return {};
}

Status DebugDocument::use_uploaded_reference(const std::string& path) {
    reference_.reset();
    reference_path_ = path;
    if (path.empty()) return {};
    auto ref = ReferenceDump::open(path);
    if (!ref) return ref.error();
    // Named as the server names it: which projections have biases aside is in the model's tensor
    // table, which the server sent.
    if (Status s = name_as_llama(*ref.value(), remote_ ? biased_in(*remote_->model()) : no_bias()); !s) return s;
    reference_ = std::shared_ptr<const ReferenceDump>(std::move(ref.value()));
    return {};
}

DebugDocument::~DebugDocument() { cancel_doctor(); }

bool DebugDocument::doctor_working() const {
    if (remote_) {
        auto d = remote_->diagnosis();
        return d && !d->done;
    }
    return doctor_future_.valid();
}

void DebugDocument::cancel_doctor() {
    if (remote_) remote_->stop_diagnosis();
    if (doctor_job_) doctor_job_->cancel = true;
}

const std::string& DebugDocument::doctor_verdict(const std::shared_ptr<const SessionSnapshot>& snap) {
    if (remote_) return remote_verdict(*snap);
    const int64_t first = snap->first_divergent;
    if (first != doctor_event_) {
        // A new first divergence: the doctor at work on the old one stops, a new one starts.
        cancel_doctor();
        if (doctor_future_.valid()) doctor_future_.wait();
        doctor_future_ = {};
        doctor_event_ = first;
        doctor_verdict_.clear();
        if (first < 0 || !reference_ || !snap->capture(first)) return doctor_verdict_;
        auto job = std::make_shared<DoctorJob>();
        doctor_job_ = job;
        std::shared_ptr<const ReferenceDump> reference = reference_;
        std::shared_ptr<const Model> model = model_ ? model_ : doctor_model_;
        doctor_future_ = std::async(std::launch::async, [job, snap, reference, model, first]() -> std::string {
            return snapshot_doctor_verdict(*snap, first, *reference, model.get(), [&job](const std::string& step, size_t tried) {
                const std::lock_guard<std::mutex> lock(job->mu);
                job->step = step;
                job->tried = tried;
                return !job->cancel.load();
            });
        });
    }
    if (!doctor_future_.valid()) return doctor_verdict_;
    if (doctor_future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        doctor_verdict_ = doctor_future_.get();
    } else {
        const std::lock_guard<std::mutex> lock(doctor_job_->mu);
        doctor_verdict_ = fmt::format("working: {} ({} tried; Esc cancels)", doctor_job_->step.empty() ? "starting" : doctor_job_->step,
                                      doctor_job_->tried);
    }
    return doctor_verdict_;
}

std::pair<int64_t, size_t> DebugDocument::divergence_key(const SessionSnapshot& snap) {
    size_t flagged = 0;
    for (const auto& r : snap.records)
        flagged += r && (r->comparison.status == CompareStatus::kWarn || r->comparison.status == CompareStatus::kDiverged);
    return {snap.first_divergent, flagged};
}

const std::string& DebugDocument::remote_verdict(const SessionSnapshot& snap) {
    // The server has the model and the reference: it is asked again when the first divergence or
    // the flagged events change, once the session has settled (and again after a reconnect).
    const auto key = divergence_key(snap);
    if (!remote_->connected()) {
        remote_reask_ = true;  // what was worked out stays shown meanwhile
    } else if ((key != remote_asked_ || remote_reask_) && !remote_->busy() && snap.has_reference && key.second > 0) {
        remote_->diagnose(snap.first_divergent);
        remote_asked_ = key;
        remote_reask_ = false;
    }
    auto d = remote_->diagnosis();
    doctor_verdict_.clear();
    if (!d || key.second == 0 || key != remote_asked_) return doctor_verdict_;
    if (!d->done) doctor_verdict_ = fmt::format("working on the server: {} ({} tried; Esc cancels)", d->step, d->tried);
    else doctor_verdict_ = d->verdict;
    return doctor_verdict_;
}

}  // namespace ls::app
