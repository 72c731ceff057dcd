// The graph machinery every architecture shares, as llama.cpp's llm_graph_context: weights loaded
// through the architecture's tensor layout, preallocated buffers, the KV cache, the ubatch loop
// with its inputs uploaded once per ubatch, output rows, event emission, the fault knobs, and the
// build_* helpers an architecture's layer is written with (engine/forward/models/*.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/forward/forward.h"
#include "engine/forward/memory_estimate.h"
#include "engine/model/tensor_layout.h"

namespace ls {

// Attention weights of one layer (biases have data == nullptr when absent).
struct AttnWeights {
    Tensor wqkv, bqkv;  // phi3: q, k and v in one projection (then wq/wk/wv are absent)
    Tensor wq, wk, wv, wo;
    Tensor bq, bk, bv, bo;
    Tensor sq, sk, sv, so;  // per-tensor scales {1} (NVFP4 conversions): each product times its scale
    Tensor q_norm, k_norm;  // {head_dim}: RMS-normalised heads of q and k before RoPE (qwen3)
    Tensor sinks;           // f32 {n_head}: gpt-oss's attention sinks (AttnMask::sinks)
};

// Dense SwiGLU feed-forward weights of one layer (biases have data == nullptr when absent).
struct FfnWeights {
    Tensor gate, up, down;
    Tensor gate_b, up_b, down_b;
    Tensor gate_s, up_s, down_s;  // per-tensor scales {1}, after the biases (llama.cpp's build_ffn)
};

// The routed experts of one layer (llama.cpp's build_moe_ffn). Absent tensors have data == nullptr.
struct MoeWeights {
    Tensor gate_inp;                       // the router {n_embd, n_expert}
    Tensor exp_probs_b;                    // the selection bias {n_expert} (DeepSeek-V3), used only to choose
    Tensor gate_exps, up_exps, down_exps;  // {n_embd, n_ff, E} x2, {n_ff, n_embd, E}; llama's gate may be absent
    Tensor gate_up_exps;                   // {n_embd, 2 n_ff, E}: gate rows then up rows, instead of gate and up
    Tensor gate_inp_b;                     // {n_expert}: the router's bias (gpt-oss)
    Tensor gate_exps_b, up_exps_b, down_exps_b;  // {n_ff, E} x2, {n_embd, E}: per-expert biases (gpt-oss)
    Tensor gate_exps_s, up_exps_s, down_exps_s;  // {E}: per-expert scales (NVFP4 conversions)
};

// Q, K and V of one ubatch, split into heads: q {head_dim, n_head, T}, k {head_dim, n_head_kv, T},
// v {head_dim_v, n_head_kv, T}.
struct Qkv {
    Tensor q, k, v;
};

class GraphBuilder : public ForwardPass {
public:
    GraphBuilder(const Model& model, Backend& backend, const ForwardOptions& options);
    ~GraphBuilder() override;

    // Loads the weights (load_weights), checks that the backend runs every op the graph uses,
    // and allocates the buffers and the KV cache.
    Status init();

    Status eval(const std::vector<int32_t>& tokens, EventSink* sink) override;
    void reset() override {
        pos_ = 0;
        swa_base_ = 0;
        decode_ = 0;
    }
    int64_t position() const override { return pos_; }
    int decode_calls() const override { return decode_; }
    const std::vector<float>& last_logits() const override { return last_logits_; }
    const ForwardOptions& options() const override { return opt_; }
    void set_llama_isa(LlamaIsa isa) override { opt_.llama_isa = isa; }
    void set_llama_threads(int n) override { opt_.llama_threads = n; }

protected:
    // ---- what an architecture provides
    // Loads its per-layer weights with load().
    virtual Status load_layer_weights() = 0;
    // The graph of one ubatch, from build_inp_embd() to build_output().
    virtual void build_graph() = 0;
    // The widths of the KV cache and of attention's buffers: K and V per head, KV heads. The
    // metadata's by default; deepseek2's MLA caches the latent instead when absorbed.
    struct AttnDims {
        int64_t head_dim_k, head_dim_v, n_head_kv;
    };
    virtual AttnDims attn_dims() const { return {cfg_.head_dim_k, cfg_.head_dim_v, cfg_.n_head_kv}; }
    // Ops beyond the shared ones (and the weights' matmuls), checked before any weight is loaded.
    virtual std::vector<std::pair<Op, GgmlType>> arch_ops() const { return {}; }
    // The architecture's own buffers, allocated after the shared ones with buffer().
    virtual void allocate_arch_buffers() {}
    // The weights read with MUL_MAT_ID rather than MUL_MAT: the routed experts (`*_exps.weight`).
    static bool expert_weight(const std::string& name);

    // ---- weights
    // The weight `name` checked against the layout (shape; absent optional tensors give a tensor
    // with data == nullptr), uploaded to the backend, rewritten when a fault says so. `matmul`:
    // the weight is a MUL_MAT operand, so the backend must run MUL_MAT on its type.
    Result<Tensor> load(const std::string& name, bool matmul = true);
    // Layer il's tensors: "blk.<il>.<name>"; q/k/v/o with their optional biases; the dense FFN
    // with the optional biases of the architecture's layout.
    Status load_blk(int64_t il, const char* name, Tensor* out, bool matmul = false);
    Status load_attn(int64_t il, AttnWeights* w);
    bool in_layout(const std::string& name) const;  // the architecture's layout has this tensor, and its graph reads it
    Status load_ffn(int64_t il, FfnWeights* w);
    // The router and the routed experts: gate and up separate or fused (gate_up_exps), as the
    // layout allows; group-limited routing refused by name.
    Status load_moe(int64_t il, MoeWeights* w);

    // ---- helpers, each announcing its tensors under llama.cpp's names
    Tensor build_inp_embd(const char* name = "embd");                             // embd (qwen35: model.input_embed)
    // rmsnorm then the weight: "norm-L" (RMS_NORM), then `name`-L (MUL)
    Tensor build_norm(const Tensor& x, const Tensor& weight, const char* name, int il);
    // The same into the given buffers (x contiguous, of any width).
    Tensor build_norm(const Tensor& x, const Tensor& weight, const char* name, int il, const Tensor& norm_buf,
                      const Tensor& out_buf);
    // wq/wk/wv projections (* scales, + biases), reshaped to heads (a fused wqkv: its product `wqkv`
    // (+ `wqkv_b`) and the three views Qcur, Kcur, Vcur, made contiguous); with q_norm/k_norm each head of q and k
    // RMS-normalised and weighted (norm-L, Qcur_normed-L; Kcur_normed-L); q and k rotated by
    // build_rope
    Qkv build_qkv(const Tensor& cur, const AttnWeights& w, int il);
    // RoPE with the model's frequency factors (Llama 3's rope_freqs) when it has them, and layer
    // il's own base and scale when the layers differ (gemma's local layers: layer_rope_).
    Tensor build_rope(const Tensor& heads, Tensor& buffer, const char* name, int il);
    // softmax(q k^T * scale + causal mask) v over the KV cache, heads merged, then wo (* so, + bo):
    // the product is attn_out, and the scale and bias steps are attn_out again (llama.cpp names only
    // the last; the others are unnamed nodes the comparison pairs by op and source).
    Tensor build_attn(const Qkv& qkv, const AttnWeights& w, int il);
    // The attention of build_attn without the merge and wo: kq, kq_soft_max and kqv {head_dim_v,
    // T, n_head} announced; with flash attention (llama mode) the fused result {head_dim_v,
    // n_head, T} is written to `flash_out` as well. A local layer (swa_layer(il)) attends over its
    // own sliding-window cache with the window's mask; with a soft cap (gemma2) kq is capped in
    // place as cap * tanh(kq / cap) before the softmax (kq_scaled_1, kq_tanh, kq_scaled_2; flash
    // attention caps inside).
    // With `sinks` (gpt-oss) each head's sink joins its softmax (AttnMask::sinks).
    Tensor build_attn_kqv(const Qkv& qkv, int il, Tensor* flash_out, const Tensor& sinks = Tensor{});
    // The last layer keeps only the rows whose logits are wanted (llama.cpp's inp_out_ids). False
    // when this ubatch has none: llama.cpp's graph ends there, and so does ours.
    bool build_out_rows(int il, Tensor& cur, Tensor& residual);
    Tensor build_add(const Tensor& a, const Tensor& b, const char* name, int il, Tensor& out);
    // down(silu(gate x) * up x), announced as ffn_gate, ffn_up, ffn_swiglu and `out_name`
    // (`gelu`: gemma's down(gelu(gate x) * up x), ffn_geglu in the middle). With biases and scales
    // (llama.cpp's build_ffn): ffn_gate_b / ffn_gate_s after the gate's product (the same for up),
    // and the down product is ffn_down with its bias (the last step is `out_name`). The buffers are
    // the dense FFN's unless given (gate, up, swiglu, out; at least as large).
    enum class FfnAct { kSilu, kGelu };
    Tensor build_ffn(const Tensor& cur, const FfnWeights& w, int il, const char* out_name = "ffn_out",
                     const Tensor* buffers = nullptr, FfnAct act = FfnAct::kSilu);
    // The routed experts as llama.cpp's build_moe_ffn strings them (SwiGLU experts, weights after
    // the down projection): router logits (ffn_moe_logits), softmax or sigmoid (ffn_moe_probs; the
    // model's expert_gating_func), the selection bias (ffn_moe_probs_biased), top-k
    // (ffn_moe_argsort, ffn_moe_topk; with expert groups, build_moe_groups first), the chosen probabilities (ffn_moe_weights), renormalised
    // when expert_weights_norm (ffn_moe_weights_sum, _sum_clamped, _norm) and scaled by
    // expert_weights_scale unless 0 or 1 (ffn_moe_weights_scaled); then up (ffn_moe_up) and gate
    // (ffn_moe_gate; a fused gate_up: ffn_moe_gate_up and its two halves), swiglu (ffn_moe_swiglu;
    // silu of up alone without a gate: ffn_moe_silu), down (ffn_moe_down), times the weights
    // (ffn_moe_weighted), the k slots summed in order (ffn_moe_out).
    Tensor build_moe(const Tensor& cur, const MoeWeights& w, int il);
    // phi3's feed-forward: one up projection of 2 n_ff rows (ffn_up), silu of its first half times
    // its second (ffn_swiglu: ggml's one-operand SWIGLU), down (ffn_out).
    Tensor build_ffn_fused_up(const Tensor& cur, const Tensor& up, const Tensor& down, int il);
    // result_norm, result_output; with final_logit_softcapping the logits capped as
    // cap * tanh(logits / cap) (result_output after each of the three steps).
    void build_output(const Tensor& x);
    // qwen35's order: the output norm over every row (`norm_name`), then the rows whose logits are
    // wanted picked (result_norm), then the LM head.
    void build_output_all_rows(const Tensor& x, const char* norm_name);
    // The LM head on the output norm's rows (result_output), and what build_output does after it.
    void build_lm_head(const Tensor& cur);
    // y = x * s, announced as `name` (SCALE); the embeddings times sqrt(n_embd) for gemma (inp_scaled).
    Tensor build_scale(const Tensor& x, float s, const char* name, int il, const Tensor& out_buf);

    // ---- sliding-window attention (gemma): local layers keep a cache of swa_cells_ cells, cell 0
    // holding position swa_base_ (the window slides by moving the cells still seen to the front).
    bool swa_layer(int64_t il) const { return il >= 0 && il < static_cast<int64_t>(swa_layers_.size()) && swa_layers_[il]; }
    std::vector<uint8_t> swa_layers_;     // per layer: 1 = local (the model's pattern, or the fault's)
    int64_t n_swa_ = 0;                   // the window: a token sees positions p - n_swa_ + 1 .. p
    int64_t swa_cells_ = 0;               // cells of a local layer's cache (0: no local layers)
    int64_t swa_base_ = 0;                // the position in cell 0 of the local caches
    Tensor inp_pos_swa_;                  // I32 {T}: the ubatch's cells in the local caches
    std::vector<RopeParams> layer_rope_;  // per layer, when the layers' RoPE differs (else rope_)

    // Announces a tensor (cb(cur, "attn_norm", il) in llama.cpp). Names repeat within a graph
    // evaluation: Qcur-0, Qcur-0#2, ...
    void cb(const Tensor& t, const char* name, int il, Op op);

    const Model& model_;
    const ModelConfig& cfg_;
    Backend& be_;
    ForwardOptions opt_;
    FaultKnobs knobs_;
    std::vector<TensorSpec> layout_;

    // ---- state of the ubatch being built
    int64_t T_ = 0;                // tokens in this ubatch
    int64_t n_kv_ = 0;             // cells attended: the cache so far plus this ubatch
    int64_t n_out_rows_ = 0;       // rows that reach the logits

    // Preallocated activations, sized for n_ubatch tokens. Shapes in ggml order.
    struct Buffers {
        Tensor x;                 // (n_embd, T) the residual stream
        Tensor norm, cur;         // (n_embd, T) rmsnorm without and with the weight
        Tensor q, q_b, q_rope;    // (n_head * head_dim, T): projection, + bias, roped copy
        Tensor k, k_b, k_rope;    // (n_head_kv * head_dim, T)
        Tensor v, v_b;            // (n_head_kv * head_dim_v, T)
        Tensor qkv, qkv_b;        // (n_q + n_k + n_v, T): phi3's fused projection, + bias
        Tensor up2;               // (2 n_ff, T): phi3's fused gate and up projection
        Tensor q_norm, q_normed;  // (n_head * head_dim, T): qwen3's per-head q norm, without and with its weight
        Tensor k_norm, k_normed;  // (n_head_kv * head_dim, T)
        Tensor kq, kq_soft_max;   // (n_ctx, T, n_head)
        Tensor kqv;               // (head_dim_v, T, n_head)
        Tensor kqv_out;           // (n_head * head_dim_v, T)
        Tensor attn_out;          // (n_embd, T)
        Tensor attn_out_b;        // (n_embd, T) attn_out + bo, when the model has attn_output biases
        Tensor gate_b, up_b;      // (n_ff, T) the FFN's products + biases, when the model has them
        Tensor ffn_out_b;         // (n_embd, T) the down product + bias
        Tensor logits_b;          // (n_logits, T) the LM head + output.bias, when the model has one
        Tensor logits_s;          // (n_logits, T) the LM head times output.scale, when the model has one
        // The products times their per-tensor scales, when the model has them.
        Tensor q_s, k_s, v_s;     // (n_head * head_dim, T), (n_head_kv * head_dim, T) x2
        Tensor attn_out_s;        // (n_embd, T)
        Tensor gate_s, up_s;      // (n_ff, T)
        Tensor ffn_out_s;         // (n_embd, T)
        Tensor out_attn, out_x;   // (n_embd, n_outputs): the last layer's output rows
        Tensor ffn_inp;           // (n_embd, T)
        Tensor gate, up, swiglu;  // (n_ff, T); swiglu also holds gemma's GEGLU
        Tensor ffn_out;           // (n_embd, T)
        Tensor logits;            // (n_logits, T)
        std::vector<Tensor> cache_k, cache_v;  // per layer (head_dim, n_head_kv, n_ctx)
    } buf_;

    // build_moe's buffers, allocated when the model has experts (E experts, k used, n_ff_expert).
    struct MoeBuffers {
        Tensor logits, probs, selection;         // (E, T)
        Tensor argsort, argsort_f;               // (E, T) I32 and its f32 announcement
        Tensor topk, topk_f;                     // (k, T)
        Tensor weights, weights_sum, weights_clamped, weights_norm, weights_scaled;
        Tensor gate_up;                          // (2 n_ff, k, T): a fused gate_up product
        Tensor gate, up, swiglu;                 // (n_ff, k, T)
        Tensor down, weighted;                   // (n_embd, k, T)
        Tensor slot, out;                        // (n_embd, T)
        Tensor group_topk, probs_masked;         // grouped routing: (n_group_used, T) as f32, (E, T)
        Tensor gate_b, up_b, down_b;             // the experts' biased products (gpt-oss): (n_ff, k, T) x2, (n_embd, k, T)
        Tensor scale_rows;                       // (1, k, T): each slot's expert's scale
        Tensor gate_s, up_s, down_s;             // the products times those scales: (n_ff, k, T) x2, (n_embd, k, T)
    } moe_;
    // DeepSeek-V3's group-limited routing as build_moe_ffn runs it: the experts in
    // expert_group_count groups, each scored by the sum of its two best selection values, the
    // expert_group_used_count best groups kept (ffn_moe_group_topk) and every other expert's
    // selection value -inf (ffn_moe_probs_masked). Computed on the host from the downloaded
    // selection (E values per token), as ggml's CPU ops order it.
    Tensor build_moe_groups(const Tensor& selection, int il);
    // An I32 tensor announced as f32 values (what the comparison and the views read).
    void announce_ids(const Tensor& ids, const Tensor& f32_buffer, const char* name, int il, Op op);

    // A buffer on the backend, released with the graph.
    Tensor buffer(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, GgmlType type = GgmlType::F32);

    Tensor inp_tokens_, inp_pos_, inp_rope_pos_, inp_out_ids_;  // I32 inputs, uploaded per ubatch
    RopeParams rope_;
    Tensor rope_freqs_;  // f32 {n_rot/2}: divisors of the rotation angles (Llama 3.1+), or none
    float kq_scale_ = 1.0f;
    float rms_eps_ = 0.0f;
    int64_t pos_ = 0;  // cells of the KV cache filled before this ubatch

private:
    Status check_backend_support() const;
    void allocate_buffers();  // the activations, the logits and the KV cache (std::bad_alloc when out of memory)
    // What init() allocates on the backend, by part; the weights too when the backend copies them.
    MemoryEstimate memory_estimate(bool weights_copied) const;
    std::string memory_hint(bool weights_copied) const;  // which flag lowers the largest part
    void eval_ubatch(const int32_t* tokens, int64_t T, int ubatch, const std::vector<int32_t>& out_rows);
    // Makes room in the local layers' caches for T more tokens (see swa_base_).
    void slide_swa_window(int64_t T);

    // Which optional buffers the model's tensors need (from its file, before anything is allocated).
    struct OptionalBuffers {
        bool attn_out = false, ffn = false, output = false;  // biases on attn_output, the FFN, the LM head
        bool qk_norm = false;  // qwen3's per-head q/k norms
        bool scales = false;   // per-tensor weight scales (.scale)
        bool fused_qkv = false, fused_up = false;  // phi3's attn_qkv, ffn_up of 2 n_ff rows
        bool fused_gate_up = false;                // the experts' ffn_gate_up_exps
        bool expert_biases = false;                // the experts' ffn_*_exps.bias (gpt-oss)
        bool expert_scales = false;                // the experts' ffn_*_exps.scale (NVFP4 conversions)
        bool output_scale = false;                 // output.scale (an NVFP4 LM head)
    } optional_buffers_;

    Tensor token_embd_, output_norm_, output_, output_b_, output_s_;
    int64_t n_vocab_ = 0;
    int64_t n_logits_ = 0;  // rows of the logits buffer: n_vocab_, more with the padded-vocab fault
    std::vector<std::pair<Op, GgmlType>> ops_used_;  // what check_backend_support asks for
    std::vector<void*> allocations_;
    std::vector<float> last_logits_;
    int decode_ = 0;
    int ubatch_ = 0;
    int64_t event_index_ = 0;
    EventSink* sink_ = nullptr;
    std::map<std::string, int> occurrences_;
};

// The graph of each architecture (engine/forward/models/).
std::unique_ptr<GraphBuilder> make_llama_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_qwen2_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_qwen3_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_qwen3moe_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_phi3_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_gemma_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_deepseek2_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_gpt_oss_graph(const Model& model, Backend& backend, const ForwardOptions& options);
std::unique_ptr<GraphBuilder> make_qwen35_graph(const Model& model, Backend& backend, const ForwardOptions& options);

}  // namespace ls
