// The residual stream of every layer through the model's output head (logit_lens.h).
#include "engine/compare/logit_lens.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/backend.h"

namespace ls {
namespace {

using Group = std::pair<int, int>;

// The model's output head on the CPU, as the graph's build_output runs it: rms_norm * output_norm,
// the LM head (output.weight, or the tied token_embd), NVFP4's output.scale, output.bias, gemma's
// final soft cap.
class LensHead {
public:
    static Result<LensHead> load(const Model& model, MathMode mode, LlamaIsa isa) {
        LensHead h;
        h.be_ = make_cpu_backend(0);
        h.be_->set_llama_isa(isa);
        h.mode_ = mode;
        h.eps_ = static_cast<float>(model.config().rms_eps);
        h.cap_ = static_cast<float>(model.config().final_softcap);
        const GgufTensorInfo* norm = model.find("output_norm.weight");
        const GgufTensorInfo* out = model.find("output.weight");
        if (!out) out = model.find("token_embd.weight");
        if (!norm || !out)
            return make_error(ErrorCode::kBadInput, fmt::format("{}: the logit lens needs output_norm.weight and an LM head "
                                                                "(output.weight or token_embd.weight)", model.path()));
        h.norm_ = h.be_->weight(norm->type, norm->ne, norm->data);
        h.head_ = h.be_->weight(out->type, out->ne, out->data);
        if (const GgufTensorInfo* b = model.find("output.bias")) h.bias_ = h.be_->weight(b->type, b->ne, b->data);
        if (const GgufTensorInfo* s = model.find("output.scale"); s && out->type == GgmlType::NVFP4)
            h.scale_ = h.be_->weight(s->type, s->ne, s->data);
        return h;
    }
    int64_t n_embd() const { return head_.ne[0]; }
    int64_t n_vocab() const { return head_.ne[1]; }

    // The logits of `cols` columns of n_embd values.
    std::vector<float> logits(const float* x, int64_t cols) {
        const int64_t n = n_embd(), V = n_vocab();
        std::vector<float> normed(static_cast<size_t>(n * cols)), y(static_cast<size_t>(V * cols));
        Tensor xt = make_tensor(const_cast<float*>(x), n, cols), nt = make_tensor(normed.data(), n, cols);
        be_->rms_norm(xt, eps_, nt);
        be_->mul_row(nt, norm_, nt);
        Tensor yt = make_tensor(y.data(), V, cols);
        be_->matmul(head_, nt, yt, mode_);
        for (int64_t c = 0; c < cols; ++c) {
            Tensor row = make_tensor(y.data() + c * V, V, 1);
            if (scale_.data) be_->binary(Op::kMul, row, scale_, row);
            if (bias_.data) be_->add(row, bias_, row);
        }
        if (cap_ > 0) {
            Tensor all = make_tensor(y.data(), V * cols);
            be_->unary(Op::kScale, all, all, 1.0f / cap_);
            be_->unary(Op::kTanh, all, all);
            be_->unary(Op::kScale, all, all, cap_);
        }
        return y;
    }

private:
    std::unique_ptr<Backend> be_;
    MathMode mode_ = MathMode::kLlama;
    float eps_ = 0, cap_ = 0;
    Tensor norm_, head_, bias_, scale_;
};

// The k most probable tokens of a row of logits (softmax in double), the first on ties.
std::vector<LensToken> top_tokens(const float* logits, int64_t n, int k) {
    double max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    const size_t keep = std::min<size_t>(static_cast<size_t>(k), idx.size());
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    std::vector<LensToken> out;
    for (size_t i = 0; i < keep; ++i)
        out.push_back({idx[i], std::isfinite(max) ? std::exp(static_cast<double>(logits[idx[i]]) - max) / sum : NAN});
    return out;
}

}  // namespace

Result<LogitLens> logit_lens(const Model& model, const CaptureLog& ours, const ReferenceDump& reference, MathMode mode,
                             LlamaIsa isa, int top_k) {
    auto head = LensHead::load(model, mode, isa);
    if (!head) return head.error();
    LensHead& h = head.value();
    LogitLens lens;
    lens.top_k = top_k;
    const auto spans = batch_spans(ours);
    std::vector<std::string> why;
    for (int L = 0; L < static_cast<int>(model.config().n_layer); ++L) {
        LensLayer layer;
        layer.layer = L;
        std::vector<PositionKl> kls;
        const std::string base = fmt::format("l_out-{}", L);
        for (const CapturedEvent& e : ours.events) {
            if (e.base_name != base || e.occurrence != 1 || e.data.size() != static_cast<size_t>(e.ne[0] * e.ne[1] * e.ne[2] * e.ne[3]))
                continue;
            const RefTensor* t = reference.find(e.name);
            const int64_t n = e.ne[0];
            if (!t || !t->complete()) {
                why.push_back(fmt::format("{}: {}", e.name, t ? "the reference's values are partial" : "not in the reference"));
                continue;
            }
            if (n != h.n_embd() || t->ne()[0] != n) {
                why.push_back(fmt::format("{}: rows of {} values, the reference's of {}, the LM head takes {}", e.name, n,
                                          t->ne()[0], h.n_embd()));
                continue;
            }
            // The rows both kept: the last ones of the side that kept more (llama.cpp's last layer
            // keeps only the output rows).
            const int64_t our_rows = static_cast<int64_t>(e.data.size()) / n, ref_rows = t->n_elements() / n;
            const int64_t rows = std::min(our_rows, ref_rows);
            const std::vector<float> ref_values = reference.values(*t, (ref_rows - rows) * n, rows * n);
            const std::vector<float> ours_logits = h.logits(e.data.data() + (our_rows - rows) * n, rows);
            const std::vector<float> ref_logits = h.logits(ref_values.data(), rows);
            const int64_t V = h.n_vocab();
            for (int64_t r = 0; r < rows; ++r) {
                LensCell cell;
                cell.decode = e.decode;
                cell.position = row_position(spans, e.decode, e.ubatch, our_rows, our_rows - rows + r);
                cell.ours = top_tokens(ours_logits.data() + r * V, V, top_k);
                cell.reference = top_tokens(ref_logits.data() + r * V, V, top_k);
                PositionKl k = compare_distributions(ref_logits.data() + r * V, ours_logits.data() + r * V, V);
                cell.kl = k.kl;
                kls.push_back(k);
                layer.cells.push_back(std::move(cell));
            }
        }
        if (layer.cells.empty()) continue;
        layer.kl = kl_stats(kls);
        if (lens.first_divergent_layer < 0 && !(layer.kl.mean <= kLensKlSame)) lens.first_divergent_layer = L;
        if (lens.first_top1_change < 0 && layer.kl.same_top1 < 1) lens.first_top1_change = L;
        lens.layers.push_back(std::move(layer));
    }
    // Where each side's final top-1 first leads.
    for (const PositionKl& f : output_kl(ours, reference).rows) {
        LensArrival a{f.decode, f.position, f.our_top1, f.ref_top1};
        for (const LensLayer& layer : lens.layers)
            for (const LensCell& c : layer.cells) {
                if (c.decode != f.decode || c.position != f.position || f.position < 0) continue;
                if (a.ours_layer < 0 && !c.ours.empty() && c.ours[0].token == f.our_top1) a.ours_layer = layer.layer;
                if (a.reference_layer < 0 && !c.reference.empty() && c.reference[0].token == f.ref_top1)
                    a.reference_layer = layer.layer;
            }
        lens.arrivals.push_back(a);
    }
    for (size_t i = 0; i < why.size() && i < 3; ++i) lens.why += (i ? "; " : "") + why[i];
    if (why.size() > 3) lens.why += fmt::format("; and {} more", why.size() - 3);
    return lens;
}

}  // namespace ls
