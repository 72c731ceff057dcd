// Session tests: the dry run against the real run, stepping, breakpoints, determinism of "back",
// cancel, replacement of queued commands and the capture memory budget, on stories260K and its
// llama.cpp dumps. Waits are bounded waits on snapshots, never sleeps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/capture/host_buffers.h"
#include "engine/compare/reference.h"
#include "engine/session/session.h"
#include "tests/test_support.h"

namespace ls {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds kWait = 60s;
const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};

std::shared_ptr<const Model> stories() {
    static std::shared_ptr<const Model> model = [] {
        auto m = Model::open(test::fixture_path("models/stories260K.gguf"));
        return m ? std::shared_ptr<const Model>(std::move(m.value())) : nullptr;
    }();
    return model;
}

std::shared_ptr<const ReferenceDump> dump(const char* name) {
    auto r = ReferenceDump::open(test::fixture_path(std::string("dumps/") + name));
    return r ? std::shared_ptr<const ReferenceDump>(std::move(r.value())) : nullptr;
}

std::unique_ptr<Session> make_session(SessionOptions options = {}) {
    auto model = stories();
    if (!model) return nullptr;
    auto s = Session::create(model, std::move(options));
    return s ? std::move(s.value()) : nullptr;
}

// Waits for a command; fails the test (and returns null) on timeout or on a command error.
std::shared_ptr<const SessionSnapshot> done(Session& s, CommandTicket t) {
    auto snap = s.wait_for_ticket(t, kWait);
    EXPECT_TRUE(snap) << "command " << t << " not done in time";
    if (snap && snap->error) ADD_FAILURE() << "command error: " << snap->error->message;
    return snap;
}

int64_t find_event(const SessionSnapshot& s, const std::string& name) {
    for (const EventInfo& e : *s.events)
        if (e.name == name) return e.index;
    return -1;
}

double max_abs(const TensorStats& st) {
    return std::max(std::fabs(static_cast<double>(st.min)), std::fabs(static_cast<double>(st.max)));
}

class Recorder : public EventSink {
public:
    void on_event(const Event& e) override { events.push_back(event_info(e)); }
    std::vector<EventInfo> events;
};

#define SESSION_OR_SKIP(var, ...)              \
    LS_REQUIRE_FIXTURES();                     \
    auto var = make_session(__VA_ARGS__);      \
    ASSERT_TRUE(var) << "stories260K did not open"

TEST(SessionPlan, DryRunListsTheEventsTheRealRunEmits) {
    LS_REQUIRE_FIXTURES();
    auto model = stories();
    ASSERT_TRUE(model);
    ForwardOptions fo;
    auto planned = plan_events(*model, fo, kPrompt, 2);
    ASSERT_TRUE(planned.ok()) << planned.error().message;

    auto backend = make_cpu_backend(1);
    auto forward = make_forward(*model, *backend, fo);
    ASSERT_TRUE(forward.ok());
    Recorder real;
    ASSERT_TRUE(forward.value()->eval(kPrompt, &real).ok());
    ASSERT_TRUE(forward.value()->eval({42}, &real).ok());
    ASSERT_TRUE(forward.value()->eval({7}, &real).ok());

    ASSERT_EQ(planned.value().size(), real.events.size());
    for (size_t i = 0; i < real.events.size(); ++i) {
        const EventInfo &p = planned.value()[i], &r = real.events[i];
        EXPECT_EQ(p.index, r.index);
        EXPECT_EQ(p.name, r.name) << "event " << i;
        EXPECT_EQ(p.op, r.op) << p.name;
        EXPECT_EQ(p.layer, r.layer) << p.name;
        EXPECT_EQ(p.decode, r.decode) << p.name;
        for (int d = 0; d < 4; ++d) EXPECT_EQ(p.ne[d], r.ne[d]) << p.name << " dim " << d;
    }
    EXPECT_EQ(real.events.back().name, "result_output@2");
}

TEST(SessionStepping, StepOpAdvancesExactlyOneEvent) {
    SESSION_OR_SKIP(s);
    auto snap = done(*s, s->set_tokens(kPrompt));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kReady);
    EXPECT_EQ(snap->cursor, -1);
    ASSERT_GT(snap->events->size(), 40u);
    for (int64_t i = 0; i < 40; ++i) {
        snap = done(*s, s->step_op());
        ASSERT_TRUE(snap);
        EXPECT_EQ(snap->cursor, i);
        EXPECT_EQ(snap->state, SessionState::kPaused);
        ASSERT_EQ(static_cast<int64_t>(snap->records.size()), i + 1);
        ASSERT_TRUE(snap->current());
        EXPECT_EQ(snap->current()->info.name, (*snap->events)[i].name);
        EXPECT_EQ(snap->current()->stats.count, snap->current()->info.ne[0] * snap->current()->info.ne[1] *
                                                     snap->current()->info.ne[2] * snap->current()->info.ne[3]);
    }
}

TEST(SessionStepping, StepLayerLandsOnTheNextLayersFirstEvent) {
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(kPrompt));
    auto snap = done(*s, s->step_op());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->current()->info.name, "embd");
    snap = done(*s, s->step_layer());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->cursor, 1);
    EXPECT_EQ(snap->current()->info.name, "norm-0");
    snap = done(*s, s->step_op());  // inside layer 0
    snap = done(*s, s->step_layer());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->current()->info.layer, 1);
    EXPECT_EQ(snap->current()->info.name, "norm-1");
    EXPECT_EQ((*snap->events)[snap->cursor - 1].name, "l_out-0");
}

TEST(SessionStepping, StepTokenFinishesADecodeCall) {
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(kPrompt));
    auto snap = done(*s, s->step_token());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->current()->info.name, "result_output");
    EXPECT_EQ(snap->decode_calls_done, 1);
    EXPECT_EQ(snap->state, SessionState::kFinished);
    EXPECT_EQ(snap->generated.size(), 1u);

    // With two generated tokens planned, stop at the first event, then a decode call per step.
    int bp = s->add_breakpoint(BreakpointSpec::name("embd"));
    snap = done(*s, s->generate(2));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->cursor, find_event(*snap, "embd@1"));
    s->remove_breakpoint(bp);
    snap = done(*s, s->step_token());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->current()->info.name, "result_output@1");
    EXPECT_EQ(snap->decode_calls_done, 2);
    EXPECT_EQ(snap->state, SessionState::kPaused);
    snap = done(*s, s->step_token());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->current()->info.name, "result_output@2");
    EXPECT_EQ(snap->decode_calls_done, 3);
    EXPECT_EQ(snap->state, SessionState::kFinished);
    EXPECT_EQ(snap->decode_inputs.size(), 2u);
    EXPECT_EQ(snap->decode_inputs[0], snap->generated[0]);
}

TEST(SessionBreakpoints, NamePatternHitsOnceAtTheFirstMatch) {
    SESSION_OR_SKIP(s);
    const int id = s->add_breakpoint(BreakpointSpec::name("Qcur-*"));
    auto snap = done(*s, s->set_tokens(kPrompt));
    snap = done(*s, s->run_to_breakpoint());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kPaused);
    EXPECT_EQ(snap->cursor, find_event(*snap, "Qcur-0"));
    ASSERT_TRUE(snap->hit);
    EXPECT_EQ(snap->hit->breakpoint_id, id);
    EXPECT_EQ(snap->hit->event_name, "Qcur-0");
    ASSERT_EQ(snap->breakpoints.size(), 1u);
    EXPECT_EQ(snap->breakpoints[0].hit_count, 1);
    // Continuing stops at the next Qcur event; a layer pattern matches base names.
    snap = done(*s, s->continue_run());
    EXPECT_EQ(snap->current()->info.name, "Qcur-0#2");
    EXPECT_EQ(snap->breakpoints[0].hit_count, 2);
    s->enable_breakpoint(id, false);
    s->add_breakpoint(BreakpointSpec::name("*-1"));
    snap = done(*s, s->continue_run());
    EXPECT_EQ(snap->current()->info.name, "norm-1");
}

TEST(SessionBreakpoints, AbsAboveHitsWhereMaxAbsExceedsIt) {
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(kPrompt));
    auto full = done(*s, s->run_to_breakpoint());  // no breakpoints: to the end
    ASSERT_TRUE(full);
    ASSERT_EQ(full->state, SessionState::kFinished);
    const double threshold = max_abs(full->records[0]->stats);
    int64_t expected = -1;
    for (const auto& r : full->records)
        if (expected < 0 && max_abs(r->stats) > threshold) expected = r->info.index;
    ASSERT_GT(expected, 0);

    s->add_breakpoint(BreakpointSpec::abs_above(threshold));
    done(*s, s->set_tokens(kPrompt));
    auto snap = done(*s, s->continue_run());
    ASSERT_TRUE(snap && snap->hit);
    EXPECT_EQ(snap->cursor, expected);
    EXPECT_GT(max_abs(snap->current()->stats), threshold);
    EXPECT_EQ(snap->breakpoints[0].hit_count, 1);
}

TEST(SessionBreakpoints, NanInfNeverHitsOnTheCleanModel) {
    SESSION_OR_SKIP(s);
    s->add_breakpoint(BreakpointSpec::nan_inf());
    done(*s, s->set_tokens(kPrompt));
    auto snap = done(*s, s->generate(4));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kFinished);
    EXPECT_FALSE(snap->hit);
    EXPECT_EQ(snap->breakpoints[0].hit_count, 0);
    EXPECT_EQ(static_cast<int64_t>(snap->records.size()), static_cast<int64_t>(snap->events->size()));
}

TEST(SessionBreakpoints, DivergenceAboveHitsAtTheFirstDivergentEvent) {
    LS_REQUIRE_FIXTURES();
    auto ref = dump("stories260K_once_n0_fa-off.gguf");
    ASSERT_TRUE(ref);
    SessionOptions options;
    options.forward.fault = Fault::kRopeWrongPairing;
    options.forward.n_ubatch = ref->n_ubatch();
    auto s = make_session(options);
    ASSERT_TRUE(s);
    done(*s, s->set_reference(ref));
    s->add_breakpoint(BreakpointSpec::divergence_above(1e-4));
    done(*s, s->set_tokens(ref->prompt_tokens()));
    auto snap = done(*s, s->continue_run());
    ASSERT_TRUE(snap && snap->hit);
    EXPECT_EQ(snap->hit->event_name, "Qcur-0#3") << snap->hit->reason;
    EXPECT_EQ(snap->first_divergent, snap->cursor);
    ASSERT_TRUE(snap->current()->compared);
    EXPECT_EQ(snap->current()->comparison.status, CompareStatus::kDiverged);
    for (int64_t i = 0; i < snap->cursor; ++i) EXPECT_NE(snap->records[i]->comparison.status, CompareStatus::kDiverged);
}

TEST(SessionReference, CleanRunAgreesAndDerivedDataIsThere) {
    LS_REQUIRE_FIXTURES();
    auto ref = dump("stories260K_once_n0_fa-off.gguf");
    ASSERT_TRUE(ref);
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(ref->prompt_tokens()));
    done(*s, s->step_op());
    done(*s, s->step_layer());
    // Loading the reference replays to the cursor so the events shown are compared too.
    auto snap = done(*s, s->set_reference(ref));
    ASSERT_TRUE(snap);
    EXPECT_TRUE(snap->has_reference);
    EXPECT_EQ(snap->cursor, 1);
    EXPECT_TRUE(snap->records[0]->compared);
    snap = done(*s, s->run_to_breakpoint());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->first_divergent, -1);

    const EventRecord* sm = snap->latest("kq_soft_max-0");
    ASSERT_TRUE(sm && sm->attention && sm->ref_attention) << (sm ? sm->ref_attention_note : "");
    EXPECT_FALSE(sm->ref_attention->reconstructed);
    const AttentionProbs& a = *sm->attention;
    EXPECT_EQ(a.n_key, 5);
    EXPECT_EQ(a.n_query, 5);
    for (int64_t h = 0; h < a.n_head; ++h)
        for (int64_t q = 0; q < a.n_query; ++q) {
            double sum = 0;
            for (int64_t k = 0; k < a.n_key; ++k) {
                sum += a.at(h, q, k);
                EXPECT_NEAR(a.at(h, q, k), sm->ref_attention->at(h, q, k), 1e-3);
            }
            EXPECT_NEAR(sum, 1.0, 1e-4);
            EXPECT_EQ(a.at(h, q, a.n_key - 1) == 0.0f, q < a.n_query - 1);  // causal
        }
    const EventRecord* q = snap->latest("Qcur-0");
    ASSERT_TRUE(q && q->head_norms && q->ref_head_norms);
    EXPECT_EQ(q->info.op, Op::kRope);
    EXPECT_NEAR(q->head_norms->at(0, 0), q->ref_head_norms->at(0, 0), 1e-3);

    const EventRecord* out = snap->latest("result_output");
    ASSERT_TRUE(out && out->top_logits);
    ASSERT_EQ(out->top_logits->entries.size(), 20u);
    EXPECT_TRUE(out->top_logits->has_reference);
    EXPECT_EQ(out->top_logits->entries[0].token, snap->generated[0]);
    EXPECT_EQ(out->top_logits->entries[0].ref_rank, 0);
    EXPECT_FALSE(out->top_logits->entries[0].piece.empty());
}

TEST(SessionReference, FlashAttentionReferenceIsRebuiltFromRopedQK) {
    LS_REQUIRE_FIXTURES();
    auto ref = dump("stories260K_once_n0.gguf");
    ASSERT_TRUE(ref);
    ASSERT_FALSE(ref->find("kq_soft_max-0"));
    SESSION_OR_SKIP(s);
    done(*s, s->set_reference(ref));
    done(*s, s->set_tokens(ref->prompt_tokens()));
    auto snap = done(*s, s->run_to_event(std::string("kq_soft_max-1")));
    ASSERT_TRUE(snap);
    const EventRecord* sm = snap->current();
    ASSERT_TRUE(sm && sm->attention && sm->ref_attention) << (sm ? sm->ref_attention_note : "");
    EXPECT_TRUE(sm->ref_attention->reconstructed);
    double worst = 0;
    for (int64_t h = 0; h < sm->attention->n_head; ++h)
        for (int64_t q = 0; q < sm->attention->n_query; ++q)
            for (int64_t k = 0; k < sm->attention->n_key; ++k)
                worst = std::max(worst, std::fabs(static_cast<double>(sm->attention->at(h, q, k) - sm->ref_attention->at(h, q, k))));
    EXPECT_LT(worst, 1e-2);
}

TEST(SessionDeterminism, BackGivesBitIdenticalCaptures) {
    SessionOptions options;
    options.capture = CapturePolicy::all();
    SESSION_OR_SKIP(s, options);
    done(*s, s->set_tokens(kPrompt));
    auto first = done(*s, s->go_to(60));
    ASSERT_TRUE(first);
    ASSERT_EQ(first->cursor, 60);
    for (int i = 0; i < 3; ++i) done(*s, s->step_op());
    auto back = done(*s, s->go_to(30));
    ASSERT_TRUE(back);
    EXPECT_EQ(back->cursor, 30);
    EXPECT_EQ(back->records.size(), 31u);
    for (int64_t i = 0; i <= 30; ++i) {
        auto a = first->capture(i), b = back->capture(i);
        ASSERT_TRUE(a && b) << "event " << i;
        EXPECT_NE(a.get(), b.get()) << "event " << i << " was not recomputed";
        ASSERT_EQ(a->values->size(), b->values->size());
        EXPECT_EQ(0, std::memcmp(a->values->data(), b->values->data(), a->values->size() * sizeof(float)))
            << a->info.name << " differs after going back";
        const TensorStats &sa = first->records[i]->stats, &sb = back->records[i]->stats;
        EXPECT_EQ(sa.count, sb.count);
        EXPECT_EQ(sa.nan_count, sb.nan_count);
        EXPECT_EQ(0, std::memcmp(&sa.min, &sb.min, sizeof(float)));
        EXPECT_EQ(0, std::memcmp(&sa.max, &sb.max, sizeof(float)));
        EXPECT_EQ(0, std::memcmp(&sa.rms, &sb.rms, sizeof(double)));
        EXPECT_EQ(0, std::memcmp(sa.hist, sb.hist, sizeof(sa.hist)));
    }
    // restart: position 0, event 0.
    auto r = done(*s, s->restart());
    EXPECT_EQ(r->cursor, 0);
    EXPECT_EQ(r->state, SessionState::kPaused);
}

TEST(SessionCancel, CancelDuringALongRunIsPromptAndLeavesTheSessionUsable) {
    SessionOptions options;
    options.capture = CapturePolicy::all();
    options.n_threads = 1;
    SESSION_OR_SKIP(s, options);
    done(*s, s->set_tokens(kPrompt));
    const uint64_t v0 = s->snapshot()->version;
    const CommandTicket gen = s->generate(400);
    auto running = s->wait_for_version(v0 + 1, kWait);
    ASSERT_TRUE(running);
    const auto t0 = std::chrono::steady_clock::now();
    const CommandTicket c = s->cancel();
    auto snap = done(*s, c);
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    ASSERT_TRUE(snap);
    EXPECT_GE(snap->completed_ticket, gen);
    EXPECT_EQ(snap->state, SessionState::kCancelled) << snap->message;
    EXPECT_LT(elapsed, 2s);
    EXPECT_LT(snap->decode_calls_done, 401);
    // Usable: the next command re-runs from the start.
    snap = done(*s, s->step_op());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kPaused);
    EXPECT_EQ(snap->records.size(), static_cast<size_t>(snap->cursor + 1));
    snap = done(*s, s->go_to(3));
    EXPECT_EQ(snap->cursor, 3);
}

TEST(SessionGenerate, TeacherForcingFeedsTheGivenTokens) {
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(kPrompt));
    auto snap = done(*s, s->generate(3, {403, 407}));
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kFinished);
    EXPECT_EQ(snap->decode_calls_done, 4);
    ASSERT_EQ(snap->generated.size(), 4u);
    EXPECT_EQ(snap->decode_inputs, (std::vector<int32_t>{403, 407, snap->generated[2]}));
    EXPECT_EQ(snap->position, 8);
    EXPECT_EQ(snap->records.size(), snap->events->size());
}

TEST(SessionQueue, PauseStopsARunningGeneration) {
    SessionOptions options;
    options.n_threads = 1;
    SESSION_OR_SKIP(s, options);
    done(*s, s->set_tokens(kPrompt));
    const uint64_t v0 = s->snapshot()->version;
    s->generate(400);
    ASSERT_TRUE(s->wait_for_version(v0 + 1, kWait));
    auto snap = done(*s, s->pause());
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->state, SessionState::kPaused);
    EXPECT_LT(snap->decode_calls_done, 401);
    const int64_t at = snap->cursor;
    snap = done(*s, s->step_op());
    EXPECT_EQ(snap->cursor, at + 1);
    EXPECT_EQ(snap->state, SessionState::kPaused);
}

TEST(SessionQueue, NewerRequestsReplaceQueuedOnesOfTheSameKind) {
    SESSION_OR_SKIP(s);
    auto before = done(*s, s->set_tokens({1, 2}));
    ASSERT_TRUE(before);
    s->hold_commands();
    s->set_tokens({1, 403});
    s->set_tokens(kPrompt);  // replaces the one above
    const CommandTicket seek5 = s->go_to(5);
    s->step_op();            // steps are never merged
    s->go_to(9);             // replaces go_to(5)
    const CommandTicket last = s->go_to(12);  // replaces go_to(9)
    EXPECT_EQ(s->snapshot()->completed_ticket, before->completed_ticket);  // nothing ran while held
    s->release_commands();
    auto snap = done(*s, last);
    ASSERT_TRUE(snap);
    EXPECT_GE(snap->completed_ticket, seek5);
    EXPECT_EQ(snap->commands_replaced - before->commands_replaced, 3u);
    EXPECT_EQ(snap->tokens, kPrompt);
    EXPECT_EQ(snap->cursor, 12);
}

TEST(SessionCaptures, CaptureBudgetTexts) {
    const uint64_t mib = 1 << 20, available = 8000 * mib;
    auto bytes = [&](const std::string& text) {
        auto b = capture_budget_bytes(text, available);
        EXPECT_TRUE(b) << text << ": " << (b ? "" : b.error().message);
        return b ? static_cast<uint64_t>(b.value()) : 0;
    };
    EXPECT_EQ(bytes(""), 4000 * mib);                        // half the available memory
    EXPECT_EQ(capture_budget_bytes("", 100 * mib).value(), 256 * mib);  // but at least 256 MiB
    EXPECT_EQ(bytes("512M"), 512 * mib);
    EXPECT_EQ(bytes("512MiB"), 512 * mib);
    EXPECT_EQ(bytes("4g"), 4096 * mib);
    EXPECT_EQ(bytes("1.5GiB"), 1536 * mib);
    EXPECT_EQ(bytes("300000000"), 300000000u);
    EXPECT_EQ(bytes("25%"), 2000 * mib);
    for (const char* bad : {"lots", "-1G", "0", "4X", "150%", "512k", "nan", "inf"}) {
        auto b = capture_budget_bytes(bad, available);
        ASSERT_FALSE(b) << bad;
        EXPECT_EQ(b.error().code, ErrorCode::kUsage) << bad;
        EXPECT_NE(b.error().message.find(std::string("--capture-budget ") + bad), std::string::npos) << b.error().message;
    }
}

TEST(SessionCaptures, MemoryBudgetEvictsOldestUnpinnedAndHoldsTheBudget) {
    SESSION_OR_SKIP(s);
    done(*s, s->set_tokens(kPrompt));
    auto plan = s->snapshot();
    size_t pinned = 0, largest = 0;
    auto bytes = [](const EventInfo& e) { return static_cast<size_t>(e.ne[0] * e.ne[1] * e.ne[2] * e.ne[3]) * 4; };
    for (const EventInfo& e : *plan->events) {
        if (is_pinned_capture(e)) pinned += bytes(e);
        else largest = std::max(largest, bytes(e));
    }
    const size_t budget = pinned + 3 * largest;
    done(*s, s->set_capture_policy(CapturePolicy::memory_budget(budget)));

    auto mid = done(*s, s->go_to(50));
    ASSERT_TRUE(mid);
    EXPECT_LE(mid->capture_bytes, budget);
    EXPECT_TRUE(mid->capture(50)) << "the current event must be kept";

    auto snap = done(*s, s->run_to_breakpoint());
    ASSERT_TRUE(snap);
    EXPECT_LE(snap->capture_bytes, budget);
    EXPECT_GT(snap->captures_evicted, 0);
    size_t sum = 0;
    for (const auto& [index, t] : *snap->captures) sum += t->bytes();
    EXPECT_EQ(sum, snap->capture_bytes);
    // Pinned names all kept; the unpinned ones kept are the most recent ones (a suffix).
    int64_t oldest_kept = -1;
    for (const EventInfo& e : *snap->events) {
        if (is_pinned_capture(e)) {
            EXPECT_TRUE(snap->capture(e.index)) << e.name << " is pinned";
        } else if (snap->capture(e.index) && oldest_kept < 0) {
            oldest_kept = e.index;
        }
    }
    ASSERT_GE(oldest_kept, 0);
    for (const EventInfo& e : *snap->events) {
        if (!is_pinned_capture(e) && e.index > oldest_kept) {
            EXPECT_TRUE(snap->capture(e.index)) << e.name;
        }
    }
    EXPECT_TRUE(snap->capture(find_event(*snap, "result_norm")));
}

TEST(SessionErrors, CommandsWithoutTokensAndBadTargetsAreErrorsNotCrashes) {
    SESSION_OR_SKIP(s);
    auto snap = s->wait_for_ticket(s->step_op(), kWait);
    ASSERT_TRUE(snap && snap->error);
    EXPECT_EQ(snap->error->code, ErrorCode::kUsage);
    done(*s, s->set_tokens(kPrompt));
    snap = s->wait_for_ticket(s->run_to_event(std::string("no-such-event")), kWait);
    ASSERT_TRUE(snap && snap->error);
    snap = s->wait_for_ticket(s->set_tokens({1, 999999}), kWait);
    ASSERT_TRUE(snap && snap->error);
    EXPECT_EQ(snap->tokens, kPrompt);  // the old tokens stay
}

// Capture buffers go back to their pool when released and are handed out again for sizes that fit
// (up to twice as large); beyond the idle limit they are freed; the pool lives while they do.
TEST(HostBuffers, ReleasedBuffersAreReusedWithinTheIdleLimit) {
    auto pool = HostBufferPool::create(4096 * sizeof(float));
    auto a = pool->take(1000);
    ASSERT_EQ(a->size(), 1000u);
    const float* a_data = a->data();
    a.reset();
    EXPECT_EQ(pool->idle_bytes(), 1000 * sizeof(float));
    auto b = pool->take(600);  // fits: the same memory, resized
    EXPECT_EQ(b->data(), a_data);
    EXPECT_EQ(b->size(), 600u);
    EXPECT_EQ(pool->idle_bytes(), 0u);
    b.reset();
    auto c = pool->take(400);  // 1000 floats is more than twice 400: a new buffer
    EXPECT_NE(c->data(), a_data);
    EXPECT_EQ(c->size(), 400u);
    auto big = pool->take(5000);  // larger than the idle limit: freed when released
    big.reset();
    EXPECT_EQ(pool->idle_bytes(), 1000 * sizeof(float));
    pool->trim();
    EXPECT_EQ(pool->idle_bytes(), 0u);
    std::weak_ptr<HostBufferPool> weak = pool;
    pool.reset();
    EXPECT_FALSE(weak.expired());  // c still holds it
    (*c)[399] = 1.0f;
    c.reset();
    EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace ls
