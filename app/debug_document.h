// What the GUI has open: a model with its live session, or a capture (a dump) without a model;
// the reference; the fault; and the doctor's verdict on the first divergence. The views read it
// through a views::DebugContext built each frame.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/compare/doctor.h"
#include "engine/remote/remote_session.h"
#include "views/debug_context.h"
#include "views/export_panel.h"
#include "views/model_document.h"

namespace ls::app {

class DebugDocument {
public:
    DebugDocument() = default;
    ~DebugDocument();  // a doctor at work is stopped (its next step) and waited for
    // A model (starts a session on `prompt`) or a dump file (opened as a capture).
    Status open(const std::string& path, const std::string& prompt = "Once upon a time");
    Status load_reference(const std::string& path);
    // Backend A/B: runs the session's model and tokens on `backend` (cpu, cuda, cuda-emulated) and
    // makes that run the reference; the session restarts against it.
    Status compare_against_backend(const std::string& backend);
    // The backend whose run is the reference ("" for a file, or none).
    const std::string& against_backend() const { return against_; }
    // One model in two formats: runs the session's tokens through `path` (the same model in
    // another format, check_same_model) and makes that run the reference; the session restarts
    // against it, every row's logits kept for the KL per position.
    Status compare_against_model(const std::string& path);
    // The file compare_against_model made the reference of ("" when the reference is something else).
    const std::string& against_model() const { return against_model_; }
    // The built-in "what does Q4_K cost" demo: the demo model in F16 and in Q4_K (the same master
    // weights), the Q4_K file run against the F16 file's run.
    Status open_quant_demo();
    // Re-creates the session with another fault (Fault::kNone: the clean engine), same tokens.
    Status set_fault(Fault fault);
    // The built-in demo: generated model, clean reference, one fault; runs to the first divergence.
    Status open_demo();
    // A session on a server (`layerscope serve` at `address`): `model` and `reference` are the
    // server's paths; the token is read from `token_file` ("" for the default).
    Status connect(const std::string& address, const std::string& token_file, const std::string& model,
                   const std::string& reference, const std::string& prompt);
    // A server's session compares with a reference uploaded from `path` here ("": one on the
    // server's disk): the panels that show the reference's side read this copy.
    Status use_uploaded_reference(const std::string& path);
    // The server's session (nullptr when the session is local or there is none).
    remote::RemoteSession* remote() { return remote_.get(); }
    // The export panel's way to the server's events (nullptr when the session is not remote).
    const std::shared_ptr<views::RemoteEvents>& remote_events() const { return remote_events_; }

    // Opening `path` keeps this reference (set before open()).
    void use_reference(std::shared_ptr<const ReferenceDump> reference, std::string path, std::string against = "") {
        reference_ = std::move(reference);
        reference_path_ = std::move(path);
        against_ = std::move(against);
        against_model_.clear();
    }
    void use_fault(Fault fault) { fault_ = fault; }
    // A server's session now runs against a run made there (described by `note`): of the backend
    // `against`, or of the model `against_model` (the server's path); no reference copy here.
    void use_remote_run_reference(std::string note, std::string against, std::string against_model) {
        reference_.reset();
        reference_path_ = std::move(note);
        against_ = std::move(against);
        against_model_ = std::move(against_model);
    }
    // The model a capture opened next is diagnosed with (the doctor, local errors); set before open().
    void use_doctor_model(std::shared_ptr<const Model> model) { doctor_model_ = std::move(model); }
    // The model of this document's session, or the one its capture is diagnosed with.
    std::shared_ptr<const Model> diagnosing_model() const { return model_ ? model_ : doctor_model_; }
    void use_backend(std::string backend) { backend_ = std::move(backend); }
    // The capture budget's text (capture_budget_bytes), applied when a session starts.
    void use_capture_budget(std::string budget) { capture_budget_ = std::move(budget); }
    const std::string& path() const { return path_; }
    std::shared_ptr<const ReferenceDump> reference_ptr() const { return reference_; }

    bool has_model() const { return session_ != nullptr; }
    bool has_anything() const { return session_ || remote_ || capture_snapshot_; }
    // The session the panels command: here, or on a server.
    SessionControl* session() { return session_ ? static_cast<SessionControl*>(session_.get()) : remote_.get(); }
    // The session's model: here, or the header of a server's (config, tokenizer, tensor table; no
    // weights: has_weights() is false).
    const Model* model() const { return model_ ? model_.get() : remote_ ? remote_->model().get() : nullptr; }
    const ReferenceDump* reference() const { return reference_.get(); }
    const std::string& reference_path() const { return reference_path_; }
    const std::shared_ptr<const views::ModelDocument>& model_document() const { return model_doc_; }
    const std::string& title() const { return title_; }
    Fault fault() const { return fault_; }
    bool is_demo() const { return demo_; }

    // The snapshot to draw this frame (the session's latest, or the capture's).
    std::shared_ptr<const SessionSnapshot> snapshot();
    // The doctor's verdict on the snapshot's first divergent event ("" when none or not yet run),
    // worked out on a thread of its own: while it works, the step it is at ("working: ...").
    const std::string& doctor_verdict(const std::shared_ptr<const SessionSnapshot>& snap);
    bool doctor_working() const;
    void cancel_doctor();  // it stops at its next step and says what it tried
    // Local vs inherited error of the snapshot's warn/diverged events, by event index (empty
    // without a model and a reference); recomputed when the snapshot changes.
    const std::vector<EventComparison>& local_errors(const SessionSnapshot& snap);
    // Grows whenever local_errors() rebuilds its answer (panels key their caches on it).
    uint64_t local_errors_generation() const { return local_generation_; }

private:
    Status start_session(std::vector<int32_t> tokens, int n_generate);
    const std::string& remote_verdict(const SessionSnapshot& snap);  // doctor_verdict() on a server's session
    // What a diagnosis depends on: the first divergent event and the number of flagged ones.
    static std::pair<int64_t, size_t> divergence_key(const SessionSnapshot& snap);

    std::shared_ptr<const Model> model_;
    std::shared_ptr<const Model> doctor_model_;
    std::string against_model_;  // see against_model()
    std::string against_;  // see against_backend()  // the model opened before a capture, for the doctor
    std::unique_ptr<Session> session_;
    std::shared_ptr<remote::RemoteSession> remote_;  // shared with the export panel's worker (remote_events)
    std::shared_ptr<views::RemoteEvents> remote_events_;
    std::string backend_ = "auto";
    std::string capture_budget_;
    std::shared_ptr<const views::ModelDocument> model_doc_;
    std::shared_ptr<const ReferenceDump> reference_;
    std::string reference_path_;
    std::shared_ptr<const ReferenceDump> capture_;
    std::shared_ptr<const SessionSnapshot> capture_snapshot_;
    std::shared_ptr<const SessionSnapshot> empty_ = std::make_shared<SessionSnapshot>();
    Fault fault_ = Fault::kNone;
    std::vector<int32_t> tokens_;
    int n_generate_ = 0;
    bool demo_ = false;
    std::string title_;
    std::string path_;  // the model or capture opened
    // Doctor: the verdict for the first divergent event, and the worker working it out.
    int64_t doctor_event_ = -2;
    std::string doctor_verdict_;
    struct DoctorJob {
        std::atomic<bool> cancel{false};
        std::mutex mu;
        std::string step;
        size_t tried = 0;
    };
    std::shared_ptr<DoctorJob> doctor_job_;
    std::future<std::string> doctor_future_;  // holds its own references to what it reads
    // Local-error cache: for the snapshot it was computed on.
    views::SnapshotKey local_source_;
    std::vector<EventComparison> local_errors_;
    uint64_t local_generation_ = 0;
    std::shared_ptr<const remote::Diagnosis> local_diagnosis_;  // the server's diagnosis local_errors_ came from
    std::pair<int64_t, size_t> remote_asked_{-2, 0};  // (first divergent, flagged events) last asked of the server
    bool remote_reask_ = false;                       // the connection was lost since: ask again
};

}  // namespace ls::app
