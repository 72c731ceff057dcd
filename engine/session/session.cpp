// The session's public API, its command queue and snapshot publication.
#include "engine/session/session.h"

#include <fmt/format.h>

#include "engine/session/session_worker.h"

namespace ls {

const char* session_state_name(SessionState state) {
    switch (state) {
        case SessionState::kEmpty: return "empty";
        case SessionState::kReady: return "ready";
        case SessionState::kRunning: return "running";
        case SessionState::kPaused: return "paused";
        case SessionState::kFinished: return "finished";
        case SessionState::kCancelled: return "cancelled";
        case SessionState::kError: return "error";
    }
    return "?";
}

std::shared_ptr<const CapturedTensor> SessionSnapshot::capture(int64_t index) const {
    if (!captures) return nullptr;
    auto it = captures->find(index);
    return it == captures->end() ? nullptr : it->second;
}

const EventRecord* SessionSnapshot::latest(const std::string& base_name) const {
    for (int64_t i = std::min<int64_t>(cursor, static_cast<int64_t>(records.size()) - 1); i >= 0; --i)
        if (records[i] && records[i]->info.base_name == base_name) return records[i].get();
    return nullptr;
}

// ---- queue and snapshots (any thread)

SessionWorker::SessionWorker(std::shared_ptr<const Model> model, SessionOptions options, std::unique_ptr<Backend> backend)
    : model_(std::move(model)), options_(std::move(options)), backend_(std::move(backend)), store_(options_.capture) {}

SessionWorker::~SessionWorker() {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        quit_ = true;
        has_commands_ = true;  // a running evaluation looks at the queue on every event
    }
    queue_cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    forward_.reset();  // releases its buffers on the backend before the backend goes
}

Status SessionWorker::start() {
    auto forward = make_forward(*model_, *backend_, options_.forward);
    if (!forward) return forward.error();
    forward_ = std::move(forward.value());
    events_ = std::make_shared<const std::vector<EventInfo>>();
    publish();
    thread_ = std::thread([this] { main_loop(); });
    return {};
}

// Steps are relative moves: merging three presses of "step" into one would lose two of them.
static bool replaces_queued(CommandKind kind) {
    return kind != CommandKind::kStepOp && kind != CommandKind::kStepLayer && kind != CommandKind::kStepToken;
}

CommandTicket SessionWorker::enqueue(Command command) {
    CommandTicket ticket;
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        ticket = command.ticket = next_ticket_++;
        if (replaces_queued(command.kind)) {
            for (auto it = queue_.begin(); it != queue_.end();) {
                if (it->kind == command.kind) {
                    it = queue_.erase(it);
                    ++replaced_;
                } else {
                    ++it;
                }
            }
        }
        queue_.push_back(std::move(command));
        refresh_has_commands();
    }
    queue_cv_.notify_all();
    return ticket;
}

void SessionWorker::refresh_has_commands() { has_commands_ = quit_ || (!held_ && !queue_.empty()); }

void SessionWorker::hold(bool held) {
    {
        std::lock_guard<std::mutex> lock(queue_mutex_);
        held_ = held;
        refresh_has_commands();
    }
    queue_cv_.notify_all();
}

std::optional<Command> SessionWorker::pop_command() {
    std::unique_lock<std::mutex> lock(queue_mutex_);
    queue_cv_.wait(lock, [&] { return quit_ || (!held_ && !queue_.empty()); });
    if (quit_) return std::nullopt;
    Command c = std::move(queue_.front());
    queue_.pop_front();
    refresh_has_commands();
    return c;
}

int SessionWorker::add_breakpoint(BreakpointSpec spec) {
    int id;
    {
        std::lock_guard<std::mutex> lock(bp_mutex_);
        id = next_breakpoint_id_++;
        breakpoints_.push_back(Breakpoint{id, std::move(spec), true, 0});
    }
    // Republish the latest snapshot with the new list (the worker may be busy computing).
    std::lock_guard<std::mutex> lock(snap_mutex_);
    auto s = std::make_shared<SessionSnapshot>(*snap_);
    s->version = ++version_;
    {
        std::lock_guard<std::mutex> bp_lock(bp_mutex_);
        s->breakpoints = breakpoints_;
    }
    snap_ = std::move(s);
    snap_cv_.notify_all();
    return id;
}

bool SessionWorker::edit_breakpoint(int id, bool remove, bool enabled) {
    bool found = false;
    {
        std::lock_guard<std::mutex> lock(bp_mutex_);
        for (auto it = breakpoints_.begin(); it != breakpoints_.end(); ++it) {
            if (it->id != id) continue;
            found = true;
            if (remove) breakpoints_.erase(it);
            else it->enabled = enabled;
            break;
        }
    }
    if (!found) return false;
    std::lock_guard<std::mutex> lock(snap_mutex_);
    auto s = std::make_shared<SessionSnapshot>(*snap_);
    s->version = ++version_;
    {
        std::lock_guard<std::mutex> bp_lock(bp_mutex_);
        s->breakpoints = breakpoints_;
    }
    snap_ = std::move(s);
    snap_cv_.notify_all();
    return true;
}

void SessionWorker::publish() {
    auto s = std::make_shared<SessionSnapshot>();
    s->completed_ticket = completed_ticket_;
    s->commands_replaced = replaced_;
    s->state = state_;
    s->error = error_;
    s->message = message_;
    s->tokens = tokens_;
    s->pieces = pieces_;
    s->generated = generated_;
    s->decode_inputs = decode_inputs_;
    s->planned_decode_calls = planned_calls();
    s->decode_calls_done = decode_done_;
    s->position = forward_ ? forward_->position() : 0;
    s->cursor = cursor_;
    s->events = events_;
    s->records = records_;
    s->captures = store_.view();
    s->capture_bytes = store_.bytes();
    s->capture_budget = store_.policy().kind == CapturePolicy::Kind::kMemoryBudget ? store_.policy().budget_bytes : 0;
    s->captures_evicted = store_.evicted();
    s->hit = hit_;
    s->has_reference = reference_ != nullptr;
    s->thresholds = thresholds_;
    s->reference_build = reference_build_;
    s->first_divergent = first_divergent_;
    {
        // Breakpoints are read under the snapshot lock, so the newest snapshot always has the
        // newest list whichever thread published it.
        std::lock_guard<std::mutex> lock(snap_mutex_);
        s->version = ++version_;
        {
            std::lock_guard<std::mutex> bp_lock(bp_mutex_);
            s->breakpoints = breakpoints_;
        }
        snap_ = std::move(s);
    }
    snap_cv_.notify_all();
    last_publish_ = std::chrono::steady_clock::now();
}

std::shared_ptr<const SessionSnapshot> SessionWorker::snapshot() const {
    std::lock_guard<std::mutex> lock(snap_mutex_);
    return snap_;
}

std::shared_ptr<const SessionSnapshot> SessionWorker::wait_until(const std::function<bool(const SessionSnapshot&)>& done,
                                                                 std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(snap_mutex_);
    if (!snap_cv_.wait_for(lock, timeout, [&] { return snap_ && done(*snap_); })) return nullptr;
    return snap_;
}

// ---- Session

Session::Session(std::unique_ptr<SessionWorker> worker) : worker_(std::move(worker)) {}
Session::~Session() = default;

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model, SessionOptions options) {
    if (!model) return make_error(ErrorCode::kUsage, "Session::create: no model");
    auto chosen = open_backend_for(*model, options.backend, options.n_threads, options.forward);
    if (!chosen) return chosen.error();
    auto worker = std::make_unique<SessionWorker>(std::move(model), std::move(options), std::move(chosen.value().backend));
    worker->set_backend_note(chosen.value().note);
    if (Status s = worker->start(); !s) return s.error();
    return std::unique_ptr<Session>(new Session(std::move(worker)));
}

Result<std::unique_ptr<Session>> Session::open(const std::string& model_path, SessionOptions options) {
    auto model = Model::open(model_path);
    if (!model) return model.error();
    return create(std::shared_ptr<const Model>(std::move(model.value())), std::move(options));
}

const Model& Session::model() const { return worker_->model(); }
std::string Session::backend_description() const { return worker_->backend_description(); }

static Command command(CommandKind kind) {
    Command c;
    c.kind = kind;
    return c;
}

CommandTicket Session::set_tokens(std::vector<int32_t> ids) {
    Command c = command(CommandKind::kTokens);
    c.tokens = std::move(ids);
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::set_prompt(std::string text, bool add_special, bool parse_special) {
    Command c = command(CommandKind::kTokens);
    c.is_prompt = true;
    c.text = std::move(text);
    c.add_special = add_special, c.parse_special = parse_special;
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::step_op() { return worker_->enqueue(command(CommandKind::kStepOp)); }
CommandTicket Session::step_layer() { return worker_->enqueue(command(CommandKind::kStepLayer)); }
CommandTicket Session::step_token() { return worker_->enqueue(command(CommandKind::kStepToken)); }

CommandTicket Session::run_to_event(int64_t index) {
    Command c = command(CommandKind::kSeek);
    c.index = index;
    c.honor_breakpoints = true;
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::run_to_event(std::string dump_name) {
    Command c = command(CommandKind::kSeek);
    c.event_name = std::move(dump_name);
    c.honor_breakpoints = true;
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::go_to(int64_t index) {
    Command c = command(CommandKind::kSeek);
    c.index = index;
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::run_to_breakpoint() { return worker_->enqueue(command(CommandKind::kRun)); }
CommandTicket Session::pause() { return worker_->enqueue(command(CommandKind::kPause)); }
CommandTicket Session::restart() { return worker_->enqueue(command(CommandKind::kRestart)); }
CommandTicket Session::cancel() { return worker_->enqueue(command(CommandKind::kCancel)); }

CommandTicket Session::generate(int n, std::vector<int32_t> forced) {
    Command c = command(CommandKind::kGenerate);
    c.n_generate = n;
    c.forced = std::move(forced);
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::set_reference(std::shared_ptr<const ReferenceDump> reference, CompareThresholds thresholds) {
    Command c = command(CommandKind::kReference);
    c.reference = std::move(reference);
    c.thresholds = thresholds;
    return worker_->enqueue(std::move(c));
}

CommandTicket Session::set_capture_policy(CapturePolicy policy) {
    Command c = command(CommandKind::kCapturePolicy);
    c.policy = std::move(policy);
    return worker_->enqueue(std::move(c));
}

int Session::add_breakpoint(BreakpointSpec spec) { return worker_->add_breakpoint(std::move(spec)); }
bool Session::remove_breakpoint(int id) { return worker_->edit_breakpoint(id, true, false); }
bool Session::enable_breakpoint(int id, bool enabled) { return worker_->edit_breakpoint(id, false, enabled); }
void Session::hold_commands() { worker_->hold(true); }
void Session::release_commands() { worker_->hold(false); }

std::shared_ptr<const SessionSnapshot> Session::snapshot() const { return worker_->snapshot(); }

std::shared_ptr<const SessionSnapshot> Session::wait_for_version(uint64_t v, std::chrono::milliseconds timeout) const {
    return worker_->wait_until([v](const SessionSnapshot& s) { return s.version >= v; }, timeout);
}

std::shared_ptr<const SessionSnapshot> Session::wait_for_ticket(CommandTicket ticket, std::chrono::milliseconds timeout) const {
    return worker_->wait_until([ticket](const SessionSnapshot& s) { return s.completed_ticket >= ticket; }, timeout);
}

}  // namespace ls
