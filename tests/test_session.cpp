// Session tests: dry run vs real run, stepping, breakpoints, determinism, cancel, queue replacement
// and the capture memory budget, on stories260K and its llama.cpp dump.
#include <gtest/gtest.h>

#include "session/session.h"
#include "test_support.h"

namespace ls {
namespace {
TEST(Session, Placeholder) {}
}  // namespace
}  // namespace ls
