// Jinja lexing and parsing: template text -> a tree of statements and expressions.
// White space follows the chat-template environment: a block tag alone on its line takes the
// line's leading blanks with it (lstrip_blocks), the newline after a block tag or comment goes
// (trim_blocks), and '-' in a tag strips all white space on that side.
#include "engine/tokenizer/jinja_ast.h"

#include <cctype>
#include <cstdlib>
#include <initializer_list>
#include <utility>

namespace ls::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

struct Tok {
    enum Kind { kText, kOpenExpr, kCloseExpr, kOpenStmt, kCloseStmt, kName, kString, kInt, kFloat, kOp, kEnd } kind;
    std::string text;
    size_t pos = 0;
    int64_t i = 0;
    double f = 0;
};

class Lexer {
public:
    explicit Lexer(std::string_view src) : src_(src) {}

    Status run(std::vector<Tok>& out) {
        size_t pos = 0;
        bool in_text = true;
        while (pos < src_.size()) {
            if (in_text) {
                text(pos, out);
                in_text = false;
                continue;
            }
            // At a tag opener.
            const char kind = src_[pos + 1];
            const size_t tag_pos = pos;
            pos += 2;
            if (pos < src_.size() && src_[pos] == '-') ++pos;
            in_text = true;
            if (kind == '#') {
                const size_t close = src_.find("#}", pos);
                if (close == std::string_view::npos) return error(tag_pos, "comment never closed");
                pos = close + 2;
                continue;
            }
            out.push_back({kind == '{' ? Tok::kOpenExpr : Tok::kOpenStmt, "", tag_pos});
            const std::string closer = kind == '{' ? "}}" : "%}";
            for (;;) {
                while (pos < src_.size() && is_space(src_[pos])) ++pos;
                if (pos >= src_.size()) return error(tag_pos, std::string("tag never closed with ") + closer);
                if (src_[pos] == '-' && src_.compare(pos + 1, 2, closer) == 0) {
                    pos += 3;
                    break;
                }
                if (src_.compare(pos, 2, closer) == 0) {
                    pos += 2;
                    break;
                }
                Status st = token(pos, out);
                if (!st.ok()) return st;
            }
            out.push_back({kind == '{' ? Tok::kCloseExpr : Tok::kCloseStmt, "", pos});
        }
        out.push_back({Tok::kEnd, "", src_.size()});
        return {};
    }

    // The text from `pos` to the next tag, trimmed as the chat-template environment trims it
    // (the rules read the characters around the text, like llama.cpp's lexer does).
    void text(size_t& pos, std::vector<Tok>& out) {
        const size_t start = pos;
        size_t end = start;
        while (end < src_.size() && !opens_tag(end)) ++end;
        pos = end;
        const bool before_block = end < src_.size() && (src_[end + 1] == '%' || src_[end + 1] == '#');
        if (before_block) {  // lstrip_blocks: the blanks between a line start and a block tag
            for (size_t cur = end; cur > start; --cur) {
                const char c = src_[cur - 1];
                if (cur == 1) {
                    end = 0;
                    break;
                }
                if (c == '\n') {
                    end = cur;
                    break;
                }
                if (!is_space(c)) break;
            }
        }
        std::string t(src_.substr(start, end > start ? end - start : 0));
        bool after_minus = false, after_block = false;
        if (start > 3) {
            const char c0 = src_[start - 3], c1 = src_[start - 2], c2 = src_[start - 1];
            after_minus = c0 == '-' && (c1 == '%' || c1 == '}' || c1 == '#') && c2 == '}';
            after_block = (c1 == '#' || c1 == '%' || c1 == '-') && c2 == '}';
        }
        if (after_block && !t.empty() && t[0] == '\n') t.erase(0, 1);  // trim_blocks
        if (after_minus) {
            size_t k = 0;
            while (k < t.size() && is_space(t[k])) ++k;
            t.erase(0, k);
        }
        if (pos + 2 < src_.size() && src_[pos + 2] == '-') {  // {{- {%- {#-
            while (!t.empty() && is_space(t.back())) t.pop_back();
        }
        if (!t.empty()) out.push_back({Tok::kText, t, start});
    }

private:
    bool opens_tag(size_t p) const {
        return src_[p] == '{' && p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#');
    }
    Status error(size_t pos, const std::string& what) const {
        return make_error(ErrorCode::kBadInput, "line " + std::to_string(line_of(src_, pos)) + ": " + what);
    }

    Status token(size_t& pos, std::vector<Tok>& out) {
        const size_t start = pos;
        const char c = src_[pos];
        if (is_ident_start(c)) {
            while (pos < src_.size() && is_ident(src_[pos])) ++pos;
            out.push_back({Tok::kName, std::string(src_.substr(start, pos - start)), start});
            return {};
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
            while (pos < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[pos])) || src_[pos] == '_')) ++pos;
            bool is_float = false;
            if (pos + 1 < src_.size() && src_[pos] == '.' && std::isdigit(static_cast<unsigned char>(src_[pos + 1]))) {
                is_float = true;
                ++pos;
                while (pos < src_.size() && std::isdigit(static_cast<unsigned char>(src_[pos]))) ++pos;
            }
            std::string digits;
            for (size_t k = start; k < pos; ++k) {
                if (src_[k] != '_') digits.push_back(src_[k]);
            }
            Tok t{is_float ? Tok::kFloat : Tok::kInt, digits, start};
            if (is_float) t.f = std::strtod(digits.c_str(), nullptr);
            else t.i = std::strtoll(digits.c_str(), nullptr, 10);
            out.push_back(t);
            return {};
        }
        if (c == '"' || c == '\'') {
            std::string s;
            ++pos;
            while (pos < src_.size() && src_[pos] != c) {
                char ch = src_[pos++];
                if (ch == '\\' && pos < src_.size()) {
                    const char e = src_[pos++];
                    switch (e) {
                        case 'n': ch = '\n'; break;
                        case 't': ch = '\t'; break;
                        case 'r': ch = '\r'; break;
                        case 'b': ch = '\b'; break;
                        case 'f': ch = '\f'; break;
                        case 'v': ch = '\v'; break;
                        case '\\': ch = '\\'; break;
                        case '\'': ch = '\''; break;
                        case '"': ch = '"'; break;
                        default: s.push_back('\\'); ch = e;
                    }
                }
                s.push_back(ch);
            }
            if (pos >= src_.size()) return error(start, "string never closed");
            ++pos;
            out.push_back({Tok::kString, s, start});
            return {};
        }
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">",
                                           "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"};
        for (const char* op : kOps) {
            const size_t n = std::char_traits<char>::length(op);
            if (src_.compare(pos, n, op) == 0) {
                pos += n;
                out.push_back({Tok::kOp, op, start});
                return {};
            }
        }
        return error(start, std::string("unexpected character '") + c + "'");
    }

    std::string_view src_;
};

class Parser {
public:
    Parser(std::string_view src, std::vector<Tok> toks) : src_(src), t_(std::move(toks)) {}

    Status parse(std::vector<NodeP>& body) {
        std::string stop;
        Status st = block(body, {}, &stop);
        if (!st.ok()) return st;
        if (!stop.empty()) return error("unexpected {% " + stop + " %}");
        return {};
    }

private:
    const Tok& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
    const Tok& next() { return t_[std::min(p_++, t_.size() - 1)]; }
    bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == Tok::kOp && peek(k).text == op; }
    bool is_name(const char* name, size_t k = 0) const { return peek(k).kind == Tok::kName && peek(k).text == name; }
    bool accept_op(const char* op) { return is_op(op) ? (++p_, true) : false; }
    bool accept_name(const char* name) { return is_name(name) ? (++p_, true) : false; }

    Error error(const std::string& what) const {
        return make_error(ErrorCode::kBadInput, "line " + std::to_string(line_of(src_, peek().pos)) + ": " + what);
    }
    Status expect_op(const char* op) {
        if (accept_op(op)) return {};
        return error(std::string("expected '") + op + "'" + near());
    }
    std::string near() const {
        const Tok& t = peek();
        if (t.kind == Tok::kEnd) return " at the end of the template";
        if (t.kind == Tok::kCloseStmt || t.kind == Tok::kCloseExpr) return " before the tag's end";
        return " before '" + t.text + "'";
    }
    Status expect_close_stmt() {
        if (peek().kind == Tok::kCloseStmt) return ++p_, Status{};
        return error("expected %}" + near());
    }
    NodeP make(Node::Kind k) {
        auto n = std::make_shared<Node>();
        n->kind = k;
        n->line = line_of(src_, peek().pos);
        return n;
    }

    // Statements until one of `stops` ({% name %}); the stop's name goes to *stop (its tag's
    // keyword is consumed, the rest of the tag is left to the caller).
    Status block(std::vector<NodeP>& body, std::initializer_list<const char*> stops, std::string* stop) {
        stop->clear();
        if (++depth_ > 200) return error("blocks nested too deeply");
        while (peek().kind != Tok::kEnd) {
            const Tok& t = peek();
            if (t.kind == Tok::kText) {
                auto n = make(Node::kText);
                n->text = next().text;
                body.push_back(n);
                continue;
            }
            if (t.kind == Tok::kOpenExpr) {
                ++p_;
                auto n = make(Node::kOutput);
                auto e = expression();
                if (!e.ok()) return e.error();
                n->kids.push_back(e.value());
                if (peek().kind != Tok::kCloseExpr) return error("expected }}" + near());
                ++p_;
                body.push_back(n);
                continue;
            }
            if (t.kind != Tok::kOpenStmt) return error("unexpected token" + near());
            ++p_;
            if (peek().kind != Tok::kName) return error("expected a statement name" + near());
            const std::string name = peek().text;
            for (const char* s : stops) {
                if (name == s) {
                    ++p_;
                    *stop = name;
                    --depth_;
                    return {};
                }
            }
            Status st = statement(body);
            if (!st.ok()) return st;
        }
        --depth_;
        if (stops.size() > 0) return error(std::string("{% ") + *(stops.end() - 1) + " %} missing: the template ends first");
        return {};
    }

    Status statement(std::vector<NodeP>& body) {
        const std::string name = next().text;
        if (name == "if") return if_statement(body);
        if (name == "for") return for_statement(body);
        if (name == "set") return set_statement(body);
        if (name == "macro") return macro_statement(body);
        if (name == "break" || name == "continue") {
            auto n = make(name == "break" ? Node::kBreak : Node::kContinue);
            body.push_back(n);
            return expect_close_stmt();
        }
        if (name == "generation") {  // a marker for training masks; renders its body
            Status st = expect_close_stmt();
            if (!st.ok()) return st;
            std::string stop;
            st = block(body, {"endgeneration"}, &stop);
            if (!st.ok()) return st;
            return expect_close_stmt();
        }
        if (name == "filter") {
            auto n = make(Node::kFilterBlock);
            auto f = filter_chain(nullptr);
            if (!f.ok()) return f.error();
            n->kids.push_back(f.value());
            Status st = expect_close_stmt();
            if (!st.ok()) return st;
            std::string stop;
            st = block(n->body, {"endfilter"}, &stop);
            if (!st.ok()) return st;
            body.push_back(n);
            return expect_close_stmt();
        }
        if (name == "call") return call_block(body);
        --p_;
        if (name.rfind("end", 0) == 0 || name == "elif" || name == "else") return error("unexpected {% " + name + " %}");
        return error("unknown statement '" + name + "'");
    }

    Status if_statement(std::vector<NodeP>& body) {
        auto n = make(Node::kIf);
        auto cond = expression();
        if (!cond.ok()) return cond.error();
        n->kids.push_back(cond.value());
        Status st = expect_close_stmt();
        if (!st.ok()) return st;
        std::string stop;
        st = block(n->body, {"elif", "else", "endif"}, &stop);
        if (!st.ok()) return st;
        if (stop == "elif") {
            st = if_statement(n->else_body);
            if (!st.ok()) return st;
            body.push_back(n);
            return {};
        }
        if (stop == "else") {
            st = expect_close_stmt();
            if (!st.ok()) return st;
            st = block(n->else_body, {"endif"}, &stop);
            if (!st.ok()) return st;
        }
        body.push_back(n);
        return expect_close_stmt();
    }

    Status for_statement(std::vector<NodeP>& body) {
        auto n = make(Node::kFor);
        do {
            if (peek().kind != Tok::kName) return error("expected a loop variable" + near());
            n->names.push_back(next().text);
        } while (accept_op(","));
        if (!accept_name("in")) return error("expected 'in'" + near());
        auto iter = ternary_free_or();
        if (!iter.ok()) return iter.error();
        n->kids.push_back(iter.value());
        if (accept_name("if")) {
            auto cond = expression();
            if (!cond.ok()) return cond.error();
            n->kids.push_back(cond.value());
        }
        Status st = expect_close_stmt();
        if (!st.ok()) return st;
        std::string stop;
        st = block(n->body, {"else", "endfor"}, &stop);
        if (!st.ok()) return st;
        if (stop == "else") {
            st = expect_close_stmt();
            if (!st.ok()) return st;
            st = block(n->else_body, {"endfor"}, &stop);
            if (!st.ok()) return st;
        }
        body.push_back(n);
        return expect_close_stmt();
    }

    Status set_statement(std::vector<NodeP>& body) {
        auto n = make(Node::kSet);
        if (peek().kind != Tok::kName) return error("expected a name after set" + near());
        n->names.push_back(next().text);
        if (accept_op(".")) {  // ns.attr
            if (peek().kind != Tok::kName) return error("expected an attribute name" + near());
            n->text = next().text;
        } else {
            while (accept_op(",")) {
                if (peek().kind != Tok::kName) return error("expected a name" + near());
                n->names.push_back(next().text);
            }
        }
        if (accept_op("=")) {
            auto e = expression_or_tuple();
            if (!e.ok()) return e.error();
            n->kids.push_back(e.value());
            body.push_back(n);
            return expect_close_stmt();
        }
        // {% set x %}...{% endset %}
        Status st = expect_close_stmt();
        if (!st.ok()) return st;
        std::string stop;
        st = block(n->body, {"endset"}, &stop);
        if (!st.ok()) return st;
        body.push_back(n);
        return expect_close_stmt();
    }

    Status params(NodeP& n) {
        Status st = expect_op("(");
        if (!st.ok()) return st;
        while (!accept_op(")")) {
            if (peek().kind != Tok::kName) return error("expected a parameter name" + near());
            n->names.push_back(next().text);
            NodeP def;
            if (accept_op("=")) {
                auto e = expression();
                if (!e.ok()) return e.error();
                def = e.value();
            }
            n->defaults.push_back(def);
            if (!is_op(")")) {
                st = expect_op(",");
                if (!st.ok()) return st;
            }
        }
        return {};
    }

    Status macro_statement(std::vector<NodeP>& body) {
        auto n = make(Node::kMacro);
        if (peek().kind != Tok::kName) return error("expected a macro name" + near());
        n->text = next().text;
        Status st = params(n);
        if (!st.ok()) return st;
        st = expect_close_stmt();
        if (!st.ok()) return st;
        std::string stop;
        st = block(n->body, {"endmacro"}, &stop);
        if (!st.ok()) return st;
        body.push_back(n);
        return expect_close_stmt();
    }

    Status call_block(std::vector<NodeP>& body) {
        auto n = make(Node::kCallBlock);
        if (is_op("(")) {
            Status st = params(n);
            if (!st.ok()) return st;
        }
        auto call = expression();
        if (!call.ok()) return call.error();
        if (call.value()->kind != Node::kCall) return error("{% call %} needs a macro call");
        n->kids.push_back(call.value());
        Status st = expect_close_stmt();
        if (!st.ok()) return st;
        std::string stop;
        st = block(n->body, {"endcall"}, &stop);
        if (!st.ok()) return st;
        body.push_back(n);
        return expect_close_stmt();
    }

    // --- expressions ---

    Result<NodeP> expression_or_tuple() {
        auto first = expression();
        if (!first.ok() || !is_op(",")) return first;
        auto list = make(Node::kList);
        list->kids.push_back(first.value());
        while (accept_op(",")) {
            if (peek().kind == Tok::kCloseStmt) break;
            auto e = expression();
            if (!e.ok()) return e;
            list->kids.push_back(e.value());
        }
        return list;
    }

    Result<NodeP> expression() {
        if (++depth_ > 200) return error("expression nested too deeply");
        auto r = ternary();
        --depth_;
        return r;
    }

    Result<NodeP> ternary() {
        auto a = ternary_free_or();
        if (!a.ok()) return a;
        if (!is_name("if")) return a;
        ++p_;
        auto n = make(Node::kTernary);
        auto cond = ternary_free_or();
        if (!cond.ok()) return cond;
        n->kids = {cond.value(), a.value(), nullptr};
        if (accept_name("else")) {
            auto b = expression();
            if (!b.ok()) return b;
            n->kids[2] = b.value();
        }
        return n;
    }

    Result<NodeP> binary(Node::Kind kind, const std::string& op, NodeP a, NodeP b) {
        auto n = make(kind);
        n->text = op;
        n->kids = {std::move(a), std::move(b)};
        return n;
    }

    // Where a binary operator of one precedence level starts at the cursor: its text and how many
    // tokens it spans ("not in" two), or an empty text for none.
    using OpAt = std::pair<std::string, size_t>;
    OpAt op_among(std::initializer_list<const char*> ops) const {
        for (const char* op : ops)
            if (is_op(op)) return {op, 1};
        return {"", 0};
    }
    // A left-associative chain `a op b op c ...` of the level below.
    template <class Operand, class Operator>
    Result<NodeP> chain(Operand operand, Operator op_at) {
        auto a = operand();
        while (a.ok()) {
            const OpAt op = op_at();
            if (op.first.empty()) break;
            p_ += op.second;
            auto b = operand();
            if (!b.ok()) return b;
            a = binary(Node::kBinary, op.first, a.value(), b.value());
        }
        return a;
    }

    Result<NodeP> ternary_free_or() {
        return chain([this] { return and_expr(); }, [this] { return is_name("or") ? OpAt{"or", 1} : OpAt{}; });
    }
    Result<NodeP> and_expr() {
        return chain([this] { return not_expr(); }, [this] { return is_name("and") ? OpAt{"and", 1} : OpAt{}; });
    }
    Result<NodeP> not_expr() {
        if (is_name("not")) {
            if (++unary_depth_ > 200) return error("expression nested too deeply");
            ++p_;
            auto n = make(Node::kUnary);
            n->text = "not";
            auto x = not_expr();
            --unary_depth_;
            if (!x.ok()) return x;
            n->kids.push_back(x.value());
            return n;
        }
        return comparison();
    }
    Result<NodeP> comparison() {
        return chain([this] { return concat(); }, [this] {
            if (is_name("in")) return OpAt{"in", 1};
            if (is_name("not") && is_name("in", 1)) return OpAt{"not in", 2};
            return op_among({"==", "!=", "<", ">", "<=", ">="});
        });
    }
    Result<NodeP> concat() {
        return chain([this] { return additive(); }, [this] { return op_among({"~"}); });
    }
    Result<NodeP> additive() {
        return chain([this] { return multiplicative(); }, [this] { return op_among({"+", "-"}); });
    }
    Result<NodeP> multiplicative() {
        return chain([this] { return unary(); }, [this] { return op_among({"*", "/", "//", "%"}); });
    }
    Result<NodeP> unary() {
        if (is_op("-") || is_op("+")) {
            if (++unary_depth_ > 200) return error("expression nested too deeply");
            auto n = make(Node::kUnary);
            n->text = next().text;
            auto x = unary();
            --unary_depth_;
            if (!x.ok()) return x;
            n->kids.push_back(x.value());
            return n;
        }
        return power();
    }
    Result<NodeP> power() {
        auto a = filtered();
        if (a.ok() && is_op("**")) {
            ++p_;
            auto b = unary();
            if (!b.ok()) return b;
            return binary(Node::kBinary, "**", a.value(), b.value());
        }
        return a;
    }

    Status call_args(NodeP& n) {  // after '('
        while (!accept_op(")")) {
            if (peek().kind == Tok::kName && is_op("=", 1)) {
                n->names.push_back(next().text);
                ++p_;
                auto e = expression();
                if (!e.ok()) return e.error();
                n->defaults.push_back(e.value());
            } else {
                if (!n->names.empty()) return error("a positional argument after a keyword argument");
                auto e = expression();
                if (!e.ok()) return e.error();
                n->kids.push_back(e.value());
            }
            if (!is_op(")")) {
                Status st = expect_op(",");
                if (!st.ok()) return st;
            }
        }
        return {};
    }

    // value | f(args) | g ... and value is [not] test(args)
    Result<NodeP> filter_chain(NodeP value) {
        do {
            if (peek().kind != Tok::kName) return error("expected a filter name" + near());
            auto f = make(Node::kFilter);
            f->text = next().text;
            while (accept_op(".")) {
                if (peek().kind != Tok::kName) return error("expected a name" + near());
                f->text += "." + next().text;
            }
            f->kids.push_back(value);
            if (accept_op("(")) {
                Status st = call_args(f);
                if (!st.ok()) return st.error();
            }
            value = f;
        } while (accept_op("|"));
        return value;
    }

    Result<NodeP> filtered() {
        auto a = postfix();
        if (!a.ok()) return a;
        NodeP v = a.value();
        for (;;) {
            if (accept_op("|")) {
                auto f = filter_chain(v);
                if (!f.ok()) return f;
                v = f.value();
            } else if (is_name("is")) {
                ++p_;
                auto t = make(Node::kTest);
                if (accept_name("not")) t->negated = true;
                if (peek().kind != Tok::kName) return error("expected a test name" + near());
                t->text = next().text;
                t->kids.push_back(v);
                if (accept_op("(")) {
                    Status st = call_args(t);
                    if (!st.ok()) return st.error();
                } else if (peek().kind == Tok::kString || peek().kind == Tok::kInt || peek().kind == Tok::kFloat) {
                    auto arg = primary();  // "x is divisibleby 3", "x is sameas none"
                    if (!arg.ok()) return arg;
                    t->kids.push_back(arg.value());
                } else if (peek().kind == Tok::kName &&
                           (is_name("none") || is_name("None") || is_name("true") || is_name("false"))) {
                    auto arg = primary();
                    if (!arg.ok()) return arg;
                    t->kids.push_back(arg.value());
                }
                v = t;
            } else {
                return v;
            }
        }
    }

    Result<NodeP> postfix() {
        auto a = primary();
        if (!a.ok()) return a;
        NodeP v = a.value();
        for (;;) {
            if (accept_op(".")) {
                if (peek().kind != Tok::kName && peek().kind != Tok::kInt) return error("expected an attribute" + near());
                auto n = make(Node::kAttr);
                n->text = next().text;
                n->kids.push_back(v);
                v = n;
            } else if (accept_op("[")) {
                auto n = make(Node::kIndex);
                n->kids.push_back(v);
                NodeP parts[3];
                bool slice = false;
                for (int k = 0; k < 3; ++k) {
                    if (!is_op(":") && !is_op("]")) {
                        auto e = expression();
                        if (!e.ok()) return e;
                        parts[k] = e.value();
                    }
                    if (k < 2 && accept_op(":")) {
                        slice = true;
                        continue;
                    }
                    break;
                }
                Status st = expect_op("]");
                if (!st.ok()) return st.error();
                if (slice) {
                    n->kind = Node::kSlice;
                    n->kids.insert(n->kids.end(), {parts[0], parts[1], parts[2]});
                } else {
                    if (!parts[0]) return error("empty subscript");
                    n->kids.push_back(parts[0]);
                }
                v = n;
            } else if (accept_op("(")) {
                auto n = make(Node::kCall);
                n->kids.push_back(v);
                Status st = call_args(n);
                if (!st.ok()) return st.error();
                v = n;
            } else {
                return v;
            }
        }
    }

    Result<NodeP> primary() {
        const Tok& t = peek();
        auto lit = [&](Value v) {
            auto n = make(Node::kLiteral);
            n->value = std::move(v);
            ++p_;
            return n;
        };
        switch (t.kind) {
            case Tok::kString: {
                std::string s = t.text;
                ++p_;
                while (peek().kind == Tok::kString) s += next().text;  // adjacent literals join
                auto n = make(Node::kLiteral);
                n->value = Value::string(std::move(s));
                return n;
            }
            case Tok::kInt: return lit(Value::integer(t.i));
            case Tok::kFloat: return lit(Value::number(t.f));
            case Tok::kName: {
                if (t.text == "true" || t.text == "True") return lit(Value::boolean(true));
                if (t.text == "false" || t.text == "False") return lit(Value::boolean(false));
                if (t.text == "none" || t.text == "None") return lit(Value::none());
                auto n = make(Node::kName);
                n->text = next().text;
                return n;
            }
            case Tok::kOp:
                if (t.text == "(") {
                    ++p_;
                    if (accept_op(")")) return make(Node::kList);
                    auto e = expression();
                    if (!e.ok()) return e;
                    if (is_op(",")) {
                        auto list = make(Node::kList);
                        list->kids.push_back(e.value());
                        while (accept_op(",")) {
                            if (is_op(")")) break;
                            auto x = expression();
                            if (!x.ok()) return x;
                            list->kids.push_back(x.value());
                        }
                        e = list;
                    }
                    Status st = expect_op(")");
                    if (!st.ok()) return st.error();
                    return e;
                }
                if (t.text == "[") {
                    ++p_;
                    auto list = make(Node::kList);
                    while (!accept_op("]")) {
                        auto x = expression();
                        if (!x.ok()) return x;
                        list->kids.push_back(x.value());
                        if (!is_op("]")) {
                            Status st = expect_op(",");
                            if (!st.ok()) return st.error();
                        }
                    }
                    return list;
                }
                if (t.text == "{") {
                    ++p_;
                    auto dict = make(Node::kDict);
                    while (!accept_op("}")) {
                        auto k = expression();
                        if (!k.ok()) return k;
                        Status st = expect_op(":");
                        if (!st.ok()) return st.error();
                        auto v = expression();
                        if (!v.ok()) return v;
                        dict->kids.push_back(k.value());
                        dict->kids.push_back(v.value());
                        if (!is_op("}")) {
                            st = expect_op(",");
                            if (!st.ok()) return st.error();
                        }
                    }
                    return dict;
                }
                break;
            default: break;
        }
        return error("expected a value" + near());
    }

    std::string_view src_;
    std::vector<Tok> t_;
    size_t p_ = 0;
    int depth_ = 0;
    int unary_depth_ = 0;
};

}  // namespace

size_t line_of(std::string_view src, size_t pos) {
    size_t line = 1;
    for (size_t i = 0; i < pos && i < src.size(); ++i) line += src[i] == '\n';
    return line;
}

Result<Template> Template::parse(std::string_view source) {
    std::vector<Tok> toks;
    Lexer lexer(source);
    Status st = lexer.run(toks);
    if (!st.ok()) return st.error();
    auto program = std::make_shared<Program>();
    Parser parser(source, std::move(toks));
    st = parser.parse(program->body);
    if (!st.ok()) return st.error();
    Template t;
    t.program_ = std::move(program);
    return t;
}

}  // namespace ls::jinja
