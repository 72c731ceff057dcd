// Reference sources besides GGUF dumps: eval-callback logs checked value by value against the
// matching dumps, .npy folders round-tripped from a dump, and malformed inputs of both kinds.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/compare/comparison.h"
#include "engine/compare/metrics.h"
#include "engine/compare/reference.h"
#include "engine/compare/reference_formats.h"
#include "tests/test_support.h"

namespace ls {
namespace {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

void expect_error(const Error& e, const std::string& file, std::initializer_list<const char*> fragments) {
    EXPECT_EQ(e.code, ErrorCode::kBadInput);
    EXPECT_NE(e.message.find(file), std::string::npos) << "message does not name " << file << ": " << e.message;
    for (const char* f : fragments)
        EXPECT_NE(e.message.find(f), std::string::npos) << "message: " << e.message << "\nexpected to mention: " << f;
}

// ---- eval-callback logs against the dumps of the same runs ------------------------------------

struct LogCheck {
    int tensors = 0, matched = 0, samples = 0, sums = 0;
    double worst_sum_rel = 0;
};

LogCheck check_log_against_dump(const std::string& log_rel, const std::string& dump_rel) {
    LogCheck c;
    auto log = ReferenceDump::open(test::fixture_path(log_rel));
    EXPECT_TRUE(log.ok()) << (log.ok() ? "" : log.error().message);
    auto dump = ReferenceDump::open(test::fixture_path(dump_rel));
    EXPECT_TRUE(dump.ok()) << (dump.ok() ? "" : dump.error().message);
    if (!log.ok() || !dump.ok()) return c;
    for (const RefTensor& t : log.value()->tensors()) {
        ++c.tensors;
        EXPECT_FALSE(t.complete());
        EXPECT_EQ(t.decode, 0) << t.name;
        // Unnamed nodes are named after their node index: the log's count must agree.
        if (t.base_name.rfind("node_", 0) == 0) {
            EXPECT_EQ(t.base_name, "node_" + std::to_string(t.node_index));
        }
        const RefTensor* d = dump.value()->find(t.name);
        if (!d) {
            // The _nocache dumps dropped the KV-cache tensors (and v_cont in MLA); the log has them.
            EXPECT_TRUE(t.base_name.rfind("cache_", 0) == 0 || t.base_name.rfind("v_cont-", 0) == 0)
                << t.name << " is in the log but not in the dump";
            continue;
        }
        ++c.matched;
        EXPECT_EQ(d->op, t.op) << t.name;
        EXPECT_EQ(d->node_index, t.node_index) << t.name;
        for (int k = 0; k < 4; ++k) EXPECT_EQ(d->ne()[k], t.ne()[k]) << t.name << " ne" << k;
        std::vector<float> v = dump.value()->values(*d);
        for (const auto& [flat, printed] : t.samples) {
            EXPECT_LT(flat, static_cast<int64_t>(v.size())) << t.name;
            if (flat >= static_cast<int64_t>(v.size())) break;
            // "%12.4f": rounded to 4 decimals; a float's own precision for large values.
            EXPECT_NEAR(printed, v[flat], 5.001e-5 + 1e-6 * std::fabs(v[flat])) << t.name << " at flat index " << flat;
            ++c.samples;
        }
        if (t.has_sum) {
            double s = 0, l1 = 0;
            for (float x : v) s += x, l1 += std::fabs(x);
            // The log's sum is a float accumulation printed with 6 decimals.
            const double err = std::fabs(s - t.sum);
            EXPECT_LE(err, 1e-4 * std::max(std::fabs(s), 1e-3 * l1) + 1e-6) << t.name << " sum " << t.sum << " vs " << s;
            if (std::fabs(s) > 1e-3 * l1) c.worst_sum_rel = std::max(c.worst_sum_rel, err / std::fabs(s));
            ++c.sums;
        }
    }
    return c;
}

TEST(EvalLog, StoriesMatchesItsDump) {
    LS_REQUIRE_FIXTURES();
    LogCheck c = check_log_against_dump("logs/stories260K_once_evalcb_c256_fa-off.txt", "dumps/stories260K_once_n0_fa-off.gguf");
    EXPECT_EQ(c.tensors, 186);
    EXPECT_EQ(c.matched, 186);  // a complete dump: every printed tensor is in it
    EXPECT_EQ(c.sums, 186);
    EXPECT_GT(c.samples, 5000);
    std::printf("stories fa-off: %d tensors, %d samples, %d sums, worst sum rel %.2g\n", c.matched, c.samples, c.sums,
                c.worst_sum_rel);
}

TEST(EvalLog, StoriesFlashAttentionMatchesItsDump) {
    LS_REQUIRE_FIXTURES();
    LogCheck c = check_log_against_dump("logs/stories260K_once_evalcb_c256.txt", "dumps/stories260K_once_n0.gguf");
    EXPECT_EQ(c.tensors, 146);  // the last printout (the flash-attention node) is cut off: kept without values
    EXPECT_EQ(c.sums, 145);
    std::printf("stories fa: %d tensors, %d samples, %d sums, worst sum rel %.2g\n", c.matched, c.samples, c.sums,
                c.worst_sum_rel);
}

TEST(EvalLog, Qwen2MatchesItsDump) {
    LS_REQUIRE_FIXTURES();
    LogCheck c = check_log_against_dump("logs/qwen2-mini-F16_france_evalcb_fa-off.txt",
                                        "dumps/qwen2-mini-F16_france_n0_fa-off_nocache.gguf");
    EXPECT_EQ(c.tensors, 112);
    EXPECT_EQ(c.sums, 111 - (c.tensors - c.matched));
    EXPECT_GT(c.samples, 3000);
    std::printf("qwen2: %d of %d tensors in the dump, %d samples, %d sums, worst sum rel %.2g\n", c.matched, c.tensors,
                c.samples, c.sums, c.worst_sum_rel);
}

TEST(EvalLog, Deepseek2MatchesItsDump) {
    LS_REQUIRE_FIXTURES();
    LogCheck c = check_log_against_dump("logs/deepseek2-mini-F16_rome_evalcb_fa-off.txt",
                                        "dumps/deepseek2-mini-F16_rome_n0_fa-off_nocache.gguf");
    EXPECT_EQ(c.tensors, 158);
    EXPECT_GT(c.samples, 5000);
    std::printf("deepseek2: %d of %d tensors in the dump, %d samples, %d sums, worst sum rel %.2g\n", c.matched,
                c.tensors, c.samples, c.sums, c.worst_sum_rel);
}

// A small log written here: where each printed value lands, decode boundaries, occurrences.
const char* kSmallLog =
    "some other output\n"
    "common_debug_cb_eval:                     embd = (f32)   GET_ROWS(tok{8, 9, 1, 1}, inp{2, 1, 1, 1}}) = {8, 2, 1, 1}\n"
    "    [\n"
    "        [\n"
    "            [      0.0000,       1.0000,       2.0000,    ...,       5.0000,       6.0000,       7.0000  ],\n"
    "            [      8.0000,       9.0000,      10.0000,    ...,      13.0000,      14.0000,      15.0000  ],\n"
    "        ],\n"
    "    ]\n"
    "    sum = 120.000000\n"
    "common_debug_cb_eval:                   Qcur-0 = (f32)    RESHAPE(embd{8, 2, 1, 1}, }) = {2, 8, 1, 1}\n"
    "    [\n"
    "        [\n"
    "            [      0.0000,       1.0000  ],\n"
    "            [      2.0000,       3.0000  ],\n"
    "            [      4.0000,       5.0000  ],\n"
    "            ..., \n"
    "            [     10.0000,      11.0000  ],\n"
    "            [     12.0000,      13.0000  ],\n"
    "            [     14.0000,      15.0000  ],\n"
    "        ],\n"
    "    ]\n"
    "    sum = 120.000000\n"
    "common_debug_cb_eval:                   Qcur-0 = (f32)       ROPE(Qcur-0{2, 8, 1, 1}, pos{2, 1, 1, 1}}) = {2, 8, 1, 1}\n"
    "common_debug_cb_eval:              (permuted) = (f32)    PERMUTE(x{2, 8, 1, 1}, }) = {8, 2, 1, 1}\n"
    "common_debug_cb_eval:                     embd = (f32)   GET_ROWS(tok{8, 9, 1, 1}, inp{1, 1, 1, 1}}) = {8, 1, 1, 1}\n"
    "    [\n"
    "        [\n"
    "            [     -0.0000,          nan,         -inf,    ...,       5.0000,       6.0000,       7.0000  ],\n"
    "        ],\n"
    "    ]\n"
    "    sum = nan\n";

TEST(EvalLog, PlacesPrintedValuesAtTheirGgmlIndices) {
    auto r = parse_eval_log(kSmallLog, "small.txt");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const ReferenceDump& d = *r.value();
    ASSERT_EQ(d.tensors().size(), 5u);
    const RefTensor* embd = d.find("embd");
    ASSERT_TRUE(embd);
    ASSERT_EQ(embd->samples.size(), 12u);
    for (const auto& [flat, v] : embd->samples) EXPECT_EQ(v, static_cast<float>(flat));
    EXPECT_TRUE(embd->has_sum);
    EXPECT_EQ(embd->sum, 120.0);
    EXPECT_EQ(embd->op, "GET_ROWS");
    EXPECT_EQ(embd->src0, "tok");
    EXPECT_EQ(embd->src1, "inp");
    const RefTensor* q = d.find("Qcur-0");
    ASSERT_TRUE(q);
    EXPECT_EQ(q->ne()[0], 2);
    EXPECT_EQ(q->ne()[1], 8);
    for (const auto& [flat, v] : q->samples) EXPECT_EQ(v, static_cast<float>(flat));
    const RefTensor* q2 = d.find("Qcur-0#2");
    ASSERT_TRUE(q2);  // a header without a printout (as for quantized tensors)
    EXPECT_EQ(q2->occurrence, 2);
    EXPECT_TRUE(q2->samples.empty());
    EXPECT_FALSE(q2->has_sum);
    EXPECT_TRUE(d.find(" (permuted)"));  // the leading space of an unnamed view's name comes back
    const RefTensor* e1 = d.find("embd@1");  // the graph restarts at its first node: decode 1
    ASSERT_TRUE(e1);
    EXPECT_EQ(e1->decode, 1);
    EXPECT_EQ(e1->node_index, 0);
    ASSERT_EQ(e1->samples.size(), 6u);
    EXPECT_TRUE(std::isnan(e1->samples[1].second));
    EXPECT_TRUE(std::isinf(e1->samples[2].second));
    EXPECT_EQ(e1->samples[3].first, 5);
    EXPECT_TRUE(std::isnan(e1->sum));
}

TEST(EvalLog, DamagedLogsGiveClearErrors) {
    const std::string base = kSmallLog;
    auto bad = [](const std::string& text, std::initializer_list<const char*> fragments) {
        auto r = parse_eval_log(text, "damaged.txt");
        ASSERT_FALSE(r.ok()) << "accepted:\n" << text;
        expect_error(r.error(), "damaged.txt", fragments);
    };
    // Not a log at all.
    bad("hello\nworld\n\x01\x02\x03 binary\n", {"no tensor printouts"});
    bad("", {"no tensor printouts"});
    // A value that is not a number.
    std::string t = base;
    t.replace(t.find("9.0000"), 6, "9.0a00");
    bad(t, {":6:", "9.0a00", "not a number"});
    // Garbage inside a printout followed by more tensors.
    t = base;
    t.insert(t.find("            [      8.0000"), "garbage line here\n");
    bad(t, {":6:", "cut short", "garbage line here"});
    // A printout cut short inside the log: rows missing, next header follows.
    t = base;
    t.erase(t.find("        ],\n    ]\n    sum = 120"), std::strlen("        ],\n    ]\n    sum = 120.000000\n"));
    bad(t, {"embd", "cut short"});
    // Printed rows that do not fit the shape in the header.
    t = base;
    t.replace(t.find("{8, 2, 1, 1}\n"), 13, "{8, 5, 1, 1}\n");
    bad(t, {":2:", "ne1 = 5"});
    // A damaged header and a sum that is not a number.
    bad("common_debug_cb_eval:  x = (f32)  ADD(a{1, 1, 1, 1}, }) = {1, 1, zz, 1}\n", {":1:", "shape"});
    t = base;
    t.replace(t.find("sum = 120.000000"), 16, "sum = twelve");
    bad(t, {"sum", "twelve"});
    // Absurd shapes are refused before any allocation.
    bad("f: x = (f32)  ADD(a{1, 1, 1, 1}, }) = {99999999999999, 99999999999999, 1, 1}\n", {":1:", "shape"});
}

TEST(EvalLog, APrintoutCutOffAtTheEndKeepsTheTensorWithoutValues) {
    std::string t = std::string(kSmallLog) +
                    "common_debug_cb_eval:                   norm-0 = (f32)   RMS_NORM(embd{8, 1, 1, 1}, }) = {8, 1, 1, 1}\n"
                    "    [\n        [\n            [      1.0000,       2.0\n"
                    "\n# ---- stderr ----\nother output\n";
    auto r = parse_eval_log(t, "cut.txt");
    ASSERT_TRUE(r.ok()) << r.error().message;
    const RefTensor* n = r.value()->find("norm-0@1");
    ASSERT_TRUE(n);
    EXPECT_TRUE(n->samples.empty());
    EXPECT_FALSE(n->has_sum);
    std::vector<float> ours(8, 1.0f);
    PartialComparison pc;
    std::string why;
    EXPECT_FALSE(compare_partial(ours.data(), n->ne(), *n, &pc, &why));
    EXPECT_NE(why.find("no values"), std::string::npos) << why;
}

// ---- partial comparison ----------------------------------------------------------------------

// kSmallLog's first tensor, embd {8, 2} holding 0..15, compared with `log` as the reference.
EventComparison compare_small_embd(const std::string& log) {
    auto r = parse_eval_log(log, "edited.txt");
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    if (!r.ok()) return {};
    Comparator comparator(*r.value());
    std::vector<float> ours(16);
    for (int i = 0; i < 16; ++i) ours[i] = static_cast<float>(i);
    return comparator.compare(0, HostTensor{"embd", {8, 2, 1, 1}, ours.data()});
}

TEST(PartialCompare, AHeaderWiderThanOurTensorIsADivergenceWithItsShapes) {
    EXPECT_EQ(compare_small_embd(kSmallLog).status, CompareStatus::kOk);
    // The same printout under a header twice as wide: its first three columns are ours, its last
    // three would be columns 13..15, which we do not have. Only KV cells are padded like that.
    std::string wide = kSmallLog;
    wide.replace(wide.find("{8, 2, 1, 1}\n"), 13, "{16, 2, 1, 1}\n");
    const EventComparison c = compare_small_embd(wide);
    EXPECT_EQ(c.status, CompareStatus::kDiverged) << c.note;
    EXPECT_NE(c.note.find("[8, 2, 1, 1] cannot be paired with the reference's [16, 2, 1, 1]"), std::string::npos) << c.note;
}

TEST(PartialCompare, ANanSumDivergesAndSaysWhy) {
    std::string nan_sum = kSmallLog;
    nan_sum.replace(nan_sum.find("sum = 120.000000"), 16, "sum = nan");
    const EventComparison c = compare_small_embd(nan_sum);
    EXPECT_EQ(c.status, CompareStatus::kDiverged);
    EXPECT_NE(c.note.find("the reference's sum is nan (ours 120)"), std::string::npos) << c.note;
    // A sum that is merely off says both sums.
    std::string off = kSmallLog;
    off.replace(off.find("sum = 120.000000"), 16, "sum = 150.000000");
    const EventComparison d = compare_small_embd(off);
    EXPECT_EQ(d.status, CompareStatus::kDiverged);
    EXPECT_NE(d.note.find("sums differ: ours 120, the reference's 150"), std::string::npos) << d.note;
}

TEST(PartialCompare, SamplesAndSum) {
    auto r = parse_eval_log(kSmallLog, "small.txt");
    ASSERT_TRUE(r.ok());
    const RefTensor& embd = *r.value()->find("embd");
    std::vector<float> ours(16);
    for (int i = 0; i < 16; ++i) ours[i] = static_cast<float>(i);
    PartialComparison pc;
    std::string why;
    ASSERT_TRUE(compare_partial(ours.data(), embd.ne(), embd, &pc, &why)) << why;
    EXPECT_EQ(pc.n_samples, 12);
    EXPECT_EQ(pc.n_total, 16);
    EXPECT_EQ(pc.metrics.max_abs, 0.0);
    EXPECT_EQ(pc.sum_rel_err, 0.0);
    EXPECT_EQ(pc.note, "partial: 12 of 16 values and the sum");
    // A change where no value was printed shows only in the sum.
    ours[3] += 1.0f;
    ASSERT_TRUE(compare_partial(ours.data(), embd.ne(), embd, &pc, &why));
    EXPECT_EQ(pc.metrics.max_abs, 0.0);
    EXPECT_NEAR(pc.sum_rel_err, 1.0 / 120.0, 1e-12);
    // Our tensor has more rows; the reference kept the last one (or the out_ids row).
    const int64_t ne3[4] = {8, 3, 1, 1};
    std::vector<float> three(24, 0.0f);
    for (int i = 0; i < 16; ++i) three[8 + i] = static_cast<float>(i);
    ASSERT_TRUE(compare_partial(three.data(), ne3, embd, &pc, &why)) << why;
    EXPECT_EQ(pc.metrics.max_abs, 0.0);  // the reference's two rows are our last two
    EXPECT_EQ(pc.note, "partial: 12 of 16 values and the sum, our last 2 rows");
    const int64_t bad_ne[4] = {8, 2, 2, 1};
    EXPECT_FALSE(compare_partial(ours.data(), bad_ne, embd, &pc, &why));
    EXPECT_NE(why.find("cannot be paired"), std::string::npos);
}

// ---- .npy folders ----------------------------------------------------------------------------

std::vector<int64_t> reversed_shape(const int64_t* ne) {
    int last = 3;
    while (last > 0 && ne[last] == 1) --last;
    std::vector<int64_t> s;
    for (int k = last; k >= 0; --k) s.push_back(ne[k]);
    return s;
}

const char* dtype_of(GgmlType t) { return t == GgmlType::I32 ? "<i4" : t == GgmlType::I64 ? "<i8" : "<f4"; }
size_t elem_size(GgmlType t) { return t == GgmlType::I64 ? 8 : 4; }

TEST(NpyFolder, RoundTripsADumpInBothOrders) {
    LS_REQUIRE_FIXTURES();
    auto dump = ReferenceDump::open(test::fixture_path("dumps/stories260K_once_n0_fa-off.gguf"));
    ASSERT_TRUE(dump.ok()) << dump.error().message;
    const ReferenceDump& d = *dump.value();
    for (const char* order : {"ggml", "row-major"}) {
        const std::string dir = test::make_temp_dir();
        std::string manifest = std::string("{\"format\": \"layerscope-npy\", \"version\": 1, \"prompt_tokens\": [1, 403, 407],"
                                           " \"tensors\": [\n");
        for (size_t i = 0; i < d.tensors().size(); ++i) {
            const RefTensor& t = d.tensors()[i];
            std::vector<int64_t> shape = reversed_shape(t.ne());
            std::string extra;
            if (std::string(order) == "row-major") {
                // A batch axis in front and, for every other tensor, all but the last axis flattened:
                // "ne" says how to view it.
                int64_t rows = 1;
                for (size_t k = 0; k + 1 < shape.size(); ++k) rows *= shape[k];
                if (i % 2) shape = {rows, shape.back()};
                shape.insert(shape.begin(), 1);
                extra = fmt::format(", \"ne\": [{}, {}, {}, {}]", t.ne()[0], t.ne()[1], t.ne()[2], t.ne()[3]);
            }
            const std::string file = "t" + std::to_string(i) + ".npy";
            Status s = write_npy(dir + "/" + file, dtype_of(t.stored_type), shape, t.data);
            ASSERT_TRUE(s.ok()) << s.error().message;
            std::string name;
            for (char c : t.name) name += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
            manifest += fmt::format("{}{{\"name\": \"{}\", \"file\": \"{}\", \"order\": \"{}\", \"op\": \"{}\", \"kind\": \"{}\"{}}}\n",
                                    i ? "," : "", name, file, order, t.op,
                                    t.kind == RefKind::kInput ? "input" : t.kind == RefKind::kLogits ? "logits" : "node", extra);
        }
        manifest += "]}\n";
        write_text(dir + "/manifest.json", manifest);
        auto folder = load_npy_folder(dir);
        ASSERT_TRUE(folder.ok()) << folder.error().message;
        EXPECT_EQ(folder->prompt_tokens, (std::vector<int32_t>{1, 403, 407}));
        auto loaded = ReferenceDump::open(dir);
        ASSERT_TRUE(loaded.ok()) << loaded.error().message;
        ASSERT_EQ(loaded.value()->tensors().size(), d.tensors().size());
        for (size_t i = 0; i < d.tensors().size(); ++i) {
            const RefTensor& a = d.tensors()[i];
            const RefTensor& b = loaded.value()->tensors()[i];
            EXPECT_EQ(a.name, b.name);
            EXPECT_EQ(a.base_name, b.base_name);
            EXPECT_EQ(a.occurrence, b.occurrence);
            EXPECT_EQ(a.kind, b.kind);
            EXPECT_EQ(a.op, b.op);
            EXPECT_EQ(a.stored_type, b.stored_type);
            for (int k = 0; k < 4; ++k) EXPECT_EQ(a.ne()[k], b.ne()[k]) << a.name;
            ASSERT_TRUE(b.complete());
            EXPECT_EQ(std::memcmp(a.data, b.data, a.n_elements() * elem_size(a.stored_type)), 0) << a.name;
        }
        fs::remove_all(dir);
    }
}

std::vector<uint8_t> npy_bytes(const std::string& header, size_t data_bytes, int version = 1) {
    std::vector<uint8_t> b = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<uint8_t>(version), 0};
    const size_t n = header.size();
    b.push_back(n & 0xff);
    b.push_back((n >> 8) & 0xff);
    if (version >= 2) b.push_back((n >> 16) & 0xff), b.push_back((n >> 24) & 0xff);
    b.insert(b.end(), header.begin(), header.end());
    b.resize(b.size() + data_bytes, 0);
    return b;
}

TEST(Npy, ReadsTheSupportedDtypesAndVersions) {
    {
        auto b = npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }\n", 4, 2);
        const uint16_t h[2] = {0x3c00, 0xc000};  // 1.0, -2.0
        std::memcpy(b.data() + b.size() - 4, h, 4);
        auto a = parse_npy(b.data(), b.size(), "h.npy");
        ASSERT_TRUE(a.ok()) << a.error().message;
        float f[2];
        std::memcpy(f, a->data(), 8);
        EXPECT_EQ(f[0], 1.0f);
        EXPECT_EQ(f[1], -2.0f);
    }
    {
        auto b = npy_bytes("{\"shape\": (1, 2), \"descr\": \"<f8\", \"fortran_order\": False}", 16, 3);
        const double v[2] = {0.5, 3.25};
        std::memcpy(b.data() + b.size() - 16, v, 16);
        auto a = parse_npy(b.data(), b.size(), "d.npy");
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->shape, (std::vector<int64_t>{1, 2}));
        float f[2];
        std::memcpy(f, a->data(), 8);
        EXPECT_EQ(f[1], 3.25f);
    }
    for (const char* dt : {"<i4", "<i8"}) {
        auto b = npy_bytes(fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (3L,), }}\n", dt),
                           3 * (dt[2] == '4' ? 4 : 8));
        auto a = parse_npy(b.data(), b.size(), "i.npy");
        ASSERT_TRUE(a.ok()) << a.error().message;
        EXPECT_EQ(a->stored_type, dt[2] == '4' ? GgmlType::I32 : GgmlType::I64);
    }
    auto scalar = npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 4);
    EXPECT_TRUE(parse_npy(scalar.data(), scalar.size(), "s.npy").ok());
}

TEST(Npy, MalformedFilesGiveClearErrors) {
    auto bad = [](const std::vector<uint8_t>& b, std::initializer_list<const char*> fragments) {
        auto a = parse_npy(b.data(), b.size(), "bad.npy");
        ASSERT_FALSE(a.ok());
        expect_error(a.error(), "bad.npy", fragments);
    };
    const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n";
    std::vector<uint8_t> ok = npy_bytes(good, 24);
    ASSERT_TRUE(parse_npy(ok.data(), ok.size(), "ok.npy").ok());
    bad(std::vector<uint8_t>(ok.begin(), ok.begin() + 7), {"truncated"});
    bad({'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}, {"not a .npy"});
    bad(std::vector<uint8_t>(ok.begin(), ok.begin() + 30), {"truncated .npy header"});
    std::vector<uint8_t> absurd = ok;
    absurd[6] = 2;  // version 2 reads 4 length bytes: the first header characters make it huge
    bad(absurd, {"header length", "absurd"});
    auto big = npy_bytes(good, 24, 2);
    big[8] = big[9] = big[10] = big[11] = 0xff;
    bad(big, {"absurd"});
    bad(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }\n", 24), {"dtype \">f4\"", "not supported"});
    bad(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }\n", 48), {"dtype \"<c8\""});
    bad(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }\n", 24), {"Fortran order"});
    bad(npy_bytes(good, 20), {"needs 24 data bytes", "has 20"});
    bad(npy_bytes(good, 28), {"needs 24 data bytes", "has 28"});
    bad(npy_bytes("{'descr': '<f4', 'shape': (2, 3), }\n", 24), {"missing 'fortran_order'"});
    bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }\n", 24), {"malformed .npy header"});
    bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}\n", 24), {"unexpected key \"x\""});
    bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }\n", 24),
        {"too large"});
    bad(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0), }\n", 0), {"empty"});
    bad(npy_bytes("{'descr': '<f4", 0), {"unterminated"});
    bad(npy_bytes("[1, 2]", 0), {"not a Python dict"});
}

// A folder with one valid array "a.npy" (ggml ne [3, 2]) and the given manifest.
std::string folder_with(const std::string& manifest) {
    const std::string dir = test::make_temp_dir();
    const float v[6] = {0, 1, 2, 3, 4, 5};
    EXPECT_TRUE(write_npy(dir + "/a.npy", "<f4", {2, 3}, v).ok());
    write_text(dir + "/manifest.json", manifest);
    return dir;
}

TEST(NpyFolder, MalformedManifestsGiveClearErrors) {
    auto bad = [](const std::string& manifest, std::initializer_list<const char*> fragments) {
        const std::string dir = folder_with(manifest);
        auto r = ReferenceDump::open(dir);
        ASSERT_FALSE(r.ok()) << manifest;
        expect_error(r.error(), "manifest.json", fragments);
        fs::remove_all(dir);
    };
    const std::string head = "{\"format\": \"layerscope-npy\", \"version\": 1, \"tensors\": [";
    {
        const std::string dir = folder_with(head + "{\"name\": \"x#2@3\", \"file\": \"a.npy\"}]}");
        auto r = ReferenceDump::open(dir);
        ASSERT_TRUE(r.ok()) << r.error().message;
        const RefTensor* t = r.value()->find("x#2@3");
        ASSERT_TRUE(t);
        EXPECT_EQ(t->ne()[0], 3);
        EXPECT_EQ(t->ne()[1], 2);
        EXPECT_EQ(t->decode, 3);
        fs::remove_all(dir);
    }
    bad("{not json", {"not valid JSON"});
    bad("[]", {"JSON object"});
    bad("{\"format\": \"other\", \"version\": 1, \"tensors\": []}", {"\"format\""});
    bad("{\"format\": \"layerscope-npy\", \"version\": 2, \"tensors\": []}", {"\"version\""});
    bad("{\"format\": \"layerscope-npy\", \"version\": 1}", {"\"tensors\""});
    bad(head + "{\"file\": \"a.npy\"}]}", {"tensor 0", "missing \"name\""});
    bad(head + "{\"name\": \"x\"}]}", {"tensor 0", "missing \"file\""});
    bad(head + "{\"name\": \"x\", \"file\": \"../a.npy\"}]}", {"outside the folder"});
    bad(head + "{\"name\": \"x\", \"file\": \"/etc/passwd\"}]}", {"outside the folder"});
    bad(head + "{\"name\": \"x\", \"file\": \"missing.npy\"}]}", {"missing.npy", "does not exist"});
    bad(head + "{\"name\": \"x\", \"file\": \"a.npy\", \"order\": \"fortran\"}]}", {"\"order\""});
    bad(head + "{\"name\": \"x\", \"file\": \"a.npy\", \"ne\": [2, 3]}]}", {"ne [3, 2] in ggml order", "ne [2, 3]"});
    bad(head + "{\"name\": \"x\", \"file\": \"a.npy\", \"order\": \"row-major\", \"ne\": [7]}]}", {"6 elements"});
    bad(head + "{\"name\": \"x#2\", \"file\": \"a.npy\", \"occurrence\": 3}]}", {"disagrees"});
    bad(head + "{\"name\": \"x\", \"file\": \"a.npy\"}, {\"name\": \"x\", \"file\": \"a.npy\"}]}", {"tensor 1", "same tensor"});
    bad(head + "{\"name\": \"x\", \"file\": \"a.npy\"}], \"prompt_tokens\": [\"a\"]}", {"prompt_tokens"});
    {
        // A symlink inside the folder that leads out of it.
        const std::string outside = test::make_temp_dir();
        const float v[6] = {};
        ASSERT_TRUE(write_npy(outside + "/o.npy", "<f4", {6}, v).ok());
        const std::string dir = folder_with(head + "{\"name\": \"x\", \"file\": \"link.npy\"}]}");
        fs::create_symlink(outside + "/o.npy", dir + "/link.npy");
        auto r = ReferenceDump::open(dir);
        ASSERT_FALSE(r.ok());
        expect_error(r.error(), "manifest.json", {"outside the folder"});
        fs::remove_all(dir);
        fs::remove_all(outside);
    }
    {
        // A listed file that is not a valid .npy: the error names that file.
        const std::string dir = folder_with(head + "{\"name\": \"x\", \"file\": \"b.npy\"}]}");
        write_text(dir + "/b.npy", "\x93NUMPY\x01");
        auto r = ReferenceDump::open(dir);
        ASSERT_FALSE(r.ok());
        expect_error(r.error(), "b.npy", {"truncated"});
        fs::remove_all(dir);
    }
}

TEST(ReferenceOpen, DetectsTheFormat) {
    const std::string dir = test::make_temp_dir();
    auto r = ReferenceDump::open(dir);
    ASSERT_FALSE(r.ok());
    expect_error(r.error(), dir, {"without manifest.json"});
    write_text(dir + "/x.txt", "just some text\n");
    r = ReferenceDump::open(dir + "/x.txt");
    ASSERT_FALSE(r.ok());
    expect_error(r.error(), "x.txt", {"not a reference", "GGUF"});
    write_text(dir + "/log.txt", kSmallLog);
    r = ReferenceDump::open(dir + "/log.txt");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value()->tensors().size(), 5u);
    const float v[2] = {1, 2};
    ASSERT_TRUE(write_npy(dir + "/one.npy", "<f4", {2}, v).ok());
    r = ReferenceDump::open(dir + "/one.npy");
    ASSERT_FALSE(r.ok());
    expect_error(r.error(), "one.npy", {"manifest.json"});
    r = ReferenceDump::open(dir + "/absent.gguf");
    ASSERT_FALSE(r.ok());
    expect_error(r.error(), "absent.gguf", {"cannot open"});
    fs::remove_all(dir);
}

}  // namespace
}  // namespace ls
