// A tensor as the kernels see it: a type, ggml-ordered counts (ne[0] fastest), byte strides and
// data on the backend's device. Views are descriptors too: a view shares its parent's data with
// other counts, strides and offset, so splitting heads or halves costs nothing. No names, no
// files: those live in the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/common/ggml_type.h"

namespace ls {

struct Tensor {
    GgmlType type = GgmlType::F32;
    int64_t ne[4] = {1, 1, 1, 1};
    uint64_t nb[4] = {4, 4, 4, 4};  // bytes between neighbours along each axis (nb[0]: one block)
    void* data = nullptr;

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    uint64_t row_bytes() const {
        uint64_t b = 0;
        ggml_row_bytes(type, ne[0], &b);
        return b;
    }
    // Bytes of the data when contiguous.
    uint64_t n_bytes() const { return row_bytes() * static_cast<uint64_t>(n_rows()); }
    float* f32() const { return static_cast<float*>(data); }
    int32_t* i32() const { return static_cast<int32_t*>(data); }

    // Rows packed one after the other with no gaps (what make_tensor gives).
    bool contiguous() const {
        const GgmlTypeTraits* tr = ggml_type_traits(type);
        const uint64_t block = tr ? tr->block_bytes : 4;
        return nb[0] == block && nb[1] == row_bytes() && nb[2] == nb[1] * ne[1] && nb[3] == nb[2] * ne[2];
    }
    void set_contiguous_strides() {
        const GgmlTypeTraits* tr = ggml_type_traits(type);
        nb[0] = tr ? tr->block_bytes : 4;
        nb[1] = row_bytes();
        nb[2] = nb[1] * static_cast<uint64_t>(ne[1]);
        nb[3] = nb[2] * static_cast<uint64_t>(ne[2]);
    }

    // The same data seen with other counts (a reshape of contiguous data: the element count
    // must not change).
    Tensor reshaped(int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) const {
        Tensor t = *this;
        t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
        t.set_contiguous_strides();
        return t;
    }
    // Columns [first, first + count) along ne[1] (a plain offset for contiguous data).
    Tensor columns(int64_t first, int64_t count) const {
        Tensor t = *this;
        t.ne[1] = count;
        t.data = static_cast<char*>(data) + static_cast<uint64_t>(first) * nb[1];
        return t;
    }
    // A window with counts `ne`, strides `nb` and a byte offset into this tensor's data
    // (ggml_view_4d): the MLA split of q into its nope and rope parts, heads of a row, ...
    Tensor view(const int64_t (&view_ne)[4], const uint64_t (&view_nb)[4], uint64_t offset_bytes) const {
        Tensor t = *this;
        for (int d = 0; d < 4; ++d) t.ne[d] = view_ne[d], t.nb[d] = view_nb[d];
        t.data = static_cast<char*>(data) + offset_bytes;
        return t;
    }
    // Axes reordered: axis d of the result is axis `order[d]` of this tensor (strides only).
    Tensor permuted(int a0, int a1, int a2, int a3) const {
        Tensor t = *this;
        const int order[4] = {a0, a1, a2, a3};
        for (int d = 0; d < 4; ++d) t.ne[d] = ne[order[d]], t.nb[d] = nb[order[d]];
        return t;
    }
};

inline Tensor make_tensor(void* data, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1,
                          GgmlType type = GgmlType::F32) {
    Tensor t;
    t.type = type;
    t.ne[0] = ne0, t.ne[1] = ne1, t.ne[2] = ne2, t.ne[3] = ne3;
    t.data = data;
    t.set_contiguous_strides();
    return t;
}

}  // namespace ls
