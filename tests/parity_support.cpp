// Parity runs against reference dumps.
#include "tests/parity_support.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>

#include "engine/compare/backend_ab.h"
#include "engine/compare/compare_run.h"
#include "engine/compare/comparison.h"
#include "engine/compare/llama_variant.h"

namespace ls::test {

std::vector<int32_t> top_k(const float* logits, int64_t n, int k) {
    std::vector<int32_t> idx(static_cast<size_t>(n));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    idx.resize(k);
    return idx;
}

std::vector<int32_t> reference_generated(const std::string& dump_path) {
    auto dump = ReferenceDump::open(dump_path);
    return dump.ok() ? dump.value()->generated_tokens() : std::vector<int32_t>{};
}

std::string rewrite_gguf(const std::string& in, const std::string& out,
                         const std::function<void(std::vector<GgufKV>&, std::vector<GgufWriteTensor>&)>& edit) {
    auto file = GgufFile::open(in);
    EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
    if (!file.ok()) return out;
    std::vector<GgufKV> kv = file.value()->metadata();
    std::vector<GgufWriteTensor> tensors;
    for (const GgufTensorInfo& t : file.value()->tensors())
        tensors.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), t.data, t.n_bytes});
    edit(kv, tensors);
    Status s = gguf_write(out, kv, tensors);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
    return out;
}

void expect_agrees_with_cpu_exact(const Model& model, Backend& backend, ForwardOptions fo,
                                  const std::vector<int32_t>& prompt, int n_decode, int64_t min_compared) {
    fo.mode = MathMode::kExact;
    auto cpu = make_cpu_backend(2);
    auto cpu_run = run_as_reference(model, *cpu, fo, prompt, n_decode, "the cpu run");
    ASSERT_TRUE(cpu_run.ok()) << cpu_run.error().message;
    CompareRunOptions options;
    options.forward = fo;
    options.prompt = prompt;
    options.thresholds.noise_floor = false;
    options.thresholds.warn_nmse = 1e-6;
    options.thresholds.diverged_nmse = 1e-6;
    auto r = compare_with_reference(model, backend, *cpu_run.value(), options);
    ASSERT_TRUE(r.ok()) << r.error().message;
    for (const EventComparison& e : r.value().comparisons)
        EXPECT_TRUE(e.status == CompareStatus::kOk) << e.name << " " << compare_status_name(e.status) << " nmse "
                                                    << e.metrics.nmse;
    EXPECT_EQ(r.value().summary.no_reference, 0);
    EXPECT_GT(r.value().summary.compared(), min_compared);
}

BackendKind whole_model_cuda_kind() {
    const char* env = std::getenv("LAYERSCOPE_TEST_CUDA");
    return env && std::string(env) == "device" ? BackendKind::kCuda : BackendKind::kCudaEmulated;
}

ParityResult run_parity(const std::string& dump_path, const std::string& model_path, MathMode mode, double limit) {
    ParityResult result;
    auto dump = ReferenceDump::open(dump_path);
    EXPECT_TRUE(dump.ok()) << (dump.ok() ? "" : dump.error().message);
    if (!dump.ok()) return result;
    auto model = Model::open(model_path);
    EXPECT_TRUE(model.ok()) << (model.ok() ? "" : model.error().message);
    if (!model.ok()) return result;
    auto backend = make_cpu_backend(0);
    ForwardOptions options;
    options.mode = mode;
    options.n_ctx = dump.value()->n_ctx() > 0 ? dump.value()->n_ctx() : 256;  // LongRoPE follows it
    options.n_ubatch = dump.value()->n_ubatch();
    options.all_logits = dump.value()->all_logits();
    options.flash_attn = dump.value()->flash_attention();
    options.llama_isa = guess_llama_isa(*dump.value()).candidates.front();  // the reference's build
    auto forward = make_forward(*model.value(), *backend, options);
    EXPECT_TRUE(forward.ok()) << (forward.ok() ? "" : forward.error().message);
    if (!forward.ok()) return result;

    const ReferenceDump& ref = *dump.value();
    CaptureAll capture;
    std::vector<int32_t> input = ref.prompt_tokens();
    std::vector<int32_t> ref_generated = ref.generated_tokens();
    const size_t n_decode = ref.decode_n_tokens().size();
    for (size_t d = 0; d < n_decode; ++d) {
        Status s = forward.value()->eval(input, &capture);
        EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
        if (!s.ok()) return result;
        const std::vector<float>& logits = forward.value()->last_logits();
        int32_t next = top_k(logits.data(), static_cast<int64_t>(logits.size()), 1)[0];
        result.generated.push_back(next);
        result.top5_ours.push_back(top_k(logits.data(), static_cast<int64_t>(logits.size()), 5));
        // Feed the reference's token, so a divergence does not cascade into later calls.
        if (d < ref_generated.size()) input = {ref_generated[d]};
    }

    // Our events paired with the reference's tensors as `compare` pairs them (unnamed nodes by op
    // and source, a bias's sum after its unnamed product).
    Comparator comparator(ref);
    std::map<const RefTensor*, const CapturedTensor*> paired;
    for (const std::string& name : capture.order) {
        const RefTensor* t = comparator.pair(name);
        if (t && t->kind == RefKind::kNode) paired[t] = &capture.tensors.at(name);
    }
    for (const RefTensor& t : ref.tensors()) {
        if (t.kind == RefKind::kInput) continue;
        const CapturedTensor* ours = nullptr;
        if (t.kind == RefKind::kLogits) {
            // llama_logits = the last row (or, with all logits, every row) of the last
            // result_output (after qwen2's output.bias, gemma's soft cap) of the last ubatch of that
            // decode call.
            auto it = capture.tensors.end();
            for (int u = 0; u < 64; ++u)
                for (int k = 1; k <= 4; ++k) {
                    auto found = capture.tensors.find(event_dump_name("result_output", k, t.decode, u));
                    if (found != capture.tensors.end()) it = found;
                }
            if (it == capture.tensors.end()) continue;
            std::vector<float> r = ref.values(t);
            const CapturedTensor& c = it->second;
            const int64_t n_vocab = c.ne[0];
            const int64_t rows = static_cast<int64_t>(r.size()) / n_vocab;
            if (rows < 1 || rows > c.ne[1] || rows * n_vocab != static_cast<int64_t>(r.size())) {
                result.failures.push_back(t.name + ": logits shape does not match result_output");
                continue;
            }
            const float* ours_rows = c.data.data() + (c.ne[1] - rows) * n_vocab;
            result.top5_ref.push_back(top_k(r.data() + (rows - 1) * n_vocab, n_vocab, 5));
            Metrics m = compute_metrics(ours_rows, r.data(), rows * n_vocab);
            ++result.compared;
            if (!(m.nmse <= result.worst_nmse)) result.worst_nmse = m.nmse, result.worst_name = t.name;
            if (!(m.nmse <= limit)) result.failures.push_back(fmt::format("{}: nmse {:.3g}", t.name, m.nmse));
            continue;
        }
        auto it = paired.find(&t);
        if (it == paired.end()) {
            ++result.not_computed;
            continue;
        }
        ours = it->second;
        AlignedValues a;
        std::string why;
        if (!align_with_reference(ours->data.data(), ours->ne, ref, t, &a, &why)) {
            result.failures.push_back(t.name + ": " + why);
            continue;
        }
        Metrics m = compute_metrics(a.ours.data(), a.ref.data(), static_cast<int64_t>(a.ours.size()));
        ++result.compared;
        if (!(m.nmse <= result.worst_nmse)) result.worst_nmse = m.nmse, result.worst_name = t.name;
        if (!(m.nmse <= limit))
            result.failures.push_back(fmt::format("{}: nmse {:.3g}{}", t.name, m.nmse, a.note.empty() ? "" : " (" + a.note + ")"));
    }
    return result;
}

}  // namespace ls::test
