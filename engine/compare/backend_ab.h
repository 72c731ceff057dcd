// Backend A/B: the same model and tokens run on a second backend, its every event kept in memory as
// a reference dump, so that the comparison machinery (first divergence, doctor, exit codes) compares
// one backend's kernels with another's: a kernel that is wrong only at some size shows up as the
// first divergent event.
#pragma once

#include <memory>
#include <vector>

#include "engine/compare/reference.h"
#include "engine/forward/forward.h"
#include "engine/forward/model.h"

namespace ls {

// Runs `prompt` and then `n_generate` greedy tokens of `model` on `backend` with `options`, and
// returns every event (and each decode call's logits) as a dump in llama.cpp's reference format,
// in memory; `source` names it in messages ("the cpu run").
Result<std::unique_ptr<ReferenceDump>> run_as_reference(const Model& model, Backend& backend, const ForwardOptions& options,
                                                        const std::vector<int32_t>& prompt, int n_generate,
                                                        const std::string& source);

}  // namespace ls
