// Tensor history (engine/session/tensor_history.h) on a real session against llama.cpp's dump: an
// element and a head followed through every event that has them, each value read back from the
// captures and the dump by its own index arithmetic here; and a KV cache cell's writes and reads.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "engine/compare/reference.h"
#include "engine/session/session.h"
#include "engine/session/tensor_history.h"
#include "tests/test_support.h"

namespace ls {
namespace {

struct SessionRun {
    std::shared_ptr<const SessionSnapshot> snap;
    std::shared_ptr<const ReferenceDump> ref;
    int64_t n_head = 0, n_head_kv = 0, n_embd = 0;
};

// llama-gqa-mini (4 layers, GQA) against llama.cpp's dump of a 6-token prompt and 4 decode calls.
SessionRun run_llama() {
    SessionRun run;
    auto model = Model::open(test::fixture_path("models/llama-gqa-mini-F16.gguf"));
    auto ref = ReferenceDump::open(test::fixture_path("dumps/llama-gqa-mini-F16_happy_n4_fa-off_nocache.gguf"));
    EXPECT_TRUE(model && ref);
    if (!model || !ref) return run;
    run.n_head = model.value()->config().n_head;
    run.n_head_kv = model.value()->config().n_head_kv;
    run.n_embd = model.value()->config().n_embd;
    run.ref = std::shared_ptr<const ReferenceDump>(std::move(ref.value()));
    SessionOptions options;
    options.backend = "cpu";
    options.capture = CapturePolicy::all();
    auto s = Session::create(std::shared_ptr<const Model>(std::move(model.value())), options);
    EXPECT_TRUE(s);
    if (!s) return run;
    Session& session = *s.value();
    session.wait_for_ticket(session.set_reference(run.ref), std::chrono::seconds(60));
    session.wait_for_ticket(session.set_tokens(run.ref->prompt_tokens()), std::chrono::seconds(60));
    // The reference's generated tokens fed as it was: its 4 decode calls after the prompt.
    const std::vector<int32_t> forced = run.ref->generated_tokens();
    session.wait_for_ticket(session.generate(static_cast<int>(forced.size()), forced), std::chrono::seconds(60));
    run.snap = session.wait_for_ticket(session.run_to_breakpoint(), std::chrono::seconds(120));
    EXPECT_TRUE(run.snap && !run.snap->error);
    return run;
}

const EventInfo* find(const SessionSnapshot& s, const std::string& name) {
    for (const EventInfo& e : *s.events)
        if (e.name == name) return &e;
    return nullptr;
}

float ours_at(const SessionSnapshot& s, const std::string& name, int64_t i) {
    const EventInfo* e = find(s, name);
    EXPECT_TRUE(e) << name;
    auto c = e ? s.capture(e->index) : nullptr;
    EXPECT_TRUE(c && c->values) << name;
    return c && c->values ? (*c->values)[static_cast<size_t>(i)] : NAN;
}

float ref_at(const ReferenceDump& r, const std::string& name, int64_t i) {
    const RefTensor* t = r.find(name);
    EXPECT_TRUE(t && t->complete()) << name;
    return t && t->complete() ? r.values(*t)[static_cast<size_t>(i)] : NAN;
}

TEST(TensorHistory, AnElementThroughEveryEventThatHasIt) {
    LS_REQUIRE_FIXTURES();
    const SessionRun run = run_llama();
    ASSERT_TRUE(run.snap);
    const int64_t T = run.snap->tokens.size(), t = 2, c = 5;
    ASSERT_GT(T, 3);
    const std::vector<HistoryRow> rows = tensor_history(*run.snap, run.ref.get(), {0, t, c, -1}, run.n_head);
    std::map<std::string, const HistoryRow*> by;
    for (const HistoryRow& r : rows) by[r.name] = &r;
    // In execution order, each of decode call 0.
    for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows[i - 1].event, rows[i].event);
    for (const char* name : {"embd", "attn_norm-0", "Qcur-0", "kqv_out-0", "attn_out-0", "ffn_inp-0", "l_out-0", "l_out-2"}) {
        ASSERT_TRUE(by.count(name)) << name;
        const HistoryRow& r = *by[name];
        const int64_t width = r.width;
        ASSERT_TRUE(r.ours && r.ref) << name << ": " << r.note;
        EXPECT_FLOAT_EQ(*r.ours, ours_at(*run.snap, name, t * width + c)) << name;
        EXPECT_FLOAT_EQ(*r.ref, ref_at(*run.ref, name, t * width + c)) << name;
        EXPECT_NEAR(*r.ours, *r.ref, 1e-3) << name;
    }
    EXPECT_EQ(by["l_out-0"]->width, run.n_embd);
    // The attention's per-head scores have no (token, channel) element; the last layer keeps only
    // the last token's row after its attention, and the token is not the last.
    for (const char* name : {"kq-0", "kq_soft_max-0", "l_out-3", "result_output"}) EXPECT_FALSE(by.count(name)) << name;

    // The last token: the last layer's kept row and the logits have it too.
    const std::vector<HistoryRow> last = tensor_history(*run.snap, run.ref.get(), {0, T - 1, c, -1}, run.n_head);
    std::set<std::string> names;
    for (const HistoryRow& r : last) names.insert(r.name);
    EXPECT_TRUE(names.count("l_out-3"));
    EXPECT_TRUE(names.count("result_output"));
    for (const HistoryRow& r : last) {
        if (r.name == "result_output") {
            EXPECT_FLOAT_EQ(*r.ours, ours_at(*run.snap, "result_output", c));
        }
    }
    // A later decode call's one token.
    const std::vector<HistoryRow> d2 = tensor_history(*run.snap, run.ref.get(), {2, 0, c, -1}, run.n_head);
    ASSERT_FALSE(d2.empty());
    for (const HistoryRow& r : d2) {
        EXPECT_NE(r.name.find("@2"), std::string::npos) << r.name;
        ASSERT_TRUE(r.ours && r.ref) << r.name << ": " << r.note;
    }
    // Nothing beyond the tokens or the widths.
    EXPECT_TRUE(tensor_history(*run.snap, run.ref.get(), {0, T, c, -1}, run.n_head).empty());
    EXPECT_TRUE(tensor_history(*run.snap, run.ref.get(), {9, 0, c, -1}, run.n_head).empty());
}

TEST(TensorHistory, AHeadAtATokenThroughTheAttention) {
    LS_REQUIRE_FIXTURES();
    const SessionRun run = run_llama();
    ASSERT_TRUE(run.snap);
    const int64_t T = run.snap->tokens.size(), t = 3;
    const int h = static_cast<int>(run.n_head) - 1;  // the last head: its KV head is the last one too
    const std::vector<HistoryRow> rows = tensor_history(*run.snap, run.ref.get(), {0, t, 0, h}, run.n_head);
    std::map<std::string, const HistoryRow*> by;
    for (const HistoryRow& r : rows) by[r.name] = &r;
    for (const char* name : {"Qcur-1#3", "Kcur-1#3", "Vcur-1#2", "kq-1", "kq_soft_max-1", "kqv-1"})
        ASSERT_TRUE(by.count(name)) << name;
    // The probabilities of head h's query t: their norm, from the {n_kv, T, n_head} values.
    const EventInfo* sm = find(*run.snap, "kq_soft_max-1");
    ASSERT_TRUE(sm);
    const int64_t n_kv = sm->ne[0];
    double sum2 = 0, sum = 0;
    for (int64_t k = 0; k < n_kv; ++k) {
        const double p = ours_at(*run.snap, "kq_soft_max-1", (h * T + t) * n_kv + k);
        sum2 += p * p, sum += p;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_NEAR(*by["kq_soft_max-1"]->ours, std::sqrt(sum2), 1e-6);
    EXPECT_EQ(by["kq_soft_max-1"]->width, n_kv);
    // K has the KV heads: query head h reads KV head h / (n_head / n_head_kv).
    const EventInfo* k = find(*run.snap, "Kcur-1#3");
    ASSERT_TRUE(k);
    const int64_t hd = k->ne[0], kv = h / (run.n_head / run.n_head_kv);
    double k2 = 0;
    for (int64_t i = 0; i < hd; ++i) {
        const double x = ours_at(*run.snap, "Kcur-1#3", (t * run.n_head_kv + kv) * hd + i);
        k2 += x * x;
    }
    EXPECT_NEAR(*by["Kcur-1#3"]->ours, std::sqrt(k2), 1e-5);
    for (const HistoryRow& r : rows) {
        ASSERT_TRUE(r.ours && r.ref) << r.name << ": " << r.note;
        EXPECT_LT(r.nmse, 1e-5) << r.name;
    }
    // Norms and the FFN have no heads.
    EXPECT_FALSE(by.count("attn_norm-1"));
    EXPECT_FALSE(by.count("ffn_out-1"));
}

TEST(TensorHistory, AKvCellWrittenOnceAndReadByEveryLaterQuery) {
    LS_REQUIRE_FIXTURES();
    const SessionRun run = run_llama();
    ASSERT_TRUE(run.snap);
    const int64_t T = run.snap->tokens.size(), cell = 2;
    const KvCellHistory h = kv_cell_history(*run.snap, run.ref.get(), 1, cell);
    EXPECT_EQ(h.decode, 0);
    EXPECT_TRUE(h.note.empty()) << h.note;
    // Its K (roped) and V, per KV head.
    ASSERT_EQ(h.writes.size(), static_cast<size_t>(2 * run.n_head_kv));
    std::map<std::string, int> written;
    for (const KvCellWrite& w : h.writes) ++written[w.name];
    EXPECT_EQ(written, (std::map<std::string, int>{{"Kcur-1#3", static_cast<int>(run.n_head_kv)},
                                                   {"Vcur-1#2", static_cast<int>(run.n_head_kv)}}));
    for (const KvCellWrite& w : h.writes) {
        ASSERT_TRUE(w.ours_norm && w.ref_norm) << w.name;
        EXPECT_NEAR(*w.ours_norm, *w.ref_norm, 1e-3 * (1 + *w.ref_norm)) << w.name;
    }
    // Read by the prompt's queries at positions 2..T-1 and each later decode call's one query.
    const int decode_calls = run.snap->decode_calls_done;
    ASSERT_GE(decode_calls, 2);
    EXPECT_EQ(h.reads.size(), static_cast<size_t>((T - cell + decode_calls - 1) * run.n_head));
    std::set<int64_t> positions;
    for (const KvCellRead& r : h.reads) {
        positions.insert(r.query_position);
        EXPECT_GE(r.query_position, cell);
        ASSERT_TRUE(r.ours && r.ref);
        EXPECT_NEAR(*r.ours, *r.ref, 1e-4);
        EXPECT_GE(*r.ours, 0.0);
        EXPECT_LE(*r.ours, 1.0);
    }
    EXPECT_EQ(*positions.rbegin(), T + decode_calls - 2);  // the last decode call's query
    // The query at the cell's own position, head 0, in the prompt's evaluation: read back directly.
    const EventInfo* sm = find(*run.snap, "kq_soft_max-1");
    ASSERT_TRUE(sm);
    int checked = 0;
    for (const KvCellRead& r : h.reads) {
        if (r.decode == 0 && r.query_position == cell && r.head == 0) {
            EXPECT_FLOAT_EQ(*r.ours, ours_at(*run.snap, "kq_soft_max-1", (0 * T + cell) * sm->ne[0] + cell));
            ++checked;
        }
    }
    EXPECT_EQ(checked, 1);
    // A position no evaluation wrote.
    EXPECT_EQ(kv_cell_history(*run.snap, run.ref.get(), 1, 999).decode, -1);
}

}  // namespace
}  // namespace ls
