// Our names for a reference's tensors (see ref_names.h).
#include "engine/compare/ref_names.h"

#include <cstdio>
#include <map>
#include <tuple>

namespace ls {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
bool ends_with(const std::string& s, const char* tail) {
    const std::string t = tail;
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// "Qcur-7 (view) (permuted)" -> "7".
std::string layer_of(const std::string& name) {
    const size_t dash = name.find('-');
    if (dash == std::string::npos) return "";
    const size_t end = name.find_first_not_of("0123456789", dash + 1);
    return name.substr(dash + 1, end == std::string::npos ? std::string::npos : end - dash - 1);
}

}  // namespace

std::string product_event(const std::string& weight) {
    if (weight == "output.weight" || weight == "token_embd.weight") return "result_output";
    int layer = -1;
    char tail[64] = {};
    if (std::sscanf(weight.c_str(), "blk.%d.%63s", &layer, tail) != 2 || layer < 0) return "";
    static const std::pair<const char*, const char*> kProducts[] = {
        {"attn_q.weight", "Qcur"},       {"attn_k.weight", "Kcur"},   {"attn_v.weight", "Vcur"},
        {"attn_output.weight", "attn_out"}, {"ffn_gate.weight", "ffn_gate"}, {"ffn_up.weight", "ffn_up"},
        {"ffn_down.weight", "ffn_out"},
        // qwen35's DeltaNet projections, reshaped under the name.
        {"attn_qkv.weight", "linear_attn_qkv_mixed"}, {"ssm_alpha.weight", "alpha"}, {"ssm_beta.weight", "beta"},
        // The experts' products, unnamed when a per-expert scale follows (it takes their name).
        {"ffn_up_exps.weight", "ffn_moe_up"}, {"ffn_gate_exps.weight", "ffn_moe_gate"},
        {"ffn_down_exps.weight", "ffn_moe_down"}, {"ffn_gate_up_exps.weight", "ffn_moe_gate_up"},
    };
    for (const auto& [w, event] : kProducts)
        if (std::string(tail) == w) return std::string(event) + "-" + std::to_string(layer);
    return "";
}

std::vector<OurName> our_names(const ReferenceDump& reference) {
    const std::vector<RefTensor>& tensors = reference.tensors();
    std::vector<OurName> out(tensors.size());
    using Key = std::tuple<int, int, std::string>;  // decode, ubatch, our base name
    std::map<Key, int> last;   // the highest occurrence given so far
    std::map<Key, int> slots;  // unnamed steps given a place so far
    std::map<std::string, std::string> ours_of;  // this evaluation's tensor names -> our base name
    int decode = -1, ubatch = -1;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const RefTensor& t = tensors[i];
        if (t.decode != decode || t.ubatch != ubatch) {
            decode = t.decode, ubatch = t.ubatch;
            ours_of.clear();  // unnamed nodes are numbered per evaluation
        }
        OurName& n = out[i];
        if (t.kind == RefKind::kInput) continue;
        if (t.kind == RefKind::kLogits) {
            n = {OurName::Kind::kSame, "result_output", 1};
            continue;
        }
        auto src0 = ours_of.find(t.src0);
        if (!starts_with(t.base_name, "node_")) {
            n.kind = OurName::Kind::kOwn;
            n.base = t.base_name;
            n.occurrence = t.occurrence + slots[{decode, ubatch, n.base}];
        } else if ((t.op == "MUL_MAT" || t.op == "MUL_MAT_ID") && !product_event(t.src0).empty()) {
            n.kind = OurName::Kind::kOwn;  // a projection's product, before the step llama.cpp names
            n.base = product_event(t.src0);
        } else if ((t.op == "MUL" || t.op == "ADD") && src0 != ours_of.end() &&
                   (ends_with(t.src1, ".scale") || ends_with(t.src1, ".bias"))) {
            n.kind = OurName::Kind::kOwn;  // a scale or bias step between named ones
            n.base = src0->second;
        } else if (t.op == "ADD" && src0 != ours_of.end() && starts_with(src0->second, "attn_out-")) {
            n.kind = OurName::Kind::kOwn;  // the attention's residual sum, unnamed in phi3's graph
            n.base = "ffn_inp-" + layer_of(src0->second);
        } else if ((t.op == "SCALE" || t.op == "TANH") && src0 != ours_of.end() &&
                   (starts_with(src0->second, "Qcur-") || src0->second == "result_output")) {
            n.kind = OurName::Kind::kOwn;  // gemma's scaled Q and its final soft cap's steps on the logits
            n.base = src0->second;
        } else if (t.op == "FLASH_ATTN_EXT" && starts_with(t.src0, "Qcur-")) {
            n = {OurName::Kind::kSame, "kqv_out-" + layer_of(t.src0), 1};
        } else if (t.op == "GET_ROWS" && t.src1 == "out_ids") {
            n = {OurName::Kind::kSame, src0 != ours_of.end() ? src0->second : t.src0, 1};
        }
        if (n.kind == OurName::Kind::kNone) continue;
        ours_of[t.base_name] = n.base;
        if (n.kind != OurName::Kind::kOwn) continue;
        const Key key{decode, ubatch, n.base};
        if (starts_with(t.base_name, "node_")) {
            n.occurrence = last[key] + 1;
            ++slots[key];
        }
        last[key] = std::max(last[key], n.occurrence);
    }
    return out;
}

}  // namespace ls
