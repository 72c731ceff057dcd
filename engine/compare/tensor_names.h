// Naming conventions: an engine's own tensor names mapped to llama.cpp's (the names our events
// and llama.cpp's dumps use), so that a dump pairs as the engine wrote it. Built in: llama.cpp's
// own names, Hugging Face transformers module paths, Meta / llama2.c names; and map files
// (`{"format": "layerscope-names", ...}`, see reference_formats.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/forward/model.h"
#include "engine/util/result.h"

namespace ls {

// How a mapped tensor's values are laid out in its .npy file (numpy shapes, outermost first).
enum class NameLayout {
    kGgml,        // numpy shape = ggml's ne reversed (the manifest's default)
    kTokenFirst,  // (T, features...) or (1, T, ...): row-major, read as it is
    kHeadsFirst,  // (n_head, T, head_dim), optionally (1, n_head, T, head_dim): permuted to [head_dim, n_head, T]
    kTransposed,  // (features, T): every axis reversed, to [features, T]
};
const char* name_layout_name(NameLayout layout);

// One pattern: the engine's name, with at most one "{layer}" standing for a decimal number, and
// llama.cpp's name it stands for ("Qcur-{layer}", "Qcur-{layer}#3").
struct NameRule {
    std::string pattern, name;
    NameLayout layout = NameLayout::kTokenFirst;
    // A q/k/v projection "with its bias": llama.cpp's second occurrence (the ADD) where the other
    // side adds a bias after the product (qwen2), else the product itself.
    bool projection = false;
};

struct NameConvention {
    std::string name;                   // "llama", "hf", "meta", or the map file's path
    std::vector<NameRule> rules;        // empty: llama.cpp's names, nothing renamed
    std::vector<std::string> prefixes;  // tried in turn before each pattern ("model." ...); empty: none
};

NameConvention llama_names();
NameConvention hf_names();
NameConvention meta_names();
// A map file; errors name the file and the entry (bad input).
Result<NameConvention> load_name_map(const std::string& path);
// What --names asks for: "auto" (llama, hf, meta: whichever names the most tensors), one of
// them, or a map file. A word that is neither is a usage error.
Result<std::vector<NameConvention>> name_conventions(const std::string& spec);

// Whether llama.cpp names the projection `base` ("Qcur-0") with its bias as a second occurrence
// ("Qcur-0#2", an ADD) on the side this dump is compared with.
using BiasedProjection = std::function<bool(const std::string& base)>;
// A dump as that side: its "#2" of `base` is an ADD.
BiasedProjection biased_in(const ReferenceDump& other);
// Our run of `model` as that side: the model has the projection's bias.
BiasedProjection biased_in(const Model& model);

// Whether `base` (a name without suffixes) is one llama.cpp gives a graph node or input.
bool is_llama_name(const std::string& base);

struct NamingReport {
    std::string convention;  // the one applied
    int renamed = 0;         // tensors given llama.cpp's name
    int relaid = 0;          // tensors whose values were re-laid (heads-first, transposed)
};

// Applies the first of `candidates` that gives llama.cpp's names to the most tensors (ties: the
// earlier one) to `dump`: renamed tensors keep their own name in source_name. A name that would
// clash with another tensor's stays as it is. Errors: a layout that does not fit the array.
Result<NamingReport> apply_names(ReferenceDump& dump, const std::vector<NameConvention>& candidates,
                                 const BiasedProjection& biased);

}  // namespace ls
