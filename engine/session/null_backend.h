// A backend whose ops do nothing: the forward pass runs on it to learn the names, order and shapes
// of its events without computing anything (the session's dry run).
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace ls {

// Weights are used in place (no copy); every allocation is a few bytes, since no op ever writes
// or reads an activation. Tensors announced by a forward pass on it have the real shapes and
// meaningless data, and stats() reports an empty tensor.
std::unique_ptr<Backend> make_null_backend();

}  // namespace ls
