// The workspace's tiling: the window's area split by a tree of horizontal and vertical splits into
// panes that never overlap; each pane holds panels as tabs and shows one. Opening a panel puts it in
// its home pane (the one the layout gives it), or the largest; closing the last tab of a pane gives
// its room to its neighbour. Pure geometry and bookkeeping: the main view draws it with ImGui.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace ls::views {

struct LayoutRect {
    float x = 0, y = 0, w = 0, h = 0;
    bool contains(float px, float py) const { return px >= x && px < x + w && py >= y && py < y + h; }
    float area() const { return w * h; }
};

class TileLayout {
public:
    enum class Edge { kCenter, kLeft, kRight, kTop, kBottom };
    struct Pane {
        int id = -1;                    // stable while the tree does not change shape
        LayoutRect rect;
        std::vector<std::string> tabs;  // open panels, in tab order
        std::string active;             // the one shown
    };
    struct Splitter {
        int id = -1;
        bool columns = true;  // true: a vertical bar between side-by-side panes (drag along x)
        LayoutRect rect;      // the gap between the two sides
    };

    // The named layouts, in the order of their keys (Alt+1, Alt+2, ...).
    static const std::vector<std::string>& names();
    // One of them, or nullopt for a name that is none of them.
    static std::optional<TileLayout> named(const std::string& name);
    const std::string& name() const { return name_; }

    // Places the panes in `area` with `gap` pixels between them; a pane gets at least min_w x min_h
    // where the area has room for every pane so (the splits' shares give way first).
    void arrange(LayoutRect area, float gap, float min_w, float min_h);
    std::vector<Pane> panes() const;          // the leaves, left to right and top to bottom (after arrange)
    std::vector<Splitter> splitters() const;  // one per split (after arrange)

    bool contains(const std::string& panel) const;
    std::vector<std::string> panels() const;  // every open panel
    // Opens `panel` as the active tab of its home pane (else of the largest pane).
    void show(const std::string& panel);
    // Closes it; a pane left without tabs is removed and its neighbour takes its room.
    void hide(const std::string& panel);
    bool activate(const std::string& panel);  // false when it is not open
    // Moves an open panel into pane `id`: as a tab (kCenter) or into a new pane at that edge of it.
    bool move(const std::string& panel, int id, Edge edge);
    // Moves splitter `id` so that the split falls at `pos` (x for columns, y for rows), within the
    // minimum sizes of both sides.
    void drag(int id, float pos);
    // The share of splitter `id`'s first side (tests, the state log).
    float share(int id) const;

    nlohmann::json to_json() const;
    // A layout saved by to_json; nullopt with `why` when it is not one (an unknown panel, a share
    // outside 0..1, a panel twice, nesting deeper than a screen could show).
    static std::optional<TileLayout> from_json(const nlohmann::json& j, const std::vector<std::string>& known, std::string* why);

private:
    struct Node {
        bool leaf = true;
        bool columns = true;  // a split's children side by side (else one above the other)
        float ratio = 0.5f;   // the first child's share
        int a = -1, b = -1, parent = -1;
        std::vector<std::string> tabs;   // leaf: open panels
        std::vector<std::string> homes;  // leaf: the panels that open here, open or not
        std::string active;
        LayoutRect rect;
        float gap = 0;
    };
    int add_leaf(std::vector<std::string> homes, std::vector<std::string> open);
    int add_split(bool columns, float ratio, int a, int b);
    void place(int n, LayoutRect r, float gap, float min_w, float min_h);
    float min_extent(int n, bool along_x, float gap, float min_w, float min_h) const;
    void leaves(int n, std::vector<int>* out) const;
    int leaf_of(const std::string& panel, bool homes) const;
    int largest_leaf(int under) const;
    void remove_leaf(int n);
    int from_json_node(const nlohmann::json& j, const std::vector<std::string>& known, int depth, std::string* why);
    nlohmann::json node_json(int n) const;

    std::vector<Node> nodes_;
    int root_ = -1;
    std::string name_;
    float min_w_ = 0, min_h_ = 0;
};

}  // namespace ls::views
