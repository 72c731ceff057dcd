// The session's worker thread: runs the forward pass, records every event (stats, comparison,
// captures, derived data), checks breakpoints and stops inside the evaluation when asked.
//
// Threading: one worker thread owns the forward pass. Stopping at an event means blocking inside
// EventSink::on_event, answering commands there; a command that moves forward returns from it, a
// command that needs another run (back, restart, new tokens, cancel) throws EvalCancelled, which
// unwinds the evaluation, and the command is then handled outside it. Stopping on the last event
// of a decode call lets the call finish first, so "step token" ends with the call complete.
#include <fmt/format.h>

#include <new>
#include <stdexcept>

#include "engine/compare/llama_variant.h"
#include "engine/forward/generate.h"
#include "engine/model/model_config.h"
#include "engine/session/session_worker.h"

namespace ls {

static bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

void SessionWorker::main_loop() {
    for (;;) {
        std::optional<Command> c;
        if (pending_) {
            c = std::move(pending_);
            pending_.reset();
        } else {
            c = pop_command();
        }
        if (!c || quitting_) return;
        current_ticket_ = c->ticket;
        error_.reset();
        message_.clear();
        handle_guarded(*c);
        if (quitting_) return;
    }
}

void SessionWorker::handle_guarded(Command& c) {
    // Out of memory (or a library's exception) in a command fails that command, never the program;
    // the run is abandoned since it may have stopped anywhere.
    std::string why;
    try {
        return handle_idle(c);
    } catch (const std::bad_alloc&) {
        why = "out of memory";
    } catch (const std::exception& e) {
        why = e.what();
    }
    in_eval_ = false;
    run_valid_ = false;
    state_ = SessionState::kError;
    fail(make_error(ErrorCode::kBadInput, fmt::format("{} while running the session's command; the run was abandoned", why)));
}

void SessionWorker::complete(std::string message) {
    if (!message.empty()) message_ = std::move(message);
    completed_ticket_ = current_ticket_;
    publish();
}

void SessionWorker::fail(Error error) {
    error_ = std::move(error);
    complete();
}

void SessionWorker::handle_idle(Command& c) {
    switch (c.kind) {
        case CommandKind::kTokens:
            if (set_tokens(c)) complete();
            return;
        case CommandKind::kPause:
            complete();
            return;
        case CommandKind::kCancel:
            complete("nothing to cancel");
            return;
        case CommandKind::kReference:
            comparator_.reset();  // it refers to the old reference, which may go away now
            reference_ = c.reference;
            thresholds_ = c.thresholds;
            // llama mode reproduces the build that made the reference.
            reference_build_.clear();
            forward_->set_llama_threads(reference_ ? reference_->n_threads() : 0);
            if (reference_) {
                const LlamaIsaGuess guess = guess_llama_isa(*reference_);
                forward_->set_llama_isa(guess.candidates.front());
                if (options_.forward.mode == MathMode::kLlama)
                    reference_build_ = fmt::format("{}: {}", llama_isa_name(guess.candidates.front()), guess.why);
            }
            replay_to_cursor();
            return;
        case CommandKind::kCapturePolicy:
            store_.set_policy(c.policy);
            replay_to_cursor();
            return;
        case CommandKind::kRestart:
            if (tokens_.empty()) return fail(make_error(ErrorCode::kUsage, "no tokens: set_tokens or set_prompt first"));
            reset_run();
            stop_ = Stop{0, false};
            state_ = SessionState::kRunning;
            return drive();
        default:
            return handle_motion(c);
    }
}

bool SessionWorker::set_tokens(Command& c) {
    std::vector<int32_t> ids = std::move(c.tokens);
    const Tokenizer* tokenizer = model_->tokenizer();
    if (c.is_prompt) {
        if (!tokenizer) {
            fail(make_error(ErrorCode::kUsage, model_->path() + " has no tokenizer; give token ids with set_tokens"));
            return false;
        }
        ids = tokenizer->encode(c.text, c.add_special, c.parse_special);
    }
    if (ids.empty()) {
        fail(make_error(ErrorCode::kUsage, "no tokens to evaluate"));
        return false;
    }
    std::vector<int32_t> old_tokens = std::move(tokens_);
    const int old_generate = n_generate_;
    tokens_ = std::move(ids);
    n_generate_ = 0;
    if (std::optional<Error> e = rebuild_plan()) {  // a token out of range, a prompt longer than the context
        tokens_ = std::move(old_tokens);
        n_generate_ = old_generate;
        fail(std::move(*e));
        return false;
    }
    forced_.clear();
    pieces_.clear();
    for (int32_t id : tokens_) pieces_.push_back(tokenizer && tokenizer->valid(id) ? tokenizer->token_to_piece(id) : "");
    reset_run();
    return true;
}

std::optional<Error> SessionWorker::rebuild_plan() {
    auto events = plan_events(*model_, options_.forward, tokens_, n_generate_);
    if (!events) return events.error();
    events_ = std::make_shared<const std::vector<EventInfo>>(std::move(events.value()));
    return std::nullopt;
}

bool SessionWorker::update_generation(const Command& c, bool in_eval, bool* compatible) {
    if (c.n_generate < 0) {
        fail(make_error(ErrorCode::kUsage, "generate: the number of tokens must be >= 0"));
        return false;
    }
    // The current run can go on when it has not gone past the new plan and fed the same inputs.
    bool ok = run_valid_ && calls_started_ <= 1 + c.n_generate && (in_eval || decode_done_ == calls_started_);
    for (size_t i = 0; ok && i < decode_inputs_.size(); ++i)
        ok = decode_inputs_[i] == (i < c.forced.size() ? c.forced[i] : generated_[i]);
    const int old_generate = n_generate_;
    std::vector<int32_t> old_forced = forced_;
    n_generate_ = c.n_generate;
    forced_ = c.forced;
    if (std::optional<Error> e = rebuild_plan()) {
        n_generate_ = old_generate;
        forced_ = std::move(old_forced);
        fail(std::move(*e));
        return false;
    }
    *compatible = ok;
    return true;
}

void SessionWorker::reset_run() {
    forward_->reset();
    records_.clear();
    store_.clear();
    comparator_ = reference_ ? std::make_unique<Comparator>(*reference_, thresholds_) : nullptr;
    first_divergent_ = -1;
    calls_started_ = decode_done_ = 0;
    generated_.clear();
    decode_inputs_.clear();
    cursor_ = -1;
    hit_.reset();
    last_roped_q_.clear();
    roped_k_.clear();
    run_valid_ = true;
    stop_at_boundary_ = false;
    state_ = tokens_.empty() ? SessionState::kEmpty : SessionState::kReady;
}

void SessionWorker::replay_to_cursor() {
    if (tokens_.empty() || cursor_ < 0) {
        if (!tokens_.empty()) reset_run();
        return complete();
    }
    const bool to_end = state_ == SessionState::kFinished;
    const int64_t target = cursor_;
    reset_run();
    stop_ = Stop{to_end ? -1 : target, false};
    state_ = SessionState::kRunning;
    drive();
}

std::optional<SessionWorker::Stop> SessionWorker::motion_stop(const Command& c) {
    const std::vector<EventInfo>& ev = *events_;
    const int64_t n = static_cast<int64_t>(ev.size());
    auto last_of_decode = [&](int decode) {
        int64_t last = -1;
        for (int64_t i = 0; i < n; ++i)
            if (ev[i].decode == decode) last = i;
        return last;
    };
    const int64_t cur = std::min(cursor_, n - 1);
    switch (c.kind) {
        case CommandKind::kStepOp:
            return Stop{cur + 1 < n ? cur + 1 : -1, false};
        case CommandKind::kStepLayer:
            if (cur < 0) return Stop{n > 0 ? 0 : -1, false};
            for (int64_t i = cur + 1; i < n; ++i)
                if (ev[i].layer != ev[cur].layer) return Stop{i, false};
            return Stop{-1, false};
        case CommandKind::kStepToken: {
            const int decode = cur < 0 ? 0 : ev[cur].decode;
            const int64_t last = last_of_decode(decode);
            if (cur < last) return Stop{last, false};
            return Stop{last_of_decode(decode + 1), false};
        }
        case CommandKind::kSeek: {
            int64_t index = c.index;
            if (!c.event_name.empty()) {
                index = -1;
                for (int64_t i = 0; i < n && index < 0; ++i)
                    if (ev[i].name == c.event_name) index = i;
                if (index < 0) {
                    fail(make_error(ErrorCode::kUsage, fmt::format("no event {} in this run ({} events)", c.event_name, n)));
                    return std::nullopt;
                }
            }
            if (index < 0 || index >= n) {
                fail(make_error(ErrorCode::kUsage, fmt::format("event {} is out of range: this run has {} events", index, n)));
                return std::nullopt;
            }
            return Stop{index, c.honor_breakpoints};
        }
        default:  // run, generate
            return Stop{-1, true};
    }
}

void SessionWorker::handle_motion(Command& c) {
    if (tokens_.empty()) return fail(make_error(ErrorCode::kUsage, "no tokens: set_tokens or set_prompt first"));
    if (c.kind == CommandKind::kGenerate) {
        bool compatible = false;
        if (!update_generation(c, false, &compatible)) return;
        if (!compatible) reset_run();
    }
    std::optional<Stop> stop = motion_stop(c);
    if (!stop) return;
    const bool behind = stop->target >= 0 && stop->target <= cursor_;
    if (!run_valid_ || behind) {
        if (run_valid_ && stop->target == cursor_) return complete();
        reset_run();  // back: a deterministic re-run from the start
    }
    if (decode_done_ >= planned_calls())
        return complete("at the end of the run; generate(n) evaluates more decode calls");
    stop_ = *stop;
    hit_.reset();
    state_ = SessionState::kRunning;
    publish();
    drive();
}

std::vector<int32_t> SessionWorker::decode_input(int decode) const {
    if (decode == 0) return tokens_;
    const size_t i = static_cast<size_t>(decode - 1);
    return {i < forced_.size() ? forced_[i] : generated_[i]};
}

void SessionWorker::drive() {
    try {
        while (decode_done_ < planned_calls()) {
            std::vector<int32_t> input = decode_input(decode_done_);
            if (decode_done_ > 0) decode_inputs_.push_back(input[0]);
            ++calls_started_;
            in_eval_ = true;
            stop_at_boundary_ = false;
            Status status = forward_->eval(input, this);
            in_eval_ = false;
            if (!status) {
                run_valid_ = false;
                state_ = SessionState::kError;
                return fail(status.error());
            }
            generated_.push_back(argmax(forward_->last_logits()));
            ++decode_done_;
            // End of generation, as llama-completion: the token is not evaluated (teacher-forced
            // inputs are fed whatever was generated).
            const Tokenizer* tokenizer = model_->tokenizer();
            if (decode_done_ < planned_calls() && static_cast<size_t>(decode_done_ - 1) >= forced_.size() && tokenizer &&
                tokenizer->is_eog(generated_.back())) {
                n_generate_ = decode_done_ - 1;
                auto kept = std::make_shared<std::vector<EventInfo>>();
                for (const EventInfo& e : *events_)
                    if (e.decode < decode_done_) kept->push_back(e);
                events_ = std::move(kept);
                message_ = "end of generation";
            }
            if (stop_at_boundary_) {
                stop_at_boundary_ = false;
                state_ = decode_done_ >= planned_calls() ? SessionState::kFinished : SessionState::kPaused;
                return complete();
            }
        }
    } catch (const EvalCancelled&) {
        in_eval_ = false;
        run_valid_ = false;
        if (cancel_requested_) {
            cancel_requested_ = false;
            state_ = SessionState::kCancelled;
            complete(fmt::format("cancelled at event {}", cursor_));
        }
        return;
    }
    state_ = SessionState::kFinished;
    complete();
}

bool SessionWorker::is_last_of_decode(int64_t index) const {
    const std::vector<EventInfo>& ev = *events_;
    if (index + 1 >= static_cast<int64_t>(ev.size())) return true;
    return ev[index + 1].decode != ev[index].decode;
}

void SessionWorker::on_event(const Event& event) {
    record_event(event);
    bool stop = stop_.target >= 0 && cursor_ >= stop_.target;
    if (stop_.honor_breakpoints && !stop) {
        const EventRecord& r = *records_.back();
        std::lock_guard<std::mutex> lock(bp_mutex_);
        for (Breakpoint& bp : breakpoints_) {
            if (!bp.enabled) continue;
            std::optional<std::string> why = breakpoint_reason(bp.spec, r.info, r.stats, r.compared ? &r.comparison : nullptr);
            if (!why) continue;
            ++bp.hit_count;
            hit_ = BreakpointHit{bp.id, r.info.index, r.info.name, *why};
            stop = true;
            break;
        }
    }
    // A new command interrupts the run here, inside the evaluation even on a decode call's last
    // event, so that a cancel always has an evaluation to abandon.
    const bool interrupted = !stop && has_commands_;
    if (!stop && !interrupted) {
        if (std::chrono::steady_clock::now() - last_publish_ >= options_.publish_interval) publish();
        return;
    }
    if (!interrupted && is_last_of_decode(cursor_)) {
        stop_at_boundary_ = true;  // drive() pauses once the decode call has finished
        return;
    }
    pause_here();
}

void SessionWorker::pause_here() {
    state_ = SessionState::kPaused;
    complete();
    for (;;) {
        std::optional<Command> c = pop_command();
        if (!c) {
            quitting_ = true;
            throw EvalCancelled{};
        }
        current_ticket_ = c->ticket;
        error_.reset();
        message_.clear();
        switch (c->kind) {
            case CommandKind::kPause:
                complete();
                continue;
            case CommandKind::kCancel:
                cancel_requested_ = true;
                throw EvalCancelled{};
            case CommandKind::kStepOp:
            case CommandKind::kStepLayer:
            case CommandKind::kStepToken:
            case CommandKind::kSeek:
            case CommandKind::kRun:
            case CommandKind::kGenerate: {
                if (c->kind == CommandKind::kGenerate) {
                    bool compatible = false;
                    if (!update_generation(*c, true, &compatible)) continue;
                    if (!compatible) {
                        pending_ = std::move(*c);
                        throw EvalCancelled{};
                    }
                }
                std::optional<Stop> stop = motion_stop(*c);
                if (!stop) continue;
                if (stop->target >= 0 && stop->target <= cursor_) {
                    if (stop->target == cursor_) {
                        complete();
                        continue;
                    }
                    pending_ = std::move(*c);  // back: re-run from the start outside this evaluation
                    throw EvalCancelled{};
                }
                stop_ = *stop;
                hit_.reset();
                state_ = SessionState::kRunning;
                publish();
                return;
            }
            default:  // tokens, restart, reference, capture policy: a fresh run
                pending_ = std::move(*c);
                throw EvalCancelled{};
        }
    }
}

void SessionWorker::record_event(const Event& e) {
    auto rec = std::make_shared<EventRecord>();
    rec->info = event_info(e);
    const EventInfo& info = rec->info;
    backend_->stats(e.tensor, &rec->stats);

    const bool softmax = starts_with(info.base_name, "kq_soft_max-");
    const bool roped_q = is_roped_q(info), roped_k = is_roped_k(info);
    const bool rope_part = is_roped_q_pe(info) || is_roped_k_pe(info);
    const bool logits = info.base_name == "result_output";
    const bool keep = store_.wants(info);
    std::shared_ptr<std::vector<float>> values;
    const int64_t n = e.tensor.n_elements();
    if (keep || comparator_ || softmax || roped_q || roped_k || rope_part || logits) {
        values = buffers_->take(static_cast<size_t>(n));
        backend_->download(values->data(), e.tensor.data, values->size() * sizeof(float));
    }
    if (comparator_) {
        HostTensor h;
        h.name = info.name;
        for (int d = 0; d < 4; ++d) h.ne[d] = info.ne[d];
        h.data = values->data();
        rec->comparison = comparator_->compare(info.index, h);
        rec->compared = true;
        if (rec->comparison.status == CompareStatus::kDiverged && first_divergent_ < 0) first_divergent_ = info.index;
    }
    if (roped_q || roped_k || rope_part) {
        if (roped_q) last_roped_q_[info.layer] = info;
        else if (roped_k) roped_k_[info.layer].push_back(info);
        rec->head_norms = head_norms(info, values->data());
        if (reference_) {
            const RefTensor* t = reference_->find(info.name);
            if (t && t->complete() && t->n_elements() == n) rec->ref_head_norms = head_norms(info, reference_->values(*t).data());
        }
    }
    if (softmax) {
        rec->attention = attention_from_softmax(info, values);
        if (reference_) {
            auto q = last_roped_q_.find(info.layer);
            if (q == last_roped_q_.end()) rec->ref_attention_note = "no roped Q before this softmax";
            else {
                const ModelConfig& c = model_->config();
                rec->ref_attention = reference_attention(*reference_, info, q->second, roped_k_[info.layer], roped_qk_scale(c),
                                                         &rec->ref_attention_note, c.layer_is_swa(info.layer) ? c.n_swa : 0,
                                                         static_cast<float>(c.attn_softcap));
            }
        }
    }
    if (logits) {
        std::vector<float> ref_row;
        if (reference_) ref_row = reference_last_logits(*reference_, info);
        rec->top_logits = top_logits(info, values->data(), options_.top_k, model_->tokenizer(),
                                     ref_row.empty() ? nullptr : ref_row.data(), static_cast<int64_t>(ref_row.size()));
    }
    if (keep) {
        auto captured = std::make_shared<CapturedTensor>();
        captured->info = info;
        captured->values = values;
        store_.put(std::move(captured));
    }
    cursor_ = info.index;
    // Event indices of a run are 0, 1, 2, ...: records_[i] is event i.
    if (static_cast<int64_t>(records_.size()) != cursor_) records_.resize(static_cast<size_t>(cursor_));
    records_.push_back(std::move(rec));
}

}  // namespace ls
