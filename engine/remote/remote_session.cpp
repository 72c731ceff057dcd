#include "engine/remote/remote_session.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "engine/remote/connection.h"
#include "engine/session/derived.h"

namespace ls::remote {
namespace {

using Clock = std::chrono::steady_clock;

// Connects and presents the token; then sends `type` (open or attach) and reads the answer up
// to the session's first snapshot.
struct Started {
    std::unique_ptr<Connection> connection;
    Opened opened;
    std::string model_header;  // the model file's bytes before its data (Opened::header_bytes)
    std::string first_snapshot;
};

// Bytes sent as file chunks up to a file end: exactly `bytes` of them.
Result<std::string> read_chunks(Connection& c, uint64_t bytes, std::chrono::milliseconds timeout, const char* what) {
    std::string out;
    for (;;) {
        auto part = c.receive(kMaxFrameBytes, timeout);
        if (!part) return part.error();
        if (part.value().type == MsgType::kFileEnd) break;
        if (part.value().type != MsgType::kFileChunk)
            return make_error(ErrorCode::kBadInput, fmt::format("{} cut by a {} message", what, msg_type_name(part.value().type)));
        auto chunk = decode_file_chunk(part.value().payload);
        if (!chunk) return chunk.error();
        auto data = decompress_chunk(chunk.value().compressed, kChunkBytes);
        if (!data) return data.error();
        if (data.value().size() > bytes - out.size())
            return make_error(ErrorCode::kBadInput, fmt::format("{} longer than the {} bytes announced", what, bytes));
        out += data.value();
    }
    if (out.size() != bytes)
        return make_error(ErrorCode::kBadInput, fmt::format("{} of {} bytes where {} were announced", what, out.size(), bytes));
    return out;
}

// `header`: the model's header follows kOpened (not when attaching with have_header).
Result<Started> connect_session(const std::string& address, const std::string& token, MsgType type,
                                const std::string& payload, const ClientOptions& options, bool header = true) {
    auto connected = connect_and_hello(address, token, options);
    if (!connected) return connected.error();
    Started st;
    st.connection = std::move(connected.value());
    Connection& c = *st.connection;
    if (Status s = c.send(type, payload); !s) return s.error();
    // Opening loads the model on the server (no pings meanwhile): its answer may take minutes.
    auto answer = c.receive(kMaxFrameBytes, std::chrono::minutes(30));
    if (!answer) return answer.error();
    if (answer.value().type == MsgType::kCommandDone) {
        auto done = decode_command_done(answer.value().payload);
        return make_error(ErrorCode::kBadInput, fmt::format("the server at {} could not {} the session: {}", address,
                                                            type == MsgType::kOpen ? "open" : "attach",
                                                            done ? done.value().error : done.error().message));
    }
    if (answer.value().type != MsgType::kOpened)
        return make_error(ErrorCode::kBadInput, fmt::format("{} answered with a {} message", address, msg_type_name(answer.value().type)));
    auto opened = decode_opened(answer.value().payload);
    if (!opened) return opened.error();
    st.opened = opened.value();
    if (header) {
        auto bytes = read_chunks(c, st.opened.header_bytes, options.silence_timeout, "the model's header");
        if (!bytes) return bytes.error();
        st.model_header = std::move(bytes.value());
    }
    auto snap = c.receive(kMaxFrameBytes, options.silence_timeout);
    if (!snap) return snap.error();
    if (snap.value().type != MsgType::kSnapshot)
        return make_error(ErrorCode::kBadInput, fmt::format("{} sent a {} message before the session's snapshot", address, msg_type_name(snap.value().type)));
    st.first_snapshot = std::move(snap.value().payload);
    return st;
}

bool same_values(const EventRecord& a, const EventRecord& b) {
    const TensorStats &x = a.stats, &y = b.stats;
    return a.info.name == b.info.name && x.count == y.count && x.nan_count == y.nan_count && x.inf_count == y.inf_count &&
           std::memcmp(&x.min, &y.min, sizeof x.min) == 0 && std::memcmp(&x.max, &y.max, sizeof x.max) == 0 &&
           std::memcmp(&x.mean, &y.mean, sizeof x.mean) == 0 && std::memcmp(&x.rms, &y.rms, sizeof x.rms) == 0;
}

}  // namespace

Result<std::unique_ptr<RemoteSession>> RemoteSession::open(const std::string& address, const std::string& token,
                                                           const Open& open, const ClientOptions& options) {
    return begin(address, token, MsgType::kOpen, encode(open), options);
}

Result<std::unique_ptr<RemoteSession>> RemoteSession::attach(const std::string& address, const std::string& token,
                                                             uint64_t id, const ClientOptions& options) {
    return begin(address, token, MsgType::kAttach, encode(Attach{id}), options);
}

Result<std::unique_ptr<RemoteSession>> RemoteSession::begin(const std::string& address, const std::string& token,
                                                            MsgType type, const std::string& payload,
                                                            const ClientOptions& options) {
    auto started = connect_session(address, token, type, payload, options);
    if (!started) return started.error();
    std::unique_ptr<RemoteSession> s(new RemoteSession());
    s->address_ = address;
    s->token_ = token;
    s->options_ = options;
    s->opened_ = started.value().opened;
    // The model as the panels read it here: its config, tokenizer and tensor table, no weights.
    const std::string& header = started.value().model_header;
    auto file = GgufFile::parse_header(std::vector<uint8_t>(header.begin(), header.end()), s->opened_.file_bytes,
                                       fmt::format("{}:{}", address, s->opened_.model_path));
    if (!file) return file.error();
    auto model = Model::from_file(std::move(file.value()));
    if (!model) return model.error();
    s->model_ = std::move(model.value());
    {
        std::lock_guard<std::mutex> lock(s->mu_);
        s->connection_ = std::move(started.value().connection);
        std::string no_bytes;
        if (Status st = s->handle(MsgType::kSnapshot, started.value().first_snapshot, no_bytes); !st) return st.error();
    }
    s->wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_ < 0) return make_error(ErrorCode::kInternal, "eventfd failed");
    RemoteSession* raw = s.get();
    s->io_ = std::thread([raw] { raw->io_loop(); });
    return s;
}

RemoteSession::~RemoteSession() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        quit_ = true;
    }
    changed_.notify_all();
    wake();
    if (io_.joinable()) io_.join();
    if (wake_ >= 0) ::close(wake_);
}

void RemoteSession::wake() {
    const uint64_t one = 1;
    if (wake_ >= 0) (void)!::write(wake_, &one, sizeof one);
}

void RemoteSession::publish(std::shared_ptr<SessionSnapshot> next) {
    next->version = ++local_version_;
    snapshot_ = std::move(next);
    changed_.notify_all();
}

void RemoteSession::lose(const std::string& why) {
    if (connection_) {
        sent_bytes_ += connection_->bytes_sent();
        received_bytes_ += connection_->bytes_received();
        connection_.reset();
    }
    lost_ = why;
    for (const auto& [request, ticketed] : awaiting_) answers_[request] = CommandDone{0, "the connection was lost: " + why, {}};
    awaiting_.clear();
    for (int64_t index : fetches_) fetch_errors_[index] = "the connection was lost: " + why;
    fetches_.clear();
    if (diagnosis_ && !diagnosis_->done) {  // the server stops it; asked again after a reconnect
        auto stopped = std::make_shared<Diagnosis>(*diagnosis_);
        stopped->done = true;
        stopped->verdict = "not worked out: the connection was lost";
        diagnosis_ = std::move(stopped);
    }
    for (const std::string& name : weight_fetches_) {
        auto lost = std::make_shared<WeightState>();
        lost->done = true;
        lost->error = "the connection was lost: " + why;
        weights_[name] = std::move(lost);
    }
    weight_fetches_.clear();
    if (lens_ && !lens_->done) {
        auto lost = std::make_shared<LensState>(*lens_);
        lost->done = true;
        lost->lens.error = "not worked out: the connection was lost";
        lens_ = std::move(lost);
    }
    outgoing_.clear();
    changed_.notify_all();
}

// With mu_ held; `bytes` holds a kTensor's or a kWeight's bytes, read before the lock was taken.
Status RemoteSession::handle(MsgType type, const std::string& payload, std::string& bytes) {
    switch (type) {
        case MsgType::kPing:
        case MsgType::kOpened: return {};
        case MsgType::kSnapshot: {
            auto next = apply_snapshot_delta(payload, snapshot_);
            if (!next) return next.error();
            // Fetched tensors stay while the server's record says the same values; one whose
            // record is not there for now (a replay under way) waits in the cache.
            std::shared_ptr<SessionSnapshot> s = next.value();
            auto captures = std::make_shared<CaptureMap>();
            for (auto it = fetched_.begin(); it != fetched_.end();) {
                const EventRecord* now = s->record(it->first);
                if (!now) {
                    ++it;
                    continue;
                }
                if (!same_values(*now, it->second.record)) {
                    it = fetched_.erase(it);
                    continue;
                }
                (*captures)[it->first] = it->second.tensor;
                if (it->second.attention) {
                    auto rec = std::make_shared<EventRecord>(*now);
                    rec->attention = it->second.attention;
                    s->records[static_cast<size_t>(it->first)] = std::move(rec);
                }
                ++it;
            }
            s->captures = std::move(captures);
            fetch_errors_.clear();
            publish(std::move(s));
            return {};
        }
        case MsgType::kCommandDone: {
            auto done = decode_command_done(payload);
            if (!done) return done.error();
            if (awaiting_.empty()) return make_error(ErrorCode::kBadInput, "an answer to no command");
            const auto [request, ticketed] = awaiting_.front();
            answers_[request] = done.value();
            awaiting_.pop_front();
            if (ticketed && done.value().error.empty()) highest_ticket_ = std::max(highest_ticket_, done.value().ticket);
            if (!done.value().error.empty()) refusal_ = done.value().error;
            // The panels' commands are answered too, and nobody waits for those answers.
            while (answers_.size() > 1024) answers_.erase(answers_.begin());
            changed_.notify_all();
            return {};
        }
        case MsgType::kTensor: {
            auto header = decode_tensor_header(payload);
            if (!header) return header.error();
            const TensorHeader& h = header.value();
            if (fetches_.empty() || fetches_.front() != h.index) return make_error(ErrorCode::kBadInput, "a tensor nobody asked for");
            fetches_.pop_front();
            if (!h.error.empty()) {
                fetch_errors_[h.index] = h.error;
                changed_.notify_all();
                return {};
            }
            if (bytes.size() != h.bytes) return make_error(ErrorCode::kBadInput, "a tensor shorter than announced");
            const SessionSnapshot& base = *snapshot_;
            // The session may have moved on between the fetch and its answer (a new plan, a replay
            // under way): the tensor is dropped and asked for again after the next snapshot.
            if (!base.record(h.index)) {
                fetch_errors_[h.index] = "the event was evaluated again meanwhile";
                changed_.notify_all();
                return {};
            }
            auto values = std::make_shared<std::vector<float>>(h.bytes / sizeof(float));
            std::memcpy(values->data(), bytes.data(), h.bytes);
            auto tensor = std::make_shared<CapturedTensor>();
            tensor->info = (*base.events)[static_cast<size_t>(h.index)];
            for (int k = 0; k < 4; ++k) tensor->info.ne[k] = h.ne[k];
            tensor->values = values;
            auto next = std::make_shared<SessionSnapshot>(base);
            auto captures = std::make_shared<CaptureMap>(base.captures ? *base.captures : CaptureMap{});
            (*captures)[h.index] = tensor;
            next->captures = std::move(captures);
            const EventRecord* rec = next->record(h.index);
            Fetched& f = fetched_[h.index];
            f.tensor = tensor;
            f.record = *rec;
            // An attention map from the fetched softmax, as the session computes it.
            f.attention = attention_from_softmax(tensor->info, values);
            if (f.attention) {
                auto copy = std::make_shared<EventRecord>(*rec);
                copy->attention = f.attention;
                next->records[static_cast<size_t>(h.index)] = std::move(copy);
            }
            fetch_errors_.erase(h.index);
            publish(std::move(next));
            return {};
        }
        case MsgType::kDiagnosis: {
            auto news = decode_diagnosis(payload);
            if (!news) return news.error();
            // An answer to a request since replaced is dropped; local errors come once, and stay.
            if (news.value().request != diagnose_request_ || !diagnosis_) return {};
            auto next = std::make_shared<Diagnosis>(std::move(news.value()));
            if (!next->has_local) {
                next->has_local = diagnosis_->has_local;
                next->local = diagnosis_->local;
            }
            diagnosis_ = std::move(next);
            changed_.notify_all();
            return {};
        }
        case MsgType::kWeight: {
            auto header = decode_weight_header(payload);
            if (!header) return header.error();
            const WeightHeader& h = header.value();
            if (weight_fetches_.empty() || weight_fetches_.front() != h.name)
                return make_error(ErrorCode::kBadInput, "a weight nobody asked for");
            weight_fetches_.pop_front();
            auto state = std::make_shared<WeightState>();
            state->done = true;
            state->error = h.error;
            if (h.error.empty()) {
                state->bytes = std::make_shared<const std::string>(std::move(bytes));
                // The newest weights stay, up to the cache's size (the one just come always).
                weight_order_.erase(std::remove(weight_order_.begin(), weight_order_.end(), h.name), weight_order_.end());
                weight_order_.push_back(h.name);
                uint64_t held = 0;
                for (const std::string& n : weight_order_) held += weights_.count(n) && weights_[n]->bytes ? weights_[n]->bytes->size() : 0;
                held += state->bytes->size();
                while (weight_order_.size() > 1 && held > kWeightCacheBytes) {
                    auto old = weights_.find(weight_order_.front());
                    if (old != weights_.end() && old->second->bytes) held -= old->second->bytes->size();
                    if (old != weights_.end()) weights_.erase(old);
                    weight_order_.pop_front();
                }
            }
            weights_[h.name] = std::move(state);
            changed_.notify_all();
            return {};
        }
        case MsgType::kLensResult: {
            auto answer = decode_lens_result(payload);
            if (!answer) return answer.error();
            if (!lens_ || answer.value().request != lens_->request) return {};  // asked again since
            auto next = std::make_shared<LensState>();
            next->request = answer.value().request;
            next->done = true;
            next->lens = std::move(answer.value().lens);
            lens_ = std::move(next);
            changed_.notify_all();
            return {};
        }
        default: return make_error(ErrorCode::kBadInput, fmt::format("an unexpected {} message", msg_type_name(type)));
    }
}

// The network is read and written without mu_ held: the UI takes it only to read the snapshot
// and queue commands, never waiting on a socket.
void RemoteSession::io_loop() {
    auto heard = Clock::now();
    for (;;) {
        std::unique_lock<std::mutex> lock(mu_);
        if (quit_) return;
        if (!connection_) {
            changed_.wait_for(lock, std::chrono::milliseconds(50));
            heard = Clock::now();
            continue;
        }
        std::deque<std::string> out;
        out.swap(outgoing_);
        Connection* c = connection_.get();
        lock.unlock();

        Status status;
        for (const std::string& f : out)
            if (status) status = c->send(static_cast<MsgType>(f[0]), std::string_view(f).substr(1));
        Result<Frame> frame = make_error(ErrorCode::kBadInput, "");
        std::string tensor;
        bool got = false;
        if (status) {
            const bool buffered = c->has_buffered();
            pollfd p[2] = {{c->native_handle(), POLLIN | POLLRDHUP, 0}, {wake_, POLLIN, 0}};
            if (::poll(p, 2, buffered ? 0 : 50) > 0 && p[1].revents) {
                uint64_t count;
                (void)!::read(wake_, &count, sizeof count);
            }
            if (buffered || p[0].revents) {
                frame = c->receive(kMaxFrameBytes, options_.silence_timeout);
                got = true;
                if (frame && frame.value().type == MsgType::kTensor) {
                    auto header = decode_tensor_header(frame.value().payload);
                    if (header && header.value().error.empty()) {
                        auto bytes = read_chunks(*c, header.value().bytes, options_.silence_timeout, "a tensor");
                        if (bytes) tensor = std::move(bytes.value());
                        else status = bytes.error();
                    }
                } else if (frame && frame.value().type == MsgType::kWeight) {
                    // Its size is the tensor table's (here since the session opened) before a byte is read.
                    auto header = decode_weight_header(frame.value().payload);
                    if (header && header.value().error.empty()) {
                        const GgufTensorInfo* t = model_->file().find_tensor(header.value().name);
                        if (!t || t->n_bytes != header.value().bytes) {
                            status = make_error(ErrorCode::kBadInput,
                                                fmt::format("the weight {} announced as {} bytes, where the model's tensor table says {}",
                                                            header.value().name, header.value().bytes, t ? t->n_bytes : 0));
                        } else {
                            auto bytes = read_chunks(*c, t->n_bytes, options_.silence_timeout, "a weight");
                            if (bytes) tensor = std::move(bytes.value());
                            else status = bytes.error();
                        }
                    }
                }
            }
        }

        lock.lock();
        if (quit_) return;
        if (!status) {
            lose(status.error().message);
        } else if (!got) {
            if (Clock::now() - heard > options_.silence_timeout)
                lose(fmt::format("no word from {} for {} s", address_,
                                 std::chrono::duration_cast<std::chrono::seconds>(options_.silence_timeout).count()));
        } else if (!frame) {
            lose(frame.error().message);
        } else {
            heard = Clock::now();
            if (Status s = handle(frame.value().type, frame.value().payload, tensor); !s) lose(s.error().message);
        }
    }
}

uint64_t RemoteSession::send(const Command& command) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t request = next_request_++;
    if (!connection_) {
        answers_[request] = CommandDone{0, "not connected: " + lost_, {}};
        return request;
    }
    outgoing_.push_back(static_cast<char>(MsgType::kCommand) + encode(command));  // type byte, then payload
    const bool ticketed = command.kind != CommandKind::kAddBreakpoint && command.kind != CommandKind::kRemoveBreakpoint &&
                          command.kind != CommandKind::kEnableBreakpoint && command.kind != CommandKind::kClose &&
                          command.kind != CommandKind::kExport;
    awaiting_.emplace_back(request, ticketed);
    changed_.notify_all();
    wake();
    return request;
}

CommandTicket RemoteSession::set_prompt(std::string text, bool, bool) {
    // The server tokenizes as the GUI's prompt does (special tokens added, special text kept text).
    Command c = simple(CommandKind::kSetPrompt);
    c.text = std::move(text);
    return send(c);
}
CommandTicket RemoteSession::generate(int n, std::vector<int32_t> forced) {
    Command c = simple(CommandKind::kGenerate, n);
    c.ids = std::move(forced);
    return send(c);
}
int RemoteSession::add_breakpoint(BreakpointSpec spec) {
    Command c = simple(CommandKind::kAddBreakpoint);
    c.breakpoint = std::move(spec);
    send(c);
    return 0;
}
bool RemoteSession::remove_breakpoint(int id) {
    send(simple(CommandKind::kRemoveBreakpoint, id));
    return connected();
}
bool RemoteSession::enable_breakpoint(int id, bool enabled) {
    Command c = simple(CommandKind::kEnableBreakpoint, id);
    c.arg2 = enabled;
    send(c);
    return connected();
}
std::string RemoteSession::backend_description() const {
    const std::string lost = lost_reason();
    return fmt::format("{} on {}{}", opened_.backend, address_, lost.empty() ? "" : " (connection lost: " + lost + ")");
}

Result<CommandDone> RemoteSession::wait_command(uint64_t request, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!changed_.wait_for(lock, timeout, [&] { return answers_.count(request) > 0; }))
        return make_error(ErrorCode::kBadInput, fmt::format("no answer from {} within {} ms", address_, timeout.count()));
    CommandDone done = answers_[request];
    answers_.erase(request);
    if (!done.error.empty()) return make_error(ErrorCode::kBadInput, done.error);
    return done;
}

std::optional<CommandDone> RemoteSession::take_answer(uint64_t request) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = answers_.find(request);
    if (it == answers_.end()) return std::nullopt;
    CommandDone done = std::move(it->second);
    answers_.erase(it);
    return done;
}

std::shared_ptr<const SessionSnapshot> RemoteSession::wait_for_ticket(uint64_t ticket, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!changed_.wait_for(lock, timeout, [&] { return snapshot_->completed_ticket >= ticket || !lost_.empty(); })) return nullptr;
    return snapshot_->completed_ticket >= ticket ? snapshot_ : nullptr;
}

Result<std::shared_ptr<const SessionSnapshot>> RemoteSession::run(const Command& command, std::chrono::milliseconds timeout) {
    auto done = wait_command(send(command), timeout);
    if (!done) return done.error();
    auto snap = wait_for_ticket(done.value().ticket, timeout);
    if (!snap) return make_error(ErrorCode::kBadInput, lost_reason().empty() ? "the command did not complete in time" : lost_reason());
    return snap;
}

std::shared_ptr<const SessionSnapshot> RemoteSession::snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return snapshot_;
}

void RemoteSession::fetch(int64_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    // Already here, on its way, or refused since the last snapshot (asked again once it changes).
    if (!connection_ || (snapshot_->captures && snapshot_->captures->count(index)) || fetch_errors_.count(index)) return;
    for (int64_t f : fetches_)
        if (f == index) return;
    outgoing_.push_back(static_cast<char>(MsgType::kFetch) + encode(Fetch{index}));
    fetches_.push_back(index);
    changed_.notify_all();
    wake();
}

Result<std::shared_ptr<const CapturedTensor>> RemoteSession::fetch_wait(int64_t index, std::chrono::milliseconds timeout) {
    fetch(index);
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return (snapshot_->captures && snapshot_->captures->count(index)) || fetch_errors_.count(index) || !connection_; };
    if (!changed_.wait_for(lock, timeout, ready)) return make_error(ErrorCode::kBadInput, fmt::format("event {} did not arrive in time", index));
    if (snapshot_->captures && snapshot_->captures->count(index)) return snapshot_->captures->at(index);
    if (fetch_errors_.count(index)) return make_error(ErrorCode::kBadInput, fetch_errors_[index]);
    return make_error(ErrorCode::kBadInput, "not connected: " + lost_);
}

void RemoteSession::fetch_weight(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connection_) return;
    if (auto it = weights_.find(name); it != weights_.end() && (!it->second->done || it->second->error.empty())) return;
    auto pending = std::make_shared<WeightState>();
    weights_[name] = pending;
    outgoing_.push_back(static_cast<char>(MsgType::kFetchWeight) + encode(FetchWeight{name}));
    weight_fetches_.push_back(name);
    changed_.notify_all();
    wake();
}

std::shared_ptr<const RemoteSession::WeightState> RemoteSession::weight(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = weights_.find(name);
    return it == weights_.end() ? nullptr : it->second;
}

Result<std::shared_ptr<const std::string>> RemoteSession::fetch_weight_wait(const std::string& name,
                                                                            std::chrono::milliseconds timeout) {
    fetch_weight(name);
    std::unique_lock<std::mutex> lock(mu_);
    auto ready = [&] { return !connection_ || (weights_.count(name) && weights_[name]->done); };
    if (!changed_.wait_for(lock, timeout, ready)) return make_error(ErrorCode::kBadInput, fmt::format("{} did not arrive in time", name));
    auto it = weights_.find(name);
    if (it == weights_.end() || !it->second->done) return make_error(ErrorCode::kBadInput, "not connected: " + lost_);
    if (!it->second->error.empty()) return make_error(ErrorCode::kBadInput, it->second->error);
    return it->second->bytes;
}

std::string RemoteSession::fetch_error(int64_t index) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fetch_errors_.find(index);
    return it == fetch_errors_.end() ? std::string() : it->second;
}

std::string RemoteSession::take_refusal() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(refusal_, std::string());
}

bool RemoteSession::busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connection_ && (!awaiting_.empty() || !fetches_.empty() || !weight_fetches_.empty() ||
                           snapshot_->completed_ticket < highest_ticket_);
}

bool RemoteSession::connected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connection_ != nullptr;
}

std::string RemoteSession::lost_reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return connection_ ? std::string() : lost_;
}

Status RemoteSession::reconnect() {
    // The model's header is here already: it does not travel again.
    auto started = connect_session(address_, token_, MsgType::kAttach, encode(Attach{opened_.session, true}), options_, false);
    if (!started) return started.error();
    // A server restarted since may have given the session's number to another model's session.
    const Opened& now = started.value().opened;
    if (now.model_path != opened_.model_path || now.file_bytes != opened_.file_bytes || now.header_bytes != opened_.header_bytes)
        return make_error(ErrorCode::kBadInput,
                          fmt::format("session {} on {} now runs {} ({} bytes), not the model this session holds ({}, {} bytes): "
                                      "open it anew",
                                      opened_.session, address_, now.model_path, now.file_bytes, opened_.model_path,
                                      opened_.file_bytes));
    std::lock_guard<std::mutex> lock(mu_);
    if (connection_) return {};
    connection_ = std::move(started.value().connection);
    lost_.clear();
    std::string no_bytes;
    if (Status s = handle(MsgType::kSnapshot, started.value().first_snapshot, no_bytes); !s) {
        lose(s.error().message);
        return s;
    }
    changed_.notify_all();
    return {};
}

Status RemoteSession::close(std::chrono::milliseconds timeout) {
    Command c;
    c.kind = CommandKind::kClose;
    auto done = wait_command(send(c), timeout);
    if (!done) return done.error();
    return {};
}

void RemoteSession::diagnose(int64_t event) {
    std::lock_guard<std::mutex> lock(mu_);
    auto asked = std::make_shared<Diagnosis>();
    asked->request = ++diagnose_request_;
    asked->event = event;
    if (!connection_) {
        asked->done = true;
        asked->verdict = "not connected: " + lost_;
    } else {
        asked->step = "asked of the server";
        outgoing_.push_back(static_cast<char>(MsgType::kDiagnose) + encode(Diagnose{asked->request, event, false}));
        wake();
    }
    diagnosis_ = std::move(asked);
}

void RemoteSession::stop_diagnosis() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!connection_ || !diagnosis_ || diagnosis_->done) return;
    outgoing_.push_back(static_cast<char>(MsgType::kDiagnose) + encode(Diagnose{0, -1, true}));
    wake();
    auto stopped = std::make_shared<Diagnosis>(*diagnosis_);
    stopped->done = true;
    stopped->verdict = fmt::format("cancelled after {} transforms", stopped->tried);
    diagnosis_ = std::move(stopped);
    ++diagnose_request_;  // what the stopped one still sends is dropped
}

void RemoteSession::ask_lens() {
    std::lock_guard<std::mutex> lock(mu_);
    auto asked = std::make_shared<LensState>();
    asked->request = lens_ ? lens_->request + 1 : 1;
    if (!connection_) {
        asked->done = true;
        asked->lens.error = "not connected: " + lost_;
    } else {
        outgoing_.push_back(static_cast<char>(MsgType::kLens) + encode(Lens{asked->request}));
        wake();
    }
    lens_ = std::move(asked);
}

std::shared_ptr<const RemoteSession::LensState> RemoteSession::lens() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lens_;
}

std::shared_ptr<const Diagnosis> RemoteSession::diagnosis() const {
    std::lock_guard<std::mutex> lock(mu_);
    return diagnosis_;
}

Result<std::string> RemoteSession::upload(const std::string& local_path,
                                          const std::function<void(uint64_t sent, uint64_t total)>& progress) {
    const std::string name = upload_name(local_path);
    auto connected = connect_and_hello(address_, token_, options_);
    if (!connected) return connected.error();
    if (Status s = upload_path(*connected.value(), opened_.session, local_path, name, progress, options_.silence_timeout); !s)
        return s.error();
    return std::string(kUploadedPrefix) + name;
}

Result<std::string> RemoteSession::export_on_server(const std::vector<std::string>& names, ExportFormat format,
                                                    const std::string& path, bool overwrite, std::chrono::milliseconds timeout) {
    Command c = simple(CommandKind::kExport, format == ExportFormat::kNpyFolder ? 1 : 0);
    c.text = path;
    c.arg2 = overwrite;
    c.names = names;
    auto done = wait_command(send(c), timeout);
    if (!done) return done.error();
    return done.value().note;
}

uint64_t RemoteSession::bytes_received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_bytes_ + (connection_ ? connection_->bytes_received() : 0);
}
uint64_t RemoteSession::bytes_sent() const {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_bytes_ + (connection_ ? connection_->bytes_sent() : 0);
}

Result<ExportSummary> export_remote(RemoteSession& session, const std::vector<std::string>& globs,
                                    const ExportOptions& options, size_t* skipped, std::chrono::milliseconds timeout) {
    auto snap = session.snapshot();
    std::vector<int64_t> events;
    for (int64_t i = 0; i < static_cast<int64_t>(snap->records.size()); ++i) {
        const EventRecord* rec = snap->record(i);
        if (rec && export_selected(globs, rec->info.base_name, rec->info.name)) events.push_back(i);
    }
    return export_remote_events(session, events, options, skipped, timeout);
}

Result<ExportSummary> export_remote_events(RemoteSession& session, const std::vector<int64_t>& events,
                                           const ExportOptions& options, size_t* skipped, std::chrono::milliseconds timeout) {
    std::vector<std::shared_ptr<const CapturedTensor>> tensors;
    size_t missing = 0;
    for (int64_t i : events) {
        auto tensor = session.fetch_wait(i, timeout);
        if (!tensor) {
            if (!session.connected()) return tensor.error();
            ++missing;
            continue;
        }
        tensors.push_back(tensor.value());
    }
    if (skipped) *skipped = missing;
    ExportSet set = export_set_from_captures(tensors, {});
    if (set.tensors.empty()) return make_error(ErrorCode::kUsage, "none of the events selected has values on the server");
    auto snap = session.snapshot();
    set.info.prompt_tokens = snap->tokens;
    set.info.prompt_token_pieces = snap->pieces;
    set.info.generated_tokens = snap->generated;
    return export_tensors(set, options);
}

}  // namespace ls::remote
