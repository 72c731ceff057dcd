// Dump names: event_dump_name and parse_dump_name are inverses, and malformed suffixes are reported.
#include <gtest/gtest.h>

#include "engine/forward/event.h"

namespace ls {
namespace {

TEST(DumpNames, RoundTrip) {
    for (const char* base : {"Qcur-0", "result_output", "attn_norm-12", "kq_soft_max-3", "Vcur-0 (reshaped)", "x.y"})
        for (int occurrence : {1, 2, 3, 17})
            for (int decode : {0, 1, 2, 123})
                for (int ubatch : {0, 1, 4}) {
                    const std::string name = event_dump_name(base, occurrence, decode, ubatch);
                    DumpName parts;
                    ASSERT_TRUE(parse_dump_name(name, &parts)) << name;
                    EXPECT_EQ(parts.base, base) << name;
                    EXPECT_EQ(parts.occurrence, occurrence) << name;
                    EXPECT_EQ(parts.decode, decode) << name;
                    EXPECT_EQ(parts.ubatch, ubatch) << name;
                }
}

TEST(DumpNames, SplitsEverySuffix) {
    DumpName p;
    ASSERT_TRUE(parse_dump_name("Qcur-0#3@1.2", &p));
    EXPECT_EQ(p.base, "Qcur-0");
    EXPECT_EQ(p.occurrence, 3);
    EXPECT_EQ(p.decode, 1);
    EXPECT_EQ(p.ubatch, 2);

    ASSERT_TRUE(parse_dump_name("l_out-1@0.1", &p));
    EXPECT_EQ(p.base, "l_out-1");
    EXPECT_EQ(p.occurrence, 1);
    EXPECT_EQ(p.decode, 0);
    EXPECT_EQ(p.ubatch, 1);

    ASSERT_TRUE(parse_dump_name("Kcur-5#2", &p));
    EXPECT_EQ(p.base, "Kcur-5");
    EXPECT_EQ(p.occurrence, 2);
    EXPECT_EQ(p.decode, 0);
}

TEST(DumpNames, NamesWithoutSuffixesParseAsThemselves) {
    for (const char* name : {"embd", "result_norm", "ffn_moe_weights-0", "", "a.b-c (view)"}) {
        DumpName p;
        ASSERT_TRUE(parse_dump_name(name, &p)) << name;
        EXPECT_EQ(p.base, name);
        EXPECT_EQ(p.occurrence, 1);
        EXPECT_EQ(p.decode, 0);
        EXPECT_EQ(p.ubatch, 0);
    }
}

TEST(DumpNames, MalformedSuffixesAreReportedAndStayInTheName) {
    struct Case { const char* name; const char* base; int occurrence, decode, ubatch; };
    for (const Case& c : {Case{"x#", "x#", 1, 0, 0}, Case{"x@a", "x@a", 1, 0, 0}, Case{"x@", "x@", 1, 0, 0},
                          Case{"x@1.", "x@1.", 1, 0, 0}, Case{"x@.1", "x@.1", 1, 0, 0}, Case{"x@1.2.3", "x@1.2.3", 1, 0, 0},
                          Case{"x#a@1", "x#a", 1, 1, 0}, Case{"x#2@b", "x#2@b", 1, 0, 0},
                          Case{"x#1234567890", "x#1234567890", 1, 0, 0}, Case{"x@-1", "x@-1", 1, 0, 0}}) {
        DumpName p;
        EXPECT_FALSE(parse_dump_name(c.name, &p)) << c.name;
        EXPECT_EQ(p.base, c.base) << c.name;
        EXPECT_EQ(p.occurrence, c.occurrence) << c.name;
        EXPECT_EQ(p.decode, c.decode) << c.name;
        EXPECT_EQ(p.ubatch, c.ubatch) << c.name;
    }
}

TEST(DumpNames, OccurrencesZeroAndOneAreReadAsWritten) {
    DumpName p;
    ASSERT_TRUE(parse_dump_name("x#1@2", &p));
    EXPECT_EQ(p.base, "x");
    EXPECT_EQ(p.occurrence, 1);
    EXPECT_EQ(p.decode, 2);
    ASSERT_TRUE(parse_dump_name("x#0", &p));
    EXPECT_EQ(p.occurrence, 0);
}

}  // namespace
}  // namespace ls
