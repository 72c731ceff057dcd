// llama.cpp eval-callback printouts (llama-eval-callback, llama-debug) as partial reference tensors:
// the printed values at their flat ggml indices, and the printed sum.
//
// What the callback prints per graph node (common/debug.cpp in llama.cpp):
//   common_debug_cb_eval:                   Qcur-0 = (f32)    RESHAPE(Qcur-0{64, 5, 1, 1}, }) = {8, 8, 5, 1}
//       [                                   one block per i3 (never elided)
//           [                               one group per i2
//               [ v, v, v, ..., v, v, v ],  one row per i1: values over i0
//               ...,                        elided rows
//           ],
//           ...,                            elided groups
//       ]
//       sum = 135.216003                    the sum of all elements, after every i3 block
// The name is right-aligned in 24 columns and the shape {ne0, ne1, ne2, ne3} is ggml's. Each of
// i0, i1, i2 prints its first n and last n indices with "..." between them when ne > 2n (n = 3
// today); with k items printed and the "..." after the p-th, item j < p is index j and item j >= p is
// index ne - (k - j). Nothing here assumes n: it is read from where the "..." stands. Values are
// printed "%12.4f" (so a sample is exact to 5e-5), the sum "%f" of a float accumulation.
//
// Names and occurrences: a node's k-th tensor of the same name within one graph evaluation gets
// "#k" (k >= 2), exactly as in our dumps. Graph evaluations are not marked in the log; a new one
// starts where the log's first node (same name and op, e.g. `embd` GET_ROWS) appears again. The
// g-th evaluation gets decode index g ("@g"): right for a prompt in one ubatch followed by one
// token per decode call; a prompt split into several ubatches would need "@d.u" and the log does
// not say which graphs belong to one llama_decode call. node_index is the position of the
// printout within its evaluation (the callback sees every node, so it is ggml's node index, which
// is also what unnamed nodes' "node_<i>" names say).
//
// Damage: a value that is not a number, a shape that does not match the printed rows, or a
// printout cut short inside the log is an error naming the file and line. A printout cut short at
// the very end (the tool's stdout ended there, as in some captured logs) keeps the tensor with no
// values and no sum. Lines between printouts (other log output) are ignored.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "engine/compare/reference_formats.h"
#include "engine/forward/event.h"
#include "engine/util/quote.h"
#include "engine/util/input_file.h"

namespace ls {
namespace {

constexpr int64_t kMaxNe = int64_t(1) << 40;

struct Header {
    std::string name, type, op, src0, src1;
    int64_t ne[4] = {1, 1, 1, 1};
};

std::string trim(const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "prefix: <name right-aligned in 24> = (type) <op right-aligned in 10>(src0{..}, src1{..}}) = {a, b, c, d}"
// Returns false for lines that are not headers; `why` is set when it looks like one but is damaged.
bool parse_header(const std::string& line, Header* h, std::string* why) {
    size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) return false;
    for (size_t i = 0; i < colon; ++i)
        if (!(std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_')) return false;
    const std::string rest = line.substr(colon + 2);
    size_t eq = rest.find(" = (");
    size_t shape_at = rest.rfind(") = {");
    if (eq == std::string::npos || shape_at == std::string::npos || shape_at < eq) return false;
    // From here on the line is a header; damage is an error.
    std::string name = rest.substr(0, eq);
    name.erase(0, name.find_first_not_of(' '));
    // ggml names a view of an unnamed tensor " (permuted)": the leading space is lost in the
    // right-aligned field and comes back here.
    if (!name.empty() && name[0] == '(') name.insert(name.begin(), ' ');
    if (name.empty()) { *why = "tensor header without a name"; return true; }
    h->name = name;
    size_t type_end = rest.find(')', eq + 4);
    if (type_end == std::string::npos || type_end > shape_at) { *why = "tensor header without a type"; return true; }
    h->type = rest.substr(eq + 4, type_end - eq - 4);
    const std::string call = rest.substr(type_end + 1, shape_at - type_end - 1);  // "    RESHAPE(src0{..}, }"
    size_t paren = call.find('(');
    h->op = trim(call.substr(0, paren == std::string::npos ? call.size() : paren));
    if (paren == std::string::npos || h->op.empty()) { *why = "tensor header without an op"; return true; }
    // Sources are informative only: "name{ne}" before ", " and before the closing "}".
    std::string srcs = call.substr(paren + 1);
    size_t b0 = srcs.find('{');
    if (b0 != std::string::npos && srcs.compare(0, 2, ", ") != 0) {
        h->src0 = srcs.substr(0, b0);
        size_t close = srcs.find('}', b0);
        if (close != std::string::npos && srcs.compare(close + 1, 2, ", ") == 0) {
            std::string s1 = srcs.substr(close + 3);
            size_t b1 = s1.find('{');
            if (b1 != std::string::npos) h->src1 = s1.substr(0, b1);
        }
    }
    const std::string tail = rest.substr(shape_at + 5);
    if (tail.empty() || tail.back() != '}') { *why = "tensor shape is not closed by '}'"; return true; }
    std::stringstream dims(tail.substr(0, tail.size() - 1));
    std::string item;
    int k = 0;
    while (std::getline(dims, item, ',')) {
        item = trim(item);
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || errno != 0 || v < 0 || v > kMaxNe || k >= 4) {
            *why = fmt::format("tensor shape {} is not 1 to 4 sizes", quote_text("{" + tail));
            return true;
        }
        h->ne[k++] = v;
    }
    if (k == 0) { *why = "tensor header without a shape"; return true; }
    int64_t n = 1;
    for (int64_t d : h->ne) {
        if (d != 0 && n > (int64_t(1) << 62) / d) { *why = "tensor shape is absurdly large"; return true; }
        n *= d;
    }
    return true;
}

// The printed structure of one tensor: blocks (i3) of groups (i2) of rows (i1) of values (i0),
// each list with the position of its "..." (-1 when none).
struct Row { std::vector<float> v; int elide = -1; };
struct Group { std::vector<Row> rows; int elide = -1; };
struct Block { std::vector<Group> groups; int elide = -1; };

struct Pending {
    RefTensor t;
    int line = 0;          // header line (1-based)
    std::vector<Block> blocks;
    int block_elide = -1;
    int depth = 0;         // 0 between blocks, 1 in a block, 2 in a group
    bool started = false;  // a '[' was seen
    bool complete = false; // depth 0 and a sum line after the last block
    int interrupted_at = 0;
    std::string interrupted_text;
    std::vector<double> sums;
};

// Indices of the k printed items of a dimension of size ne with "..." after item p.
bool printed_indices(size_t k, int p, int64_t ne, std::vector<int64_t>* out) {
    out->clear();
    if (p < 0) {
        if (static_cast<int64_t>(k) != ne) return false;
        for (size_t j = 0; j < k; ++j) out->push_back(static_cast<int64_t>(j));
        return true;
    }
    if (static_cast<int64_t>(k) >= ne || static_cast<size_t>(p) > k) return false;
    for (size_t j = 0; j < k; ++j)
        out->push_back(static_cast<int>(j) < p ? static_cast<int64_t>(j) : ne - static_cast<int64_t>(k - j));
    return true;
}

// Places the printed values at their flat ggml indices.
bool place_samples(Pending& p, std::string* why) {
    const int64_t* ne = p.t.ne_;
    std::vector<int64_t> i3s, i2s, i1s, i0s;
    auto shape_err = [&](const char* dim, size_t k, int64_t size) {
        *why = fmt::format("{} entries printed for {} = {}", k, dim, size);
        return false;
    };
    if (!printed_indices(p.blocks.size(), p.block_elide, ne[3], &i3s)) return shape_err("ne3", p.blocks.size(), ne[3]);
    for (size_t b = 0; b < p.blocks.size(); ++b) {
        const Block& blk = p.blocks[b];
        if (!printed_indices(blk.groups.size(), blk.elide, ne[2], &i2s)) return shape_err("ne2", blk.groups.size(), ne[2]);
        for (size_t g = 0; g < blk.groups.size(); ++g) {
            const Group& grp = blk.groups[g];
            if (!printed_indices(grp.rows.size(), grp.elide, ne[1], &i1s)) return shape_err("ne1", grp.rows.size(), ne[1]);
            for (size_t r = 0; r < grp.rows.size(); ++r) {
                const Row& row = grp.rows[r];
                if (!printed_indices(row.v.size(), row.elide, ne[0], &i0s)) return shape_err("ne0", row.v.size(), ne[0]);
                for (size_t c = 0; c < row.v.size(); ++c)
                    p.t.samples.emplace_back(i0s[c] + ne[0] * (i1s[r] + ne[1] * (i2s[g] + ne[2] * i3s[b])), row.v[c]);
            }
        }
    }
    return true;
}

// One printed row "[ v, v, ..., v ]," -> values and elision; false when it is not a whole row.
bool parse_row(const std::string& t, Row* row, std::string* bad_value) {
    size_t close = t.rfind(']');
    if (t.empty() || t[0] != '[' || close == std::string::npos) return false;
    const std::string after = trim(t.substr(close + 1));
    if (!after.empty() && after != ",") return false;
    std::stringstream items(t.substr(1, close - 1));
    std::string item;
    while (std::getline(items, item, ',')) {
        item = trim(item);
        if (item == "...") {
            if (row->elide >= 0) { *bad_value = "..."; return true; }
            row->elide = static_cast<int>(row->v.size());
            continue;
        }
        char* end = nullptr;
        double v = std::strtod(item.c_str(), &end);
        if (item.empty() || *end != '\0') { *bad_value = item.empty() ? "(empty)" : item; return true; }
        row->v.push_back(static_cast<float>(v));
    }
    return true;
}

}  // namespace

Result<std::unique_ptr<ReferenceDump>> parse_eval_log(const std::string& text, const std::string& source) {
    std::vector<RefTensor> out;
    std::map<std::string, int> occurrences;  // per graph evaluation
    std::string first_name, first_op;
    int graph = -1, node = 0;
    Pending cur;
    bool have_cur = false;
    auto err = [&](int line, const std::string& msg) {
        return make_error(ErrorCode::kBadInput, fmt::format("{}:{}: {}", source, line, msg));
    };

    // Closes the current tensor: `at_end` is true when no further header follows.
    auto finish = [&](bool at_end) -> Status {
        if (!have_cur) return {};
        have_cur = false;
        if (cur.started && !cur.complete) {
            if (!at_end)
                return err(cur.interrupted_at ? cur.interrupted_at : cur.line,
                           fmt::format("the printout of {} (line {}) is cut short{}; the log is damaged", quote_text(cur.t.name),
                                       cur.line,
                                       cur.interrupted_at ? fmt::format(" by {}", quote_text(cur.interrupted_text, 60))
                                                          : " by the next tensor"));
            out.push_back(std::move(cur.t));  // cut off at the end of the log: no values
            return {};
        }
        if (cur.started) {
            std::string why;
            if (!place_samples(cur, &why))
                return err(cur.line, fmt::format("the printed values do not fit the shape [{}, {}, {}, {}]: {}",
                                                 cur.t.ne_[0], cur.t.ne_[1], cur.t.ne_[2], cur.t.ne_[3], why));
            // Every sum line repeats the whole tensor's sum; differing ones come from an old
            // printer that summed only what it printed, which is no sum of the tensor.
            cur.t.has_sum = true;
            for (double s : cur.sums)
                cur.t.has_sum = cur.t.has_sum && (s == cur.sums.front() || (std::isnan(s) && std::isnan(cur.sums.front())));
            cur.t.sum = cur.t.has_sum ? cur.sums.front() : 0;
        }
        out.push_back(std::move(cur.t));
        return {};
    };

    std::stringstream lines(text);
    std::string line;
    int ln = 0;
    while (std::getline(lines, line)) {
        ++ln;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        Header h;
        std::string why;
        if (parse_header(line, &h, &why)) {
            if (!why.empty()) return err(ln, why);
            if (Status s = finish(false); !s) return s.error();
            if (graph < 0 || (h.name == first_name && h.op == first_op)) {
                if (graph < 0) first_name = h.name, first_op = h.op;
                ++graph;
                node = 0;
                occurrences.clear();
            }
            cur = Pending();
            have_cur = true;
            cur.line = ln;
            RefTensor& t = cur.t;
            t.base_name = h.name;
            t.occurrence = ++occurrences[h.name];
            t.decode = graph;
            t.name = event_dump_name(h.name, t.occurrence, t.decode, 0);
            t.op = h.op;
            t.src0 = h.src0;
            t.src1 = h.src1;
            t.node_index = node++;
            std::copy(h.ne, h.ne + 4, t.ne_);
            continue;
        }
        if (!have_cur || cur.interrupted_at) continue;
        const std::string t = trim(line);
        if (cur.complete && t != "[") {  // the printout ended; this is other output
            if (Status s = finish(true); !s) return s.error();
            continue;
        }
        if (t == "[") {
            if (cur.depth == 0) { cur.blocks.emplace_back(); cur.started = true; cur.complete = false; }
            else if (cur.depth == 1) cur.blocks.back().groups.emplace_back();
            else return err(ln, fmt::format("unexpected '[' inside a row of {}", quote_text(cur.t.name)));
            ++cur.depth;
        } else if (t == "]" || t == "],") {
            if (cur.depth == 0) return err(ln, fmt::format("unbalanced ']' in the printout of {}", quote_text(cur.t.name)));
            --cur.depth;
        } else if (t == "..." || t == "...,") {
            int* elide = cur.depth == 0 ? &cur.block_elide
                         : cur.depth == 1 ? (cur.blocks.empty() ? nullptr : &cur.blocks.back().elide)
                                          : &cur.blocks.back().groups.back().elide;
            const size_t count = cur.depth == 0 ? cur.blocks.size()
                                 : cur.depth == 1 ? cur.blocks.back().groups.size()
                                                  : cur.blocks.back().groups.back().rows.size();
            if (!elide || *elide >= 0) return err(ln, fmt::format("unexpected '...' in the printout of {}", quote_text(cur.t.name)));
            *elide = static_cast<int>(count);
        } else if (t.compare(0, 5, "sum =") == 0 && cur.started && cur.depth == 0) {
            const std::string v = trim(t.substr(5));
            char* end = nullptr;
            double s = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != '\0')
                return err(ln, fmt::format("the sum of {} is not a number: {}", quote_text(cur.t.name), quote_text(v, 40)));
            cur.sums.push_back(s);
            cur.complete = true;
        } else if (cur.depth == 2 && !t.empty() && t[0] == '[') {
            Row row;
            std::string bad_value;
            if (!parse_row(t, &row, &bad_value)) {  // a row cut in the middle
                cur.interrupted_at = ln;
                cur.interrupted_text = t;
                continue;
            }
            if (!bad_value.empty())
                return err(ln, fmt::format("value {} in the printout of {} is not a number", quote_text(bad_value, 40),
                                           quote_text(cur.t.name)));
            cur.blocks.back().groups.back().rows.push_back(std::move(row));
        } else if (!cur.started && !t.empty()) {
            // A header without a printout (quantized tensors are not printed), then other output.
            if (Status s = finish(true); !s) return s.error();
        } else {
            cur.interrupted_at = ln;  // only fatal if another printout follows
            cur.interrupted_text = t.empty() ? "an empty line" : t;
        }
    }
    if (Status s = finish(true); !s) return s.error();
    if (out.empty())
        return make_error(ErrorCode::kBadInput,
                          fmt::format("{}: not a reference: no tensor printouts of llama-eval-callback / llama-debug "
                                      "(lines like \"common_debug_cb_eval:  Qcur-0 = (f32) MUL_MAT(...) = "
                                      "{{64, 5, 1, 1}}\"); a reference is a GGUF dump, such a log, or a folder "
                                      "with manifest.json and .npy files",
                                      source));
    return ReferenceDump::from_tensors(source, std::move(out), {});
}

Result<std::unique_ptr<ReferenceDump>> open_eval_log(const std::string& path) {
    auto text = read_input_file(path, UINT64_MAX);
    if (!text) return text.error();
    return parse_eval_log(text.value(), path);
}

}  // namespace ls
