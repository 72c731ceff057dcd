// Our event name for each tensor of a reference dump: llama.cpp's own name, or for the nodes its
// graph leaves unnamed what they compute (a projection's product before its scale or bias, the
// flash-attention node, the output rows), with the occurrence our events give it.
#pragma once

#include <string>
#include <vector>

#include "engine/compare/reference.h"

namespace ls {

struct OurName {
    enum class Kind {
        kNone,   // nothing of ours stands for it (an input, an unnamed node we do not compute)
        kOwn,    // a tensor of ours by this name and occurrence computes it
        kSame,   // the same values as our tensor of this name (flash attention's node, the output
                 // rows, the logits): paired only when no tensor of its own is there
    };
    Kind kind = Kind::kNone;
    std::string base;    // "Qcur-0", "result_output"
    int occurrence = 1;  // among our events of that base name in the same graph evaluation
};

// The event of ours an unnamed MUL_MAT (or MUL_MAT_ID) with weight `weight` (its src0) computes:
// "blk.3.attn_q.weight" -> "Qcur-3", attn_k / attn_v / attn_output -> Kcur / Vcur / attn_out,
// ffn_gate / ffn_up / ffn_down -> ffn_gate / ffn_up / ffn_out, ffn_{up,gate,down,gate_up}_exps ->
// ffn_moe_{up,gate,down,gate_up}, output.weight and token_embd.weight -> result_output; "" else.
std::string product_event(const std::string& weight);

// One entry per reference tensor, in its order. Occurrences follow execution order within each
// graph evaluation: an unnamed product (wq x, whose scale or bias step llama.cpp names Qcur) and
// an unnamed scale or bias step after a named or unnamed product take their place among the
// tensors of that name, as our events do.
std::vector<OurName> our_names(const ReferenceDump& reference);

}  // namespace ls
