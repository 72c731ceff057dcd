// Top-k logits of the cursor's decode call with the reference's rank and probability beside, a
// lookup of any expected token, and the padded-vocabulary warning.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "views/debug_context.h"

namespace ls::views {

// A token piece printable on one line: control bytes and newlines as escapes, SentencePiece's
// U+2581 as a visible space marker kept as is.
std::string escape_piece(const std::string& piece);

struct LogitsPanel {
    bool open = true;

    // One token's standing among a full row of logits.
    struct Standing {
        bool valid = false;
        int64_t rank = -1;  // 0 = the argmax
        float logit = 0, prob = 0;
    };
    struct Lookup {
        std::string query;    // as typed
        int32_t token = -1;   // -1: not resolved
        std::string piece;
        std::string message;  // how the query resolved ("encodes to 2 tokens, the first is used")
        Standing ours, reference;
    };

    // Resolves `text` (a token id, or text tokenized without special tokens) and ranks it; the
    // lookup box calls this on Enter. Refreshed when the decode call changes.
    void look_up(const std::string& text);
    const Lookup& lookup() const { return lookup_; }

    struct Shown {
        int decode = -1;
        int entries = 0;
        int32_t first_token = -1;
        int64_t logit_rows = 0;   // ne0 of result_output
        int64_t vocab = 0;        // tokenizer size, 0 without one
        bool padded_vocab_hint = false;
    };
    Shown shown;

    void draw(DebugContext& ctx);

private:
    void resolve(const DebugContext& ctx, const EventInfo& event);

    char input_[128] = {};
    Lookup lookup_;
    bool lookup_pending_ = false;
    // What the lookup was computed from, so it refreshes when the cursor or the run changes.
    std::shared_ptr<const TopLogits> lookup_source_;  // held (a few hundred bytes), not its address
    const void* lookup_reference_ = nullptr;
    // The reference's last row of logits for the shown result_output event.
    std::vector<float> reference_row_;
    std::string reference_row_event_;
    const void* reference_row_source_ = nullptr;
    int32_t reference_top1_ = -1;
};

}  // namespace ls::views
