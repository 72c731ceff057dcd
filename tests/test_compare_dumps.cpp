// Comparing two dumps in one streaming pass (compare_dumps): the metrics are bit for bit those of
// copying both tensors and aligning them (reshapes, output rows, padded KV cells, logits), on any
// number of threads and for dumps whose data cannot be read in place; the pages given back along
// the way read the same afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "engine/capture/export.h"
#include "engine/compare/compare_run.h"
#include "engine/compare/metrics.h"
#include "tests/test_support.h"

namespace ls {
namespace {

// Smooth values with a NaN, -0, a denormal and an infinity near the start; `wobble` perturbs
// every `every`-th value.
std::vector<float> values(size_t n, float seed, float wobble = 0, size_t every = 1) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = std::sin(seed * static_cast<float>(i) + 0.5f) * 3.0f;
        if (wobble != 0 && i % every == 0) v[i] += wobble * std::cos(static_cast<float>(i));
    }
    if (n > 8) {
        v[1] = std::numeric_limits<float>::quiet_NaN();
        v[2] = -0.0f;
        v[3] = std::numeric_limits<float>::denorm_min();
        v[4] = std::numeric_limits<float>::infinity();
    }
    return v;
}

ExportTensor node(const std::string& dump_name, std::vector<int64_t> ne, std::vector<float> v, const std::string& op = "",
                  const std::string& src0 = "") {
    ExportTensor t = make_export_tensor(dump_name, std::move(ne), std::move(v));
    t.op = op;
    t.src0 = src0;
    return t;
}

ExportTensor out_ids(std::vector<int32_t> ids) {
    auto owner = std::make_shared<std::vector<int32_t>>(std::move(ids));
    ExportTensor t;
    t.base_name = "out_ids";
    t.kind = RefKind::kInput;
    t.type = GgmlType::I32;
    t.ne = {static_cast<int64_t>(owner->size())};
    t.data = owner->data();
    t.owner = owner;
    return t;
}

// Ours and a reference that pair in every way a comparison knows, with one event that diverges.
void make_pair(ExportSet* ours, ExportSet* ref) {
    ours->info.prompt_tokens = ref->info.prompt_tokens = {1, 5, 9};
    const size_t big = 1024 * 1100;  // 4.4 MB: the pages of the pairs before l_out-0 go back mid-pass
    ours->tensors = {
        node("attn_norm-0", {8, 3}, values(24, 0.3f)),
        node("Qcur-0", {4, 2, 3}, values(24, 0.7f)),
        node("kq_soft_max-0", {5, 3, 2}, values(30, 0.2f)),
        node("kqv_out-0", {8, 3}, values(24, 0.9f)),
        node("ffn_out-0", {1024, 1100}, values(big, 0.01f)),
        node("ffn_extra-0", {16}, values(16, 0.4f)),  // nothing in the reference
        node("l_out-0", {1024, 1100}, values(big, 0.02f)),
        node("l_out-1", {8, 3}, values(24, 1.1f)),
        node("result_output", {16, 2}, values(32, 0.6f)),
    };
    ExportTensor logits = node("llama_logits", {16, 2}, values(32, 0.6f));
    logits.kind = RefKind::kLogits;
    ours->tensors.push_back(logits);  // the same event as result_output: compared once

    std::vector<float> cells(8 * 3 * 2, 0.0f), soft = values(30, 0.2f, 1e-5f, 3);
    for (int64_t row = 0; row < 6; ++row)
        for (int64_t i = 0; i < 5; ++i) cells[row * 8 + i] = soft[row * 5 + i];
    std::vector<float> rows = values(24, 1.1f, 2e-4f), kept(16);
    for (int64_t i = 0; i < 8; ++i) kept[i] = rows[i], kept[8 + i] = rows[16 + i];
    ref->tensors = {
        out_ids({0, 2}),
        node("attn_norm-0", {8, 3}, values(24, 0.3f)),
        node("Qcur-0", {4, 2, 3}, values(24, 0.7f, 1e-3f, 5)),
        node("kq_soft_max-0", {8, 3, 2}, cells),                                     // padded KV cells
        node("node_7", {4, 2, 3}, values(24, 0.9f, 1e-6f), "FLASH_ATTN_EXT", "Qcur-0"),  // a reshape
        node("ffn_out-0", {1024, 1100}, values(big, 0.01f, 1e-4f, 7)),
        node("cache_k_l0", {4}, values(4, 0.1f)),                                    // unmatched
        node("l_out-0", {1024, 1100}, values(big, 0.5f)),                              // diverges
        node("l_out-1", {8, 2}, kept),                                                // output rows
        node("result_output", {16, 2}, values(32, 0.6f, 0.3f, 4)),
    };
}

std::string write(const ExportSet& set, const std::string& path) {
    ExportOptions o;
    o.path = path;
    auto r = export_tensors(set, o);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return path;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same_metrics(const Metrics& got, const Metrics& want) {
    EXPECT_EQ(got.n, want.n);
    EXPECT_EQ(got.n_nonfinite, want.n_nonfinite);
    EXPECT_TRUE(same_bits(got.max_abs, want.max_abs)) << got.max_abs << " vs " << want.max_abs;
    EXPECT_TRUE(same_bits(got.mean_abs, want.mean_abs)) << got.mean_abs << " vs " << want.mean_abs;
    EXPECT_TRUE(same_bits(got.rel_l2, want.rel_l2)) << got.rel_l2 << " vs " << want.rel_l2;
    EXPECT_TRUE(same_bits(got.nmse, want.nmse)) << got.nmse << " vs " << want.nmse;
    EXPECT_TRUE(same_bits(got.cosine, want.cosine)) << got.cosine << " vs " << want.cosine;
    EXPECT_TRUE(same_bits(got.pearson, want.pearson)) << got.pearson << " vs " << want.pearson;
}

void expect_same(const CompareRunResult& got, const CompareRunResult& want) {
    ASSERT_EQ(got.comparisons.size(), want.comparisons.size());
    for (size_t i = 0; i < got.comparisons.size(); ++i) {
        const EventComparison& a = got.comparisons[i];
        const EventComparison& b = want.comparisons[i];
        SCOPED_TRACE(b.name);
        EXPECT_EQ(a.event_index, b.event_index);
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.ref_name, b.ref_name);
        EXPECT_EQ(a.status, b.status);
        EXPECT_EQ(a.note, b.note);
        EXPECT_EQ(a.top_k_overlap, b.top_k_overlap);
        EXPECT_EQ(a.ref_top1_rank, b.ref_top1_rank);
        expect_same_metrics(a.metrics, b.metrics);
    }
    EXPECT_EQ(got.summary.first_divergent, want.summary.first_divergent);
    EXPECT_EQ(got.unmatched, want.unmatched);
    EXPECT_EQ(got.volume.tensors, want.volume.tensors);
    EXPECT_EQ(got.volume.bytes, want.volume.bytes);
}

// compute_metrics as one loop over the elements, each sum a chain in element order: what the
// vectorized form must give bit for bit.
Metrics metrics_in_element_order(const float* ours, const float* ref, int64_t n) {
    Metrics m;
    double sum_abs = 0, sum_d2 = 0, sum_r2 = 0, sum_o2 = 0, sum_or = 0, sum_o = 0, sum_r = 0;
    int64_t finite = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double o = ours[i], r = ref[i];
        if (!std::isfinite(o) || !std::isfinite(r)) {
            m.nan_ours += std::isnan(o), m.inf_ours += std::isinf(o);
            m.nan_ref += std::isnan(r), m.inf_ref += std::isinf(r);
            if (!(o == r) && !(std::isnan(o) && std::isnan(r))) ++m.n_nonfinite;
            continue;
        }
        const double d = o - r;
        sum_abs += std::fabs(d);
        m.max_abs = std::max(m.max_abs, std::fabs(d));
        sum_d2 += d * d, sum_r2 += r * r, sum_o2 += o * o, sum_or += o * r, sum_o += o, sum_r += r;
        ++finite;
    }
    m.n = n;
    m.n_finite = finite;
    if (finite == 0) {
        if (n > 0) m.max_abs = m.mean_abs = m.rel_l2 = m.nmse = m.cosine = m.pearson = NAN;
        return m;
    }
    m.mean_abs = sum_abs / finite;
    m.rel_l2 = sum_r2 > 0 ? std::sqrt(sum_d2 / sum_r2) : (sum_d2 > 0 ? INFINITY : 0.0);
    m.nmse = sum_r2 > 0 ? sum_d2 / sum_r2 : (sum_d2 > 0 ? INFINITY : 0.0);
    m.cosine = (sum_o2 > 0 && sum_r2 > 0) ? sum_or / std::sqrt(sum_o2 * sum_r2) : (sum_d2 == 0 ? 1.0 : 0.0);
    const double cov = sum_or - sum_o * sum_r / finite;
    const double var_o = sum_o2 - sum_o * sum_o / finite, var_r = sum_r2 - sum_r * sum_r / finite;
    m.pearson = (var_o > 0 && var_r > 0) ? cov / std::sqrt(var_o * var_r) : (sum_d2 == 0 ? 1.0 : 0.0);
    if (m.n_nonfinite > 0) m.nmse = m.rel_l2 = INFINITY;
    return m;
}

TEST(CompareDumps, MetricsAreThoseOfTheElementOrderLoopBitForBit) {
    // Values over many magnitudes (so that the order of the additions shows in the last bits),
    // lengths around the vector widths, NaN and Inf on either side or both, at the edges too.
    uint64_t state = 12345;
    auto next = [&] {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        return static_cast<uint32_t>(state >> 33);
    };
    auto draw = [&] { return std::ldexp(static_cast<float>(next() % 2000001) / 1e6f - 1.0f, static_cast<int>(next() % 40) - 20); };
    for (int64_t n : {0, 1, 3, 4, 5, 7, 8, 9, 31, 64, 1000, 4099}) {
        for (int special : {0, 1, 2, 3}) {
            std::vector<float> ours(n), ref(n);
            for (int64_t i = 0; i < n; ++i) {
                ours[i] = draw();
                ref[i] = next() % 3 == 0 ? ours[i] : ours[i] + draw() * 1e-3f;
            }
            if (special > 0 && n > 0) {
                const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
                for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
                    if (special == 1) ours[i] = nan;                 // ours only
                    if (special == 2) ref[i] = -inf;                 // the reference only
                    if (special == 3) ours[i] = ref[i] = nan;        // both: agreement
                }
            }
            SCOPED_TRACE(testing::Message() << "n " << n << ", special " << special);
            const Metrics got = compute_metrics(ours.data(), ref.data(), n);
            const Metrics want = metrics_in_element_order(ours.data(), ref.data(), n);
            expect_same_metrics(got, want);
            EXPECT_EQ(got.n_finite, want.n_finite);
            EXPECT_EQ(got.nan_ours, want.nan_ours);
            EXPECT_EQ(got.inf_ref, want.inf_ref);
            EXPECT_EQ(got.nan_ref, want.nan_ref);
        }
    }
    // All NaN: nothing measured.
    const std::vector<float> nans(9, std::numeric_limits<float>::quiet_NaN()), ones(9, 1.0f);
    EXPECT_TRUE(std::isnan(compute_metrics(ones.data(), nans.data(), 9).nmse));
}

TEST(CompareDumps, StreamingMetricsAreThoseOfCopiedAndAlignedValues) {
    const std::string dir = test::make_temp_dir();
    ExportSet ours_set, ref_set;
    make_pair(&ours_set, &ref_set);
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    auto ref = ReferenceDump::open_gguf(write(ref_set, dir + "/ref.gguf"));
    ASSERT_TRUE(ours) << ours.error().message;
    ASSERT_TRUE(ref) << ref.error().message;

    const CompareRunResult r = compare_dumps(*ours.value(), *ref.value(), {}, 2);
    ASSERT_EQ(r.comparisons.size(), 9u);  // llama_logits folds into result_output
    int64_t paired = 0;
    uint64_t bytes = 0;
    for (const EventComparison& c : r.comparisons) {
        SCOPED_TRACE(c.name);
        const RefTensor* o = ours.value()->find(c.name);
        ASSERT_NE(o, nullptr);
        if (c.name == "ffn_extra-0") {
            EXPECT_EQ(c.status, CompareStatus::kNoReference);
            continue;
        }
        const RefTensor* t = ref.value()->find(c.ref_name);
        ASSERT_NE(t, nullptr);
        // What the comparison computed before it streamed: both sides copied, then aligned.
        const std::vector<float> v = ours.value()->values(*o);
        AlignedValues a;
        std::string why;
        ASSERT_TRUE(align_with_reference(v.data(), o->ne(), *ref.value(), *t, &a, &why)) << why;
        expect_same_metrics(c.metrics, compute_metrics(a.ours.data(), a.ref.data(), static_cast<int64_t>(a.ours.size())));
        EXPECT_EQ(c.note, a.note);
        ++paired;
        bytes += o->n_bytes() + t->n_bytes();
    }
    EXPECT_EQ(r.volume.tensors, paired);
    EXPECT_EQ(r.volume.bytes, bytes);
    EXPECT_EQ(r.comparisons[2].note, "first 5 of 8 KV cells");
    EXPECT_EQ(r.comparisons[3].note, "reshaped");
    EXPECT_EQ(r.comparisons[7].note, "output rows 2");
    EXPECT_GE(r.comparisons[8].top_k_overlap, 0);
    ASSERT_EQ(r.unmatched.size(), 1u);
    EXPECT_EQ(r.unmatched[0].first, "cache_k_l0");

    // The first divergent event keeps its values for the doctor; the others stay in the file.
    ASSERT_EQ(r.summary.first_divergent, 6);
    EXPECT_EQ(r.comparisons[6].name, "l_out-0");
    for (size_t i = 0; i < r.captures.events.size(); ++i)
        EXPECT_EQ(r.captures.events[i].data.empty(), i != 6u) << r.captures.events[i].name;
    const std::vector<float> l_out = ours.value()->values(*ours.value()->find("l_out-0"));
    EXPECT_EQ(std::memcmp(r.captures.events[6].data.data(), l_out.data(), l_out.size() * 4), 0);

    // Pages given back read the file's bytes again.
    for (size_t i = 0; i < ref_set.tensors.size(); ++i) {
        const RefTensor& t = ref.value()->tensors()[i];
        EXPECT_EQ(std::memcmp(t.data, ref_set.tensors[i].data, ref_set.tensors[i].n_bytes()), 0) << t.name;
    }

    // Any number of threads, the same numbers.
    for (int threads : {1, 3, 16}) {
        SCOPED_TRACE(threads);
        expect_same(compare_dumps(*ours.value(), *ref.value(), {}, threads), r);
    }
}

TEST(CompareDumps, AReferenceInAnotherOrderComparesTheSame) {
    // Its tensors lie in the file in the reverse of our order: the pages of the pairs compared are
    // not one span of it, and are given back without those still to be read.
    const std::string dir = test::make_temp_dir();
    ExportSet ours_set, ref_set;
    make_pair(&ours_set, &ref_set);
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    auto ref = ReferenceDump::open_gguf(write(ref_set, dir + "/ref.gguf"));
    std::reverse(ref_set.tensors.begin(), ref_set.tensors.end());
    auto reversed = ReferenceDump::open_gguf(write(ref_set, dir + "/reversed.gguf"));
    ASSERT_TRUE(ours && ref && reversed);
    const CompareRunResult in_order = compare_dumps(*ours.value(), *ref.value(), {}, 2);
    for (int threads : {1, 2}) expect_same(compare_dumps(*ours.value(), *reversed.value(), {}, threads), in_order);
    for (size_t i = 0; i < ref_set.tensors.size(); ++i) {
        const RefTensor& t = reversed.value()->tensors()[i];
        EXPECT_EQ(std::memcmp(t.data, ref_set.tensors[i].data, ref_set.tensors[i].n_bytes()), 0) << t.name;
    }
}

TEST(CompareDumps, DataThatCannotBeReadInPlaceComparesTheSame) {
    const std::string dir = test::make_temp_dir();
    ExportSet ours_set, ref_set;
    make_pair(&ours_set, &ref_set);
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    auto ref = ReferenceDump::open_gguf(write(ref_set, dir + "/ref.gguf"));
    ASSERT_TRUE(ours && ref);
    const CompareRunResult aligned = compare_dumps(*ours.value(), *ref.value(), {}, 2);

    // The same dumps rewritten with 2-byte alignment and a header that leaves their f32 data off
    // 4-byte boundaries: read through copies.
    auto rewrite = [&](const ReferenceDump& dump, const std::string& path) -> std::unique_ptr<ReferenceDump> {
        for (int pad = 0; pad < 4; ++pad) {
            std::vector<GgufKV> kv;
            for (const GgufKV& x : dump.file()->metadata())
                if (x.key != "general.alignment") kv.push_back(x);
            kv.push_back({"test.pad", GgufValue::make_string(std::string(static_cast<size_t>(pad), 'x'))});
            std::vector<GgufWriteTensor> tensors;
            for (const GgufTensorInfo& t : dump.file()->tensors())
                tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes});
            EXPECT_TRUE(gguf_write(path, kv, tensors, 2, /*overwrite=*/true));
            auto d = ReferenceDump::open_gguf(path);
            EXPECT_TRUE(d) << (d ? "" : d.error().message);
            if (d && d.value()->tensors()[1].complete() && !d.value()->tensors()[1].f32()) return std::move(d.value());
        }
        return nullptr;
    };
    auto ours_odd = rewrite(*ours.value(), dir + "/ours-odd.gguf");
    auto ref_odd = rewrite(*ref.value(), dir + "/ref-odd.gguf");
    ASSERT_TRUE(ours_odd && ref_odd) << "no padding put the data off 4-byte boundaries";
    expect_same(compare_dumps(*ours_odd, *ref_odd, {}, 2), aligned);
    expect_same(compare_dumps(*ours_odd, *ref.value(), {}, 1), aligned);
    expect_same(compare_dumps(*ours.value(), *ref_odd, {}, 3), aligned);
}

// A reference dump written field by field, so that it can hold what our exporter refuses to write
// (a tensor of zero elements).
std::string write_raw_dump(const std::string& path, const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes,
                           const std::vector<std::vector<float>>& values) {
    std::vector<GgufWriteTensor> tensors;
    for (size_t i = 0; i < shapes.size(); ++i)
        tensors.push_back({shapes[i].first, GgmlType::F32, shapes[i].second, values[i].data(), values[i].size() * 4});
    Status s = gguf_write(path, {{"dump.format_version", GgufValue::make_u32(1)}}, tensors);
    EXPECT_TRUE(s) << (s ? "" : s.error().message);
    return path;
}

TEST(CompareDumps, AnEmptyReferenceTensorIsUnusableAndTheRealFirstDivergenceIsStillFound) {
    const std::string dir = test::make_temp_dir();
    ExportSet ours_set;
    ours_set.tensors = {node("attn_norm-0", {8, 3}, values(24, 0.3f)), node("Qcur-0", {8, 3}, values(24, 0.7f)),
                        node("l_out-0", {8, 3}, values(24, 0.9f))};
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    // The reference's attn_norm-0 has ne [8, 0]: no values at all. Qcur-0 agrees, l_out-0 does not.
    auto ref = ReferenceDump::open_gguf(write_raw_dump(dir + "/ref.gguf",
                                                       {{"attn_norm-0", {8, 0}}, {"Qcur-0", {8, 3}}, {"l_out-0", {8, 3}}},
                                                       {{}, values(24, 0.7f), values(24, 0.9f, 0.5f)}));
    ASSERT_TRUE(ours && ref);

    const CompareRunResult r = compare_dumps(*ours.value(), *ref.value(), {}, 1);
    ASSERT_EQ(r.comparisons.size(), 3u);
    EXPECT_EQ(r.comparisons[0].status, CompareStatus::kUnusable) << r.comparisons[0].note;
    EXPECT_NE(r.comparisons[0].note.find("holds no values"), std::string::npos) << r.comparisons[0].note;
    EXPECT_NE(r.comparisons[0].note.find("[8, 0, 1, 1]"), std::string::npos) << r.comparisons[0].note;
    EXPECT_EQ(r.comparisons[1].status, CompareStatus::kOk);
    EXPECT_EQ(r.summary.unusable, 1);
    EXPECT_EQ(r.summary.compared(), 2);
    EXPECT_EQ(r.summary.first_divergent, 2);  // l_out-0, not the empty tensor and not nothing
    std::filesystem::remove_all(dir);
}

TEST(CompareDumps, ATensorWiderThanOursIsNotPaddedKvCells) {
    const std::string dir = test::make_temp_dir();
    ExportSet ours_set, ref_set;
    ours_set.tensors = {node("l_out-0", {8, 3}, values(24, 0.9f)), node("kq_soft_max-0", {5, 3}, values(15, 0.2f))};
    // The reference is 16 wide; its first 8 columns of each row are ours. Only attention over KV
    // cells is padded that way, so l_out-0 cannot be paired while kq_soft_max-0 can.
    std::vector<float> wide(16 * 3, 0.0f), cells(8 * 3, 0.0f);
    const std::vector<float> mine = values(24, 0.9f), soft = values(15, 0.2f);
    for (int row = 0; row < 3; ++row) {
        std::copy(mine.begin() + row * 8, mine.begin() + row * 8 + 8, wide.begin() + row * 16);
        std::copy(soft.begin() + row * 5, soft.begin() + row * 5 + 5, cells.begin() + row * 8);
    }
    ref_set.tensors = {node("l_out-0", {16, 3}, wide), node("kq_soft_max-0", {8, 3}, cells)};
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    auto ref = ReferenceDump::open_gguf(write(ref_set, dir + "/ref.gguf"));
    ASSERT_TRUE(ours && ref);
    const CompareRunResult r = compare_dumps(*ours.value(), *ref.value(), {}, 1);
    ASSERT_EQ(r.comparisons.size(), 2u);
    EXPECT_EQ(r.comparisons[0].status, CompareStatus::kDiverged) << r.comparisons[0].note;
    EXPECT_NE(r.comparisons[0].note.find("cannot be paired"), std::string::npos) << r.comparisons[0].note;
    EXPECT_EQ(r.comparisons[1].status, CompareStatus::kOk) << r.comparisons[1].note;
    EXPECT_EQ(r.comparisons[1].note, "first 5 of 8 KV cells");
    std::filesystem::remove_all(dir);
}

TEST(CompareDumps, NanInTheReferenceIsReportedNotMeasuredAsAgreement) {
    const std::string dir = test::make_temp_dir();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    ExportSet ours_set, ref_set;
    std::vector<float> finite(4096), all_nan(4096, nan);
    for (size_t i = 0; i < finite.size(); ++i) finite[i] = std::sin(0.01f * static_cast<float>(i));
    ours_set.tensors = {node("attn_norm-0", {64, 64}, finite), node("l_out-0", {64, 64}, all_nan)};
    ref_set.tensors = {node("attn_norm-0", {64, 64}, all_nan), node("l_out-0", {64, 64}, all_nan)};
    auto ours = ReferenceDump::open_gguf(write(ours_set, dir + "/ours.gguf"));
    auto ref = ReferenceDump::open_gguf(write(ref_set, dir + "/ref.gguf"));
    ASSERT_TRUE(ours && ref);
    const CompareRunResult r = compare_dumps(*ours.value(), *ref.value(), {}, 1);
    ASSERT_EQ(r.comparisons.size(), 2u);
    for (const EventComparison& c : r.comparisons) {
        SCOPED_TRACE(c.name);
        EXPECT_EQ(c.status, CompareStatus::kDiverged);
        // Nothing was measured: no nmse 0, no cosine 1.
        EXPECT_TRUE(std::isnan(c.metrics.nmse)) << c.metrics.nmse;
        EXPECT_TRUE(std::isnan(c.metrics.cosine)) << c.metrics.cosine;
        EXPECT_EQ(c.metrics.n_finite, 0);
        EXPECT_EQ(c.metrics.nan_ref, 4096);
        EXPECT_NE(c.note.find("reference has NaN in 4096 of 4096 values"), std::string::npos) << c.note;
        EXPECT_NE(c.note.find("nothing measured"), std::string::npos) << c.note;
    }
    EXPECT_EQ(r.comparisons[0].metrics.nan_ours, 0);
    EXPECT_EQ(r.comparisons[1].metrics.nan_ours, 4096);
    EXPECT_EQ(r.summary.first_divergent, 0);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ls
