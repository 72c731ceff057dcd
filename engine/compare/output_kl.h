// The final distributions of two runs compared position by position, as llama-perplexity's
// --kl-divergence compares a quantized model with its base: KL(P_reference || P_ours) of the softmax
// of each row of logits, whether the top tokens agree, and statistics over the positions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/compare/compare_run.h"
#include "engine/compare/reference.h"

namespace ls {

// One row of logits of each side: the distribution of the token after `position`.
struct PositionKl {
    int decode = 0;          // the decode call the row belongs to
    int64_t position = -1;   // the token position it follows; -1 when the token counts are unknown
    double kl = 0;           // KL(reference || ours), nats; NaN when either row has a NaN
    int32_t ref_top1 = -1, our_top1 = -1;
    double ref_p_top1 = 0;   // the reference's probability of its top token
    double our_p_ref_top1 = 0;  // ours of the same token (llama-perplexity's Δp is the difference)
};

// KL(softmax(ref) || softmax(ours)) over `n` logits, summed in double, and both sides' top tokens
// (the first one on ties). A token the reference gives probability 0 adds nothing; one that ours
// gives probability 0 and the reference does not makes it +inf.
PositionKl compare_distributions(const float* ref, const float* ours, int64_t n);

// Over the positions: mean, median, 99th percentile (linear between the nearest ranks, as
// llama-perplexity's), the largest and smallest, and the share whose top tokens agree. NaN KLs
// sort last and make the mean NaN.
struct KlStats {
    int64_t n = 0;
    double mean = 0, median = 0, p99 = 0, max = 0, min = 0;
    double same_top1 = 0;  // share of the positions, 0..1
};
KlStats kl_stats(const std::vector<PositionKl>& rows);
std::string kl_stats_text(const KlStats& s);  // "mean 0.0123, median ..., same top-1 93.8%"

// Where each batch (decode call, physical batch) of our run starts and how many tokens it has,
// from its embeddings' columns. A batch whose count is unknown, and every one after it, is absent.
struct BatchSpan {
    int64_t start = 0, tokens = 0;
};
std::map<std::pair<int, int>, BatchSpan> batch_spans(const CaptureLog& ours);
// The position of row `row` of `rows` a batch kept (all of its tokens, or the last ones); -1 when
// the batch is not in `spans`.
int64_t row_position(const std::map<std::pair<int, int>, BatchSpan>& spans, int decode, int ubatch, int64_t rows, int64_t row);

// The final logits of every decode call (each batch's last result_output: after the bias or the
// soft cap where the model has them) of our run against the reference's, row by row. Rows that
// cannot be paired (no reference logits, another shape) are left out and `why` says so. Only events
// whose values `ours` holds count (a comparison of two dumps holds one event's).
struct OutputKl {
    std::vector<PositionKl> rows;
    std::string why;  // why some or all rows were left out; "" when none was
};
OutputKl output_kl(const CaptureLog& ours, const ReferenceDump& reference);

}  // namespace ls
