// The workspace's tiling (views/layout.h): panes never overlap and fill the area, keep their minimum
// size where the area allows, panels open in their home pane, closing the last tab of a pane gives
// its room away, tabs move between panes and to their edges, splitters drag within the minimums, and
// a layout survives the settings file (and a damaged one is refused, not half-used).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include "views/layout.h"

namespace ls::views {
namespace {

const std::vector<std::string> kPanels = {"events", "stepping", "tensor", "histograms", "attention", "qk",
                                          "logits", "divergence", "prompt", "faults", "backends", "export",
                                          "model", "weights", "lints", "router", "lens", "quant", "history", "state"};
constexpr float kGap = 6, kMinW = 240, kMinH = 160;

bool overlap(const LayoutRect& a, const LayoutRect& b) {
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

// No two panes overlap, each lies in the area with its minimum size, and panes and gaps cover it.
void expect_tiled(const TileLayout& t, const LayoutRect& area, const std::string& what) {
    const auto panes = t.panes();
    ASSERT_FALSE(panes.empty()) << what;
    double covered = 0;
    for (size_t i = 0; i < panes.size(); ++i) {
        const LayoutRect& r = panes[i].rect;
        EXPECT_GE(r.w, kMinW) << what << " pane " << i;
        EXPECT_GE(r.h, kMinH) << what << " pane " << i;
        EXPECT_GE(r.x, area.x) << what;
        EXPECT_GE(r.y, area.y) << what;
        EXPECT_LE(r.x + r.w, area.x + area.w + 0.01f) << what;
        EXPECT_LE(r.y + r.h, area.y + area.h + 0.01f) << what;
        for (size_t j = i + 1; j < panes.size(); ++j) EXPECT_FALSE(overlap(r, panes[j].rect)) << what << " panes " << i << ", " << j;
        covered += r.area();
    }
    for (const auto& s : t.splitters()) covered += s.rect.area();
    // Splitters of nested splits cross only their own side: panes plus bars tile the area exactly.
    EXPECT_NEAR(covered, area.area(), 1.0) << what;
}

TEST(TileLayout, EveryNamedLayoutTilesEveryPanelAtBothSizes) {
    for (const std::string& name : TileLayout::names()) {
        auto t = TileLayout::named(name);
        ASSERT_TRUE(t) << name;
        EXPECT_EQ(t->name(), name);
        // Every panel has exactly one home pane.
        std::multiset<std::string> homes;
        std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& n) {
            if (n.contains("split")) {
                walk(n["first"]);
                walk(n["second"]);
                return;
            }
            for (const auto& h : n["homes"]) homes.insert(h.get<std::string>());
        };
        walk(t->to_json()["root"]);
        EXPECT_EQ(homes, std::multiset<std::string>(kPanels.begin(), kPanels.end())) << name;
        for (const LayoutRect area : {LayoutRect{0, 19, 1280, 730}, LayoutRect{0, 38, 2560, 1330}}) {
            for (const std::string& p : kPanels) t->show(p);
            t->arrange(area, kGap, kMinW, kMinH);
            expect_tiled(*t, area, name);
            std::vector<std::string> open = t->panels();
            std::sort(open.begin(), open.end());
            std::vector<std::string> want = kPanels;
            std::sort(want.begin(), want.end());
            EXPECT_EQ(open, want) << name;
        }
    }
    EXPECT_FALSE(TileLayout::named("nonsense"));
}

TEST(TileLayout, APanelOpensAtHomeAndAnEmptyPaneGivesItsRoomAway) {
    auto t = TileLayout::named("default").value();
    const LayoutRect area{0, 0, 1280, 730};
    t.arrange(area, kGap, kMinW, kMinH);
    const size_t panes = t.panes().size();
    // qk lives with attention in the default layout: a tab there, the pane's active one.
    t.show("qk");
    t.arrange(area, kGap, kMinW, kMinH);
    EXPECT_EQ(t.panes().size(), panes);
    bool found = false;
    for (const auto& p : t.panes())
        if (std::find(p.tabs.begin(), p.tabs.end(), "qk") != p.tabs.end()) {
            found = true;
            EXPECT_NE(std::find(p.tabs.begin(), p.tabs.end(), "attention"), p.tabs.end());
            EXPECT_EQ(p.active, "qk");
        }
    EXPECT_TRUE(found);
    // Closing the stepping toolbar, alone in its pane, removes the pane; the events take its room.
    t.hide("stepping");
    t.arrange(area, kGap, kMinW, kMinH);
    EXPECT_EQ(t.panes().size(), panes - 1);
    expect_tiled(t, area, "without stepping");
    int events_panes = 0;
    for (const auto& p : t.panes()) {
        if (p.active != "events") continue;
        EXPECT_FLOAT_EQ(p.rect.h, area.h);
        ++events_panes;
    }
    EXPECT_EQ(events_panes, 1);
    // It comes back to a sensible place: its home went to the pane that took the room.
    t.show("stepping");
    t.arrange(area, kGap, kMinW, kMinH);
    for (const auto& p : t.panes()) {
        if (std::find(p.tabs.begin(), p.tabs.end(), "stepping") != p.tabs.end()) {
            EXPECT_NE(std::find(p.tabs.begin(), p.tabs.end(), "events"), p.tabs.end());
        }
    }
    // Closing a tab that is not alone leaves the pane with the next tab active.
    t.hide("qk");
    for (const auto& p : t.panes()) {
        if (std::find(p.tabs.begin(), p.tabs.end(), "attention") != p.tabs.end()) {
            EXPECT_EQ(p.active, "attention");
        }
    }
}

TEST(TileLayout, TabsMoveIntoPanesAndToTheirEdges) {
    auto t = TileLayout::named("default").value();
    const LayoutRect area{0, 0, 1280, 730};
    t.arrange(area, kGap, kMinW, kMinH);
    auto pane_of = [&](const std::string& panel) {
        for (const auto& p : t.panes())
            if (std::find(p.tabs.begin(), p.tabs.end(), panel) != p.tabs.end()) return p;
        return TileLayout::Pane{};
    };
    const int logits_pane = pane_of("logits").id;
    const size_t before = t.panes().size();
    // The divergence panel to the bottom edge of the logits pane: a new pane below it.
    ASSERT_TRUE(t.move("divergence", logits_pane, TileLayout::Edge::kBottom));
    t.arrange(area, kGap, kMinW, kMinH);
    EXPECT_EQ(t.panes().size(), before);  // its old pane emptied and went away, a new one came
    const auto div = pane_of("divergence"), logits = pane_of("logits");
    EXPECT_NE(div.id, logits.id);
    EXPECT_GT(div.rect.y, logits.rect.y);
    EXPECT_FLOAT_EQ(div.rect.x, logits.rect.x);
    expect_tiled(t, area, "after the move to an edge");
    // Into the event browser's pane as a tab.
    ASSERT_TRUE(t.move("tensor", pane_of("events").id, TileLayout::Edge::kCenter));
    t.arrange(area, kGap, kMinW, kMinH);
    EXPECT_EQ(pane_of("tensor").id, pane_of("events").id);
    EXPECT_EQ(pane_of("events").active, "tensor");
    expect_tiled(t, area, "after the move into a pane");
    // What is not open, or a pane that is not there, moves nothing.
    EXPECT_FALSE(t.move("quant", pane_of("events").id, TileLayout::Edge::kLeft));
    EXPECT_FALSE(t.move("events", 9999, TileLayout::Edge::kLeft));
}

TEST(TileLayout, SplittersDragWithinTheMinimumSizes) {
    auto t = TileLayout::named("default").value();
    const LayoutRect area{0, 0, 1280, 730};
    t.arrange(area, kGap, kMinW, kMinH);
    const auto bars = t.splitters();
    ASSERT_FALSE(bars.empty());
    const TileLayout::Splitter root = bars.front();  // the first column's right edge
    ASSERT_TRUE(root.columns);
    t.drag(root.id, 500);
    t.arrange(area, kGap, kMinW, kMinH);
    EXPECT_NEAR(t.splitters().front().rect.x, 500 - kGap / 2, 1.0f);
    expect_tiled(t, area, "after a drag");
    // Dragged beyond the room the other side needs: stopped at its minimum.
    t.drag(root.id, 1270);
    t.arrange(area, kGap, kMinW, kMinH);
    expect_tiled(t, area, "after a drag too far");
    t.drag(root.id, 5);
    t.arrange(area, kGap, kMinW, kMinH);
    expect_tiled(t, area, "after a drag too far the other way");
    for (const auto& p : t.panes()) EXPECT_GE(p.rect.w, kMinW);
}

TEST(TileLayout, SavedAndLoadedAsItWas) {
    auto t = TileLayout::named("attention").value();
    t.show("router");
    ASSERT_TRUE(t.move("logits", t.panes().front().id, TileLayout::Edge::kBottom));
    const LayoutRect area{0, 0, 1280, 730};
    t.arrange(area, kGap, kMinW, kMinH);
    t.drag(t.splitters().front().id, 400);
    std::string why;
    auto back = TileLayout::from_json(nlohmann::json::parse(t.to_json().dump()), kPanels, &why);
    ASSERT_TRUE(back) << why;
    back->arrange(area, kGap, kMinW, kMinH);
    EXPECT_EQ(back->name(), "attention");
    EXPECT_EQ(back->to_json(), t.to_json());
    const auto a = t.panes(), b = back->panes();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].tabs, b[i].tabs);
        EXPECT_EQ(a[i].active, b[i].active);
        EXPECT_FLOAT_EQ(a[i].rect.x, b[i].rect.x);
        EXPECT_FLOAT_EQ(a[i].rect.w, b[i].rect.w);
    }
}

TEST(TileLayout, ADamagedSavedLayoutIsRefusedWithTheReason) {
    const auto load = [](const std::string& text) {
        std::string why;
        auto t = TileLayout::from_json(nlohmann::json::parse(text), kPanels, &why);
        return t ? std::string("loaded") : why;
    };
    EXPECT_EQ(load(R"({"root": {"tabs": ["nope"]}})"), "unknown panel \"nope\"");
    EXPECT_NE(load(R"({"root": {"split": "columns", "share": 2, "first": {}, "second": {}}})").find("share between 0 and 1"),
              std::string::npos);
    EXPECT_EQ(load(R"({"root": {"split": "rows", "share": 0.5, "first": {"tabs": ["events"]}, "second": {"tabs": ["events"]}}})"),
              "panel events is open twice");
    EXPECT_EQ(load(R"({"name": "x"})"), "no \"root\" pane");
    std::string deep = R"({"tabs": ["events"]})";
    for (int i = 0; i < 40; ++i) deep = R"({"split": "rows", "share": 0.5, "first": )" + deep + R"(, "second": {}})";
    EXPECT_EQ(load(R"({"root": )" + deep + "}"), "nested deeper than any screen shows");
    EXPECT_EQ(load(R"({"root": {"tabs": ["events", "logits"], "homes": ["events"]}})"), "loaded");
}

}  // namespace
}  // namespace ls::views
