// `compare`'s reports of the output: KL statistics and the logit lens (compare_report.h).
#include "app/compare_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "engine/util/quote.h"

namespace ls::app {
namespace {

// A token's piece for a grid cell: quoted, at most 8 bytes of it, "~" when cut.
std::string cell_piece(const Tokenizer* tokenizer, int32_t token) {
    if (token < 0) return "-";
    if (!tokenizer) return std::to_string(token);
    std::string q = quote_text(tokenizer->token_to_piece(token), 8);
    if (size_t cut = q.find("\"... ("); cut != std::string::npos) q = q.substr(0, cut + 1) + "~";
    return q;
}

// `text` and spaces to `width` terminal columns (a UTF-8 character is one column).
std::string padded(const std::string& text, size_t width) {
    size_t columns = 0;
    for (unsigned char c : text) columns += (c & 0xc0) != 0x80;
    return text + std::string(columns < width ? width - columns : 0, ' ');
}

nlohmann::json tokens_json(const std::vector<LensToken>& tokens, const Tokenizer* tokenizer) {
    nlohmann::json j = nlohmann::json::array();
    for (const LensToken& t : tokens) {
        nlohmann::json e = {{"token", t.token}, {"p", t.p}};
        if (tokenizer && t.token >= 0) e["piece"] = tokenizer->token_to_piece(t.token);
        j.push_back(std::move(e));
    }
    return j;
}

}  // namespace

nlohmann::json kl_stats_json(const KlStats& s) {
    return {{"positions", s.n}, {"mean", s.mean}, {"median", s.median}, {"p99", s.p99}, {"max", s.max}, {"min", s.min},
            {"same_top1", s.same_top1}};
}

nlohmann::json output_kl_json(const OutputKl& kl) {
    nlohmann::json j = kl_stats_json(kl_stats(kl.rows));
    if (!kl.why.empty()) j["left_out"] = kl.why;
    j["rows"] = nlohmann::json::array();
    for (const PositionKl& k : kl.rows)
        j["rows"].push_back({{"decode", k.decode}, {"position", k.position}, {"kl", k.kl}, {"ref_top1", k.ref_top1},
                             {"our_top1", k.our_top1}, {"ref_p_top1", k.ref_p_top1}, {"our_p_ref_top1", k.our_p_ref_top1}});
    return j;
}

void print_output_kl(const OutputKl& kl, bool all, const Tokenizer* tokenizer) {
    if (kl.rows.empty()) return;
    std::printf("output:    KL(reference || ours) of the final distributions (llama-perplexity --kl-divergence): %s\n",
                kl_stats_text(kl_stats(kl.rows)).c_str());
    if (!kl.why.empty()) std::printf("           left out: %s\n", kl.why.c_str());
    std::vector<const PositionKl*> shown;
    for (const PositionKl& k : kl.rows) shown.push_back(&k);
    const bool every = all || shown.size() <= 16;
    if (!every) {
        std::stable_sort(shown.begin(), shown.end(), [](const PositionKl* a, const PositionKl* b) { return a->kl > b->kl; });
        shown.resize(10);
    }
    std::printf("           %s\n", every ? "per position:" : "the 10 positions with the largest KL (--all for every one):");
    for (const PositionKl* k : shown)
        std::printf("           decode %d position %-5lld KL %-10.4g top-1 %s %s p(top-1) %.4f, ours %.4f\n", k->decode,
                    static_cast<long long>(k->position), k->kl, padded(cell_piece(tokenizer, k->ref_top1), 10).c_str(),
                    padded(k->ref_top1 == k->our_top1 ? "(ours too)" : "(ours " + cell_piece(tokenizer, k->our_top1) + ")", 16).c_str(),
                    k->ref_p_top1, k->our_p_ref_top1);
}

nlohmann::json logit_lens_json(const LogitLens& lens, const Tokenizer* tokenizer) {
    nlohmann::json j = {{"top_k", lens.top_k}, {"kl_same_below", kLensKlSame}};
    j["first_divergent_layer"] = lens.first_divergent_layer >= 0 ? nlohmann::json(lens.first_divergent_layer) : nlohmann::json();
    j["first_top1_change"] = lens.first_top1_change >= 0 ? nlohmann::json(lens.first_top1_change) : nlohmann::json();
    if (!lens.why.empty()) j["left_out"] = lens.why;
    j["layers"] = nlohmann::json::array();
    for (const LensLayer& layer : lens.layers) {
        nlohmann::json l = {{"layer", layer.layer}, {"kl", kl_stats_json(layer.kl)}, {"cells", nlohmann::json::array()}};
        for (const LensCell& c : layer.cells)
            l["cells"].push_back({{"decode", c.decode}, {"position", c.position}, {"kl", c.kl},
                                  {"ours", tokens_json(c.ours, tokenizer)}, {"reference", tokens_json(c.reference, tokenizer)}});
        j["layers"].push_back(std::move(l));
    }
    j["arrivals"] = nlohmann::json::array();
    auto layer_or_null = [](int l) { return l >= 0 ? nlohmann::json(l) : nlohmann::json(); };
    for (const LensArrival& a : lens.arrivals)
        j["arrivals"].push_back({{"decode", a.decode}, {"position", a.position}, {"ours_final", a.ours_final},
                                 {"reference_final", a.reference_final}, {"ours_layer", layer_or_null(a.ours_layer)},
                                 {"reference_layer", layer_or_null(a.reference_layer)}});
    return j;
}

void print_logit_lens(const LogitLens& lens, const Tokenizer* tokenizer, bool all) {
    if (lens.layers.empty()) {
        std::printf("logit lens: no layer output (l_out) of ours pairs with the reference's%s%s\n",
                    lens.why.empty() ? "" : ": ", lens.why.c_str());
        return;
    }
    // The columns: (decode, position) in order of appearance, the last 8 unless `all`.
    std::vector<std::pair<int, int64_t>> columns;
    for (const LensLayer& layer : lens.layers)
        for (const LensCell& c : layer.cells)
            if (std::find(columns.begin(), columns.end(), std::make_pair(c.decode, c.position)) == columns.end())
                columns.push_back({c.decode, c.position});
    std::sort(columns.begin(), columns.end());
    const size_t first = all || columns.size() <= 8 ? 0 : columns.size() - 8;
    std::printf("\nlogit lens: each layer's output (l_out) through output_norm and the LM head: our top-1, '*' where the "
                "reference's differs%s\n",
                first > 0 ? fmt::format(" (the last 8 of {} positions; --all for every one)", columns.size()).c_str() : "");
    std::printf("%-9s", "layer");
    for (size_t i = first; i < columns.size(); ++i)
        std::printf(" %s", padded(fmt::format("pos {}{}", columns[i].second, columns[i].first > 0 ? fmt::format("@{}", columns[i].first) : ""), 12).c_str());
    std::printf("  mean KL     same top-1\n");
    for (const LensLayer& layer : lens.layers) {
        std::printf("%-9d", layer.layer);
        for (size_t i = first; i < columns.size(); ++i) {
            auto it = std::find_if(layer.cells.begin(), layer.cells.end(), [&](const LensCell& c) {
                return c.decode == columns[i].first && c.position == columns[i].second;
            });
            std::string cell = "";
            if (it != layer.cells.end() && !it->ours.empty()) {
                cell = cell_piece(tokenizer, it->ours[0].token);
                if (it->reference.empty() || it->reference[0].token != it->ours[0].token) cell += "*";
            }
            std::printf(" %s", padded(cell, 12).c_str());
        }
        std::printf("  %-11.4g %5.1f%%\n", layer.kl.mean, 100 * layer.kl.same_top1);
    }
    std::printf("first layer that differs: %s; first layer where a top-1 differs: %s\n",
                lens.first_divergent_layer >= 0 ? fmt::format("{} (mean KL above {:g})", lens.first_divergent_layer, kLensKlSame).c_str()
                                                : "none",
                lens.first_top1_change >= 0 ? std::to_string(lens.first_top1_change).c_str() : "none");
    std::string arrivals;
    int shown = 0;
    for (const LensArrival& a : lens.arrivals) {
        if (!all && lens.arrivals.size() > 8 && shown++ < static_cast<int>(lens.arrivals.size()) - 8) continue;
        auto at = [](int l) { return l >= 0 ? fmt::format("layer {}", l) : std::string("only at the output"); };
        arrivals += fmt::format("\n  position {}{}: ours {} from {}, reference {} from {}", a.position,
                                a.decode > 0 ? fmt::format("@{}", a.decode) : "", cell_piece(tokenizer, a.ours_final),
                                at(a.ours_layer), cell_piece(tokenizer, a.reference_final), at(a.reference_layer));
    }
    if (!arrivals.empty()) std::printf("the final top-1 token leads from:%s\n", arrivals.c_str());
    if (!lens.why.empty()) std::printf("left out: %s\n", lens.why.c_str());
}

}  // namespace ls::app
