// Data the views derive from captured events: attention probabilities per layer and head, Q/K
// L2 norms per head and position, the top-k logits with the reference's ranking beside, and the
// MoE router's choices per layer and token with the reference's beside.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
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
    bool rope_part = false;  // MLA's q_pe / k_pe: the rotated dimensions alone
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

// The event that makes the roped Q (or K): the ROPE occurrence ("Qcur-L#3", "#4" in qwen2), or
// in MLA (deepseek2) the concatenation of the no-rope and roped parts ("Qcur-L", CONCAT).
bool is_roped_q(const EventInfo& info);
bool is_roped_k(const EventInfo& info);
// MLA's roped rope part alone: the ROPE occurrence of q_pe-L ({rope dims, n_head, T}) and k_pe-L
// ({rope dims, 1, T}, shared by the heads).
bool is_roped_q_pe(const EventInfo& info);
bool is_roped_k_pe(const EventInfo& info);

// Ours, from the kq_soft_max-L tensor. n_kv keys; query rows at positions n_kv - n_query onwards.
std::shared_ptr<const AttentionProbs> attention_from_softmax(const EventInfo& info,
                                                             std::shared_ptr<const std::vector<float>> values);

// The reference's attention for our kq_soft_max-L event: its own kq_soft_max when it has one,
// else rebuilt from its roped Q (this graph evaluation) and roped K (every evaluation so far, in
// order: `k_events`) with the causal mask and `kq_scale` (roped_qk_scale of the model's config);
// a local layer's sliding window (`n_swa` > 0: key j seen from position p when p - j < n_swa) and
// gemma2's soft cap (`softcap` > 0: each score s becomes cap * tanh(s / cap)) as the model has them.
// GQA: head h reads kv head h / (n_head / n_head_kv). Null when the reference lacks the inputs
// (`why` says which).
std::shared_ptr<const AttentionProbs> reference_attention(const ReferenceDump& ref, const EventInfo& softmax_event,
                                                          const EventInfo& q_event, const std::vector<EventInfo>& k_events,
                                                          float kq_scale, std::string* why, int64_t n_swa = 0,
                                                          float softcap = 0.0f);

// From a roped Q or K tensor {head_dim, n_head, T}.
std::shared_ptr<const HeadNorms> head_norms(const EventInfo& info, const float* values);

// Top-k of the last row of result_output {n_vocab, rows}; `ref_row` (may be null) is the
// reference's logits for the same token, n_ref values.
std::shared_ptr<const TopLogits> top_logits(const EventInfo& info, const float* values, int k, const Tokenizer* tokenizer,
                                            const float* ref_row, int64_t n_ref);

// The reference's logits for our result_output event: its last row, or empty.
std::vector<float> reference_last_logits(const ReferenceDump& ref, const EventInfo& info);

// One MoE layer's router tensors of one graph evaluation, in ggml order (expert fastest); any may
// be empty (not captured). Expert ids are stored as float values, as the events carry them.
struct RouterTensors {
    int64_t n_expert = 0, k = 0, n_tokens = 0;
    std::span<const float> logits;   // ffn_moe_logits-L {n_expert, T}
    std::span<const float> probs;    // ffn_moe_probs-L {n_expert, T}
    std::span<const float> topk;     // ffn_moe_topk-L {k, T}: the chosen experts, best first
    std::span<const float> weights;  // the weights applied: ffn_moe_weights-L, or its _softmax / _norm / _scaled
    int64_t n_groups_used = 0;
    std::span<const float> groups;   // ffn_moe_group_topk-L {n_groups_used, T}: grouped routing's groups kept
};

struct RouterChoice {
    int32_t expert = -1;
    float weight = NAN;
};

// One token of one MoE layer: the experts chosen, ours and the reference's, and how close the
// choice was. The gap is between the k-th and (k+1)-th largest router logit (probability when
// the logits are not captured): a different choice is legitimate when the two values are closer
// than our numerical difference from the reference can move them.
struct RouterRow {
    int layer = -1;
    int64_t token = 0;                 // token of this graph evaluation (a layer that evaluates only
                                       // the output rows has them as the last tokens)
    std::vector<RouterChoice> ours;    // slot order, best first
    std::vector<RouterChoice> ref;     // empty without a reference (or its tensors)
    float gap = NAN;                   // ours: k-th minus (k+1)-th
    float ref_gap = NAN;
    float difference = NAN;            // max |ours - reference| over this token's router logits
    bool near_tie = false;             // gap <= 2 x difference, or < the threshold without a reference
    bool mismatch = false;             // the chosen sets differ
    std::vector<int32_t> groups, ref_groups;  // grouped routing: the groups kept, best first (empty without)
    bool groups_differ = false;        // the kept groups differ from the reference's (as sets)
    bool ref_chose(int32_t expert) const;
    bool ours_chose(int32_t expert) const;
};

// Router rows of one layer, token by token. `ref` may be null. Without topk, the choice is the
// top k of the probabilities (logits without them), lower id first on equal values; k comes from
// topk or weights. `tie_threshold` is the near-tie limit when there is no reference to measure.
std::vector<RouterRow> router_rows(int layer, const RouterTensors& ours, const RouterTensors* ref,
                                   float tie_threshold = 1e-3f);

struct RouterTable {
    int decode = 0, ubatch = 0;
    int64_t n_expert = 0, k = 0, n_tokens = 0;
    bool has_reference = false;
    bool gap_of_logits = true;         // false: gaps and differences are of probabilities
    std::vector<int> layers;           // the MoE layers, ascending
    std::vector<RouterRow> rows;       // layer by layer, token by token within a layer
    std::vector<int64_t> gate_event;   // per entry of `layers`: ffn_moe_gate-L's index, -1 if none
    const RouterRow* row(int layer, int64_t token) const;
};

// The router table of one graph evaluation from its events: `values(index)` gives an event's
// captured values (null when not captured); the reference's tensors of the same names, when given.
RouterTable router_table(const std::vector<EventInfo>& events, int decode, int ubatch,
                         const std::function<std::shared_ptr<const std::vector<float>>(int64_t)>& values,
                         const ReferenceDump* reference, float tie_threshold = 1e-3f);

}  // namespace ls
