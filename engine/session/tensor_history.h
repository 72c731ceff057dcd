// Tensor history: one coordinate followed through a run. An element (a token and a channel of its
// values) or a head at a token, at every event where that coordinate exists, ours and the
// reference's side by side in execution order; and a KV cache cell: which evaluation wrote it, its
// K and V, and how much every later query attended to it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/session/session.h"

namespace ls {

struct HistoryCoord {
    int decode = 0;       // the decode call
    int64_t token = 0;    // the token within it (0: its first)
    int64_t channel = 0;  // the index within the token's values (element mode)
    int head = -1;        // >= 0: that head's vector at the token instead (head mode)
};

struct HistoryRow {
    int64_t event = -1;
    std::string name;
    int64_t width = 0;  // element mode: the token's values in this event; head mode: the vector's length
    // Element mode: the value; head mode: the vector's L2 norm. Absent with `note` saying why.
    std::optional<double> ours, ref;
    double nmse = 0;    // head mode with both sides: of the two vectors (0 for element mode)
    std::string note;
};

// Every event of the coordinate's decode call that has it, in execution order. An event has an
// element (t, c) when its tokens are its outermost axis (the last layer's kept rows count from the
// end) and c < the values per token; a head h at t when it is laid out {x, heads, T} (a head's x
// values) or, for the attention's scores and outputs, {x, T, heads} (its row at t). K and V events
// with fewer (KV) heads give query head h's KV head. Values not captured (not run yet, dropped by
// the capture budget) and reference tensors absent or of another shape leave that side empty.
std::vector<HistoryRow> tensor_history(const SessionSnapshot& snap, const ReferenceDump* reference, const HistoryCoord& at,
                                       int64_t n_head);

// The element at flat index `flat` of event `e` as a coordinate to follow (its decode call, its
// token within it, its channel); nullopt when the event's tokens are not its outermost axis.
std::optional<HistoryCoord> history_coord_of(const SessionSnapshot& snap, const EventInfo& e, int64_t flat);

struct KvCellWrite {
    int64_t event = -1;
    std::string name;       // the roped K (Kcur-L) or the V (Vcur-L) the cell was written from
    int kv_head = 0;
    std::optional<double> ours_norm, ref_norm;  // L2 norm of that head's vector
};
struct KvCellRead {
    int64_t event = -1;     // kq_soft_max-L of a later (or the same) evaluation
    int decode = 0;
    int64_t query_position = 0;
    int head = 0;
    std::optional<double> ours, ref;  // the attention probability of that query for the cell
};
struct KvCellHistory {
    int decode = -1;        // the decode call that wrote the cell; -1: not written (yet)
    std::vector<KvCellWrite> writes;
    std::vector<KvCellRead> reads;
    std::string note;       // what could not be shown, and why
};

// The cell at `position` of layer `layer`'s KV cache.
KvCellHistory kv_cell_history(const SessionSnapshot& snap, const ReferenceDump* reference, int layer, int64_t position);

}  // namespace ls
