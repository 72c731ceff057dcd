// A tensor as the kernels see it: a type, ggml-ordered counts (ne[0] fastest) and contiguous
// data on the backend's device. No names, no files: those live in the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/ggml_type.h"

namespace ls {

struct Tensor {
    GgmlType type = GgmlType::F32;
    int64_t ne[4] = {1, 1, 1, 1};
    void* data = nullptr;

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    uint64_t row_bytes() const {
        uint64_t b = 0;
        ggml_row_bytes(type, ne[0], &b);
        return b;
    }
    uint64_t n_bytes() const { return row_bytes() * static_cast<uint64_t>(n_rows()); }
    float* f32() const { return static_cast<float*>(data); }

    // The same data seen with other counts (a reshape: the element count must not change).
    Tensor reshaped(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) const {
        Tensor t = *this;
        t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
        return t;
    }
    // Columns [first, first + count) of a 2-D f32 tensor (contiguous, so a plain offset).
    Tensor columns(int64_t first, int64_t count) const {
        Tensor t = *this;
        t.ne[1] = count;
        t.data = static_cast<char*>(data) + static_cast<uint64_t>(first) * row_bytes();
        return t;
    }
};

inline Tensor make_tensor(void* data, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                          GgmlType type = GgmlType::F32) {
    Tensor t;
    t.type = type;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
    t.data = data;
    return t;
}

}  // namespace ls
