// Tensor history (tensor_history.h).
#include "engine/session/tensor_history.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "engine/session/derived.h"

namespace ls {
namespace {

using Group = std::pair<int, int>;  // decode call, physical batch
struct Span {
    int64_t start = 0, tokens = 0;  // the positions of an evaluation's tokens
};

// Each evaluation's tokens, from its embeddings, and their positions in execution order.
std::map<Group, Span> spans(const std::vector<EventInfo>& events) {
    std::map<Group, Span> out;
    int64_t pos = 0;
    for (const EventInfo& e : events) {
        const Group g{e.decode, e.ubatch};
        if (e.base_name != "embd" || out.count(g)) continue;
        out[g] = {pos, e.ne[1]};
        pos += e.ne[1];
    }
    return out;
}

std::string prefix_of(const std::string& base) {
    const size_t dash = base.rfind('-');
    return dash == std::string::npos || base.find_first_not_of("0123456789", dash + 1) != std::string::npos ? base
                                                                                                            : base.substr(0, dash);
}

// The attention's scores, probabilities and outputs: {x, T, heads}.
bool heads_outer(const std::string& base) {
    const std::string p = prefix_of(base);
    return p == "kq" || p == "kq_soft_max" || p == "kqv";
}

// One side's values of an event: ours from the captures, the reference's from its dump.
struct Side {
    const float* v = nullptr;
    int64_t ne[4] = {1, 1, 1, 1};
    std::vector<float> storage;  // the reference's values when they cannot be read in place
    std::string missing;         // why `v` is null
    int64_t n() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
};

Side our_side(const SessionSnapshot& snap, const EventInfo& e) {
    Side s;
    std::copy(e.ne, e.ne + 4, s.ne);
    if (e.index > snap.cursor) {
        s.missing = "not run yet";
        return s;
    }
    auto c = snap.capture(e.index);
    if (!c || !c->values) {
        s.missing = "our values were not kept (capture budget)";
        return s;
    }
    s.v = c->values->data();
    return s;
}

// The reference tensor our event pairs with: the one its comparison paired, else the same name.
Side ref_side(const SessionSnapshot& snap, const ReferenceDump* ref, const EventInfo& e) {
    Side s;
    if (!ref) {
        s.missing = "no reference";
        return s;
    }
    const EventRecord* r = snap.record(e.index);
    const std::string name = r && !r->comparison.ref_name.empty() ? r->comparison.ref_name : e.name;
    const RefTensor* t = ref->find(name);
    if (!t) {
        s.missing = "the reference has no " + name;
        return s;
    }
    if (!t->complete()) {
        s.missing = "the reference printed only some values of " + name;
        return s;
    }
    std::copy(t->ne(), t->ne() + 4, s.ne);
    s.v = t->f32();
    if (!s.v) {
        s.storage = ref->values(*t);
        s.v = s.storage.data();
    }
    return s;
}

// The token-major row of token `t` of an evaluation of `tokens` tokens: rows and width of a
// {width..., rows} tensor whose rows are its last tokens (all of them, or the last layer's kept
// ones); false when the tensor is not laid out so or the token's row was not kept.
bool token_row(const int64_t ne[4], int64_t tokens, int64_t t, int64_t* row, int64_t* width) {
    const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
    int last = 3;
    while (last > 0 && ne[last] == 1) --last;
    const int64_t rows = tokens == 1 || last == 0 ? 1 : ne[last];  // one row: the last token's
    if (rows <= 0 || rows > tokens || n % rows != 0) return false;
    *row = t - (tokens - rows);
    *width = n / rows;
    return *row >= 0;
}

// The attention's per-head events: Q, K and V ({x, heads, T}), the scores, probabilities and
// outputs ({x, T, heads}).
bool per_head(const std::string& base) {
    static const char* const kPrefixes[] = {"Qcur", "Kcur", "Vcur", "Qcur_normed", "Kcur_normed", "q_pe", "k_pe", "q_nope"};
    const std::string p = prefix_of(base);
    for (const char* k : kPrefixes)
        if (p == k) return true;
    return heads_outer(base);
}

// Head `h`'s vector at token `t`: its offset and length in a side's values.
bool head_vector(const Side& s, bool outer, int64_t tokens, int64_t t, int h, int64_t n_head, int64_t* offset, int64_t* len) {
    const int64_t* ne = s.ne;
    if (ne[3] != 1 || t < 0 || t >= tokens) return false;
    if (outer) {  // {x, T, heads}: every query row
        if (ne[1] != tokens || ne[2] <= h) return false;
        *offset = (h * ne[1] + t) * ne[0];
        *len = ne[0];
        return true;
    }
    // {x, heads, T}: K and V have the KV heads, each shared by n_head / heads query heads.
    const int64_t heads = ne[1];
    if (ne[2] != tokens) return false;
    int64_t hh = h;
    if (heads < n_head && heads > 0 && n_head % heads == 0) hh = h / (n_head / heads);
    if (hh >= heads) return false;
    *offset = (t * heads + hh) * ne[0];
    *len = ne[0];
    return true;
}

double norm(const float* v, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v[i]) * v[i];
    return std::sqrt(s);
}

}  // namespace

std::vector<HistoryRow> tensor_history(const SessionSnapshot& snap, const ReferenceDump* reference, const HistoryCoord& at,
                                       int64_t n_head) {
    std::vector<HistoryRow> out;
    if (!snap.events) return out;
    const std::map<Group, Span> groups = spans(*snap.events);
    int64_t first = -1;  // the decode call's first token's position
    for (const auto& [key, span] : groups)
        if (key.first == at.decode) {
            first = span.start;
            break;
        }
    if (first < 0) return out;
    // The evaluation of the decode call that holds the token, and the token within it.
    for (const EventInfo& e : *snap.events) {
        if (e.decode != at.decode) continue;
        auto g = groups.find({e.decode, e.ubatch});
        if (g == groups.end()) continue;
        const int64_t t = first + at.token - g->second.start;
        if (t < 0 || t >= g->second.tokens) continue;
        const int64_t tokens = g->second.tokens;
        const bool outer = heads_outer(e.base_name);
        HistoryRow row;
        row.event = e.index;
        row.name = e.name;
        Side ours = our_side(snap, e), ref = ref_side(snap, reference, e);
        if (at.head < 0) {
            int64_t r = 0, width = 0;
            if (outer || !token_row(e.ne, tokens, t, &r, &width) || at.channel >= width) continue;
            row.width = width;
            if (ours.v) row.ours = ours.v[r * width + at.channel];
            int64_t rr = 0, rwidth = 0;
            if (ref.v && token_row(ref.ne, tokens, t, &rr, &rwidth) && rwidth == width) row.ref = ref.v[rr * rwidth + at.channel];
            else if (ref.v) ref.missing = fmt::format("the reference's {} has another shape", e.name);
        } else {
            int64_t off = 0, len = 0;
            if (!per_head(e.base_name) || !head_vector(ours, outer, tokens, t, at.head, n_head, &off, &len)) continue;
            row.width = len;
            if (ours.v) row.ours = norm(ours.v + off, len);
            int64_t roff = 0, rlen = 0;
            if (ref.v && head_vector(ref, outer, tokens, t, at.head, n_head, &roff, &rlen) && rlen >= len) {
                // The reference's scores span every KV cell (padded): its first cells are ours.
                row.ref = norm(ref.v + roff, len);
                if (ours.v) {
                    double d = 0, r2 = 0;
                    for (int64_t i = 0; i < len; ++i) {
                        const double a = ours.v[off + i], b = ref.v[roff + i];
                        d += (a - b) * (a - b), r2 += b * b;
                    }
                    row.nmse = r2 > 0 ? d / r2 : d;
                }
            } else if (ref.v) {
                ref.missing = fmt::format("the reference's {} has another shape", e.name);
            }
        }
        if (!row.ours) row.note = ours.missing;
        if (!row.ref && reference) row.note += (row.note.empty() ? "" : "; ") + ref.missing;
        out.push_back(std::move(row));
    }
    return out;
}

std::optional<HistoryCoord> history_coord_of(const SessionSnapshot& snap, const EventInfo& e, int64_t flat) {
    if (!snap.events || heads_outer(e.base_name) || flat < 0) return std::nullopt;
    const std::map<Group, Span> groups = spans(*snap.events);
    auto g = groups.find({e.decode, e.ubatch});
    if (g == groups.end()) return std::nullopt;
    int64_t first = g->second.start;  // the decode call's first token's position
    for (const auto& [key, span] : groups)
        if (key.first == e.decode) first = std::min(first, span.start);
    int64_t row = 0, width = 0;
    if (!token_row(e.ne, g->second.tokens, g->second.tokens - 1, &row, &width)) return std::nullopt;
    const int64_t rows = row + 1;  // the last token's row is the last row
    if (flat >= rows * width) return std::nullopt;
    HistoryCoord c;
    c.decode = e.decode;
    c.token = g->second.start - first + (g->second.tokens - rows) + flat / width;
    c.channel = flat % width;
    return c;
}

KvCellHistory kv_cell_history(const SessionSnapshot& snap, const ReferenceDump* reference, int layer, int64_t position) {
    KvCellHistory h;
    if (!snap.events) return h;
    const std::map<Group, Span> groups = spans(*snap.events);
    Group writer{-1, -1};
    for (const auto& [g, s] : groups)
        if (position >= s.start && position < s.start + s.tokens) writer = g;
    if (writer.first < 0) {
        h.note = fmt::format("no evaluation of this run writes position {}", position);
        return h;
    }
    h.decode = writer.first;
    const Span w = groups.at(writer);
    const std::string kname = fmt::format("Kcur-{}", layer), vname = fmt::format("Vcur-{}", layer);
    const std::string soft = fmt::format("kq_soft_max-{}", layer);
    // The V written to the cache: the last Vcur event of the evaluation.
    const EventInfo* v_event = nullptr;
    for (const EventInfo& e : *snap.events)
        if (e.decode == writer.first && e.ubatch == writer.second && e.base_name == vname) v_event = &e;
    bool saw_softmax = false;
    for (const EventInfo& e : *snap.events) {
        const Group g{e.decode, e.ubatch};
        const bool write = g == writer && ((e.base_name == kname && is_roped_k(e)) || &e == v_event);
        if (write) {
            Side ours = our_side(snap, e), ref = ref_side(snap, reference, e);
            const int64_t heads = e.ne[1], x = e.ne[0], t = position - w.start;
            if (e.ne[2] != w.tokens) continue;
            for (int64_t kh = 0; kh < heads; ++kh) {
                KvCellWrite cw;
                cw.event = e.index;
                cw.name = e.name;
                cw.kv_head = static_cast<int>(kh);
                const int64_t off = (t * heads + kh) * x;
                if (ours.v) cw.ours_norm = norm(ours.v + off, x);
                if (ref.v && ref.n() == e.ne[0] * e.ne[1] * e.ne[2]) cw.ref_norm = norm(ref.v + off, x);
                h.writes.push_back(cw);
            }
            continue;
        }
        if (e.base_name != soft) continue;
        saw_softmax = true;
        auto gs = groups.find(g);
        if (gs == groups.end() || gs->second.start + gs->second.tokens <= position) continue;  // before the write
        Side ours = our_side(snap, e), ref = ref_side(snap, reference, e);
        const int64_t n_kv = e.ne[0], n_q = e.ne[1], heads = e.ne[2];
        if (position >= n_kv) continue;
        for (int64_t q = 0; q < n_q; ++q) {
            const int64_t qpos = gs->second.start + gs->second.tokens - n_q + q;
            if (qpos < position) continue;  // the causal mask hides the cell from earlier queries
            for (int64_t hd = 0; hd < heads; ++hd) {
                KvCellRead r;
                r.event = e.index;
                r.decode = e.decode;
                r.query_position = qpos;
                r.head = static_cast<int>(hd);
                if (ours.v) r.ours = ours.v[(hd * n_q + q) * n_kv + position];
                if (ref.v && ref.ne[1] == n_q && ref.ne[2] == heads && position < ref.ne[0])
                    r.ref = ref.v[(hd * n_q + q) * ref.ne[0] + position];
                h.reads.push_back(r);
            }
        }
    }
    if (!saw_softmax)
        h.note = fmt::format("no {} events: this run's attention has no probabilities to show (flash attention)", soft);
    return h;
}

}  // namespace ls
