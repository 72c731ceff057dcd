// A debugging session over one model: owns the backend, the forward pass, the tokens and the KV
// position, and runs on its own worker thread. Callers send commands (never blocking on compute)
// and read immutable snapshots; the GUI, the CLI and the tests all drive it through this API.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/compare/comparison.h"
#include "engine/session/breakpoint.h"
#include "engine/session/capture_store.h"
#include "engine/session/derived.h"
#include "engine/session/event_plan.h"
#include "engine/session/session_control.h"

namespace ls {

struct SessionOptions {
    ForwardOptions forward;
    CapturePolicy capture;    // default: a 256 MiB memory budget
    std::string backend = "auto";  // cpu, cuda, cuda-emulated, auto (see open_backend_for)
    int n_threads = 0;        // CPU backend threads (0 = all cores)
    int top_k = 20;           // top-k logits shown for result_output
    // While running, a snapshot at most this often (every stop publishes at once).
    std::chrono::milliseconds publish_interval{30};
};

enum class SessionState {
    kEmpty,      // no tokens yet
    kReady,      // tokens set, nothing evaluated (cursor -1)
    kRunning,    // the worker is evaluating
    kPaused,     // stopped inside an evaluation at `cursor`
    kFinished,   // every planned decode call evaluated
    kCancelled,  // the evaluation was abandoned; the next command re-runs from the start
    kError,      // the last command failed: see SessionSnapshot::error
};
const char* session_state_name(SessionState state);

// Everything known about one event of the current run. Immutable once published.
struct EventRecord {
    EventInfo info;
    TensorStats stats;                                // always, computed on the backend
    bool compared = false;                            // a reference is loaded
    EventComparison comparison;
    std::shared_ptr<const AttentionProbs> attention;  // kq_soft_max-L: ours
    std::shared_ptr<const AttentionProbs> ref_attention;
    std::string ref_attention_note;                   // why the reference's is missing
    std::shared_ptr<const HeadNorms> head_norms;      // roped Qcur-L / Kcur-L: ours
    std::shared_ptr<const HeadNorms> ref_head_norms;
    std::shared_ptr<const TopLogits> top_logits;      // result_output
};

struct SessionSnapshot {
    uint64_t version = 0;                 // grows with every publication
    CommandTicket completed_ticket = 0;   // every command with a ticket <= this is done
    uint64_t commands_replaced = 0;       // queued commands a newer one of the same kind replaced
    SessionState state = SessionState::kEmpty;
    std::optional<Error> error;           // of the last command, when it failed
    std::string message;                  // a note for the status bar ("at the end of the run")

    std::vector<int32_t> tokens;          // the prompt as evaluated
    std::vector<std::string> pieces;      // token pieces, "" without a tokenizer
    std::vector<int32_t> generated;       // generated[d] = argmax after decode call d
    std::vector<int32_t> decode_inputs;   // the token fed to decode call d >= 1 (forced or generated)
    int planned_decode_calls = 0;         // 1 + generate(n)
    int decode_calls_done = 0;
    int64_t position = 0;                 // KV cache position of the forward pass

    int64_t cursor = -1;                  // event the session stands at; -1 before the first
    std::shared_ptr<const std::vector<EventInfo>> events;      // the plan (dry run), execution order
    std::vector<std::shared_ptr<const EventRecord>> records;   // records[i] for events 0..cursor
    std::shared_ptr<const CaptureMap> captures;
    size_t capture_bytes = 0;
    size_t capture_budget = 0;            // the memory budget's bytes; 0 under another policy
    int64_t captures_evicted = 0;

    std::vector<Breakpoint> breakpoints;
    std::optional<BreakpointHit> hit;     // the breakpoint that stopped the session at the cursor

    bool has_reference = false;
    CompareThresholds thresholds;         // the statuses' thresholds (with a reference)
    // llama mode: the llama.cpp CPU build reproduced for the reference, and why ("avx2: system_info
    // has AVX2 and no AVX512"); the session judges by the thresholds alone, with no noise floor.
    std::string reference_build;
    int64_t first_divergent = -1;         // event index, -1 when none so far

    const EventRecord* record(int64_t index) const {
        return index >= 0 && index < static_cast<int64_t>(records.size()) ? records[index].get() : nullptr;
    }
    const EventRecord* current() const { return record(cursor); }
    std::shared_ptr<const CapturedTensor> capture(int64_t index) const;
    // The latest record at or before the cursor whose base name is `base_name` ("kq_soft_max-3").
    const EventRecord* latest(const std::string& base_name) const;
};

class SessionWorker;

class Session : public SessionControl {
public:
    static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model, SessionOptions options = {});
    static Result<std::unique_ptr<Session>> open(const std::string& model_path, SessionOptions options = {});
    ~Session() override;  // abandons any evaluation and joins the worker
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Commands: queued, answered by snapshots. Each returns a ticket; the snapshot's
    // completed_ticket reaches it once the command is done (stopped, finished or failed). A newer
    // command of the same kind replaces an older one still queued (tokens, seek, run, reference,
    // capture policy, restart, pause, cancel); steps are never merged, each one is a step.
    CommandTicket set_tokens(std::vector<int32_t> ids);
    CommandTicket set_prompt(std::string text, bool add_special = true, bool parse_special = false) override;
    CommandTicket step_op() override;        // to the next event
    CommandTicket step_layer() override;     // to the next event whose layer differs from the current one (event 0 from the start)
    CommandTicket step_token() override;     // to the end of the current decode call, or through the next
    CommandTicket run_to_event(int64_t index) override;  // breakpoints on the way stop it
    CommandTicket run_to_event(std::string dump_name);
    CommandTicket run_to_breakpoint();          // until a breakpoint hits or the plan ends
    CommandTicket continue_run() override { return run_to_breakpoint(); }
    CommandTicket pause() override;          // stop at the next event
    CommandTicket restart() override;        // empty the KV cache and re-run to event 0
    CommandTicket go_to(int64_t index) override;  // deterministic re-run to `index`, breakpoints ignored
    // Greedy decode calls after the prompt (1 + n in all); forced[d] replaces the argmax as the
    // input of decode call d + 1 (teacher forcing). Runs like continue: breakpoints stop it.
    CommandTicket generate(int n, std::vector<int32_t> forced = {}) override;
    CommandTicket cancel();         // abandon the evaluation now (EvalCancelled)
    // Compares every event with `reference` from now on; the run is replayed to the cursor so the
    // events already shown are compared too.
    CommandTicket set_reference(std::shared_ptr<const ReferenceDump> reference, CompareThresholds thresholds = {});
    CommandTicket set_capture_policy(CapturePolicy policy);

    // Breakpoints apply at once (the worker reads them on every event) and publish a snapshot.
    int add_breakpoint(BreakpointSpec spec) override;
    bool remove_breakpoint(int id) override;
    bool enable_breakpoint(int id, bool enabled) override;

    // Queued commands wait while held: a GUI batching a burst of edits, and tests of replacement.
    void hold_commands();
    void release_commands();

    std::shared_ptr<const SessionSnapshot> snapshot() const override;
    // The first snapshot with version >= v, or null after `timeout`.
    std::shared_ptr<const SessionSnapshot> wait_for_version(uint64_t v, std::chrono::milliseconds timeout) const;
    // The first snapshot where command `ticket` is done, or null after `timeout`.
    std::shared_ptr<const SessionSnapshot> wait_for_ticket(CommandTicket ticket, std::chrono::milliseconds timeout) const;

    const Model& model() const;
    // The backend the session runs on, and why auto chose it when it chose the CPU.
    std::string backend_description() const override;

private:
    explicit Session(std::unique_ptr<SessionWorker> worker);
    std::unique_ptr<SessionWorker> worker_;
};

}  // namespace ls
