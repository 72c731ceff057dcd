// A backend that hands every call to another one (the CPU's by default): tests derive from it and
// override the one thing they change (what it supports, how much memory it reports, ...).
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"

namespace ls::test {

class ForwardingBackend : public Backend {
public:
    explicit ForwardingBackend(std::unique_ptr<Backend> inner = make_cpu_backend(1)) : inner_(std::move(inner)) {}

    std::string name() const override { return inner_->name(); }
    BackendKind kind() const override { return inner_->kind(); }
    bool supports(Op op, MathMode mode, GgmlType type) const override { return inner_->supports(op, mode, type); }
    BackendMemory memory() const override { return inner_->memory(); }
    void* alloc(size_t bytes) override { return inner_->alloc(bytes); }
    void release(void* p) override { inner_->release(p); }
    void upload(void* d, const void* s, size_t n) override { inner_->upload(d, s, n); }
    void download(void* d, const void* s, size_t n) override { inner_->download(d, s, n); }
    void copy(const Tensor& s, Tensor& d) override { inner_->copy(s, d); }
    Tensor weight(GgmlType t, const int64_t ne[4], const void* data) override { return inner_->weight(t, ne, data); }
    bool reads_host_weights() const override { return inner_->reads_host_weights(); }
    void get_rows(const Tensor& t, const Tensor& ids, Tensor& y) override { inner_->get_rows(t, ids, y); }
    void rms_norm(const Tensor& x, float eps, Tensor& y) override { inner_->rms_norm(x, eps, y); }
    void mul_row(const Tensor& x, const Tensor& w, Tensor& y) override { inner_->mul_row(x, w, y); }
    void add(const Tensor& a, const Tensor& b, Tensor& y) override { inner_->add(a, b, y); }
    void matmul(const Tensor& w, const Tensor& x, Tensor& y, MathMode m) override { inner_->matmul(w, x, y, m); }
    void rope(Tensor& x, const Tensor& pos, const Tensor& ff, const RopeParams& p, MathMode m) override {
        inner_->rope(x, pos, ff, p, m);
    }
    void swiglu(const Tensor& g, const Tensor& u, Tensor& y, MathMode m) override { inner_->swiglu(g, u, y, m); }
    void store_kv(const Tensor& k, const Tensor& v, Tensor& ck, Tensor& cv, int64_t first, MathMode m) override {
        inner_->store_kv(k, v, ck, cv, first, m);
    }
    void attn_scores(const Tensor& q, const Tensor& ck, int64_t n_kv, Tensor& kq, MathMode m) override {
        inner_->attn_scores(q, ck, n_kv, kq, m);
    }
    void softmax_masked(const Tensor& kq, float scale, const Tensor& pos, const AttnMask& mask, Tensor& p, MathMode m) override {
        inner_->softmax_masked(kq, scale, pos, mask, p, m);
    }
    void attn_values(const Tensor& p, const Tensor& cv, int64_t n_kv, Tensor& kqv, MathMode m) override {
        inner_->attn_values(p, cv, n_kv, kqv, m);
    }
    void attn_flash(const Tensor& q, const Tensor& ck, const Tensor& cv, int64_t n_kv, float scale, const Tensor& pos,
                    const AttnMask& mask, Tensor& out) override {
        inner_->attn_flash(q, ck, cv, n_kv, scale, pos, mask, out);
    }
    void merge_heads(const Tensor& x, Tensor& y) override { inner_->merge_heads(x, y); }
    void stats(const Tensor& x, TensorStats* out) override { inner_->stats(x, out); }
    void synchronize() override { inner_->synchronize(); }
    DeviceCounters device_counters() const override { return inner_->device_counters(); }

protected:
    std::unique_ptr<Backend> inner_;
};

}  // namespace ls::test
