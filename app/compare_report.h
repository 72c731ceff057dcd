// What `compare` reports of the output besides the events: the final distributions' KL statistics
// (output_kl.h) and the logit lens (logit_lens.h), as text and as JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "engine/compare/logit_lens.h"
#include "engine/compare/output_kl.h"
#include "engine/tokenizer/tokenizer.h"

namespace ls::app {

nlohmann::json kl_stats_json(const KlStats& s);
nlohmann::json output_kl_json(const OutputKl& kl);
// The statistics; per position every row with `all` or up to 16 of them, else the 10 with the
// largest KL. `tokenizer` gives the tokens' pieces (absent: ids only).
void print_output_kl(const OutputKl& kl, bool all, const Tokenizer* tokenizer);

// `tokenizer` gives the tokens' pieces (absent: ids only).
nlohmann::json logit_lens_json(const LogitLens& lens, const Tokenizer* tokenizer);
// A grid of layer x position (the last 8 positions, every one with `all`): our top-1 piece, '*'
// where the reference's differs; each layer's KL; where the final tokens first lead.
void print_logit_lens(const LogitLens& lens, const Tokenizer* tokenizer, bool all);

}  // namespace ls::app
