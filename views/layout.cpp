// The workspace's tiling (layout.h).
#include "views/layout.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace ls::views {
namespace {

// Deeper than any screen shows: a saved layout nested further is not one of ours.
constexpr int kMaxDepth = 16;

struct Spec {
    // A pane: the panels that live there and which of them are open; or a split of two specs.
    std::vector<std::string> homes, open;
    bool columns = true;
    float ratio = 0.5f;
    std::vector<Spec> children;
};
Spec pane(std::vector<std::string> homes, std::vector<std::string> open) { return {std::move(homes), std::move(open), true, 0.5f, {}}; }
Spec cols(float ratio, Spec a, Spec b) { return {{}, {}, true, ratio, {std::move(a), std::move(b)}}; }
Spec rows(float ratio, Spec a, Spec b) { return {{}, {}, false, ratio, {std::move(a), std::move(b)}}; }

// Every layout has a home for every panel: the stepping toolbar top left, the event browser (with
// the prompt and the faults) below it, two columns of panes for the rest.
Spec named_spec(const std::string& name) {
    if (name == "divergence hunt")
        return cols(0.27f, rows(0.3f, pane({"stepping"}, {"stepping"}), pane({"events", "prompt", "faults"}, {"events"})),
                    cols(0.55f,
                         rows(0.5f, pane({"divergence", "lens", "quant"}, {"divergence"}),
                              pane({"tensor", "history", "weights", "model", "state"}, {"tensor"})),
                         rows(0.5f, pane({"histograms", "backends", "export"}, {"histograms"}),
                              pane({"logits", "attention", "qk", "router", "lints"}, {"logits"}))));
    if (name == "attention")
        return cols(0.25f, rows(0.3f, pane({"stepping"}, {"stepping"}), pane({"events", "prompt", "faults"}, {"events"})),
                    cols(0.62f,
                         rows(0.62f, pane({"attention", "histograms", "router", "lens", "quant"}, {"attention"}),
                              pane({"qk", "model", "state"}, {"qk"})),
                         rows(0.5f, pane({"tensor", "history", "weights", "lints"}, {"tensor"}),
                              pane({"logits", "divergence", "backends", "export"}, {"logits"}))));
    if (name == "moe")
        return cols(0.25f, rows(0.3f, pane({"stepping"}, {"stepping"}), pane({"events", "prompt", "faults"}, {"events"})),
                    cols(0.55f,
                         rows(0.55f, pane({"router", "attention", "qk", "lens", "quant"}, {"router"}),
                              pane({"tensor", "history", "histograms", "model", "state"}, {"tensor"})),
                         rows(0.5f, pane({"divergence", "backends", "export"}, {"divergence"}),
                              pane({"logits", "weights", "lints"}, {"logits"}))));
    if (name == "quantization")
        return cols(0.25f, rows(0.3f, pane({"stepping"}, {"stepping"}), pane({"events", "prompt", "faults"}, {"events"})),
                    cols(0.58f,
                         rows(0.6f, pane({"quant", "histograms", "attention", "qk", "router"}, {"quant"}),
                              pane({"lens", "tensor", "history", "model", "state"}, {"lens"})),
                         rows(0.5f, pane({"divergence", "backends", "export"}, {"divergence"}),
                              pane({"logits", "weights", "lints"}, {"logits"}))));
    // "default": the first look that fits 1280x800.
    return cols(0.27f, rows(0.3f, pane({"stepping"}, {"stepping"}), pane({"events", "prompt", "faults"}, {"events"})),
                cols(0.55f,
                     rows(0.5f, pane({"tensor", "history", "histograms", "quant", "model", "state"}, {"tensor"}),
                          pane({"attention", "qk", "router", "lens"}, {"attention"})),
                     rows(0.5f, pane({"divergence", "backends", "export"}, {"divergence"}),
                          pane({"logits", "weights", "lints"}, {"logits"}))));
}

}  // namespace

const std::vector<std::string>& TileLayout::names() {
    static const std::vector<std::string> kNames = {"default", "divergence hunt", "attention", "moe", "quantization"};
    return kNames;
}

std::optional<TileLayout> TileLayout::named(const std::string& name) {
    if (std::find(names().begin(), names().end(), name) == names().end()) return std::nullopt;
    TileLayout t;
    t.name_ = name;
    std::function<int(const Spec&)> build = [&](const Spec& s) {
        if (s.children.empty()) return t.add_leaf(s.homes, s.open);
        const int a = build(s.children[0]), b = build(s.children[1]);
        return t.add_split(s.columns, s.ratio, a, b);
    };
    t.root_ = build(named_spec(name));
    return t;
}

int TileLayout::add_leaf(std::vector<std::string> homes, std::vector<std::string> open) {
    Node n;
    n.homes = std::move(homes);
    n.tabs = std::move(open);
    if (!n.tabs.empty()) n.active = n.tabs.front();
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
}

int TileLayout::add_split(bool columns, float ratio, int a, int b) {
    Node n;
    n.leaf = false;
    n.columns = columns;
    n.ratio = ratio;
    n.a = a, n.b = b;
    nodes_.push_back(std::move(n));
    const int id = static_cast<int>(nodes_.size()) - 1;
    nodes_[a].parent = nodes_[b].parent = id;
    return id;
}

// The least width (along_x) or height a subtree needs for every pane to have its minimum.
float TileLayout::min_extent(int n, bool along_x, float gap, float min_w, float min_h) const {
    const Node& node = nodes_[n];
    if (node.leaf) return along_x ? min_w : min_h;
    const float a = min_extent(node.a, along_x, gap, min_w, min_h), b = min_extent(node.b, along_x, gap, min_w, min_h);
    return node.columns == along_x ? a + gap + b : std::max(a, b);
}

void TileLayout::place(int n, LayoutRect r, float gap, float min_w, float min_h) {
    Node& node = nodes_[n];
    node.rect = r;
    node.gap = gap;
    if (node.leaf) return;
    const float total = (node.columns ? r.w : r.h) - gap;
    float first = std::round(node.ratio * total);
    // Each side keeps its minimum where the area allows both; else the shares stand.
    const float need_a = min_extent(node.a, node.columns, gap, min_w, min_h);
    const float need_b = min_extent(node.b, node.columns, gap, min_w, min_h);
    if (need_a + need_b <= total) first = std::clamp(first, need_a, total - need_b);
    first = std::clamp(first, 0.0f, std::max(0.0f, total));
    LayoutRect ra = r, rb = r;
    if (node.columns) {
        ra.w = first;
        rb.x = r.x + first + gap;
        rb.w = total - first;
    } else {
        ra.h = first;
        rb.y = r.y + first + gap;
        rb.h = total - first;
    }
    place(node.a, ra, gap, min_w, min_h);
    place(node.b, rb, gap, min_w, min_h);
}

void TileLayout::arrange(LayoutRect area, float gap, float min_w, float min_h) {
    min_w_ = min_w, min_h_ = min_h;
    if (root_ >= 0) place(root_, area, gap, min_w, min_h);
}

void TileLayout::leaves(int n, std::vector<int>* out) const {
    if (n < 0) return;
    if (nodes_[n].leaf) {
        out->push_back(n);
        return;
    }
    leaves(nodes_[n].a, out);
    leaves(nodes_[n].b, out);
}

std::vector<TileLayout::Pane> TileLayout::panes() const {
    std::vector<int> ids;
    leaves(root_, &ids);
    std::vector<Pane> out;
    for (int id : ids) out.push_back({id, nodes_[id].rect, nodes_[id].tabs, nodes_[id].active});
    return out;
}

std::vector<TileLayout::Splitter> TileLayout::splitters() const {
    std::vector<Splitter> out;
    std::function<void(int)> walk = [&](int n) {
        if (n < 0 || nodes_[n].leaf) return;
        const Node& node = nodes_[n];
        const LayoutRect& ra = nodes_[node.a].rect;
        LayoutRect bar = node.rect;
        if (node.columns) bar.x = ra.x + ra.w, bar.w = node.gap;
        else bar.y = ra.y + ra.h, bar.h = node.gap;
        out.push_back({n, node.columns, bar});
        walk(node.a);
        walk(node.b);
    };
    walk(root_);
    return out;
}

int TileLayout::leaf_of(const std::string& panel, bool homes) const {
    std::vector<int> ids;
    leaves(root_, &ids);
    for (int id : ids) {
        const auto& list = homes ? nodes_[id].homes : nodes_[id].tabs;
        if (std::find(list.begin(), list.end(), panel) != list.end()) return id;
    }
    return -1;
}

int TileLayout::largest_leaf(int under) const {
    std::vector<int> ids;
    leaves(under, &ids);
    int best = ids.empty() ? -1 : ids.front();
    for (int id : ids)
        if (nodes_[id].rect.area() > nodes_[best].rect.area()) best = id;
    return best;
}

bool TileLayout::contains(const std::string& panel) const { return leaf_of(panel, false) >= 0; }

std::vector<std::string> TileLayout::panels() const {
    std::vector<std::string> out;
    for (const Pane& p : panes()) out.insert(out.end(), p.tabs.begin(), p.tabs.end());
    return out;
}

void TileLayout::show(const std::string& panel) {
    if (activate(panel)) return;
    if (root_ < 0) root_ = add_leaf({}, {});
    int id = leaf_of(panel, true);
    if (id < 0) {
        id = largest_leaf(root_);
        nodes_[id].homes.push_back(panel);
    }
    nodes_[id].tabs.push_back(panel);
    nodes_[id].active = panel;
}

bool TileLayout::activate(const std::string& panel) {
    const int id = leaf_of(panel, false);
    if (id < 0) return false;
    nodes_[id].active = panel;
    return true;
}

// Removes an empty pane: its sibling takes the parent's place, and the panels whose home it was
// live in the sibling's largest pane from now on. The root pane stays (empty).
void TileLayout::remove_leaf(int n) {
    const int parent = nodes_[n].parent;
    if (parent < 0) return;
    const int sibling = nodes_[parent].a == n ? nodes_[parent].b : nodes_[parent].a;
    const int grand = nodes_[parent].parent;
    nodes_[sibling].parent = grand;
    if (grand < 0) root_ = sibling;
    else if (nodes_[grand].a == parent) nodes_[grand].a = sibling;
    else nodes_[grand].b = sibling;
    nodes_[sibling].rect = nodes_[parent].rect;
    const int heir = largest_leaf(sibling);
    nodes_[heir].homes.insert(nodes_[heir].homes.end(), nodes_[n].homes.begin(), nodes_[n].homes.end());
    nodes_[n] = Node{};  // unreachable from now on
    nodes_[parent] = Node{};
    nodes_[n].parent = nodes_[parent].parent = -2;
}

void TileLayout::hide(const std::string& panel) {
    const int id = leaf_of(panel, false);
    if (id < 0) return;
    Node& node = nodes_[id];
    const auto at = std::find(node.tabs.begin(), node.tabs.end(), panel);
    const size_t index = static_cast<size_t>(at - node.tabs.begin());
    node.tabs.erase(at);
    if (node.active == panel) node.active = node.tabs.empty() ? "" : node.tabs[std::min(index, node.tabs.size() - 1)];
    if (node.tabs.empty()) remove_leaf(id);
}

bool TileLayout::move(const std::string& panel, int id, Edge edge) {
    const int from = leaf_of(panel, false);
    std::vector<int> ids;
    leaves(root_, &ids);
    if (from < 0 || std::find(ids.begin(), ids.end(), id) == ids.end()) return false;
    if (from == id && (edge == Edge::kCenter || nodes_[id].tabs.size() == 1)) return activate(panel);
    // Out of its pane (removed when it empties; the target, another leaf, stays) and its home.
    for (int leaf : ids) {
        auto& h = nodes_[leaf].homes;
        h.erase(std::remove(h.begin(), h.end(), panel), h.end());
    }
    Node& source = nodes_[from];
    const size_t index = static_cast<size_t>(std::find(source.tabs.begin(), source.tabs.end(), panel) - source.tabs.begin());
    source.tabs.erase(source.tabs.begin() + static_cast<std::ptrdiff_t>(index));
    if (source.active == panel) source.active = source.tabs.empty() ? "" : source.tabs[std::min(index, source.tabs.size() - 1)];
    if (source.tabs.empty()) remove_leaf(from);
    if (edge == Edge::kCenter) {
        nodes_[id].tabs.push_back(panel);
        nodes_[id].homes.push_back(panel);
        nodes_[id].active = panel;
        return true;
    }
    // A new pane at that edge: the target and it become the two sides of a new split.
    const int parent = nodes_[id].parent;
    const LayoutRect rect = nodes_[id].rect;
    const int fresh = add_leaf({panel}, {panel});
    const bool columns = edge == Edge::kLeft || edge == Edge::kRight;
    const bool first = edge == Edge::kLeft || edge == Edge::kTop;
    const int split = add_split(columns, 0.5f, first ? fresh : id, first ? id : fresh);
    nodes_[split].parent = parent;
    nodes_[split].rect = rect;
    if (parent < 0) root_ = split;
    else if (nodes_[parent].a == id) nodes_[parent].a = split;
    else nodes_[parent].b = split;
    return true;
}

void TileLayout::drag(int id, float pos) {
    if (id < 0 || id >= static_cast<int>(nodes_.size()) || nodes_[id].leaf || nodes_[id].parent == -2) return;
    Node& node = nodes_[id];
    const float origin = node.columns ? node.rect.x : node.rect.y;
    const float total = (node.columns ? node.rect.w : node.rect.h) - node.gap;
    if (total <= 0) return;
    float first = pos - origin - node.gap / 2;
    const float need_a = min_extent(node.a, node.columns, node.gap, min_w_, min_h_);
    const float need_b = min_extent(node.b, node.columns, node.gap, min_w_, min_h_);
    if (need_a + need_b <= total) first = std::clamp(first, need_a, total - need_b);
    node.ratio = std::clamp(first / total, 0.02f, 0.98f);
    place(id, node.rect, node.gap, min_w_, min_h_);
}

float TileLayout::share(int id) const {
    return id >= 0 && id < static_cast<int>(nodes_.size()) && !nodes_[id].leaf ? nodes_[id].ratio : 0.0f;
}

nlohmann::json TileLayout::node_json(int n) const {
    const Node& node = nodes_[n];
    if (node.leaf) return {{"tabs", node.tabs}, {"homes", node.homes}, {"active", node.active}};
    return {{"split", node.columns ? "columns" : "rows"}, {"share", node.ratio}, {"first", node_json(node.a)},
            {"second", node_json(node.b)}};
}

nlohmann::json TileLayout::to_json() const {
    return {{"name", name_}, {"root", root_ >= 0 ? node_json(root_) : nlohmann::json()}};
}

int TileLayout::from_json_node(const nlohmann::json& j, const std::vector<std::string>& known, int depth, std::string* why) {
    if (!j.is_object() || depth > kMaxDepth) {
        *why = depth > kMaxDepth ? "nested deeper than any screen shows" : "a pane is not an object";
        return -1;
    }
    if (j.contains("split")) {
        const auto& s = j["split"];
        const auto& share = j.contains("share") ? j["share"] : nlohmann::json();
        if (!s.is_string() || (s != "columns" && s != "rows") || !share.is_number() || !(share.get<double>() > 0) ||
            !(share.get<double>() < 1) || !j.contains("first") || !j.contains("second")) {
            *why = "a split needs \"columns\" or \"rows\", a share between 0 and 1, a first and a second side";
            return -1;
        }
        const int a = from_json_node(j["first"], known, depth + 1, why);
        if (a < 0) return -1;
        const int b = from_json_node(j["second"], known, depth + 1, why);
        if (b < 0) return -1;
        return add_split(s == "columns", share.get<float>(), a, b);
    }
    std::vector<std::string> lists[2];
    int k = 0;
    for (const char* key : {"homes", "tabs"}) {
        if (j.contains(key)) {
            if (!j[key].is_array()) {
                *why = std::string("a pane's ") + key + " is not a list";
                return -1;
            }
            for (const auto& p : j[key]) {
                if (!p.is_string() || std::find(known.begin(), known.end(), p.get<std::string>()) == known.end()) {
                    *why = "unknown panel " + p.dump();
                    return -1;
                }
                lists[k].push_back(p.get<std::string>());
            }
        }
        ++k;
    }
    const int id = add_leaf(lists[0], lists[1]);
    if (j.contains("active") && j["active"].is_string()) {
        const std::string active = j["active"].get<std::string>();
        if (std::find(lists[1].begin(), lists[1].end(), active) != lists[1].end()) nodes_[id].active = active;
    }
    return id;
}

std::optional<TileLayout> TileLayout::from_json(const nlohmann::json& j, const std::vector<std::string>& known, std::string* why) {
    std::string ignored;
    if (!why) why = &ignored;
    if (!j.is_object() || !j.contains("root") || !j["root"].is_object()) {
        *why = "no \"root\" pane";
        return std::nullopt;
    }
    TileLayout t;
    t.name_ = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : "";
    t.root_ = t.from_json_node(j["root"], known, 0, why);
    if (t.root_ < 0) return std::nullopt;
    // Each panel open once and at home once.
    std::set<std::string> open, homes;
    for (const Node& n : t.nodes_) {
        for (const std::string& p : n.tabs)
            if (!open.insert(p).second) {
                *why = "panel " + p + " is open twice";
                return std::nullopt;
            }
        for (const std::string& p : n.homes)
            if (!homes.insert(p).second) {
                *why = "panel " + p + " has two homes";
                return std::nullopt;
            }
    }
    return t;
}

}  // namespace ls::views
