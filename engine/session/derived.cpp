// Attention maps, Q/K head norms and top-k logits computed from captured events.
#include "engine/session/derived.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/tokenizer/tokenizer.h"

namespace ls {

static bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_roped_q(const EventInfo& info) { return info.op == Op::kRope && starts_with(info.base_name, "Qcur-"); }
bool is_roped_k(const EventInfo& info) { return info.op == Op::kRope && starts_with(info.base_name, "Kcur-"); }

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
                                                          float kq_scale, std::string* why) {
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
            const int64_t visible = std::min(n_key, a->first_query_pos + t + 1);  // causal: keys j <= pos
            double max_score = -INFINITY;
            for (int64_t j = 0; j < visible; ++j) {
                const float* krow = keys.data() + head_dim * (hk + n_head_kv * j);
                double dot = 0;
                for (int64_t d = 0; d < head_dim; ++d) dot += static_cast<double>(qrow[d]) * krow[d];
                scores[j] = dot * scale;
                max_score = std::max(max_score, scores[j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < visible; ++j) sum += (scores[j] = std::exp(scores[j] - max_score));
            float* out = probs->data() + n_key * (t + n_query * h);
            for (int64_t j = 0; j < visible; ++j) out[j] = static_cast<float>(scores[j] / sum);
        }
    }
    a->probs = std::move(probs);
    a->reconstructed = true;
    return a;
}

std::shared_ptr<const HeadNorms> head_norms(const EventInfo& info, const float* values) {
    auto n = std::make_shared<HeadNorms>();
    n->layer = info.layer, n->decode = info.decode, n->ubatch = info.ubatch;
    n->is_key = is_roped_k(info);
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

}  // namespace ls
