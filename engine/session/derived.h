// Data the views derive from captured events: attention probabilities per layer and head, Q/K
// L2 norms per head and position, and the top-k logits with the reference's ranking beside.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/session/event_plan.h"

namespace ls {

class Tokenizer;

// softmax(q k^T * scale + mask) of one layer in one graph evaluation: n_head x n_query x n_key.
struct AttentionProbs {
    int layer = -1;
    int decode = 0, ubatch = 0;
    int64_t n_head = 0, n_query = 0, n_key = 0;
    int64_t first_query_pos = 0;  // position of query row 0 (rows are consecutive positions)
    bool reconstructed = false;   // the reference's, rebuilt from its roped Q and K (flash attention)
    std::shared_ptr<const std::vector<float>> probs;  // kq_soft_max layout {n_key, n_query, n_head}

    float at(int64_t head, int64_t query, int64_t key) const {
        return (*probs)[static_cast<size_t>(key + n_key * (query + n_query * head))];
    }
};

// Per-head L2 norms of the roped Q or K of one layer: norms[head * n_pos + t].
struct HeadNorms {
    int layer = -1;
    int decode = 0, ubatch = 0;
    bool is_key = false;
    int64_t n_head = 0, n_pos = 0;
    std::vector<float> norms;
    float at(int64_t head, int64_t t) const { return norms[static_cast<size_t>(head * n_pos + t)]; }
};

struct TopLogit {
    int32_t token = 0;
    std::string piece;
    float logit = 0;
    float prob = 0;
    int ref_rank = -1;      // rank of this token among the reference's logits (0 = its top-1)
    float ref_prob = 0;
};
struct TopLogits {
    int decode = 0;
    bool has_reference = false;
    std::vector<TopLogit> entries;  // ours, best first
};

// The event that makes the roped Q (or K): the ROPE occurrence ("Qcur-L#3", "#4" in qwen2).
bool is_roped_q(const EventInfo& info);
bool is_roped_k(const EventInfo& info);

// Ours, from the kq_soft_max-L tensor. n_kv keys; query rows at positions n_kv - n_query onwards.
std::shared_ptr<const AttentionProbs> attention_from_softmax(const EventInfo& info,
                                                             std::shared_ptr<const std::vector<float>> values);

// The reference's attention for our kq_soft_max-L event: its own kq_soft_max when it has one,
// else rebuilt from its roped Q (this graph evaluation) and roped K (every evaluation so far, in
// order: `k_events`) with the causal mask and `kq_scale` (attention_kq_scale of the model's config);
// GQA: head h reads kv head h / (n_head / n_head_kv). Null when the reference lacks the inputs
// (`why` says which).
std::shared_ptr<const AttentionProbs> reference_attention(const ReferenceDump& ref, const EventInfo& softmax_event,
                                                          const EventInfo& q_event, const std::vector<EventInfo>& k_events,
                                                          float kq_scale, std::string* why);

// From a roped Q or K tensor {head_dim, n_head, T}.
std::shared_ptr<const HeadNorms> head_norms(const EventInfo& info, const float* values);

// Top-k of the last row of result_output {n_vocab, rows}; `ref_row` (may be null) is the
// reference's logits for the same token, n_ref values.
std::shared_ptr<const TopLogits> top_logits(const EventInfo& info, const float* values, int k, const Tokenizer* tokenizer,
                                            const float* ref_row, int64_t n_ref);

// The reference's logits for our result_output event: its last row, or empty.
std::vector<float> reference_last_logits(const ReferenceDump& ref, const EventInfo& info);

}  // namespace ls
