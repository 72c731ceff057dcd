// Backend A/B: `compare -m MODEL --backend A --against-backend B` runs the same tokens on both
// backends, keeps B's run in memory as the reference, and compares every event with the reference
// machinery: a clean pair passes, a bug on one side diverges at its event with the doctor's
// verdict, and misuse is a usage error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/forward/forward.h"
#include "engine/forward/model.h"
#include "tests/forwarding_backend.h"
#include "tests/test_json.h"
#include "tests/test_support.h"

namespace {

using ls::test::fixture_path;
using ls::test::run_layerscope;
using ls::test::run_layerscope_json;

std::string q(const std::string& path) { return "'" + path + "'"; }

const char* kPrompt = " --tokens 1,403,407,26,94";

TEST(BackendAB, TheSameBackendTwiceIsClean) {
    LS_REQUIRE_FIXTURES();
    const std::string m = q(fixture_path("models/stories260K.gguf"));
    for (const char* mode : {"exact", "llama"}) {
        const nlohmann::json j = run_layerscope_json("compare -m " + m + kPrompt + " -n 3 --backend cpu --against-backend cpu --mode " + mode, 0);
        EXPECT_GT(j["summary"]["compared"].get<int>(), 150) << mode;  // 3 decode calls of ~60 events
        EXPECT_EQ(j["summary"]["diverged"], 0) << mode;
        EXPECT_EQ(j["summary"]["warn"], 0) << mode;
        EXPECT_TRUE(j["first_divergence"].is_null()) << mode;
    }
    auto text = run_layerscope("compare -m " + m + kPrompt + " --backend cpu --against-backend cpu");
    EXPECT_EQ(text.exit_code, 0) << text.out;
    EXPECT_NE(text.out.find("backends:  ours CPU"), std::string::npos) << text.out;
}

TEST(BackendAB, ABugOnOneSideDivergesAtItsEvent) {
    LS_REQUIRE_FIXTURES();
    const std::string m = q(fixture_path("models/stories260K.gguf"));
    const nlohmann::json j =
        run_layerscope_json("compare -m " + m + kPrompt + " --backend cpu --against-backend cpu --mode exact --fault rope-pairing", 1);
    EXPECT_EQ(j["first_divergence"]["name"], "Qcur-0#3");
    ASSERT_FALSE(j["doctor"].empty());
    EXPECT_EQ(j["doctor"][0]["transform"], "rope");
}

TEST(BackendAB, MisuseIsAUsageError) {
    LS_REQUIRE_FIXTURES();
    const std::string m = q(fixture_path("models/stories260K.gguf"));
    const std::string ref = q(fixture_path("dumps/stories260K_once_n0_fa-off.gguf"));
    auto with_reference = run_layerscope("compare -m " + m + " -r " + ref + " --against-backend cpu", true);
    EXPECT_EQ(with_reference.exit_code, 2) << with_reference.out;
    EXPECT_NE(with_reference.out.find("--against-backend compares two backends"), std::string::npos) << with_reference.out;
    auto no_tokens = run_layerscope("compare -m " + m + " --against-backend cpu", true);
    EXPECT_EQ(no_tokens.exit_code, 2) << no_tokens.out;
    EXPECT_NE(no_tokens.out.find("give -p TEXT or --tokens"), std::string::npos) << no_tokens.out;
    auto bad = run_layerscope("compare -m " + m + kPrompt + " --against-backend tpu");
    EXPECT_EQ(bad.exit_code, 2) << bad.out;
}

}  // namespace

namespace ls {
namespace {

// A backend that lacks one op: the CPU's, except that it does not do RMS_NORM.
class WithoutRmsNorm final : public test::ForwardingBackend {
public:
    std::string name() const override { return "a backend without RMS_NORM"; }
    bool supports(Op op, MathMode mode, GgmlType type) const override {
        return op != Op::kRmsNorm && inner_->supports(op, mode, type);
    }
};

// A backend that lacks an op the model needs is refused before anything runs, with what it lacks
// and what it has.
TEST(BackendSupport, AMissingOpIsRefusedByName) {
    LS_REQUIRE_FIXTURES();
    auto model = Model::open(test::fixture_path("models/stories260K.gguf"));
    ASSERT_TRUE(model.ok()) << model.error().message;
    WithoutRmsNorm backend;
    auto forward = make_forward(*model.value(), backend, ForwardOptions{});
    ASSERT_FALSE(forward.ok());
    const std::string& m = forward.error().message;
    EXPECT_NE(m.find("a backend without RMS_NORM cannot run"), std::string::npos) << m;
    EXPECT_NE(m.find("it does not support RMS_NORM"), std::string::npos) << m;
    EXPECT_NE(m.find("It supports: GET_ROWS"), std::string::npos) << m;
}

}  // namespace
}  // namespace ls
