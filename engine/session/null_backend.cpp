// The no-op backend of the dry run: shapes without arithmetic.
#include "engine/session/null_backend.h"

#include <cstdlib>

namespace ls {
namespace {

class NullBackend final : public Backend {
public:
    std::string name() const override { return "null (dry run)"; }
    BackendKind kind() const override { return BackendKind::kCpu; }
    bool supports(Op, MathMode, GgmlType) const override { return true; }

    // A forward pass offsets pointers into its buffers (output rows, logits columns) but a null op
    // never dereferences them, so a tiny zeroed block per buffer is enough.
    void* alloc(size_t) override { return std::calloc(1, kTinyBytes); }
    void release(void* ptr) override { std::free(ptr); }
    void upload(void*, const void*, size_t) override {}
    void download(void*, const void*, size_t) override {}
    void copy(const Tensor&, Tensor&) override {}
    Tensor weight(GgmlType type, const int64_t ne[4], const void* host_data) override {
        return make_tensor(const_cast<void*>(host_data), ne[0], ne[1], ne[2], ne[3], type);
    }

    void get_rows(const Tensor&, const Tensor&, Tensor&) override {}
    void rms_norm(const Tensor&, float, Tensor&) override {}
    void mul_row(const Tensor&, const Tensor&, Tensor&) override {}
    void add(const Tensor&, const Tensor&, Tensor&) override {}
    void matmul(const Tensor&, const Tensor&, Tensor&, MathMode) override {}
    void rope(Tensor&, const Tensor&, const Tensor&, const RopeParams&, MathMode) override {}
    void swiglu(const Tensor&, const Tensor&, Tensor&, MathMode) override {}
    void store_kv(const Tensor&, const Tensor&, Tensor&, Tensor&, int64_t, MathMode) override {}
    void attn_scores(const Tensor&, const Tensor&, int64_t, Tensor&, MathMode) override {}
    void softmax_masked(const Tensor&, float, const Tensor&, const AttnMask&, Tensor&, MathMode) override {}
    void attn_values(const Tensor&, const Tensor&, int64_t, Tensor&, MathMode) override {}
    void attn_flash(const Tensor&, const Tensor&, const Tensor&, int64_t, float, const Tensor&, const AttnMask&,
                    Tensor&) override {}
    void merge_heads(const Tensor&, Tensor&) override {}
    void stats(const Tensor&, TensorStats* out) override { *out = TensorStats{}; }

private:
    static constexpr size_t kTinyBytes = 64;
};

}  // namespace

std::unique_ptr<Backend> make_null_backend() { return std::make_unique<NullBackend>(); }

}  // namespace ls
