// A live session on a server, as the client holds it: commands go out without waiting, the
// server's snapshot deltas come in on a thread of this object's own and become a local
// SessionSnapshot that panels draw as they draw a local one. Full tensors are fetched on demand
// and cached (an attention map is rebuilt from a fetched kq_soft_max). When the connection is
// lost, everything already here stays browsable, the loss is reported, and reconnect() takes up
// the same session on the server.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "engine/capture/export.h"
#include "engine/forward/model.h"
#include "engine/remote/client.h"
#include "engine/remote/session_wire.h"
#include "engine/session/session_control.h"

namespace ls::remote {

class Connection;

class RemoteSession : public SessionControl {
public:
    // Connects, presents the token and opens `open` on the server (or attaches to session `id`);
    // returns once the server has answered, with the first snapshot in hand.
    static Result<std::unique_ptr<RemoteSession>> open(const std::string& address, const std::string& token,
                                                       const Open& open, const ClientOptions& options = {});
    static Result<std::unique_ptr<RemoteSession>> attach(const std::string& address, const std::string& token,
                                                         uint64_t id, const ClientOptions& options = {});
    ~RemoteSession() override;  // leaves the session open on the server (close() ends it)
    RemoteSession(const RemoteSession&) = delete;
    RemoteSession& operator=(const RemoteSession&) = delete;

    // Queues a command; returns its request number (never waits on the network).
    uint64_t send(const Command& command);

    // The panels' commands, each queued as send() queues it; the ticket is the request number.
    CommandTicket set_prompt(std::string text, bool add_special = true, bool parse_special = false) override;
    CommandTicket step_op() override { return send(simple(CommandKind::kStepOp)); }
    CommandTicket step_layer() override { return send(simple(CommandKind::kStepLayer)); }
    CommandTicket step_token() override { return send(simple(CommandKind::kStepToken)); }
    CommandTicket run_to_event(int64_t index) override { return send(simple(CommandKind::kRunToEvent, index)); }
    CommandTicket continue_run() override { return send(simple(CommandKind::kContinue)); }
    CommandTicket pause() override { return send(simple(CommandKind::kPause)); }
    CommandTicket restart() override { return send(simple(CommandKind::kRestart)); }
    CommandTicket go_to(int64_t index) override { return send(simple(CommandKind::kGoTo, index)); }
    CommandTicket generate(int n, std::vector<int32_t> forced = {}) override;
    int add_breakpoint(BreakpointSpec spec) override;  // 0: the id comes with the snapshot
    bool remove_breakpoint(int id) override;
    bool enable_breakpoint(int id, bool enabled) override;
    std::string backend_description() const override;
    // The server's answer to request `request`: its ticket or breakpoint id, or the error; an
    // error too when the connection is lost first or after `timeout`.
    Result<CommandDone> wait_command(uint64_t request, std::chrono::milliseconds timeout);
    // The server's answer to request `request` if it has come (taken: asked again, nothing), else
    // nothing; never waits. A lost connection answers every request with its error.
    std::optional<CommandDone> take_answer(uint64_t request);
    // The first snapshot whose completed_ticket reaches `ticket`, or null after `timeout`.
    std::shared_ptr<const SessionSnapshot> wait_for_ticket(uint64_t ticket, std::chrono::milliseconds timeout);
    // Sends and waits for both: the answer, then the snapshot that completes it (queued commands).
    Result<std::shared_ptr<const SessionSnapshot>> run(const Command& command, std::chrono::milliseconds timeout);

    // The latest snapshot (never null); its version grows with every change seen here.
    std::shared_ptr<const SessionSnapshot> snapshot() const override;
    // Asks for event `index`'s full tensor; it arrives in snapshot()->captures. Asking again for
    // one already here or on its way costs nothing.
    void fetch(int64_t index);
    // Fetches and waits: the tensor, or why the server has none.
    Result<std::shared_ptr<const CapturedTensor>> fetch_wait(int64_t index, std::chrono::milliseconds timeout);
    // Why event `index`'s last fetch failed ("" when it did not).
    std::string fetch_error(int64_t index) const;

    bool connected() const;
    // The last command the server refused ("" when none since the last call): the panels' commands
    // are not waited for, so their refusals are collected here for the status bar.
    std::string take_refusal();
    // Commands or fetches under way: asked and not answered, or answered and not yet done.
    bool busy() const;
    // "" while connected; else why the connection was lost.
    std::string lost_reason() const;
    // Connects again and attaches to the same session; the snapshot then catches up.
    Status reconnect();
    // Ends the session on the server.
    Status close(std::chrono::milliseconds timeout = std::chrono::seconds(10));

    // The doctor and the local errors, worked out on the server (it holds the model and the
    // reference): asks for them on the server's snapshot as it stands, for the first divergence
    // `event` (-1: none; the local errors alone). The answer replaces any earlier one.
    void diagnose(int64_t event);
    void stop_diagnosis();  // the doctor stops at its next step and says what it tried
    // The newest diagnosis asked for: its progress, verdict and local errors (null before any).
    std::shared_ptr<const Diagnosis> diagnosis() const;

    // The logit lens of the server's snapshot as it stands, worked out there (it holds the output
    // head's weights and the reference). The answer replaces any earlier one.
    struct LensState {
        uint64_t request = 0;
        bool done = false;  // false: the server is working on it
        SnapshotLens lens;  // when done: the lens, or lens.error
    };
    void ask_lens();
    // The newest lens asked for (null before any).
    std::shared_ptr<const LensState> lens() const;

    // A weight of the session's model as the file stores it (the client holds the tensor table
    // alone): asked for once, then kept here (the newest, up to kWeightCacheBytes of them).
    struct WeightState {
        bool done = false;   // false: on its way
        std::string error;   // when done: why the server sent none, or the connection was lost
        std::shared_ptr<const std::string> bytes;  // when done without an error: the tensor's bytes
    };
    static constexpr uint64_t kWeightCacheBytes = 1ull << 30;
    // Asks for `name` unless it is here or on its way (one that failed is asked again).
    void fetch_weight(const std::string& name);
    // Its state (null: never asked).
    std::shared_ptr<const WeightState> weight(const std::string& name) const;
    // Fetches and waits: the bytes, or why there are none.
    Result<std::shared_ptr<const std::string>> fetch_weight_wait(const std::string& name, std::chrono::milliseconds timeout);

    // Sends a file or a folder of files (a reference: a GGUF dump, or .npy files with manifest.json)
    // from this machine to the server, over a connection of its own, for this session only: the
    // server keeps it until the session closes. Returns the name to set it as a reference with
    // (kSetReference's text, "upload:NAME"). `progress` (bytes sent, total) may be empty.
    Result<std::string> upload(const std::string& local_path,
                               const std::function<void(uint64_t sent, uint64_t total)>& progress = {});

    // Writes the events named (dump names; none: every one with values) from the server's session
    // to `path` on the server's disk (inside its folders), waiting for it: what was written.
    Result<std::string> export_on_server(const std::vector<std::string>& names, ExportFormat format,
                                         const std::string& path, bool overwrite,
                                         std::chrono::milliseconds timeout = std::chrono::minutes(10));

    // The session's model as the server sent its header: config, tokenizer, chat template and
    // tensor table, without weights (has_weights() is false). Never null.
    const std::shared_ptr<const Model>& model() const { return model_; }
    uint64_t session_id() const { return opened_.session; }
    const Opened& opened() const { return opened_; }
    const std::string& address() const { return address_; }
    uint64_t bytes_received() const;
    uint64_t bytes_sent() const;

private:
    RemoteSession() = default;
    static Command simple(CommandKind kind, int64_t arg = 0) {
        Command c;
        c.kind = kind;
        c.arg = arg;
        return c;
    }
    static Result<std::unique_ptr<RemoteSession>> begin(const std::string& address, const std::string& token, MsgType type,
                                                        const std::string& payload, const ClientOptions& options);
    void io_loop();
    Status handle(MsgType type, const std::string& payload, std::string& bytes);
    void publish(std::shared_ptr<SessionSnapshot> next);  // with mu_ held
    void lose(const std::string& why);                    // with mu_ held
    void wake();

    std::string address_, token_;
    ClientOptions options_;
    Opened opened_;
    std::shared_ptr<const Model> model_;  // set before the io thread starts, then constant

    mutable std::mutex mu_;
    std::condition_variable changed_;
    std::unique_ptr<Connection> connection_;  // used by the io thread only, replaced under mu_
    std::shared_ptr<const SessionSnapshot> snapshot_ = std::make_shared<SessionSnapshot>();
    uint64_t local_version_ = 0;
    std::deque<std::string> outgoing_;               // frames to send: the type's byte, then the payload
    std::deque<std::pair<uint64_t, bool>> awaiting_; // requests sent or queued, in order; true: answered by a ticket
    uint64_t highest_ticket_ = 0;                    // of the answers so far
    std::string refusal_;                            // see take_refusal()
    std::map<uint64_t, CommandDone> answers_;
    uint64_t next_request_ = 1;
    std::deque<int64_t> fetches_;                    // asked, in order
    struct Fetched {
        std::shared_ptr<const CapturedTensor> tensor;
        EventRecord record;  // as it was when fetched: the tensor stays while the record says the same
        std::shared_ptr<const AttentionProbs> attention;
    };
    std::map<int64_t, Fetched> fetched_;
    std::map<int64_t, std::string> fetch_errors_;
    std::string lost_;
    uint64_t diagnose_request_ = 0;
    std::shared_ptr<const Diagnosis> diagnosis_;     // the answer to diagnose_request_, as it comes
    std::shared_ptr<const LensState> lens_;          // the newest asked for, then its answer
    std::deque<std::string> weight_fetches_;         // weights asked, in order
    std::map<std::string, std::shared_ptr<const WeightState>> weights_;
    std::deque<std::string> weight_order_;           // the weights here, oldest first
    uint64_t sent_bytes_ = 0, received_bytes_ = 0;   // of connections before the current one
    bool quit_ = false;
    int wake_ = -1;  // an eventfd: a queued command or fetch wakes the io thread from its poll
    std::thread io_;
};

// Exports the events of the session's snapshot whose names match `globs` (split_export_globs)
// to this machine's disk, fetching each full tensor; events the server holds no values of are
// counted in `skipped`.
Result<ExportSummary> export_remote(RemoteSession& session, const std::vector<std::string>& globs,
                                    const ExportOptions& options, size_t* skipped = nullptr,
                                    std::chrono::milliseconds timeout = std::chrono::seconds(120));
// The same for events `events` (indices into the snapshot).
Result<ExportSummary> export_remote_events(RemoteSession& session, const std::vector<int64_t>& events,
                                           const ExportOptions& options, size_t* skipped = nullptr,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(120));

}  // namespace ls::remote
