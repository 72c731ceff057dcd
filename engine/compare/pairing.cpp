// The share of a comparison that paired, and suggestions for what did not.
#include "engine/compare/pairing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "engine/util/quote.h"

namespace ls {
namespace {

struct Item {
    std::string name, llama_name;
    std::array<int64_t, 4> ne{1, 1, 1, 1};
    double position = 0;  // in its side's execution order, 0 (first) to 1 (last)
};

int64_t count(const std::array<int64_t, 4>& ne) { return ne[0] * ne[1] * ne[2] * ne[3]; }

// 0: the same shape; 1: the same number of elements; 2: the same ne0 (rows kept or not); 3: other.
int shape_tier(const Item& a, const Item& b) {
    if (a.ne == b.ne) return 0;
    if (count(a.ne) == count(b.ne)) return 1;
    return a.ne[0] == b.ne[0] ? 2 : 3;
}

}  // namespace

std::string ne_list_text(const std::array<int64_t, 4>& ne) {
    int last = 3;
    while (last > 0 && ne[last] == 1) --last;
    std::string s = "[";
    for (int k = 0; k <= last; ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
    return s + "]";
}

std::string unpaired_text(const UnpairedTensor& u, const std::string& other_side) {
    std::string s = quote_text(u.name, 80) + " " + ne_list_text(u.ne);
    s += u.llama_name.empty() ? ": no known name"
                              : fmt::format(" (as {}): {} has no tensor of that name", quote_text(u.llama_name, 60), other_side);
    if (u.suggestions.empty()) return s + "; nothing left on " + other_side + " to suggest";
    s += "; nearest by shape and order: ";
    for (size_t i = 0; i < u.suggestions.size(); ++i)
        s += (i ? ", " : "") + quote_text(u.suggestions[i].name, 60) + " " + ne_list_text(u.suggestions[i].ne);
    return s;
}

PairingReport check_pairing(const CompareRunResult& r, const ReferenceDump& reference, double min_share, size_t max_listed,
                            size_t max_suggestions) {
    PairingReport p;
    p.min_share = min_share;
    p.ours = static_cast<int>(r.comparisons.size());
    std::vector<Item> ours_left, ref_left, ref_all;
    for (size_t i = 0; i < r.comparisons.size(); ++i) {
        const EventComparison& c = r.comparisons[i];
        if (c.status != CompareStatus::kNoReference) {
            ++p.paired;
            continue;
        }
        Item it;
        it.name = c.source_name.empty() ? c.name : c.source_name;
        it.llama_name = c.source_name.empty() ? "" : c.name;
        if (i < r.captures.events.size()) std::copy(r.captures.events[i].ne, r.captures.events[i].ne + 4, it.ne.begin());
        it.position = static_cast<double>(i) / std::max<size_t>(1, r.comparisons.size() - 1);
        ours_left.push_back(std::move(it));
    }
    const std::vector<RefTensor>& all = reference.tensors();
    for (const auto& [name, why] : r.unmatched) {
        const RefTensor* t = reference.find(name);
        if (!t) continue;
        Item it;
        it.name = t->source_name.empty() ? t->name : t->source_name;
        it.llama_name = t->source_name.empty() ? "" : t->name;
        std::copy(t->ne(), t->ne() + 4, it.ne.begin());
        it.position = static_cast<double>(t - all.data()) / std::max<size_t>(1, all.size() - 1);
        if (why.empty()) ref_left.push_back(it);  // left over for no known reason (not a view, not the KV cache)
        ref_all.push_back(std::move(it));
    }
    p.reference = p.paired + static_cast<int>(ref_left.size());
    const int smaller = std::min(p.ours, p.reference);
    p.share = smaller > 0 ? static_cast<double>(p.paired) / smaller : 0.0;
    p.enough = p.paired > 0 && p.share >= min_share;

    // The smaller side's leftovers are what failed to pair; the other side's are the candidates.
    const bool ours_side = p.ours <= p.reference;
    p.side = ours_side ? "ours" : "reference";
    const std::vector<Item>& listed = ours_side ? ours_left : ref_left;
    const std::vector<Item>& candidates = ours_side ? ref_all : ours_left;
    p.n_unpaired = static_cast<int>(listed.size());
    for (size_t i = 0; i < listed.size() && i < max_listed; ++i) {
        const Item& u = listed[i];
        std::vector<const Item*> ranked;
        for (const Item& c : candidates) ranked.push_back(&c);
        std::stable_sort(ranked.begin(), ranked.end(), [&](const Item* a, const Item* b) {
            const int ta = shape_tier(u, *a), tb = shape_tier(u, *b);
            if (ta != tb) return ta < tb;
            return std::fabs(a->position - u.position) < std::fabs(b->position - u.position);
        });
        UnpairedTensor out;
        out.name = u.name;
        out.llama_name = u.llama_name;
        out.ne = u.ne;
        for (size_t k = 0; k < ranked.size() && k < max_suggestions; ++k)
            out.suggestions.push_back({ranked[k]->llama_name.empty() ? ranked[k]->name : ranked[k]->llama_name, ranked[k]->ne});
        p.unpaired.push_back(std::move(out));
    }
    return p;
}

}  // namespace ls
