// Two files of one model: the same weights in two formats (a quantized file against its F16 source,
// or two quantizations of it), so that a run of one can be the reference of the other and every
// difference between them is what the formats do.
#pragma once

#include <string>

#include "engine/forward/model.h"
#include "engine/util/result.h"

namespace ls {

// The same architecture, the same hyperparameters (every `<arch>.` key with the same value) and the
// same tensors by name and shape; the tensors' types may differ. The error (kBadInput) names both
// files and the first thing that differs.
Status check_same_model(const Model& ours, const Model& other);

// The formats of a file's tensors, the most common first: "Q4_K 155, F32 45, Q6_K 1".
std::string tensor_type_mix(const Model& model);

}  // namespace ls
