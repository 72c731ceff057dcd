// Attention maps, Q/K head norms, top-k logits and router choices computed from captured events.
#include "engine/session/derived.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "engine/tokenizer/tokenizer.h"

namespace ls {

static bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_roped_q(const EventInfo& info) {
    return (info.op == Op::kRope || info.op == Op::kConcat) && starts_with(info.base_name, "Qcur-");
}
bool is_roped_k(const EventInfo& info) {
    return (info.op == Op::kRope || info.op == Op::kConcat) && starts_with(info.base_name, "Kcur-");
}
bool is_roped_q_pe(const EventInfo& info) { return info.op == Op::kRope && starts_with(info.base_name, "q_pe-"); }
bool is_roped_k_pe(const EventInfo& info) { return info.op == Op::kRope && starts_with(info.base_name, "k_pe-"); }

std::shared_ptr<const AttentionProbs> attention_from_softmax(const EventInfo& info,
                                                             std::shared_ptr<const std::vector<float>> values) {
    auto a = std::make_shared<AttentionProbs>();
    a->layer = info.layer, a->decode = info.decode, a->ubatch = info.ubatch;
    a->n_key = info.ne[0], a->n_query = info.ne[1], a->n_head = info.ne[2];
    a->first_query_pos = a->n_key - a->n_query;
    a->probs = std::move(values);
    return a;
}

std::shared_ptr<const AttentionProbs> reference_attention(const ReferenceDump& ref, const EventInfo& sm,
                                                          const EventInfo& q_event, const std::vector<EventInfo>& k_events,
                                                          float kq_scale, std::string* why, int64_t n_swa,
                                                          float softcap) {
    const int64_t n_key = sm.ne[0], n_query = sm.ne[1], n_head = sm.ne[2];
    auto a = std::make_shared<AttentionProbs>();
    a->layer = sm.layer, a->decode = sm.decode, a->ubatch = sm.ubatch;
    a->n_key = n_key, a->n_query = n_query, a->n_head = n_head;
    a->first_query_pos = n_key - n_query;

    // Its own softmax, when it has one: KV cells may be padded beyond ours (ggml pads to 256).
    if (const RefTensor* t = ref.find(sm.name); t && t->complete() && t->ne()[0] >= n_key && t->ne()[1] == n_query &&
                                                t->ne()[2] == n_head) {
        auto probs = std::make_shared<std::vector<float>>(static_cast<size_t>(n_key * n_query * n_head));
        for (int64_t r = 0; r < n_query * n_head; ++r) {
            const std::vector<float> row = ref.values(*t, r * t->ne()[0], n_key);  // not the padding cells
            std::copy(row.begin(), row.end(), probs->begin() + r * n_key);
        }
        a->probs = std::move(probs);
        return a;
    }

    // Flash attention in the reference: rebuild from its roped Q and K.
    const RefTensor* q = ref.find(q_event.name);
    if (!q || !q->complete()) {
        *why = fmt::format("the reference has neither {} nor {}", sm.name, q_event.name);
        return nullptr;
    }
    const int64_t head_dim = q->ne()[0];
    if (q->ne()[1] != n_head || q->ne()[2] != n_query) {
        *why = fmt::format("{} in the reference has shape [{}, {}, {}], expected [{}, {}, {}]", q_event.name, q->ne()[0],
                           q->ne()[1], q->ne()[2], head_dim, n_head, n_query);
        return nullptr;
    }
    const std::vector<float> qv = ref.values(*q);
    std::vector<float> keys;  // {head_dim, n_head_kv, positions} concatenated over evaluations
    int64_t n_head_kv = 0;
    for (const EventInfo& k_event : k_events) {
        const RefTensor* k = ref.find(k_event.name);
        if (!k || !k->complete() || k->ne()[0] != head_dim || (n_head_kv && k->ne()[1] != n_head_kv)) {
            *why = fmt::format("the reference lacks a usable {}", k_event.name);
            return nullptr;
        }
        n_head_kv = k->ne()[1];
        const std::vector<float> kv = ref.values(*k);
        keys.insert(keys.end(), kv.begin(), kv.end());
    }
    if (n_head_kv == 0 || n_head % n_head_kv != 0 ||
        static_cast<int64_t>(keys.size()) != head_dim * n_head_kv * n_key) {
        *why = fmt::format("the reference's roped K of layer {} does not cover the {} attended cells", sm.layer, n_key);
        return nullptr;
    }
    const int64_t group = n_head / n_head_kv;
    const float scale = kq_scale;
    auto probs = std::make_shared<std::vector<float>>(static_cast<size_t>(n_key * n_query * n_head), 0.0f);
    std::vector<double> scores(static_cast<size_t>(n_key));
    for (int64_t h = 0; h < n_head; ++h) {
        const int64_t hk = h / group;
        for (int64_t t = 0; t < n_query; ++t) {
            const float* qrow = qv.data() + head_dim * (h + n_head * t);
            const int64_t pos = a->first_query_pos + t;
            const int64_t visible = std::min(n_key, pos + 1);  // causal: keys j <= pos
            const int64_t first = n_swa > 0 ? std::max<int64_t>(0, pos - n_swa + 1) : 0;  // the sliding window
            double max_score = -INFINITY;
            for (int64_t j = first; j < visible; ++j) {
                const float* krow = keys.data() + head_dim * (hk + n_head_kv * j);
                double dot = 0;
                for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qrow[d]) * krow[d];
                scores[j] = dot * scale;
                if (softcap > 0) scores[j] = softcap * std::tanh(scores[j] / softcap);
                max_score = std::max(max_score, scores[j]);
            }
            double sum = 0;
            for (int64_t j = first; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
            float* out = probs->data() + n_key * (t + n_query * h);
            for (int64_t j = first; j < visible; ++j) out[j] = static_cast<float>(scores[j] / sum);
        }
    }
    a->probs = std::move(probs);
    a->reconstructed = true;
    return a;
}

std::shared_ptr<const HeadNorms> head_norms(const EventInfo& info, const float* values) {
    auto n = std::make_shared<HeadNorms>();
    n->layer = info.layer, n->decode = info.decode, n->ubatch = info.ubatch;
    n->is_key = is_roped_k(info) || is_roped_k_pe(info);
    n->rope_part = is_roped_q_pe(info) || is_roped_k_pe(info);
    const int64_t head_dim = info.ne[0];
    n->n_head = info.ne[1], n->n_pos = info.ne[2];
    n->norms.resize(static_cast<size_t>(n->n_head * n->n_pos));
    for (int64_t t = 0; t < n->n_pos; ++t)
        for (int64_t h = 0; h < n->n_head; ++h) {
            const float* x = values + head_dim * (h + n->n_head * t);
            double sq = 0;
            for (int64_t d = 0; d < head_dim; ++d) sq += static_cast<double>(x[d]) * x[d];
            n->norms[static_cast<size_t>(h * n->n_pos + t)] = static_cast<float>(std::sqrt(sq));
        }
    return n;
}

// Softmax probabilities of a logit row, in double for a stable sum.
static std::vector<float> softmax_row(const float* row, int64_t n) {
    std::vector<float> p(static_cast<size_t>(n));
    double max_v = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
        if (std::isfinite(row[i])) max_v = std::max(max_v, static_cast<double>(row[i]));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::isfinite(row[i]) ? std::exp(row[i] - max_v) : 0.0;
    for (int64_t i = 0; i < n; ++i)
        p[i] = std::isfinite(row[i]) && sum > 0 ? static_cast<float>(std::exp(row[i] - max_v) / sum) : 0.0f;
    return p;
}

std::shared_ptr<const TopLogits> top_logits(const EventInfo& info, const float* values, int k, const Tokenizer* tokenizer,
                                            const float* ref_row, int64_t n_ref) {
    const int64_t n_vocab = info.ne[0], n_rows = info.ne[1] * info.ne[2] * info.ne[3];
    const float* row = values + (n_rows - 1) * n_vocab;
    const std::vector<float> probs = softmax_row(row, n_vocab);
    std::vector<int32_t> order(static_cast<size_t>(n_vocab));
    std::iota(order.begin(), order.end(), 0);
    const int64_t top = std::min<int64_t>(k, n_vocab);
    // Ties keep the lower id first, as argmax does.
    std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](int32_t a, int32_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    std::vector<float> ref_probs;
    if (ref_row) ref_probs = softmax_row(ref_row, n_ref);

    auto out = std::make_shared<TopLogits>();
    out->decode = info.decode;
    out->has_reference = ref_row != nullptr;
    for (int64_t i = 0; i < top; ++i) {
        TopLogit e;
        e.token = order[i];
        e.logit = row[e.token];
        e.prob = probs[e.token];
        if (tokenizer && tokenizer->valid(e.token)) e.piece = tokenizer->token_to_piece(e.token);
        else e.piece = fmt::format("<{}>", e.token);
        if (ref_row && e.token < n_ref) {
            const float v = ref_row[e.token];
            e.ref_rank = static_cast<int>(std::count_if(ref_row, ref_row + n_ref, [v](float x) { return x > v; }));
            e.ref_prob = ref_probs[e.token];
        }
        out->entries.push_back(std::move(e));
    }
    return out;
}

std::vector<float> reference_last_logits(const ReferenceDump& ref, const EventInfo& info) {
    const RefTensor* t = ref.find(info.name);
    if (!t || !t->complete()) {
        t = nullptr;
        for (const RefTensor& c : ref.tensors())
            if (c.kind == RefKind::kLogits && c.complete() && c.decode == info.decode && c.ubatch == info.ubatch) t = &c;
    }
    if (!t || t->ne()[0] <= 0) return {};
    const int64_t n = t->ne()[0];
    return ref.values(*t, t->n_elements() - n, n);  // the last row
}

bool RouterRow::ref_chose(int32_t expert) const {
    return std::any_of(ref.begin(), ref.end(), [expert](const RouterChoice& c) { return c.expert == expert; });
}
bool RouterRow::ours_chose(int32_t expert) const {
    return std::any_of(ours.begin(), ours.end(), [expert](const RouterChoice& c) { return c.expert == expert; });
}

const RouterRow* RouterTable::row(int layer, int64_t token) const {
    for (const RouterRow& r : rows)
        if (r.layer == layer && r.token == token) return &r;
    return nullptr;
}

namespace {

// Column t of a {n, T} tensor; empty when the tensor is not there or too short.
std::span<const float> column(std::span<const float> v, int64_t n, int64_t t) {
    if (n <= 0 || static_cast<int64_t>(v.size()) < n * (t + 1)) return {};
    return v.subspan(static_cast<size_t>(n * t), static_cast<size_t>(n));
}

// Expert ids by descending value, lower id first on equal values (the order argsort keeps).
std::vector<int32_t> experts_by_value(std::span<const float> values) {
    std::vector<int32_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return values[a] > values[b]; });
    return order;
}

std::vector<RouterChoice> router_choices(const RouterTensors& r, int64_t t) {
    std::vector<RouterChoice> out;
    std::vector<int32_t> ids;
    if (std::span<const float> topk = column(r.topk, r.k, t); !topk.empty()) {
        for (float id : topk) ids.push_back(static_cast<int32_t>(id));
    } else {
        std::span<const float> selection = column(r.probs.empty() ? r.logits : r.probs, r.n_expert, t);
        if (selection.empty()) return out;
        ids = experts_by_value(selection);
        ids.resize(static_cast<size_t>(std::min<int64_t>(r.k, r.n_expert)));
    }
    const std::span<const float> weights = column(r.weights, r.k, t);
    for (size_t s = 0; s < ids.size(); ++s)
        out.push_back({ids[s], s < weights.size() ? weights[s] : NAN});
    return out;
}

// k-th minus (k+1)-th largest value.
float kth_gap(std::span<const float> values, int64_t k) {
    if (k <= 0 || k >= static_cast<int64_t>(values.size())) return NAN;
    std::vector<float> sorted(values.begin(), values.end());
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    return sorted[static_cast<size_t>(k - 1)] - sorted[static_cast<size_t>(k)];
}

}  // namespace

std::vector<RouterRow> router_rows(int layer, const RouterTensors& ours, const RouterTensors* ref, float tie_threshold) {
    std::vector<RouterRow> rows;
    const bool of_logits = !ours.logits.empty();
    for (int64_t t = 0; t < ours.n_tokens; ++t) {
        RouterRow row;
        row.layer = layer, row.token = t;
        row.ours = router_choices(ours, t);
        const std::span<const float> values = column(of_logits ? ours.logits : ours.probs, ours.n_expert, t);
        row.gap = kth_gap(values, ours.k);
        if (ref && ref->n_expert == ours.n_expert && t < ref->n_tokens) {
            row.ref = router_choices(*ref, t);
            const std::span<const float> ref_values = column(of_logits ? ref->logits : ref->probs, ref->n_expert, t);
            row.ref_gap = kth_gap(ref_values, ref->k);
            if (!values.empty() && ref_values.size() == values.size()) {
                float d = 0;
                for (size_t e = 0; e < values.size(); ++e) d = std::max(d, std::abs(values[e] - ref_values[e]));
                row.difference = d;
            }
        }
        // Each of the two values may move by the difference: a choice flips only within twice it.
        if (std::isfinite(row.difference)) row.near_tie = row.gap <= 2 * row.difference;
        else row.near_tie = row.gap < tie_threshold;
        if (!row.ref.empty()) {
            row.mismatch = row.ref.size() != row.ours.size();
            for (const RouterChoice& c : row.ours) row.mismatch = row.mismatch || !row.ref_chose(c.expert);
        }
        for (float g : column(ours.groups, ours.n_groups_used, t)) row.groups.push_back(static_cast<int32_t>(g));
        if (ref)
            for (float g : column(ref->groups, ref->n_groups_used, t)) row.ref_groups.push_back(static_cast<int32_t>(g));
        if (!row.groups.empty() && !row.ref_groups.empty()) {
            std::vector<int32_t> a = row.groups, b = row.ref_groups;
            std::sort(a.begin(), a.end());
            std::sort(b.begin(), b.end());
            row.groups_differ = a != b;
        }
        rows.push_back(std::move(row));
    }
    return rows;
}

RouterTable router_table(const std::vector<EventInfo>& events, int decode, int ubatch,
                         const std::function<std::shared_ptr<const std::vector<float>>(int64_t)>& values,
                         const ReferenceDump* reference, float tie_threshold) {
    RouterTable table;
    table.decode = decode, table.ubatch = ubatch;
    table.has_reference = reference != nullptr;
    struct LayerEvents {
        const EventInfo *logits = nullptr, *probs = nullptr, *topk = nullptr, *weights = nullptr, *gate = nullptr;
        const EventInfo* groups = nullptr;
    };
    std::map<int, LayerEvents> layers;
    for (const EventInfo& e : events) {
        if (e.decode != decode || e.ubatch != ubatch || e.layer < 0) continue;
        const std::string name = e.base_name.substr(0, e.base_name.rfind('-'));
        LayerEvents& l = layers[e.layer];
        if (name == "ffn_moe_logits") l.logits = &e;
        else if (name == "ffn_moe_probs") l.probs = &e;
        else if (name == "ffn_moe_topk") l.topk = &e;
        // The weights applied: the last of weights, weights_softmax (gpt-oss), weights_norm, weights_scaled.
        else if (name == "ffn_moe_weights" || name == "ffn_moe_weights_softmax" || name == "ffn_moe_weights_norm" ||
                 name == "ffn_moe_weights_scaled")
            l.weights = &e;
        else if (name == "ffn_moe_gate" && !l.gate) l.gate = &e;
        else if (name == "ffn_moe_group_topk") l.groups = &e;
    }
    auto n_elements = [](const EventInfo& e) { return e.ne[0] * e.ne[1] * e.ne[2] * e.ne[3]; };
    // The last layer may evaluate only the output rows (llama.cpp's out_ids: the last token).
    for (const auto& [layer, l] : layers)
        if (const EventInfo* shape = l.logits ? l.logits : l.probs) table.n_tokens = std::max(table.n_tokens, shape->ne[1]);
    for (const auto& [layer, l] : layers) {
        const EventInfo* shape = l.logits ? l.logits : l.probs;
        if (!shape) continue;
        RouterTensors ours, ref;
        ours.n_expert = ref.n_expert = shape->ne[0];
        ours.n_tokens = ref.n_tokens = shape->ne[1];
        ours.k = ref.k = l.topk ? l.topk->ne[0] : (l.weights ? l.weights->ne[1] : table.k);
        std::vector<std::shared_ptr<const std::vector<float>>> keep;  // ours, alive until the rows are built
        std::vector<std::vector<float>> ref_keep;
        ref_keep.reserve(5);
        auto bind = [&](const EventInfo* e, std::span<const float>* ours_span, std::span<const float>* ref_span) {
            if (!e) return;
            if (auto v = values(e->index); v && static_cast<int64_t>(v->size()) == n_elements(*e)) {
                keep.push_back(v);
                *ours_span = *v;
            }
            if (!reference) return;
            const RefTensor* t = reference->find(e->name);
            if (!t || !t->complete() || t->n_elements() != n_elements(*e)) return;
            ref_keep.push_back(reference->values(*t));
            *ref_span = ref_keep.back();
        };
        bind(l.logits, &ours.logits, &ref.logits);
        bind(l.probs, &ours.probs, &ref.probs);
        bind(l.topk, &ours.topk, &ref.topk);
        bind(l.weights, &ours.weights, &ref.weights);
        ours.n_groups_used = ref.n_groups_used = l.groups ? l.groups->ne[0] : 0;
        bind(l.groups, &ours.groups, &ref.groups);
        const bool ref_any = !ref.logits.empty() || !ref.probs.empty() || !ref.topk.empty();
        std::vector<RouterRow> rows = router_rows(layer, ours, ref_any ? &ref : nullptr, tie_threshold);
        table.n_expert = ours.n_expert, table.k = ours.k;
        table.gap_of_logits = table.gap_of_logits && !ours.logits.empty();
        table.layers.push_back(layer);
        table.gate_event.push_back(l.gate ? l.gate->index : -1);
        for (RouterRow& r : rows) {
            r.token += table.n_tokens - ours.n_tokens;  // the output rows are the last tokens
            table.rows.push_back(std::move(r));
        }
    }
    return table;
}

}  // namespace ls
