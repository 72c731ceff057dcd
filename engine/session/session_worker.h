// The session's worker (internal to engine/session): the command queue, the published snapshots,
// and the thread that runs the forward pass and stops inside it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/capture/host_buffers.h"
#include "engine/session/session.h"

namespace ls {

enum class CommandKind {
    kTokens, kStepOp, kStepLayer, kStepToken, kSeek, kRun, kGenerate, kPause, kRestart, kCancel, kReference,
    kCapturePolicy,
};

struct Command {
    CommandKind kind = CommandKind::kPause;
    CommandTicket ticket = 0;
    // kTokens
    std::vector<int32_t> tokens;
    bool is_prompt = false;
    std::string text;
    bool add_special = true, parse_special = false;
    // kSeek: an index, or a dump name when event_name is set; breakpoints honoured (run_to_event)
    int64_t index = -1;
    std::string event_name;
    bool honor_breakpoints = false;
    // kGenerate
    int n_generate = 0;
    std::vector<int32_t> forced;
    // kReference / kCapturePolicy
    std::shared_ptr<const ReferenceDump> reference;
    CompareThresholds thresholds;
    CapturePolicy policy;
};

class SessionWorker final : public EventSink {
public:
    SessionWorker(std::shared_ptr<const Model> model, SessionOptions options, std::unique_ptr<Backend> backend);
    ~SessionWorker() override;
    Status start();  // makes the forward pass, publishes the first snapshot, starts the thread

    CommandTicket enqueue(Command command);
    void hold(bool held);
    int add_breakpoint(BreakpointSpec spec);
    bool edit_breakpoint(int id, bool remove, bool enabled);

    std::shared_ptr<const SessionSnapshot> snapshot() const;
    std::shared_ptr<const SessionSnapshot> wait_until(const std::function<bool(const SessionSnapshot&)>& done,
                                                      std::chrono::milliseconds timeout) const;
    const Model& model() const { return *model_; }
    void set_backend_note(std::string note) { backend_note_ = std::move(note); }
    // "CPU (2 threads) (CPU: cudaGetDeviceCount failed: ...)": the backend, and why auto chose it.
    std::string backend_description() const {
        return backend_note_.empty() ? backend_->name() : backend_->name() + " (" + backend_note_ + ")";
    }

    void on_event(const Event& event) override;

private:
    // Where a motion stops: at event `target` (-1: at the end of the plan), and whether
    // breakpoints on the way stop it first.
    struct Stop {
        int64_t target = -1;
        bool honor_breakpoints = false;
    };

    // Queue (any thread).
    std::optional<Command> pop_command();
    void refresh_has_commands();  // under queue_mutex_

    // Worker thread.
    void main_loop();
    void handle_guarded(Command& c);  // handle_idle, with exceptions turned into the command's error
    void handle_idle(Command& c);
    void handle_motion(Command& c);
    void pause_here();  // blocks inside on_event, answering commands until one moves on
    void drive();       // evaluates planned decode calls from decode_done_ until a stop
    void reset_run();
    void replay_to_cursor();
    bool set_tokens(Command& c);
    bool update_generation(const Command& c, bool in_eval, bool* compatible);
    std::optional<Error> rebuild_plan();  // the dry run for tokens_ and n_generate_
    std::optional<Stop> motion_stop(const Command& c);  // nullopt: error_ says why
    std::vector<int32_t> decode_input(int decode) const;
    int planned_calls() const { return tokens_.empty() ? 0 : 1 + n_generate_; }
    bool is_last_of_decode(int64_t index) const;
    void record_event(const Event& e);
    void complete(std::string message = {});
    void fail(Error error);
    void publish();

    // Shared with callers.
    mutable std::mutex queue_mutex_;
    std::condition_variable queue_cv_;
    std::deque<Command> queue_;
    bool held_ = false, quit_ = false;
    std::atomic<bool> has_commands_{false};
    CommandTicket next_ticket_ = 1;
    std::atomic<uint64_t> replaced_{0};

    mutable std::mutex bp_mutex_;
    std::vector<Breakpoint> breakpoints_;
    int next_breakpoint_id_ = 1;

    mutable std::mutex snap_mutex_;
    mutable std::condition_variable snap_cv_;
    std::shared_ptr<const SessionSnapshot> snap_;
    uint64_t version_ = 0;

    // Worker thread only.
    std::shared_ptr<const Model> model_;
    SessionOptions options_;
    std::unique_ptr<Backend> backend_;
    std::string backend_note_;
    std::string reference_build_;  // see SessionSnapshot::reference_build
    std::unique_ptr<ForwardPass> forward_;
    std::thread thread_;

    std::vector<int32_t> tokens_;
    std::vector<std::string> pieces_;
    int n_generate_ = 0;
    std::vector<int32_t> forced_;
    std::shared_ptr<const std::vector<EventInfo>> events_;

    bool run_valid_ = false;  // the forward pass and the records agree (no abandoned evaluation)
    bool in_eval_ = false;
    int calls_started_ = 0, decode_done_ = 0;
    std::vector<int32_t> generated_, decode_inputs_;
    int64_t cursor_ = -1;
    std::vector<std::shared_ptr<const EventRecord>> records_;
    CaptureStore store_;
    // Host copies come from here and go back when released (by the store, a new run or the last
    // snapshot holding them), so that later captures reuse their memory.
    std::shared_ptr<HostBufferPool> buffers_ = HostBufferPool::create();
    std::shared_ptr<const ReferenceDump> reference_;
    CompareThresholds thresholds_;
    std::unique_ptr<Comparator> comparator_;
    int64_t first_divergent_ = -1;
    std::map<int, EventInfo> last_roped_q_;             // by layer, this graph evaluation
    std::map<int, std::vector<EventInfo>> roped_k_;     // by layer, every evaluation of the run

    SessionState state_ = SessionState::kEmpty;
    Stop stop_;
    bool stop_at_boundary_ = false;  // stopped on a decode call's last event: pause after it returns
    bool cancel_requested_ = false;
    bool quitting_ = false;
    std::optional<Command> pending_;  // a command that needed the evaluation abandoned first
    std::optional<BreakpointHit> hit_;
    std::optional<Error> error_;
    std::string message_;
    CommandTicket current_ticket_ = 0, completed_ticket_ = 0;
    std::chrono::steady_clock::time_point last_publish_{};
};

}  // namespace ls
