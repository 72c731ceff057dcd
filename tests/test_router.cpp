// The MoE router table (engine/session/derived.h) from hand-built router tensors, the Q/K event
// lookup of the magnitude and attention views, and both on a real deepseek2 session.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/session/derived.h"
#include "engine/session/session.h"
#include "tests/test_support.h"

namespace ls {
namespace {

std::vector<int32_t> experts(const std::vector<RouterChoice>& choices) {
    std::vector<int32_t> ids;
    for (const RouterChoice& c : choices) ids.push_back(c.expert);
    return ids;
}

// 4 experts, top 2, 2 tokens. Token 0: a clear choice (experts 1 and 3, gap 1.8 - 1.0). Token 1:
// the 2nd and 3rd logits 0.0004 apart, and the reference picks the other of the two.
const std::vector<float> kLogits = {0.5f, 2.0f, 1.0f, 1.8f,  //
                                    3.0f, 1.0f, 0.9996f, -1.0f};
const std::vector<float> kTopk = {1, 3, 0, 1};
const std::vector<float> kWeights = {0.6f, 0.3f, 0.7f, 0.2f};
const std::vector<float> kRefLogits = {0.5f, 2.001f, 1.0f, 1.8f,  //
                                       3.0f, 0.9997f, 1.0001f, -1.0f};
const std::vector<float> kRefTopk = {1, 3, 0, 2};
const std::vector<float> kRefWeights = {0.61f, 0.3f, 0.7f, 0.21f};

RouterTensors tensors(const std::vector<float>& logits, const std::vector<float>& topk, const std::vector<float>& weights) {
    RouterTensors r;
    r.n_expert = 4, r.k = 2, r.n_tokens = 2;
    r.logits = logits, r.topk = topk, r.weights = weights;
    return r;
}

TEST(RouterRows, ChosenExpertsWeightsAndGapWithoutAReference) {
    const std::vector<RouterRow> rows = router_rows(1, tensors(kLogits, kTopk, kWeights), nullptr, 1e-3f);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].layer, 1);
    EXPECT_EQ(rows[0].token, 0);
    EXPECT_EQ(experts(rows[0].ours), (std::vector<int32_t>{1, 3}));
    EXPECT_FLOAT_EQ(rows[0].ours[0].weight, 0.6f);
    EXPECT_FLOAT_EQ(rows[0].ours[1].weight, 0.3f);
    EXPECT_NEAR(rows[0].gap, 0.8f, 1e-6);
    EXPECT_FALSE(rows[0].near_tie);
    EXPECT_TRUE(rows[0].ref.empty());
    EXPECT_FALSE(rows[0].mismatch);
    EXPECT_TRUE(std::isnan(rows[0].difference));

    EXPECT_EQ(experts(rows[1].ours), (std::vector<int32_t>{0, 1}));
    EXPECT_FLOAT_EQ(rows[1].ours[1].weight, 0.2f);
    EXPECT_NEAR(rows[1].gap, 0.0004f, 1e-6);
    EXPECT_TRUE(rows[1].near_tie);  // below the 1e-3 threshold
    // A smaller threshold: no longer a near tie.
    EXPECT_FALSE(router_rows(1, tensors(kLogits, kTopk, kWeights), nullptr, 1e-4f)[1].near_tie);
}

TEST(RouterRows, ReferenceBesideWithMismatchAndMeasuredNearTie) {
    const RouterTensors ref = tensors(kRefLogits, kRefTopk, kRefWeights);
    const std::vector<RouterRow> rows = router_rows(2, tensors(kLogits, kTopk, kWeights), &ref, 1e-9f);
    ASSERT_EQ(rows.size(), 2u);
    // Token 0: same choice; the logits differ by at most 0.001, far below the 0.8 gap.
    EXPECT_EQ(experts(rows[0].ref), (std::vector<int32_t>{1, 3}));
    EXPECT_FLOAT_EQ(rows[0].ref[0].weight, 0.61f);
    EXPECT_FALSE(rows[0].mismatch);
    EXPECT_NEAR(rows[0].difference, 0.001f, 1e-6);
    EXPECT_FALSE(rows[0].near_tie);
    // Token 1: the reference chose expert 2 where we chose 1. Logits differ by up to 0.0005, so a
    // gap of 0.0004 (under 2 x 0.0005) is a near tie whatever the threshold says.
    EXPECT_EQ(experts(rows[1].ref), (std::vector<int32_t>{0, 2}));
    EXPECT_TRUE(rows[1].mismatch);
    EXPECT_TRUE(rows[1].ref_chose(2));
    EXPECT_FALSE(rows[1].ref_chose(1));
    EXPECT_TRUE(rows[1].ours_chose(1));
    EXPECT_NEAR(rows[1].difference, 0.0005f, 1e-6);
    EXPECT_NEAR(rows[1].ref_gap, 0.0004f, 1e-6);
    EXPECT_TRUE(rows[1].near_tie);
}

// Grouped routing: the groups each token kept, ours and the reference's, compared as sets.
TEST(RouterRows, GroupsKeptBesideTheReferences) {
    const std::vector<float> groups = {1, 0, 0, 1}, ref_groups = {0, 1, 1, 0};
    RouterTensors ours = tensors(kLogits, kTopk, kWeights), ref = tensors(kRefLogits, kRefTopk, kRefWeights);
    ours.n_groups_used = ref.n_groups_used = 2;
    ours.groups = groups;
    ref.groups = ref_groups;
    std::vector<RouterRow> rows = router_rows(0, ours, &ref, 1e-3f);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].groups, (std::vector<int32_t>{1, 0}));
    EXPECT_EQ(rows[0].ref_groups, (std::vector<int32_t>{0, 1}));
    EXPECT_FALSE(rows[0].groups_differ);  // the same set, in another order
    const std::vector<float> other = {0, 1, 1, 2};
    ref.groups = other;
    rows = router_rows(0, ours, &ref, 1e-3f);
    EXPECT_FALSE(rows[0].groups_differ);
    EXPECT_TRUE(rows[1].groups_differ);
    // Without grouped routing, no groups.
    rows = router_rows(0, tensors(kLogits, kTopk, kWeights), nullptr, 1e-3f);
    EXPECT_TRUE(rows[0].groups.empty());
}

TEST(RouterRows, DifferentChoiceWithAClearGapIsNotANearTie) {
    // Reference logits of token 0 moved by 0.01 at most, yet it chose experts 1 and 2: not
    // explained by a 0.8 gap.
    const std::vector<float> ref_logits = {0.5f, 2.0f, 1.01f, 1.8f, 3.0f, 1.0f, 0.9996f, -1.0f};
    const std::vector<float> ref_topk = {1, 2, 0, 1};
    const RouterTensors ref = tensors(ref_logits, ref_topk, kWeights);
    const std::vector<RouterRow> rows = router_rows(1, tensors(kLogits, kTopk, kWeights), &ref);
    EXPECT_TRUE(rows[0].mismatch);
    EXPECT_NEAR(rows[0].difference, 0.01f, 1e-6);
    EXPECT_FALSE(rows[0].near_tie);
    EXPECT_FALSE(rows[1].mismatch);
}

TEST(RouterRows, WithoutTopkTheChoiceIsTheTopKOfTheProbabilities) {
    RouterTensors r;
    r.n_expert = 4, r.k = 2, r.n_tokens = 2;
    const std::vector<float> probs = {0.1f, 0.4f, 0.2f, 0.3f,  //
                                      0.25f, 0.25f, 0.25f, 0.25f};
    r.probs = probs;
    const std::vector<RouterRow> rows = router_rows(0, r, nullptr);
    EXPECT_EQ(experts(rows[0].ours), (std::vector<int32_t>{1, 3}));
    EXPECT_TRUE(std::isnan(rows[0].ours[0].weight));  // no weights captured
    EXPECT_NEAR(rows[0].gap, 0.1f, 1e-6);
    EXPECT_EQ(experts(rows[1].ours), (std::vector<int32_t>{0, 1}));  // equal values: lower id first
    EXPECT_EQ(rows[1].gap, 0.0f);
    EXPECT_TRUE(rows[1].near_tie);
}

TEST(RouterTable, GathersTheLayersEventsAndTheAppliedWeights) {
    auto info = [](int64_t index, const char* base, int layer, Op op, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
        EventInfo e;
        e.index = index, e.name = e.base_name = base, e.layer = layer, e.op = op;
        e.ne[0] = ne0, e.ne[1] = ne1, e.ne[2] = ne2;
        return e;
    };
    const std::vector<EventInfo> events = {
        info(0, "ffn_moe_logits-1", 1, Op::kMulMat, 4, 2),
        info(1, "ffn_moe_topk-1", 1, Op::kView, 2, 2),
        info(2, "ffn_moe_weights-1", 1, Op::kGetRows, 1, 2, 2),
        info(3, "ffn_moe_weights_sum-1", 1, Op::kSumRows, 1, 2),
        info(4, "ffn_moe_weights_norm-1", 1, Op::kDiv, 2, 2),
        info(5, "ffn_moe_gate-1", 1, Op::kMulMatId, 8, 2, 2),
        // The last layer evaluates only the output row: the call's last token.
        info(6, "ffn_moe_probs-2", 2, Op::kSoftMax, 4, 1),
    };
    const std::vector<float> probs = {0.1f, 0.2f, 0.3f, 0.4f};
    const std::vector<float> sum = {0.9f, 0.9f};
    const std::vector<float> normed = {0.75f, 0.25f, 0.5f, 0.5f};
    const std::vector<float> gate(32, 0.0f);
    auto values = [&](int64_t index) -> std::shared_ptr<const std::vector<float>> {
        const std::vector<float>* v[] = {&kLogits, &kTopk, &kWeights, &sum, &normed, &gate, &probs};
        return std::make_shared<const std::vector<float>>(*v[index]);
    };
    const RouterTable t = router_table(events, 0, 0, values, nullptr);
    EXPECT_EQ(t.layers, (std::vector<int>{1, 2}));
    EXPECT_EQ(t.gate_event, (std::vector<int64_t>{5, -1}));
    EXPECT_EQ(t.n_tokens, 2);
    EXPECT_EQ(t.n_expert, 4);
    ASSERT_EQ(t.rows.size(), 3u);
    const RouterRow* r = t.row(1, 0);
    ASSERT_TRUE(r);
    EXPECT_EQ(experts(r->ours), (std::vector<int32_t>{1, 3}));
    EXPECT_FLOAT_EQ(r->ours[0].weight, 0.75f);  // the normalized weights, not the raw ones
    EXPECT_FLOAT_EQ(t.row(1, 1)->ours[1].weight, 0.5f);
    EXPECT_EQ(t.row(2, 0), nullptr);
    ASSERT_TRUE(t.row(2, 1));
    // No topk or weights captured: k of the other layers, the top of the probabilities.
    EXPECT_EQ(experts(t.row(2, 1)->ours), (std::vector<int32_t>{3, 2}));
    EXPECT_EQ(t.k, 2);
    EXPECT_FALSE(t.gap_of_logits);  // layer 2's gaps are of probabilities
}

// gpt-oss: the weights applied are the softmax over the k chosen (ffn_moe_weights_softmax), the
// raw gathered ones being biased logits.
TEST(RouterTable, GptOssAppliesTheSoftmaxOfTheChosen) {
    auto info = [](int64_t index, const char* base, Op op, int64_t ne0, int64_t ne1, int64_t ne2 = 1) {
        EventInfo e;
        e.index = index, e.name = e.base_name = base, e.layer = 0, e.op = op;
        e.ne[0] = ne0, e.ne[1] = ne1, e.ne[2] = ne2;
        return e;
    };
    const std::vector<EventInfo> events = {
        info(0, "ffn_moe_logits-0", Op::kMulMat, 4, 1),     info(1, "ffn_moe_probs-0", Op::kAdd, 4, 1),
        info(2, "ffn_moe_topk-0", Op::kView, 2, 1),         info(3, "ffn_moe_weights-0", Op::kGetRows, 1, 2, 1),
        info(4, "ffn_moe_weights_softmax-0", Op::kSoftMax, 1, 2, 1),
    };
    const std::vector<std::vector<float>> v = {{0.5f, 2.0f, -1.0f, 1.0f}, {0.6f, 2.1f, -0.9f, 1.1f}, {1, 3},
                                               {2.1f, 1.1f}, {0.7310586f, 0.2689414f}};
    auto values = [&](int64_t index) { return std::make_shared<const std::vector<float>>(v[static_cast<size_t>(index)]); };
    const RouterTable t = router_table(events, 0, 0, values, nullptr);
    const RouterRow* r = t.row(0, 0);
    ASSERT_TRUE(r);
    EXPECT_EQ(experts(r->ours), (std::vector<int32_t>{1, 3}));
    EXPECT_FLOAT_EQ(r->ours[0].weight, 0.7310586f);  // the softmax's, not the logit 2.1
    EXPECT_FLOAT_EQ(r->ours[1].weight, 0.2689414f);
}

EventInfo named(const char* base, Op op) {
    EventInfo e;
    e.base_name = base, e.op = op;
    return e;
}

TEST(QKEvents, RopedQAndKInLlamaAndInMla) {
    // llama / qwen2: the ROPE occurrence; the projection and the reshape are not.
    EXPECT_TRUE(is_roped_q(named("Qcur-0", Op::kRope)));
    EXPECT_TRUE(is_roped_k(named("Kcur-3", Op::kRope)));
    EXPECT_FALSE(is_roped_q(named("Qcur-0", Op::kMulMat)));
    EXPECT_FALSE(is_roped_k(named("Kcur-0", Op::kReshape)));
    // deepseek2 (MLA): Q and K are the concatenation of the no-rope and roped parts.
    EXPECT_TRUE(is_roped_q(named("Qcur-1", Op::kConcat)));
    EXPECT_TRUE(is_roped_k(named("Kcur-1", Op::kConcat)));
    EXPECT_FALSE(is_roped_q(named("Kcur-1", Op::kConcat)));
    EXPECT_FALSE(is_roped_k(named("Vcur-1", Op::kConcat)));
    // The roped parts alone.
    EXPECT_TRUE(is_roped_q_pe(named("q_pe-1", Op::kRope)));
    EXPECT_TRUE(is_roped_k_pe(named("k_pe-1", Op::kRope)));
    EXPECT_FALSE(is_roped_q_pe(named("q_pe-1", Op::kView)));
    EXPECT_FALSE(is_roped_k_pe(named("k_pe-1", Op::kView)));
    EXPECT_FALSE(is_roped_q(named("q_pe-1", Op::kRope)));
}

// A deepseek2 session against llama.cpp's dump: Q/K norms and attention maps, ours and the
// reference's, and the router's choices agree.
std::shared_ptr<const SessionSnapshot> run_deepseek2(const char* model_file, const char* dump_file,
                                                     std::shared_ptr<const ReferenceDump>* ref_out,
                                                     CapturePolicy capture = {}) {
    auto model = Model::open(test::fixture_path(std::string("models/") + model_file));
    EXPECT_TRUE(model) << model_file;
    auto ref = ReferenceDump::open(test::fixture_path(std::string("dumps/") + dump_file));
    EXPECT_TRUE(ref) << dump_file;
    if (!model || !ref) return nullptr;
    std::shared_ptr<const ReferenceDump> r(std::move(ref.value()));
    *ref_out = r;
    SessionOptions options;
    options.backend = "cpu";
    options.capture = std::move(capture);
    auto s = Session::create(std::shared_ptr<const Model>(std::move(model.value())), options);
    EXPECT_TRUE(s);
    if (!s) return nullptr;
    Session& session = *s.value();
    session.wait_for_ticket(session.set_reference(r), std::chrono::seconds(60));
    session.wait_for_ticket(session.set_tokens(r->prompt_tokens()), std::chrono::seconds(60));
    auto snap = session.wait_for_ticket(session.run_to_breakpoint(), std::chrono::seconds(120));
    EXPECT_TRUE(snap && !snap->error);
    return snap;
}

TEST(Deepseek2Views, QKNormsAttentionAndRouterOnARealRun) {
    LS_REQUIRE_FIXTURES();
    std::shared_ptr<const ReferenceDump> ref;
    auto snap = run_deepseek2("deepseek2-mini-F16.gguf", "deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf", &ref);
    ASSERT_TRUE(snap);
    EXPECT_EQ(snap->first_divergent, -1);
    for (const char* name : {"Qcur-1", "Kcur-1", "q_pe-1", "k_pe-1"}) {
        const EventRecord* rec = snap->latest(name);
        ASSERT_TRUE(rec && rec->head_norms && rec->ref_head_norms) << name;
        EXPECT_NEAR(rec->head_norms->at(0, 0), rec->ref_head_norms->at(0, 0), 1e-3) << name;
    }
    EXPECT_EQ(snap->latest("Qcur-1")->head_norms->n_head, 4);
    EXPECT_EQ(snap->latest("Kcur-1")->head_norms->n_head, 1);
    EXPECT_TRUE(snap->latest("q_pe-1")->head_norms->rope_part);
    const EventRecord* sm = snap->latest("kq_soft_max-1");
    ASSERT_TRUE(sm && sm->attention && sm->ref_attention) << (sm ? sm->ref_attention_note : "");
    const RouterTable t = router_table(
        *snap->events, 0, 0,
        [&](int64_t index) -> std::shared_ptr<const std::vector<float>> {
            auto c = snap->capture(index);
            return c ? c->values : nullptr;
        },
        ref.get());
    ASSERT_FALSE(t.layers.empty());
    EXPECT_EQ(t.layers[0], 1);  // block 0 is dense
    EXPECT_EQ(t.k, 2);
    EXPECT_EQ(t.n_expert, 8);
    for (const RouterRow& r : t.rows) {
        ASSERT_EQ(r.ours.size(), 2u);
        EXPECT_EQ(experts(r.ours), experts(r.ref)) << "layer " << r.layer << " token " << r.token;
        EXPECT_FALSE(r.mismatch);
        EXPECT_NEAR(r.ours[0].weight, r.ref[0].weight, 1e-4);
    }
}

TEST(Deepseek2Views, RouterEventsStayCapturedUnderASmallMemoryBudget) {
    LS_REQUIRE_FIXTURES();
    std::shared_ptr<const ReferenceDump> ref;
    auto snap = run_deepseek2("deepseek2-mini-F16.gguf", "deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf", &ref,
                              CapturePolicy::memory_budget(64 << 10));
    ASSERT_TRUE(snap);
    const RouterTable t = router_table(
        *snap->events, 0, 0,
        [&](int64_t index) -> std::shared_ptr<const std::vector<float>> {
            auto c = snap->capture(index);
            return c ? c->values : nullptr;
        },
        nullptr);
    ASSERT_EQ(t.layers, (std::vector<int>{1, 2}));
    ASSERT_EQ(t.rows.size(), 12u);  // 11 tokens in layer 1, the output row in layer 2
    for (const RouterRow& r : t.rows) {
        EXPECT_EQ(r.ours.size(), 2u);
        EXPECT_TRUE(std::isfinite(r.gap)) << "layer " << r.layer << " token " << r.token << ": logits evicted";
        EXPECT_TRUE(std::isfinite(r.ours[0].weight)) << "layer " << r.layer << " token " << r.token << ": weights evicted";
    }
}

TEST(Deepseek2Views, FlashAttentionReferenceIsRebuiltFromTheConcatenatedQK) {
    LS_REQUIRE_FIXTURES();
    std::shared_ptr<const ReferenceDump> ref;
    auto snap = run_deepseek2("deepseek2-mini-Q4_K_M.gguf", "deepseek2-mini-Q4_K_M_rome_n0_nocache.gguf", &ref);
    ASSERT_TRUE(snap);
    ASSERT_FALSE(ref->find("kq_soft_max-1"));
    const EventRecord* sm = snap->latest("kq_soft_max-1");
    ASSERT_TRUE(sm && sm->attention && sm->ref_attention) << (sm ? sm->ref_attention_note : "");
    EXPECT_TRUE(sm->ref_attention->reconstructed);
    double worst = 0;
    for (int64_t h = 0; h < sm->attention->n_head; ++h)
        for (int64_t q = 0; q < sm->attention->n_query; ++q)
            for (int64_t k = 0; k < sm->attention->n_key; ++k)
                worst = std::max(worst, std::fabs(static_cast<double>(sm->attention->at(h, q, k) - sm->ref_attention->at(h, q, k))));
    // The rebuilt map is f32 softmax(q k^T * scale) of the reference's Q and K (bit-identical to
    // ours here); our kq_soft_max follows llama.cpp's non-flash path (K in f16): 0.015 apart at most
    // on this prompt. A wrong head grouping or a missing causal mask would be off by far more.
    EXPECT_LT(worst, 0.05);
}

}  // namespace
}  // namespace ls
