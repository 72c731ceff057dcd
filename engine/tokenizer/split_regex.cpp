// Parser, compiler and backtracking matcher of the pre-tokenizer patterns (see split_regex.h).
#include "engine/tokenizer/split_regex.h"

#include <algorithm>
#include <deque>
#include <memory>

#include "engine/tokenizer/unicode_text.h"

namespace ls {

namespace {

constexpr uint32_t kInfinite = 0xFFFFFFFF;

// Stand-ins of the collapsed view, one per category llama.cpp tells apart.
constexpr uint32_t kCollapsedOther = 0xD0, kCollapsedNumber = 0xD1, kCollapsedLetter = 0xD2,
                   kCollapsedPunct = 0xD3, kCollapsedMark = 0xD4, kCollapsedSymbol = 0xD5;
constexpr uint32_t kVerticalTab = 0x0B;

// The categories a pattern may name. Any of them makes the whole pattern collapsed (llama.cpp
// checks for these very substrings).
struct Property {
    const char* name;
    uint32_t stand_in;
    const char* ascii;  // the ASCII members, as pairs of first/last characters
};
constexpr Property kProperties[] = {
    {"N", kCollapsedNumber, "09"},
    {"L", kCollapsedLetter, "AZaz"},
    {"P", kCollapsedPunct, "!#%*,/:;?@[]__{{}}"},
    {"M", kCollapsedMark, ""},
    {"S", kCollapsedSymbol, "$$++<>^^``||~~"},
    {"Lu", kCollapsedLetter, "AZaz"},
    {"Ll", kCollapsedLetter, "AZaz"},
    {"Lt", kCollapsedLetter, "AZaz"},
    {"Lm", kCollapsedLetter, "AZaz"},
    {"Lo", kCollapsedLetter, "AZaz"},
};

struct Node {
    enum Kind { kAlt, kSeq, kClass, kRepeat, kLook, kAssert } kind = kSeq;
    std::vector<std::unique_ptr<Node>> kids;
    uint32_t cls = 0;
    uint32_t min = 1, max = 1;
    bool negative = false;
    char assertion = 0;
};

}  // namespace

bool SplitRegex::Class::matches(uint32_t u) const {
    bool in;
    if (u < 256) {
        in = (low[u >> 6] >> (u & 63)) & 1;
    } else {
        in = high_all;
        for (size_t i = 0; !in && i < high.size(); ++i) in = u >= high[i].first && u <= high[i].second;
    }
    return in != negated;
}

class RegexCompiler {
public:
    RegexCompiler(SplitRegex& re, std::vector<uint32_t> pattern) : re_(re), p_(std::move(pattern)) {}

    Status compile() {
        auto root = parse_alt();
        if (!root) return error_;
        if (pos_ < p_.size()) return fail("unbalanced ')'");
        emit(*root);
        re_.code_.push_back({});  // kMatch
        return {};
    }

private:
    using NodeP = std::unique_ptr<Node>;
    using Class = SplitRegex::Class;

    Error fail(const std::string& what) {
        if (error_.message.empty()) {
            error_ = make_error(ErrorCode::kInternal, "pre-tokenizer pattern " + re_.pattern_ + ": " + what +
                                                          " at offset " + std::to_string(pos_));
        }
        return error_;
    }
    bool more() const { return pos_ < p_.size(); }
    uint32_t peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : 0; }

    static void add_range(Class& c, uint32_t lo, uint32_t hi) {
        for (uint32_t u = lo; u <= std::min<uint32_t>(hi, 255); ++u) c.low[u >> 6] |= uint64_t{1} << (u & 63);
        if (hi >= 256) c.high.push_back({std::max<uint32_t>(lo, 256), hi});
    }
    // \s \d \w as std::regex has them in the "C" locale: ASCII only; upper case negates.
    static bool add_builtin(Class& c, uint32_t letter) {
        Class b;
        switch (letter | 0x20) {
            case 's': add_range(b, 9, 13), add_range(b, ' ', ' '); break;
            case 'd': add_range(b, '0', '9'); break;
            case 'w': add_range(b, '0', '9'), add_range(b, 'A', 'Z'), add_range(b, 'a', 'z'), add_range(b, '_', '_'); break;
            default: return false;
        }
        const bool negate = letter >= 'A' && letter <= 'Z';
        for (int i = 0; i < 4; ++i) c.low[i] |= negate ? ~b.low[i] : b.low[i];
        if (negate) c.high_all = true;
        return true;
    }
    uint32_t add_class(Class c) {
        re_.classes_.push_back(std::move(c));
        return static_cast<uint32_t>(re_.classes_.size() - 1);
    }
    NodeP class_node(Class c) {
        auto n = std::make_unique<Node>();
        n->kind = Node::kClass;
        n->cls = add_class(std::move(c));
        return n;
    }

    bool parse_hex(size_t digits, uint32_t* out) {
        uint32_t v = 0;
        for (size_t i = 0; i < digits; ++i) {
            const uint32_t c = peek();
            uint32_t d;
            if (c >= '0' && c <= '9') d = c - '0';
            else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') d = (c | 0x20) - 'a' + 10;
            else return false;
            v = v * 16 + d;
            ++pos_;
        }
        *out = v;
        return true;
    }

    // After a backslash: a property or builtin into `c` (returns true, *single unset), or a
    // single character (*single set).
    bool parse_escape(Class& c, uint32_t* single, bool* is_single) {
        if (!more()) return fail("trailing backslash"), false;
        const uint32_t e = p_[pos_++];
        *is_single = false;
        if (e == 'p') {
            if (peek() != '{') return fail("\\p without {"), false;
            std::string name;
            ++pos_;
            while (more() && peek() != '}') name.push_back(static_cast<char>(p_[pos_++]));
            if (!more()) return fail("unterminated \\p{"), false;
            ++pos_;
            for (const Property& prop : kProperties) {
                if (name != prop.name) continue;
                add_range(c, prop.stand_in, prop.stand_in);
                for (const char* r = prop.ascii; *r; r += 2) add_range(c, static_cast<uint8_t>(r[0]), static_cast<uint8_t>(r[1]));
                return true;
            }
            return fail("unknown property \\p{" + name + "}"), false;
        }
        if (add_builtin(c, e)) return true;
        *is_single = true;
        switch (e) {
            case 'r': *single = '\r'; return true;
            case 'n': *single = '\n'; return true;
            case 't': *single = '\t'; return true;
            case 'v': *single = '\v'; return true;
            case 'f': *single = '\f'; return true;
            case '0': *single = 0; return true;
            case 'x': if (!parse_hex(2, single)) return fail("bad \\x escape"), false; return true;
            case 'u': if (!parse_hex(4, single)) return fail("bad \\u escape"), false; return true;
            default:
                if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
                    return fail(std::string("unsupported escape \\") + static_cast<char>(e)), false;
                }
                *single = e;  // an escaped punctuation character is itself
                return true;
        }
    }

    NodeP parse_bracket() {
        Class c;
        if (peek() == '^') c.negated = true, ++pos_;
        while (more() && peek() != ']') {  // ECMAScript: a ']' right after '[' closes it
            uint32_t lo = p_[pos_++];
            bool single = true;
            if (lo == '\\') {
                if (!parse_escape(c, &lo, &single)) return nullptr;
                if (!single) continue;
            }
            if (peek() == '-' && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
                ++pos_;
                uint32_t hi = p_[pos_++];
                if (hi == '\\') {
                    bool hi_single = true;
                    if (!parse_escape(c, &hi, &hi_single)) return nullptr;
                    if (!hi_single) return fail("class escape as a range end"), nullptr;
                }
                if (hi < lo) return fail("range out of order"), nullptr;
                add_range(c, lo, hi);
            } else {
                add_range(c, lo, lo);
            }
        }
        if (!more()) return fail("unterminated ["), nullptr;
        ++pos_;  // ]
        return class_node(std::move(c));
    }

    NodeP parse_atom() {
        const uint32_t c = p_[pos_++];
        if (c == '(') {
            auto look = std::make_unique<Node>();
            bool is_look = false;
            if (peek() == '?') {
                const uint32_t k = peek(1);
                if (k == ':') {
                    pos_ += 2;
                } else if (k == '=' || k == '!') {
                    is_look = true;
                    look->negative = k == '!';
                    pos_ += 2;
                } else {
                    return fail("unsupported group (?"), nullptr;
                }
            }
            NodeP body = parse_alt();
            if (!body) return nullptr;
            if (peek() != ')') return fail("missing ')'"), nullptr;
            ++pos_;
            if (!is_look) return body;
            look->kind = Node::kLook;
            look->kids.push_back(std::move(body));
            return look;
        }
        if (c == '[') return parse_bracket();
        if (c == '^' || c == '$') {
            auto n = std::make_unique<Node>();
            n->kind = Node::kAssert;
            n->assertion = static_cast<char>(c);
            return n;
        }
        Class cls;
        if (c == '.') {
            cls.negated = true;  // anything but line terminators
            for (uint32_t t : {0x0Au, 0x0Du}) add_range(cls, t, t);
            add_range(cls, 0x2028, 0x2029);
            return class_node(std::move(cls));
        }
        if (c == '\\') {
            if (peek() == 'b' || peek() == 'B') {
                auto n = std::make_unique<Node>();
                n->kind = Node::kAssert;
                n->assertion = static_cast<char>(p_[pos_++]);
                return n;
            }
            uint32_t single = 0;
            bool is_single = true;
            if (!parse_escape(cls, &single, &is_single)) return nullptr;
            if (is_single) add_range(cls, single, single);
            return class_node(std::move(cls));
        }
        if (c == ')' || c == '|' || c == '*' || c == '+' || c == '?' || c == '{') {
            --pos_;
            return fail("nothing to repeat or stray metacharacter"), nullptr;
        }
        add_range(cls, c, c);
        return class_node(std::move(cls));
    }

    bool parse_count(uint32_t* out) {
        if (!(peek() >= '0' && peek() <= '9')) return false;
        uint32_t v = 0;
        while (peek() >= '0' && peek() <= '9') {
            v = v * 10 + (p_[pos_++] - '0');
            if (v > 4096) return false;
        }
        *out = v;
        return true;
    }

    NodeP parse_seq() {
        auto seq = std::make_unique<Node>();
        seq->kind = Node::kSeq;
        while (more() && peek() != '|' && peek() != ')') {
            NodeP atom = parse_atom();
            if (!atom) return nullptr;
            uint32_t min = 1, max = 1;
            const uint32_t q = peek();
            if (q == '*') min = 0, max = kInfinite, ++pos_;
            else if (q == '+') min = 1, max = kInfinite, ++pos_;
            else if (q == '?') min = 0, max = 1, ++pos_;
            else if (q == '{') {
                ++pos_;
                if (!parse_count(&min)) return fail("bad {n,m}"), nullptr;
                max = min;
                if (peek() == ',') {
                    ++pos_;
                    max = kInfinite;
                    if (peek() != '}' && !parse_count(&max)) return fail("bad {n,m}"), nullptr;
                }
                if (peek() != '}' || max < min) return fail("bad {n,m}"), nullptr;
                ++pos_;
            }
            if (min != 1 || max != 1) {
                if (peek() == '?' || peek() == '+') return fail("lazy or possessive quantifiers are not supported"), nullptr;
                if (atom->kind == Node::kLook || atom->kind == Node::kAssert) return fail("quantified assertion"), nullptr;
                if (max == kInfinite && min_width(*atom) == 0) return fail("a loop whose body can match nothing"), nullptr;
                auto rep = std::make_unique<Node>();
                rep->kind = Node::kRepeat;
                rep->min = min, rep->max = max;
                rep->kids.push_back(std::move(atom));
                atom = std::move(rep);
            }
            seq->kids.push_back(std::move(atom));
        }
        return seq;
    }

    NodeP parse_alt() {
        auto alt = std::make_unique<Node>();
        alt->kind = Node::kAlt;
        for (;;) {
            NodeP seq = parse_seq();
            if (!seq) return nullptr;
            alt->kids.push_back(std::move(seq));
            if (peek() != '|') break;
            ++pos_;
        }
        return alt;
    }

    static uint32_t min_width(const Node& n) {
        switch (n.kind) {
            case Node::kClass: return 1;
            case Node::kLook:
            case Node::kAssert: return 0;
            case Node::kRepeat: return n.min * min_width(*n.kids[0]);
            case Node::kSeq: {
                uint32_t w = 0;
                for (const auto& k : n.kids) w += min_width(*k);
                return w;
            }
            case Node::kAlt: {
                uint32_t w = kInfinite;
                for (const auto& k : n.kids) w = std::min(w, min_width(*k));
                return w;
            }
        }
        return 0;
    }

    uint32_t here() const { return static_cast<uint32_t>(re_.code_.size()); }
    uint32_t push(SplitRegex::Inst inst) {
        re_.code_.push_back(inst);
        return here() - 1;
    }

    void emit(const Node& n) {
        using Op = SplitRegex::Op;
        switch (n.kind) {
            case Node::kClass: push({Op::kClass, false, 0, 0, 0, 0, 0, n.cls}); break;
            case Node::kAssert: push({Op::kAssert, false, n.assertion}); break;
            case Node::kSeq:
                for (const auto& k : n.kids) emit(*k);
                break;
            case Node::kAlt: {
                std::vector<uint32_t> jumps;
                for (size_t i = 0; i < n.kids.size(); ++i) {
                    if (i + 1 == n.kids.size()) {
                        emit(*n.kids[i]);
                        break;
                    }
                    const uint32_t split = push({Op::kSplit});
                    re_.code_[split].a = here();
                    emit(*n.kids[i]);
                    jumps.push_back(push({Op::kJmp}));
                    re_.code_[split].b = here();
                }
                for (uint32_t j : jumps) re_.code_[j].a = here();
                break;
            }
            case Node::kLook: {
                const uint32_t look = push({Op::kLook, n.negative});
                emit(*n.kids[0]);
                push({});  // kMatch ends the lookahead's body
                re_.code_[look].a = here();
                break;
            }
            case Node::kRepeat: {
                const Node& body = *n.kids[0];
                if (body.kind == Node::kClass) {
                    push({Op::kRepClass, false, 0, 0, 0, n.min, n.max, body.cls});
                    break;
                }
                for (uint32_t i = 0; i < n.min; ++i) emit(body);
                if (n.max == kInfinite) {
                    const uint32_t loop = push({Op::kSplit});
                    re_.code_[loop].a = here();
                    emit(body);
                    push({Op::kJmp, false, 0, loop});
                    re_.code_[loop].b = here();
                } else {
                    std::vector<uint32_t> splits;
                    for (uint32_t i = n.min; i < n.max; ++i) {
                        const uint32_t split = push({Op::kSplit});
                        re_.code_[split].a = here();
                        splits.push_back(split);
                        emit(body);
                    }
                    for (uint32_t s : splits) re_.code_[s].b = here();
                }
                break;
            }
        }
    }

    SplitRegex& re_;
    std::vector<uint32_t> p_;
    size_t pos_ = 0;
    Error error_;
};

Result<SplitRegex> SplitRegex::compile(std::string_view pattern) {
    SplitRegex re;
    re.pattern_ = std::string(pattern);
    for (const Property& prop : kProperties) {
        if (pattern.find(std::string("\\p{") + prop.name + "}") != std::string_view::npos) re.collapsed_ = true;
    }
    std::vector<uint32_t> cps = unicode::decode_utf8(pattern);
    if (re.collapsed_) {
        for (uint32_t c : cps) {
            if (c >= 0x80) {
                return make_error(ErrorCode::kInternal, "pre-tokenizer pattern " + re.pattern_ +
                                                            ": a category and a non-ASCII character in one pattern "
                                                            "(llama.cpp refuses this too)");
            }
        }
    }
    RegexCompiler compiler(re, std::move(cps));
    Status st = compiler.compile();
    if (!st.ok()) return st.error();
    return re;
}

std::vector<uint32_t> SplitRegex::units(const std::vector<uint32_t>& cps) const {
    std::vector<uint32_t> out(cps.size());
    for (size_t i = 0; i < cps.size(); ++i) {
        const uint32_t c = cps[i];
        if (c < 0x80) {
            out[i] = c;
            continue;
        }
        const unicode::CharClass cls = unicode::classify(c);
        if (cls.whitespace) {
            out[i] = kVerticalTab;
        } else if (!collapsed_) {
            out[i] = c;
        } else {
            switch (cls.category) {
                case unicode::Category::kNumber: out[i] = kCollapsedNumber; break;
                case unicode::Category::kLetter: out[i] = kCollapsedLetter; break;
                case unicode::Category::kPunctuation: out[i] = kCollapsedPunct; break;
                case unicode::Category::kMark: out[i] = kCollapsedMark; break;
                case unicode::Category::kSymbol: out[i] = kCollapsedSymbol; break;
                default: out[i] = kCollapsedOther; break;
            }
        }
    }
    return out;
}

namespace {

bool is_word_unit(uint32_t u) {
    return (u >= '0' && u <= '9') || (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || u == '_';
}

// A place to go back to: `pc` at `pos`; a run of one class leaves its shorter lengths, positions
// pos down to `lo`, as one entry.
struct Frame {
    uint32_t pc;
    size_t pos, lo;
};
constexpr size_t kNoRun = static_cast<size_t>(-1);

}  // namespace

bool SplitRegex::run(const std::vector<uint32_t>& u, size_t begin, size_t end, uint32_t start_pc, size_t start,
                     bool not_null, size_t* match_end, unsigned depth) const {
    // One stack per lookahead depth; a deque, so growing it keeps `stack` valid below.
    thread_local std::deque<std::vector<Frame>> stacks;
    if (stacks.size() <= depth) stacks.resize(depth + 1);
    std::vector<Frame>& stack = stacks[depth];
    const size_t base = stack.size();
    stack.push_back({start_pc, start, kNoRun});
    bool found = false;
    while (stack.size() > base && !found) {
        Frame f = stack.back();
        stack.pop_back();
        if (f.lo != kNoRun && f.pos > f.lo) stack.push_back({f.pc, f.pos - 1, f.lo});
        uint32_t pc = f.pc;
        size_t pos = f.pos;
        for (bool alive = true; alive;) {
            const Inst& in = code_[pc];
            switch (in.op) {
                case Op::kClass:
                    if (pos < end && classes_[in.cls].matches(u[pos])) ++pos, ++pc;
                    else alive = false;
                    break;
                case Op::kRepClass: {
                    const Class& c = classes_[in.cls];
                    size_t n = 0;
                    while (n < in.max && pos + n < end && c.matches(u[pos + n])) ++n;
                    if (n < in.min) {
                        alive = false;
                        break;
                    }
                    if (n > in.min) stack.push_back({pc + 1, pos + n - 1, pos + in.min});
                    pos += n;
                    ++pc;
                    break;
                }
                case Op::kSplit:
                    stack.push_back({in.b, pos, kNoRun});
                    pc = in.a;
                    break;
                case Op::kJmp: pc = in.a; break;
                case Op::kLook: {
                    size_t ignored;
                    const bool hit = run(u, begin, end, pc + 1, pos, false, &ignored, depth + 1);
                    if (hit == in.negative) alive = false;
                    else pc = in.a;
                    break;
                }
                case Op::kAssert: {
                    bool ok = false;
                    switch (in.assertion) {
                        case '^': ok = pos == begin; break;
                        case '$': ok = pos == end; break;
                        default: {
                            const bool before = pos > begin && is_word_unit(u[pos - 1]);
                            const bool after = pos < end && is_word_unit(u[pos]);
                            ok = (before != after) == (in.assertion == 'b');
                        }
                    }
                    if (ok) ++pc;
                    else alive = false;
                    break;
                }
                case Op::kMatch:
                    if (not_null && pos == start) {
                        alive = false;
                    } else {
                        *match_end = pos;
                        found = true;
                        alive = false;
                    }
                    break;
            }
        }
    }
    stack.resize(base);
    return found;
}

size_t SplitRegex::match_at(const std::vector<uint32_t>& units, size_t begin, size_t end, size_t pos,
                            bool not_null) const {
    size_t e = npos;
    return run(units, begin, end, 0, pos, not_null, &e, 0) ? e : npos;
}

void SplitRegex::split(const std::vector<uint32_t>& units, size_t begin, size_t end,
                       std::vector<std::pair<size_t, size_t>>& out) const {
    auto search = [&](size_t from, size_t* ms, size_t* me) {
        for (size_t p = from; p <= end; ++p) {
            const size_t e = match_at(units, begin, end, p, false);
            if (e != npos) {
                *ms = p, *me = e;
                return true;
            }
        }
        return false;
    };
    size_t gap = begin, ms = 0, me = 0;
    bool have = search(begin, &ms, &me);
    while (have) {
        if (ms > gap) out.push_back({gap, ms});
        if (me > ms) out.push_back({ms, me});
        gap = me;
        size_t from = me;
        if (ms == me) {
            if (me == end) break;
            const size_t e = match_at(units, begin, end, me, true);
            if (e != npos) {
                ms = me, me = e;
                continue;
            }
            from = me + 1;
        }
        have = search(from, &ms, &me);
    }
    if (gap < end) out.push_back({gap, end});
}

}  // namespace ls
