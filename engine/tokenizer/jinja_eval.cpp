// Jinja evaluation: values, filters, tests, methods and the statement walker. Strings and
// numbers print as llama.cpp's Jinja runtime prints them (Python's forms: True, None, 1.5).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <unordered_map>

#include "engine/tokenizer/jinja_ast.h"

namespace ls::jinja {

struct Function {
    std::string name;
    // A macro: its node and the scope it was defined in (for defaults).
    NodeP macro;
    // A builtin: positional args and keyword args.
    std::function<Value(std::vector<Value>&, std::vector<std::pair<std::string, Value>>&)> builtin;
    Value bound;  // a method's object
};

Value Value::list(std::vector<Value> items) {
    Value v;
    v.type = Type::kArray;
    v.array = std::make_shared<std::vector<Value>>(std::move(items));
    return v;
}

Value Value::dict() {
    Value v;
    v.type = Type::kObject;
    v.object = std::make_shared<Object>();
    return v;
}

bool Value::truthy() const {
    switch (type) {
        case Type::kUndefined:
        case Type::kNone: return false;
        case Type::kBool: return b;
        case Type::kInt: return i != 0;
        case Type::kFloat: return f != 0.0;
        case Type::kString: return !s.empty();
        case Type::kArray: return !array->empty();
        case Type::kObject: return !object->items.empty();
        case Type::kFunction: return true;
    }
    return false;
}

const Value* Object::find(std::string_view key) const {
    for (const auto& [k, v] : items) {
        if (k.is_string() && k.s == key) return &v;
    }
    return nullptr;
}

namespace {
bool equal(const Value& a, const Value& b);
}

const Value* Object::find(const Value& key) const {
    for (const auto& [k, v] : items) {
        if (equal(k, key)) return &v;
    }
    return nullptr;
}

void Object::set(const Value& key, Value v) {
    for (auto& [k, old] : items) {
        if (equal(k, key)) {
            old = std::move(v);
            return;
        }
    }
    items.emplace_back(key, std::move(v));
}

namespace {

constexpr int kMaxNesting = 200;  // lists and dicts inside each other, at most

// nullopt-free: a too-deep document sets *too_deep and gives undefined.
Value from_nlohmann(const nlohmann::ordered_json& j, int depth, bool* too_deep) {
    if (depth > kMaxNesting) {
        *too_deep = true;
        return Value();
    }
    switch (j.type()) {
        case nlohmann::ordered_json::value_t::null: return Value::none();
        case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
        case nlohmann::ordered_json::value_t::number_unsigned: return Value::integer(j.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
        case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
        case nlohmann::ordered_json::value_t::array: {
            Value v = Value::list();
            for (const auto& x : j) v.array->push_back(from_nlohmann(x, depth + 1, too_deep));
            return v;
        }
        case nlohmann::ordered_json::value_t::object: {
            Value v = Value::dict();
            for (const auto& [k, x] : j.items()) v.object->items.emplace_back(Value::string(k), from_nlohmann(x, depth + 1, too_deep));
            return v;
        }
        default: return Value();
    }
}

// A runtime error: unwinds to render(), which adds the line.
struct Failure {
    std::string message;
};
[[noreturn]] void fail(const std::string& message) { throw Failure{message}; }

const char* type_name(const Value& v) {
    switch (v.type) {
        case Value::Type::kUndefined: return "undefined";
        case Value::Type::kNone: return "none";
        case Value::Type::kBool: return "boolean";
        case Value::Type::kInt: return "integer";
        case Value::Type::kFloat: return "float";
        case Value::Type::kString: return "string";
        case Value::Type::kArray: return "list";
        case Value::Type::kObject: return "dict";
        case Value::Type::kFunction: return "function";
    }
    return "?";
}

std::string float_text(double f) {
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    if (std::isnan(f)) return "nan";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%f", f);
    std::string out = buf;
    out.erase(out.find_last_not_of('0') + 1);
    if (!out.empty() && out.back() == '.') out.push_back('0');
    return out;
}

std::string repr(const Value& v);

std::string to_text(const Value& v) {
    switch (v.type) {
        case Value::Type::kUndefined: return "";
        case Value::Type::kNone: return "None";
        case Value::Type::kBool: return v.b ? "True" : "False";
        case Value::Type::kInt: return std::to_string(v.i);
        case Value::Type::kFloat: return float_text(v.f);
        case Value::Type::kString: return v.s;
        case Value::Type::kArray: {
            std::string s = "[";
            for (size_t k = 0; k < v.array->size(); ++k) s += (k ? ", " : "") + repr((*v.array)[k]);
            return s + "]";
        }
        case Value::Type::kObject: {
            std::string s = "{";
            bool first = true;
            for (const auto& [key, x] : v.object->items) {
                s += (first ? "" : ", ") + repr(key) + ": " + repr(x);
                first = false;
            }
            return s + "}";
        }
        case Value::Type::kFunction: return "<function " + v.function->name + ">";
    }
    return "";
}

std::string repr(const Value& v) {
    if (v.type != Value::Type::kString) return to_text(v);
    const char q = v.s.find('\'') != std::string::npos && v.s.find('"') == std::string::npos ? '"' : '\'';
    std::string s(1, q);
    for (char c : v.s) {
        if (c == q || c == '\\') s.push_back('\\');
        if (c == '\n') s += "\\n";
        else s.push_back(c);
    }
    return s + q;
}

void json_string(std::string& out, const std::string& s, bool ascii) {
    out.push_back('"');
    for (size_t k = 0; k < s.size(); ++k) {
        const unsigned char c = static_cast<unsigned char>(s[k]);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20 || (ascii && c >= 0x80)) {
                    uint32_t cp = c;
                    if (c >= 0x80) {  // decode one UTF-8 sequence
                        const int n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
                        cp = c & (0x3F >> n);
                        for (int m = 0; m < n && k + 1 < s.size(); ++m) cp = (cp << 6) | (static_cast<unsigned char>(s[++k]) & 0x3F);
                    }
                    char buf[16];
                    if (cp >= 0x10000) {
                        cp -= 0x10000;
                        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
                    } else {
                        std::snprintf(buf, sizeof buf, "\\u%04x", cp);
                    }
                    out += buf;
                } else {
                    out.push_back(static_cast<char>(c));
                }
        }
    }
    out.push_back('"');
}

struct JsonStyle {
    int indent = -1;
    std::string item_sep = ", ", key_sep = ": ";
    bool ascii = false;
};

void to_json(std::string& out, const Value& v, const JsonStyle& st, int level) {
    auto newline = [&](int lv) {
        if (st.indent < 0) return;
        out.push_back('\n');
        out.append(static_cast<size_t>(st.indent * lv), ' ');
    };
    switch (v.type) {
        case Value::Type::kUndefined:
        case Value::Type::kNone: out += "null"; break;
        case Value::Type::kBool: out += v.b ? "true" : "false"; break;
        case Value::Type::kInt: out += std::to_string(v.i); break;
        case Value::Type::kFloat: out += float_text(v.f); break;
        case Value::Type::kString: json_string(out, v.s, st.ascii); break;
        case Value::Type::kArray:
            out.push_back('[');
            for (size_t k = 0; k < v.array->size(); ++k) {
                if (k) out += st.item_sep;
                newline(level + 1);
                to_json(out, (*v.array)[k], st, level + 1);
            }
            if (!v.array->empty()) newline(level);
            out.push_back(']');
            break;
        case Value::Type::kObject: {
            out.push_back('{');
            bool first = true;
            for (const auto& [key, x] : v.object->items) {
                if (!first) out += st.item_sep;
                first = false;
                newline(level + 1);
                json_string(out, key.is_string() ? key.s : to_text(key), st.ascii);
                out += st.key_sep;
                to_json(out, x, st, level + 1);
            }
            if (!v.object->items.empty()) newline(level);
            out.push_back('}');
            break;
        }
        case Value::Type::kFunction: fail("tojson: a function has no JSON form");
    }
}

bool equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (a.type == Value::Type::kInt && b.type == Value::Type::kInt) return a.i == b.i;
        return (a.type == Value::Type::kInt ? double(a.i) : a.f) == (b.type == Value::Type::kInt ? double(b.i) : b.f);
    }
    if ((a.type == Value::Type::kBool && b.is_number()) || (b.type == Value::Type::kBool && a.is_number())) {
        const Value& x = a.type == Value::Type::kBool ? a : b;
        const Value& y = a.type == Value::Type::kBool ? b : a;
        return (x.b ? 1.0 : 0.0) == (y.type == Value::Type::kInt ? double(y.i) : y.f);
    }
    if (a.type != b.type) return false;
    switch (a.type) {
        case Value::Type::kUndefined:
        case Value::Type::kNone: return true;
        case Value::Type::kBool: return a.b == b.b;
        case Value::Type::kString: return a.s == b.s;
        case Value::Type::kArray:
            if (a.array->size() != b.array->size()) return false;
            for (size_t k = 0; k < a.array->size(); ++k) {
                if (!equal((*a.array)[k], (*b.array)[k])) return false;
            }
            return true;
        case Value::Type::kObject:
            if (a.object->items.size() != b.object->items.size()) return false;
            for (const auto& [key, x] : a.object->items) {
                const Value* y = b.object->find(key);
                if (!y || !equal(x, *y)) return false;
            }
            return true;
        default: return a.function == b.function;
    }
}

double as_double(const Value& v) {
    if (v.type == Value::Type::kInt) return double(v.i);
    if (v.type == Value::Type::kFloat) return v.f;
    if (v.type == Value::Type::kBool) return v.b;
    fail(std::string("expected a number, got ") + type_name(v));
}

int compare(const Value& a, const Value& b) {  // <0, 0, >0
    if ((a.is_number() || a.type == Value::Type::kBool) && (b.is_number() || b.type == Value::Type::kBool)) {
        if (a.type == Value::Type::kInt && b.type == Value::Type::kInt) return a.i < b.i ? -1 : a.i > b.i;
        const double x = as_double(a), y = as_double(b);
        return x < y ? -1 : x > y;
    }
    if (a.is_string() && b.is_string()) return a.s.compare(b.s) < 0 ? -1 : a.s == b.s ? 0 : 1;
    if (a.is_array() && b.is_array()) {
        for (size_t k = 0; k < a.array->size() && k < b.array->size(); ++k) {
            const int c = compare((*a.array)[k], (*b.array)[k]);
            if (c) return c;
        }
        return a.array->size() < b.array->size() ? -1 : a.array->size() > b.array->size();
    }
    fail(std::string("cannot compare ") + type_name(a) + " with " + type_name(b));
}

bool contains(const Value& haystack, const Value& needle) {
    switch (haystack.type) {
        case Value::Type::kString:
            if (!needle.is_string()) fail("'in <string>' needs a string on the left");
            return haystack.s.find(needle.s) != std::string::npos;
        case Value::Type::kArray:
            for (const Value& x : *haystack.array) {
                if (equal(x, needle)) return true;
            }
            return false;
        case Value::Type::kObject: return haystack.object->find(needle) != nullptr;
        case Value::Type::kUndefined:
        case Value::Type::kNone: return false;
        default: fail(std::string("'in' needs a string, list or dict, got ") + type_name(haystack));
    }
}

std::vector<Value> items_of(const Value& v) {
    if (v.is_array()) return *v.array;
    if (v.is_object()) {
        std::vector<Value> keys;
        for (const auto& [k, x] : v.object->items) keys.push_back(k);
        return keys;
    }
    if (v.is_string()) {  // characters (UTF-8 sequences)
        std::vector<Value> chars;
        for (size_t k = 0; k < v.s.size();) {
            const unsigned char c = static_cast<unsigned char>(v.s[k]);
            const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            chars.push_back(Value::string(v.s.substr(k, n)));
            k += n;
        }
        return chars;
    }
    if (v.is_undefined() || v.is_none()) return {};
    fail(std::string("cannot iterate over ") + type_name(v));
}

std::string strip_chars(const std::string& s, bool left, bool right, const std::string& chars) {
    size_t b = 0, e = s.size();
    if (left) while (b < e && chars.find(s[b]) != std::string::npos) ++b;
    if (right) while (e > b && chars.find(s[e - 1]) != std::string::npos) --e;
    return s.substr(b, e - b);
}

int64_t norm_index(int64_t i, size_t n) { return i < 0 ? i + static_cast<int64_t>(n) : i; }

// Integer arithmetic that refuses to overflow (Python's integers do not; ours are 64-bit).
int64_t checked(int64_t a, int64_t b, char op) {
    int64_t r = 0;
    const bool over = op == '+' ? __builtin_add_overflow(a, b, &r) : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                                                                : __builtin_mul_overflow(a, b, &r);
    if (over) fail("an integer past 64 bits");
    return r;
}

// How deep `v` nests, stopping past kMaxNesting, and whether the container `into` is inside it.
int nesting(const Value& v, const void* into, int depth, bool* contains_into) {
    if (depth > kMaxNesting || *contains_into) return depth;
    int deepest = depth;
    if (v.is_array()) {
        if (v.array.get() == into) *contains_into = true;
        for (const Value& x : *v.array) deepest = std::max(deepest, nesting(x, into, depth + 1, contains_into));
    } else if (v.is_object()) {
        if (v.object.get() == into) *contains_into = true;
        for (const auto& [k, x] : v.object->items) deepest = std::max(deepest, nesting(x, into, depth + 1, contains_into));
    }
    return deepest;
}

// Before `v` goes into a list or dict (`into`, or null for a new one): no cycles (a list that holds
// itself would print forever and never be freed) and no nesting deeper than kMaxNesting (freeing
// and printing a value recurse through it).
void check_insert(const Value& v, const void* into) {
    bool cycle = false;
    const int depth = nesting(v, into, 1, &cycle);
    if (cycle) fail("a list or dict cannot contain itself");
    if (depth > kMaxNesting) fail("lists and dicts nested deeper than " + std::to_string(kMaxNesting) + " levels");
}

int64_t to_int64(double f) {
    if (!(f > -9.2e18 && f < 9.2e18)) fail("a number past 64-bit integers");
    return static_cast<int64_t>(f);
}

// Python slicing of a length-n sequence; the indices taken.
std::vector<size_t> slice_indices(size_t n, const Value& a, const Value& b, const Value& c) {
    const int64_t step = c.is_undefined() || c.is_none() ? 1 : c.i;
    if (step == 0) fail("slice step cannot be zero");
    const int64_t len = static_cast<int64_t>(n);
    auto clamp = [&](const Value& v, int64_t dflt) {
        if (v.is_undefined() || v.is_none()) return dflt;
        int64_t x = v.i < 0 ? v.i + len : v.i;
        if (step > 0) return std::clamp<int64_t>(x, 0, len);
        return std::clamp<int64_t>(x, -1, len - 1);
    };
    const int64_t start = clamp(a, step > 0 ? 0 : len - 1), stop = clamp(b, step > 0 ? len : -1);
    std::vector<size_t> out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
        out.push_back(static_cast<size_t>(k));
        if (__builtin_add_overflow(k, step, &k)) break;
    }
    return out;
}

struct Scope {
    std::unordered_map<std::string, Value> vars;
};

struct LoopControl {
    enum { kNone, kBreak, kContinue } state = kNone;
};

class Renderer {
public:
    Renderer(const Limits& limits, std::string& out) : limits_(limits), out_(out) {}

    void run(const std::vector<NodeP>& body, const Value& globals) {
        scopes_.push_back({});
        if (globals.is_object()) {
            for (const auto& [k, v] : globals.object->items) {
                if (k.is_string()) scopes_.back().vars[k.s] = v;
            }
        }
        install_builtins();
        exec(body);
    }

    size_t line = 0;  // of the node being evaluated, for errors

private:
    void step() {
        if (++steps_ > limits_.max_steps) fail("the template ran for too long (over " + std::to_string(limits_.max_steps) + " steps)");
    }
    void emit(const std::string& s) {
        if (out_.size() + s.size() > limits_.max_output_bytes) {
            fail("the output passed " + std::to_string(limits_.max_output_bytes) + " bytes");
        }
        out_ += s;
    }

    Value* lookup(const std::string& name) {
        for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
            auto f = it->vars.find(name);
            if (f != it->vars.end()) return &f->second;
            if (it->barrier) break;
        }
        auto g = scopes_.front().vars.find(name);
        return g == scopes_.front().vars.end() ? nullptr : &g->second;
    }

    struct Frame : Scope {
        bool barrier = false;  // a macro's scope sees only itself and the globals
    };

    Value builtin(const std::string& name, std::function<Value(std::vector<Value>&, std::vector<std::pair<std::string, Value>>&)> fn) {
        Value v;
        v.type = Value::Type::kFunction;
        v.function = std::make_shared<Function>();
        v.function->name = name;
        v.function->builtin = std::move(fn);
        return v;
    }

    void install_builtins() {
        auto& g = scopes_.front().vars;
        g["range"] = builtin("range", [](std::vector<Value>& a, auto&) {
            int64_t start = 0, stop = 0, step = 1;
            for (const Value& x : a) {
                if (x.type != Value::Type::kInt) fail("range() takes integers");
            }
            if (a.size() == 1) stop = a[0].i;
            else if (a.size() >= 2) start = a[0].i, stop = a[1].i;
            if (a.size() == 3) step = a[2].i;
            if (a.empty() || a.size() > 3 || step == 0) fail("range() takes 1 to 3 integers, the step not 0");
            const double n = std::ceil((double(stop) - double(start)) / double(step));
            if (n > 10'000'000) fail("range() of more than 10000000 items");
            Value out = Value::list();
            for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
                out.array->push_back(Value::integer(k));
                if (__builtin_add_overflow(k, step, &k)) break;
            }
            return out;
        });
        g["namespace"] = builtin("namespace", [](std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw) {
            Value ns = Value::dict();
            ns.object->is_namespace = true;
            if (!a.empty() && a[0].is_object()) ns.object->items = a[0].object->items;
            for (auto& [k, v] : kw) ns.object->set(k, v);
            check_insert(ns, nullptr);
            return ns;
        });
        g["dict"] = builtin("dict", [](std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw) {
            Value d = Value::dict();
            if (!a.empty() && a[0].is_object()) d.object->items = a[0].object->items;
            for (auto& [k, v] : kw) d.object->set(k, v);
            check_insert(d, nullptr);
            return d;
        });
        g["raise_exception"] = builtin("raise_exception", [](std::vector<Value>& a, auto&) -> Value {
            fail("the template raised an exception: " + (a.empty() ? std::string() : to_text(a[0])));
        });
        g["strftime_now"] = builtin("strftime_now", [](std::vector<Value>& a, auto&) {
            if (a.empty() || !a[0].is_string()) fail("strftime_now() takes a format string");
            const std::time_t now = std::time(nullptr);
            std::tm tm{};
            localtime_r(&now, &tm);
            char buf[256];
            const size_t n = std::strftime(buf, sizeof buf, a[0].s.c_str(), &tm);
            return Value::string(std::string(buf, n));
        });
    }

    void exec(const std::vector<NodeP>& body) {
        for (const NodeP& n : body) {
            exec(*n);
            if (loop_.state != LoopControl::kNone) return;
        }
    }

    void assign(const std::string& name, Value v) { scopes_.back().vars[name] = std::move(v); }

    void exec(const Node& n) {
        step();
        line = n.line;
        switch (n.kind) {
            case Node::kText: emit(n.text); break;
            case Node::kOutput: emit(to_text(eval(*n.kids[0]))); break;
            case Node::kIf:
                if (eval(*n.kids[0]).truthy()) exec(n.body);
                else exec(n.else_body);
                break;
            case Node::kFor: exec_for(n); break;
            case Node::kSet: {
                Value v;
                if (n.kids.empty()) {
                    std::string captured;
                    std::swap(captured, out_);
                    exec(n.body);
                    std::swap(captured, out_);
                    v = Value::string(captured);
                } else {
                    v = eval(*n.kids[0]);
                }
                line = n.line;
                if (!n.text.empty()) {  // ns.attr = v
                    Value* ns = lookup(n.names[0]);
                    if (!ns || !ns->is_object() || !ns->object->is_namespace) {
                        fail("'" + n.names[0] + "' is not a namespace; only namespace attributes can be set");
                    }
                    check_insert(v, ns->object.get());
                    ns->object->set(n.text, std::move(v));
                } else if (n.names.size() == 1) {
                    assign(n.names[0], std::move(v));
                } else {
                    const std::vector<Value> parts = items_of(v);
                    if (parts.size() != n.names.size()) fail("set: cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(n.names.size()) + " names");
                    for (size_t k = 0; k < parts.size(); ++k) assign(n.names[k], parts[k]);
                }
                break;
            }
            case Node::kMacro: {
                Value m;
                m.type = Value::Type::kFunction;
                m.function = std::make_shared<Function>();
                m.function->name = n.text;
                m.function->macro = std::make_shared<Node>(n);
                assign(n.text, m);
                break;
            }
            case Node::kCallBlock: {
                // The block becomes `caller()` inside the macro.
                Value caller;
                caller.type = Value::Type::kFunction;
                caller.function = std::make_shared<Function>();
                caller.function->name = "caller";
                auto node = std::make_shared<Node>(n);
                node->kind = Node::kMacro;
                caller.function->macro = node;
                scopes_.push_back({});
                assign("caller", caller);
                emit(to_text(eval(*n.kids[0])));
                scopes_.pop_back();
                break;
            }
            case Node::kFilterBlock: {
                std::string captured;
                std::swap(captured, out_);
                exec(n.body);
                std::swap(captured, out_);
                Value v = apply_filter(*n.kids[0], Value::string(captured));
                emit(to_text(v));
                break;
            }
            case Node::kBreak: loop_.state = LoopControl::kBreak; break;
            case Node::kContinue: loop_.state = LoopControl::kContinue; break;
            default: emit(to_text(eval(n))); break;
        }
    }

    // A filter node applied to an already computed value (the {% filter %} block).
    Value apply_filter(const Node& f, Value subject) {
        std::vector<Value> args{std::move(subject)};
        for (size_t k = 1; k < f.kids.size(); ++k) args.push_back(eval(*f.kids[k]));
        std::vector<std::pair<std::string, Value>> kw;
        for (size_t k = 0; k < f.names.size(); ++k) kw.emplace_back(f.names[k], eval(*f.defaults[k]));
        return call_filter(f.text, args, kw);
    }

    void exec_for(const Node& n) {
        const Value seq = eval(*n.kids[0]);
        std::vector<Value> items;
        if (seq.is_object() && n.names.size() == 1) {
            items = items_of(seq);
        } else if (seq.is_object()) {  // for k, v in dict (llama.cpp allows it without .items())
            for (const auto& [k, v] : seq.object->items) items.push_back(Value::list({k, v}));
        } else {
            items = items_of(seq);
        }
        if (n.kids.size() > 1) {  // for x in xs if cond
            std::vector<Value> kept;
            scopes_.push_back({});
            for (const Value& x : items) {
                bind(n, x);
                if (eval(*n.kids[1]).truthy()) kept.push_back(x);
            }
            scopes_.pop_back();
            items = std::move(kept);
        }
        if (items.empty()) {
            exec(n.else_body);
            return;
        }
        if (++depth_ > limits_.max_depth) fail("loops and macro calls nested deeper than " + std::to_string(limits_.max_depth));
        scopes_.push_back({});
        for (size_t k = 0; k < items.size(); ++k) {
            step();
            bind(n, items[k]);
            Value loop = Value::dict();
            auto& o = *loop.object;
            const int64_t len = static_cast<int64_t>(items.size()), idx = static_cast<int64_t>(k);
            o.set("index", Value::integer(idx + 1));
            o.set("index0", Value::integer(idx));
            o.set("revindex", Value::integer(len - idx));
            o.set("revindex0", Value::integer(len - idx - 1));
            o.set("first", Value::boolean(k == 0));
            o.set("last", Value::boolean(k + 1 == items.size()));
            o.set("length", Value::integer(len));
            o.set("previtem", k > 0 ? items[k - 1] : Value());
            o.set("nextitem", k + 1 < items.size() ? items[k + 1] : Value());
            assign("loop", loop);
            exec(n.body);
            if (loop_.state == LoopControl::kBreak) {
                loop_.state = LoopControl::kNone;
                break;
            }
            loop_.state = LoopControl::kNone;
        }
        scopes_.pop_back();
        --depth_;
    }

    void bind(const Node& n, const Value& x) {
        if (n.names.size() == 1) {
            assign(n.names[0], x);
            return;
        }
        const std::vector<Value> parts = items_of(x);
        if (parts.size() != n.names.size()) fail("for: cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(n.names.size()) + " names");
        for (size_t k = 0; k < parts.size(); ++k) assign(n.names[k], parts[k]);
    }

    Value call_macro(const Function& fn, std::vector<Value>& args, std::vector<std::pair<std::string, Value>>& kw) {
        const Node& m = *fn.macro;
        if (++depth_ > limits_.max_depth) fail("macro calls nested deeper than " + std::to_string(limits_.max_depth));
        Frame frame;
        frame.barrier = true;
        for (size_t k = 0; k < m.names.size(); ++k) {
            Value v;
            if (k < args.size()) v = args[k];
            else if (m.defaults[k]) v = eval(*m.defaults[k]);
            frame.vars[m.names[k]] = v;
        }
        for (auto& [k, v] : kw) frame.vars[k] = v;
        if (Value* caller = lookup("caller")) frame.vars["caller"] = *caller;
        std::string captured;
        std::swap(captured, out_);
        scopes_.push_back(frame);
        const LoopControl saved = loop_;
        exec(m.body);
        loop_ = saved;
        scopes_.pop_back();
        std::swap(captured, out_);
        --depth_;
        return Value::string(captured);
    }

    Value call(const Value& callee, std::vector<Value>& args, std::vector<std::pair<std::string, Value>>& kw) {
        if (callee.type != Value::Type::kFunction) fail(std::string("a ") + type_name(callee) + " is not callable");
        if (callee.function->macro) return call_macro(*callee.function, args, kw);
        return callee.function->builtin(args, kw);
    }

    Value attr(const Value& obj, const std::string& name) {
        if (obj.is_object()) {
            if (const Value* v = obj.object->find(name)) return *v;
            if (!obj.object->is_namespace) {
                if (Value m = method(obj, name); !m.is_undefined()) return m;
            }
            return Value();
        }
        if (obj.is_string() || obj.is_array()) return method(obj, name);
        return Value();  // of undefined, none, numbers: undefined, as in llama.cpp
    }

    Value method(const Value& self, const std::string& name) {
        using Args = std::vector<Value>;
        using Kw = std::vector<std::pair<std::string, Value>>;
        auto str_arg = [](Args& a, size_t k, const char* what) -> const std::string& {
            if (a.size() <= k || !a[k].is_string()) fail(std::string(what) + " takes a string");
            return a[k].s;
        };
        if (self.is_string()) {
            const std::string s = self.s;
            if (name == "strip" || name == "lstrip" || name == "rstrip") {
                return builtin(name, [s, name](Args& a, Kw&) {
                    const std::string chars = !a.empty() && a[0].is_string() ? a[0].s : std::string(" \t\n\r\f\v");
                    return Value::string(strip_chars(s, name != "rstrip", name != "lstrip", chars));
                });
            }
            if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
                return builtin(name, [this, s, name](Args&, Kw&) { return call_filter(name, *new_args(Value::string(s)), empty_kw_); });
            }
            if (name == "startswith" || name == "endswith") {
                return builtin(name, [s, name, str_arg](Args& a, Kw&) {
                    const std::string& x = str_arg(a, 0, name.c_str());
                    const bool hit = x.size() <= s.size() &&
                                     (name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0);
                    return Value::boolean(hit);
                });
            }
            if (name == "split" || name == "rsplit") {
                return builtin(name, [this, s, name](Args& a, Kw&) { Args all{Value::string(s)}; all.insert(all.end(), a.begin(), a.end()); return call_filter(name, all, empty_kw_); });
            }
            if (name == "replace") {
                return builtin(name, [this, s](Args& a, Kw& kw) { Args all{Value::string(s)}; all.insert(all.end(), a.begin(), a.end()); return call_filter("replace", all, kw); });
            }
            if (name == "find") {
                return builtin(name, [s, str_arg](Args& a, Kw&) {
                    const size_t at = s.find(str_arg(a, 0, "find"));
                    return Value::integer(at == std::string::npos ? -1 : static_cast<int64_t>(at));
                });
            }
            if (name == "count") {
                return builtin(name, [s, str_arg](Args& a, Kw&) {
                    const std::string& x = str_arg(a, 0, "count");
                    int64_t n = 0;
                    if (!x.empty()) for (size_t at = s.find(x); at != std::string::npos; at = s.find(x, at + x.size())) ++n;
                    return Value::integer(n);
                });
            }
            if (name == "join") {
                return builtin(name, [s](Args& a, Kw&) {
                    std::string out;
                    if (!a.empty()) {
                        const std::vector<Value> parts = items_of(a[0]);
                        for (size_t k = 0; k < parts.size(); ++k) out += (k ? s : "") + to_text(parts[k]);
                    }
                    return Value::string(out);
                });
            }
            if (name == "format") {
                return builtin(name, [this, s](Args& a, Kw&) { Args all{Value::string(s)}; all.insert(all.end(), a.begin(), a.end()); return call_filter("format", all, empty_kw_); });
            }
            return Value();
        }
        if (self.is_array()) {
            auto arr = self.array;
            if (name == "append") {
                return builtin(name, [arr](Args& a, Kw&) {
                    if (a.size() != 1) fail("append() takes one value");
                    check_insert(a[0], arr.get());
                    arr->push_back(a[0]);
                    return Value::none();
                });
            }
            if (name == "pop") {
                return builtin(name, [arr](Args& a, Kw&) {
                    if (arr->empty()) fail("pop() from an empty list");
                    int64_t k = a.empty() ? -1 : a[0].i;
                    k = norm_index(k, arr->size());
                    if (k < 0 || k >= static_cast<int64_t>(arr->size())) fail("pop() index out of range");
                    Value v = (*arr)[static_cast<size_t>(k)];
                    arr->erase(arr->begin() + k);
                    return v;
                });
            }
            if (name == "index") {
                return builtin(name, [arr](Args& a, Kw&) {
                    for (size_t k = 0; k < arr->size(); ++k) if (!a.empty() && equal((*arr)[k], a[0])) return Value::integer(static_cast<int64_t>(k));
                    fail("index(): the value is not in the list");
                });
            }
            return Value();
        }
        if (self.is_object()) {
            auto obj = self.object;
            if (name == "items") return builtin(name, [this, self](Args&, Kw&) { return call_filter("items", *new_args(self), empty_kw_); });
            if (name == "keys") return builtin(name, [obj](Args&, Kw&) { Value out = Value::list(); for (auto& [k, v] : obj->items) out.array->push_back(k); return out; });
            if (name == "values") return builtin(name, [obj](Args&, Kw&) { Value out = Value::list(); for (auto& [k, v] : obj->items) out.array->push_back(v); return out; });
            if (name == "get") {
                return builtin(name, [obj](Args& a, Kw&) {
                    if (a.empty()) fail("get() takes a key");
                    const Value* v = obj->find(a[0]);
                    return v ? *v : (a.size() > 1 ? a[1] : Value::none());
                });
            }
        }
        return Value();
    }

    std::shared_ptr<std::vector<Value>> new_args(Value v) {
        scratch_ = std::make_shared<std::vector<Value>>(std::vector<Value>{std::move(v)});
        return scratch_;
    }

    Value call_filter(const std::string& name, std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw);
    bool call_test(const std::string& name, std::vector<Value>& a);

public:
    Value eval(const Node& n);

private:
    const Limits& limits_;
    std::string& out_;
    std::vector<Frame> scopes_;
    LoopControl loop_;
    uint64_t steps_ = 0;
    int depth_ = 0;
    int eval_depth_ = 0;
    std::shared_ptr<std::vector<Value>> scratch_;
    std::vector<std::pair<std::string, Value>> empty_kw_;
};

Value kw_or_pos(std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw, const char* name, size_t pos) {
    for (auto& [k, v] : kw) {
        if (k == name) return v;
    }
    return pos < a.size() ? a[pos] : Value();
}

Value Renderer::call_filter(const std::string& called, std::vector<Value>& a, std::vector<std::pair<std::string, Value>>& kw) {
    if (a.empty()) fail("filter " + called + " has no value");
    // llama.cpp's aliases, and its string filters read a number or none as its text.
    const std::string name = called == "trim" ? "strip" : called == "count" ? "length" : called == "d" ? "default"
                           : called == "e" ? "escape" : called;
    if (!a[0].is_undefined() && !a[0].is_string() &&
        (name == "capitalize" || name == "lower" || name == "replace" || name == "strip" || name == "title" ||
         name == "upper" || name == "wordcount")) {
        a[0] = Value::string(to_text(a[0]));
    }
    const Value& x = a[0];
    // llama.cpp's runtime: most filters give an empty value of their kind on an undefined input,
    // a few do on none; the rest refuse.
    if (x.is_undefined() || x.is_none()) {
        static const char* const kToList[] = {"items", "map", "reject", "rejectattr", "select", "selectattr", "unique",
                                              "list", "reverse", "sort"};
        static const char* const kToString[] = {"capitalize", "join", "lower", "replace", "safe", "string", "strip",
                                                "title", "truncate", "upper"};
        const bool undefined = x.is_undefined();
        for (const char* f : kToList) {
            if (name == f && (undefined || std::string(f) != "list")) {
                if (!undefined && (name == "reverse" || name == "sort")) break;
                return Value::list();
            }
        }
        if (!undefined && (name == "string" || name == "safe")) return Value::string("None");
        if (undefined) {
            for (const char* f : kToString) {
                if (name == f) return Value::string("");
            }
            if (name == "length" || name == "sum" || name == "wordcount") return Value::integer(0);
            if (name == "first" || name == "last" || name == "max" || name == "min") return Value();
        }
        if (name != "default" && !(name == "tojson" && !undefined)) {
            fail("filter " + name + " on " + (undefined ? "an undefined value" : "none"));
        }
    }
    auto need_string = [&]() -> const std::string& {
        if (!x.is_string()) fail("filter " + name + " takes a string, got " + type_name(x));
        return x.s;
    };
    if (name == "length") {
        if (x.is_string()) return Value::integer(static_cast<int64_t>(items_of(x).size()));
        if (x.is_array()) return Value::integer(static_cast<int64_t>(x.array->size()));
        if (x.is_object()) return Value::integer(static_cast<int64_t>(x.object->items.size()));
        fail(std::string("length of a ") + type_name(x));
    }
    if (name == "strip") {
        const Value chars = kw_or_pos(a, kw, "chars", 1);
        return Value::string(strip_chars(need_string(), true, true, chars.is_string() ? chars.s : " \t\n\r\f\v"));
    }
    if (name == "upper" || name == "lower") {
        std::string s = need_string();
        for (char& c : s) c = static_cast<char>(name == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        return Value::string(s);
    }
    if (name == "capitalize") {
        std::string s = need_string();
        for (size_t k = 0; k < s.size(); ++k) s[k] = static_cast<char>(k ? std::tolower(static_cast<unsigned char>(s[k])) : std::toupper(static_cast<unsigned char>(s[k])));
        return Value::string(s);
    }
    if (name == "title") {
        std::string s = need_string();
        bool start = true;
        for (char& c : s) {
            const bool alpha = std::isalpha(static_cast<unsigned char>(c));
            c = static_cast<char>(start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
            start = !alpha;
        }
        return Value::string(s);
    }
    if (name == "tojson") {
        JsonStyle st;
        const Value indent = kw_or_pos(a, kw, "indent", 2);
        if (indent.type == Value::Type::kInt) st.indent = static_cast<int>(indent.i), st.item_sep = ",";
        const Value seps = kw_or_pos(a, kw, "separators", 3);
        if (seps.is_array()) {
            if (seps.array->size() > 0) st.item_sep = to_text((*seps.array)[0]);
            if (seps.array->size() > 1) st.key_sep = to_text((*seps.array)[1]);
        }
        st.ascii = kw_or_pos(a, kw, "ensure_ascii", 1).truthy();
        if (kw_or_pos(a, kw, "sort_keys", 4).truthy()) fail("tojson: sort_keys is not supported (llama.cpp's neither)");
        std::string out;
        to_json(out, x, st, 0);
        return Value::string(out);
    }
    if (name == "string") return Value::string(to_text(x));
    if (name == "safe" || name == "escape") {
        if (name == "safe") return x;
        std::string out;
        for (char c : to_text(x)) {
            switch (c) {
                case '&': out += "&amp;"; break;
                case '<': out += "&lt;"; break;
                case '>': out += "&gt;"; break;
                case '"': out += "&#34;"; break;
                case '\'': out += "&#39;"; break;
                default: out.push_back(c);
            }
        }
        return Value::string(out);
    }
    if (name == "int") {
        if (x.type == Value::Type::kInt) return x;
        if (x.type == Value::Type::kFloat) return Value::integer(to_int64(x.f));
        if (x.type == Value::Type::kBool) return Value::integer(x.b);
        if (x.is_string()) {
            char* end = nullptr;
            const long long v = std::strtoll(x.s.c_str(), &end, 10);
            return Value::integer(end && *end == 0 && !x.s.empty() ? v : 0);
        }
        return Value::integer(0);
    }
    if (name == "float") {
        if (x.is_number() || x.type == Value::Type::kBool) return Value::number(as_double(x));
        if (x.is_string()) return Value::number(std::strtod(x.s.c_str(), nullptr));
        return Value::number(0);
    }
    if (name == "abs") {
        if (x.type == Value::Type::kInt) return Value::integer(x.i < 0 ? checked(0, x.i, '-') : x.i);
        return Value::number(std::fabs(as_double(x)));
    }
    if (name == "default") {
        const Value dflt = kw_or_pos(a, kw, "default_value", 1);
        const bool boolean = kw_or_pos(a, kw, "boolean", 2).truthy();
        if (x.is_undefined() || (boolean && !x.truthy())) return dflt.is_undefined() ? Value::string("") : dflt;
        return x;
    }
    if (name == "first" || name == "last") {
        const std::vector<Value> it = items_of(x);
        if (it.empty()) return Value();
        return name == "first" ? it.front() : it.back();
    }
    if (name == "list") return Value::list(items_of(x));
    if (name == "items") {
        if (!x.is_object()) {
            if (x.is_undefined() || x.is_none()) return Value::list();
            fail(std::string("items() of a ") + type_name(x));
        }
        Value out = Value::list();
        for (const auto& [k, v] : x.object->items) out.array->push_back(Value::list({k, v}));
        return out;
    }
    if (name == "join") {
        const Value sep = kw_or_pos(a, kw, "d", 1);
        const Value attribute = kw_or_pos(a, kw, "attribute", 2);
        std::string out;
        const std::vector<Value> parts = items_of(x);
        for (size_t k = 0; k < parts.size(); ++k) {
            if (k) out += sep.is_string() ? sep.s : "";
            out += to_text(attribute.is_string() ? attr(parts[k], attribute.s) : parts[k]);
        }
        return Value::string(out);
    }
    if (name == "replace") {
        const std::string& s = need_string();
        const Value from = kw_or_pos(a, kw, "old", 1), to = kw_or_pos(a, kw, "new", 2), count = kw_or_pos(a, kw, "count", 3);
        if (!from.is_string() || !to.is_string()) fail("replace() takes two strings");
        int64_t left = count.type == Value::Type::kInt ? count.i : -1;
        std::string out;
        size_t pos = 0;
        if (from.s.empty()) return Value::string(s);
        for (size_t hit; left != 0 && (hit = s.find(from.s, pos)) != std::string::npos; pos = hit + from.s.size(), --left) {
            out += s.substr(pos, hit - pos) + to.s;
        }
        return Value::string(out + s.substr(pos));
    }
    if (name == "split" || name == "rsplit") {
        const std::string& s = need_string();
        const Value sep = kw_or_pos(a, kw, "sep", 1);
        const std::string delim = sep.is_string() ? sep.s : " ";
        if (delim.empty()) fail("split(): empty separator");
        Value out = Value::list();
        size_t pos = 0;
        for (size_t hit; (hit = s.find(delim, pos)) != std::string::npos; pos = hit + delim.size()) {
            out.array->push_back(Value::string(s.substr(pos, hit - pos)));
        }
        out.array->push_back(Value::string(s.substr(pos)));
        return out;
    }
    if (name == "reverse") {
        if (x.is_string()) return Value::string(std::string(x.s.rbegin(), x.s.rend()));
        std::vector<Value> it = items_of(x);
        std::reverse(it.begin(), it.end());
        return Value::list(std::move(it));
    }
    if (name == "unique") {
        Value out = Value::list();
        for (const Value& v : items_of(x)) {
            if (!contains(out, v)) out.array->push_back(v);
        }
        return out;
    }
    if (name == "sort" || name == "dictsort") {
        std::vector<Value> it = name == "dictsort" ? *call_filter("items", *new_args(x), empty_kw_).array : items_of(x);
        const Value attribute = kw_or_pos(a, kw, "attribute", 3);
        const bool rev = kw_or_pos(a, kw, "reverse", 1).truthy();
        std::stable_sort(it.begin(), it.end(), [&](const Value& l, const Value& r) {
            const Value lk = attribute.is_string() ? attr(l, attribute.s) : l;
            const Value rk = attribute.is_string() ? attr(r, attribute.s) : r;
            return rev ? compare(rk, lk) < 0 : compare(lk, rk) < 0;
        });
        return Value::list(std::move(it));
    }
    if (name == "sum" || name == "min" || name == "max") {
        const std::vector<Value> it = items_of(x);
        if (name == "sum") {
            Value total = Value::integer(0);
            for (const Value& v : it) {
                if (total.type == Value::Type::kInt && v.type == Value::Type::kInt) total.i = checked(total.i, v.i, '+');
                else total = Value::number(as_double(total) + as_double(v));
            }
            return total;
        }
        if (it.empty()) return Value();
        Value best = it[0];
        for (const Value& v : it) {
            if (name == "min" ? compare(v, best) < 0 : compare(v, best) > 0) best = v;
        }
        return best;
    }
    if (name == "map") {
        const Value attribute = kw_or_pos(a, kw, "attribute", 99);
        Value out = Value::list();
        for (const Value& v : items_of(x)) {
            if (attribute.is_string()) {
                out.array->push_back(attr(v, attribute.s));
            } else {
                if (a.size() < 2 || !a[1].is_string()) fail("map() needs a filter name or attribute=");
                std::vector<Value> args{v};
                args.insert(args.end(), a.begin() + 2, a.end());
                out.array->push_back(call_filter(a[1].s, args, empty_kw_));
            }
        }
        return out;
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
        const bool by_attr = name == "selectattr" || name == "rejectattr";
        const bool keep_if = name == "select" || name == "selectattr";
        Value out = Value::list();
        for (const Value& v : items_of(x)) {
            Value subject = v;
            size_t next = 1;
            if (by_attr) {
                if (a.size() < 2 || !a[1].is_string()) fail(name + "() needs an attribute name");
                subject = attr(v, a[1].s);
                next = 2;
            }
            bool pass;
            if (a.size() > next) {
                if (!a[next].is_string()) fail(name + "() needs a test name");
                std::vector<Value> targs{subject};
                targs.insert(targs.end(), a.begin() + static_cast<long>(next) + 1, a.end());
                pass = call_test(a[next].s, targs);
            } else {
                pass = subject.truthy();
            }
            if (pass == keep_if) out.array->push_back(v);
        }
        return out;
    }
    if (name == "indent") {
        const std::string& s = need_string();
        const Value width = kw_or_pos(a, kw, "width", 1);
        const bool first = kw_or_pos(a, kw, "first", 2).truthy();
        const bool blank = kw_or_pos(a, kw, "blank", 3).truthy();
        if (width.type == Value::Type::kInt && (width.i < 0 || width.i > 4096)) fail("indent(): width out of range");
        const std::string pad = width.is_string() ? width.s : std::string(width.type == Value::Type::kInt ? static_cast<size_t>(width.i) : 4, ' ');
        std::string out;
        size_t pos = 0;
        bool first_line = true;
        while (pos <= s.size()) {
            const size_t nl = s.find('\n', pos);
            const std::string line_text = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
            if ((!first_line || first) && (blank || !line_text.empty())) out += pad;
            out += line_text;
            if (nl == std::string::npos) break;
            out += "\n";
            pos = nl + 1;
            first_line = false;
        }
        return Value::string(out);
    }
    if (name == "wordcount") {
        int64_t n = 0;
        bool in_word = false;
        for (char c : need_string()) {
            const bool w = !std::isspace(static_cast<unsigned char>(c));
            if (w && !in_word) ++n;
            in_word = w;
        }
        return Value::integer(n);
    }
    if (name == "format") {  // llama.cpp: "{}" placeholders, in order; nothing else
        const std::string& f = need_string();
        std::string out;
        size_t next = 1;
        for (size_t k = 0; k < f.size(); ++k) {
            if (f[k] != '{') {
                out.push_back(f[k]);
                continue;
            }
            if (k + 1 >= f.size() || f[k + 1] != '}') fail("format() takes only '{}' placeholders");
            ++k;
            if (next >= a.size()) fail("format(): not enough arguments");
            out += to_text(a[next++]);
        }
        return Value::string(out);
    }
    if (name == "batch" || name == "slice") fail("filter " + name + " is not supported");
    fail("unknown filter '" + name + "'");
}

bool Renderer::call_test(const std::string& name, std::vector<Value>& a) {
    const Value& x = a[0];
    auto arg = [&](size_t k) -> const Value& {
        if (a.size() <= k) fail("test '" + name + "' needs an argument");
        return a[k];
    };
    if (name == "defined") return !x.is_undefined();
    if (name == "undefined") return x.is_undefined();
    if (name == "none") return x.is_none();
    if (name == "string") return x.is_string();
    if (name == "number") return x.is_number();
    if (name == "integer") return x.type == Value::Type::kInt;
    if (name == "float") return x.type == Value::Type::kFloat;
    if (name == "boolean") return x.type == Value::Type::kBool;
    if (name == "true") return x.type == Value::Type::kBool && x.b;
    if (name == "false") return x.type == Value::Type::kBool && !x.b;
    if (name == "mapping") return x.is_object();
    if (name == "sequence" || name == "iterable") return x.is_array() || x.is_string() || (name == "iterable" && x.is_object());
    if (name == "callable") return x.type == Value::Type::kFunction;
    if (name == "even" || name == "odd") {
        if (x.type != Value::Type::kInt) fail("test '" + name + "' needs an integer");
        return (x.i % 2 == 0) == (name == "even");
    }
    if (name == "divisibleby") {
        const Value& d = arg(1);
        if (x.type != Value::Type::kInt || d.type != Value::Type::kInt || d.i == 0) fail("divisibleby needs integers, not 0");
        return x.i % d.i == 0;
    }
    if (name == "eq" || name == "equalto" || name == "==" || name == "sameas") return equal(x, arg(1));
    if (name == "ne" || name == "!=") return !equal(x, arg(1));
    if (name == "lt" || name == "lessthan" || name == "<") return compare(x, arg(1)) < 0;
    if (name == "le" || name == "<=") return compare(x, arg(1)) <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return compare(x, arg(1)) > 0;
    if (name == "ge" || name == ">=") return compare(x, arg(1)) >= 0;
    if (name == "in") return contains(arg(1), x);
    if (name == "lower" || name == "upper") {
        if (!x.is_string()) return false;
        for (char c : x.s) {
            if (name == "lower" ? std::isupper(static_cast<unsigned char>(c)) : std::islower(static_cast<unsigned char>(c))) return false;
        }
        return true;
    }
    fail("unknown test '" + name + "'");
}

Value Renderer::eval(const Node& n) {
    step();
    // Long chains (1 + 1 + ...) nest without the parser's recursion: bound them here.
    struct Depth {
        int& d;
        explicit Depth(int& x) : d(x) {
            if (++d > 200) fail("an expression nested too deeply");  // like the parser's limit
        }
        ~Depth() { --d; }
    } depth_guard(eval_depth_);
    switch (n.kind) {
        case Node::kLiteral: return n.value;
        case Node::kName: {
            const Value* v = lookup(n.text);
            return v ? *v : Value();
        }
        case Node::kAttr: return attr(eval(*n.kids[0]), n.text);
        case Node::kIndex: {
            const Value obj = eval(*n.kids[0]);
            const Value key = eval(*n.kids[1]);
            if (obj.is_array() || obj.is_string()) {
                if (key.type != Value::Type::kInt) {
                    if (key.is_string()) return attr(obj, key.s);
                    fail(std::string("a ") + type_name(obj) + " index must be an integer");
                }
                const std::vector<Value> it = obj.is_array() ? *obj.array : items_of(obj);
                const int64_t k = norm_index(key.i, it.size());
                if (k < 0 || k >= static_cast<int64_t>(it.size())) return Value();
                return it[static_cast<size_t>(k)];
            }
            if (obj.is_object()) {
                if (const Value* v = obj.object->find(key)) return *v;
                return Value();
            }
            return Value();
        }
        case Node::kSlice: {
            const Value obj = eval(*n.kids[0]);
            Value parts[3];
            for (int k = 0; k < 3; ++k) {
                if (n.kids[1 + k]) parts[k] = eval(*n.kids[1 + k]);
                if (!parts[k].is_undefined() && !parts[k].is_none() && parts[k].type != Value::Type::kInt) fail("slice indices must be integers");
            }
            const std::vector<Value> it = items_of(obj);
            const std::vector<size_t> idx = slice_indices(it.size(), parts[0], parts[1], parts[2]);
            if (obj.is_string()) {
                std::string s;
                for (size_t k : idx) s += it[k].s;
                return Value::string(s);
            }
            Value out = Value::list();
            for (size_t k : idx) out.array->push_back(it[k]);
            return out;
        }
        case Node::kCall: {
            const Value callee = eval(*n.kids[0]);
            std::vector<Value> args;
            for (size_t k = 1; k < n.kids.size(); ++k) args.push_back(eval(*n.kids[k]));
            std::vector<std::pair<std::string, Value>> kw;
            for (size_t k = 0; k < n.names.size(); ++k) kw.emplace_back(n.names[k], eval(*n.defaults[k]));
            line = n.line;
            if (callee.is_undefined()) {
                const Node& c = *n.kids[0];
                fail("'" + (c.kind == Node::kName || c.kind == Node::kAttr ? c.text : std::string("value")) + "' is undefined and cannot be called");
            }
            return call(callee, args, kw);
        }
        case Node::kFilter: {
            std::vector<Value> args;
            for (const NodeP& k : n.kids) args.push_back(eval(*k));
            std::vector<std::pair<std::string, Value>> kw;
            for (size_t k = 0; k < n.names.size(); ++k) kw.emplace_back(n.names[k], eval(*n.defaults[k]));
            line = n.line;
            return call_filter(n.text, args, kw);
        }
        case Node::kTest: {
            std::vector<Value> args;
            for (const NodeP& k : n.kids) args.push_back(eval(*k));
            line = n.line;
            return Value::boolean(call_test(n.text, args) != n.negated);
        }
        case Node::kUnary: {
            const Value x = eval(*n.kids[0]);
            if (n.text == "not") return Value::boolean(!x.truthy());
            if (n.text == "-") {
                if (x.type == Value::Type::kInt) return Value::integer(checked(0, x.i, '-'));
                return Value::number(-as_double(x));
            }
            return x;
        }
        case Node::kTernary:
            if (eval(*n.kids[0]).truthy()) return eval(*n.kids[1]);
            return n.kids[2] ? eval(*n.kids[2]) : Value();
        case Node::kList: {
            Value out = Value::list();
            for (const NodeP& k : n.kids) out.array->push_back(eval(*k));
            if (!n.kids.empty()) check_insert(out, nullptr);
            return out;
        }
        case Node::kDict: {
            Value out = Value::dict();
            for (size_t k = 0; k + 1 < n.kids.size(); k += 2) {
                const Value key = eval(*n.kids[k]);
                out.object->set(key, eval(*n.kids[k + 1]));
            }
            if (!n.kids.empty()) check_insert(out, nullptr);
            return out;
        }
        case Node::kBinary: {
            const std::string& op = n.text;
            if (op == "and") {
                const Value l = eval(*n.kids[0]);
                return l.truthy() ? eval(*n.kids[1]) : l;
            }
            if (op == "or") {
                const Value l = eval(*n.kids[0]);
                return l.truthy() ? l : eval(*n.kids[1]);
            }
            const Value l = eval(*n.kids[0]);
            const Value r = eval(*n.kids[1]);
            line = n.line;
            if (op == "==") return Value::boolean(equal(l, r));
            if (op == "!=") return Value::boolean(!equal(l, r));
            // llama.cpp's runtime: none or undefined next to a string in + or ~ reads as "";
            // "in undefined" is false; anything else with them is an error.
            const bool l_null = l.is_undefined() || l.is_none(), r_null = r.is_undefined() || r.is_none();
            if (l_null || r_null) {
                if (r.is_undefined() && (op == "in" || op == "not in")) return Value::boolean(op == "not in");
                if (!r.is_undefined() && !l.is_undefined() && (op == "in" || op == "not in")) {
                    return Value::boolean(contains(r, l) == (op == "in"));
                }
                if ((op == "+" || op == "~") && ((l_null && r.is_string()) || (r_null && l.is_string()))) {
                    return Value::string((l_null ? std::string() : l.s) + (r_null ? std::string() : r.s));
                }
                fail("cannot " + op + " " + (l.is_undefined() || r.is_undefined() ? "an undefined value" : "none"));
            }
            if (op == "~") return Value::string(to_text(l) + to_text(r));
            if (op == "<") return Value::boolean(compare(l, r) < 0);
            if (op == ">") return Value::boolean(compare(l, r) > 0);
            if (op == "<=") return Value::boolean(compare(l, r) <= 0);
            if (op == ">=") return Value::boolean(compare(l, r) >= 0);
            if (op == "in") return Value::boolean(contains(r, l));
            if (op == "not in") return Value::boolean(!contains(r, l));
            if (op == "+") {
                if (l.is_string() && r.is_string()) {
                    if (l.s.size() + r.s.size() > limits_.max_output_bytes) fail("a string grew past the output limit");
                    return Value::string(l.s + r.s);
                }
                if (l.is_array() && r.is_array()) {
                    Value out = Value::list(*l.array);
                    out.array->insert(out.array->end(), r.array->begin(), r.array->end());
                    return out;
                }
                if (l.type == Value::Type::kInt && r.type == Value::Type::kInt) return Value::integer(checked(l.i, r.i, '+'));
                if ((l.is_number() || l.type == Value::Type::kBool) && (r.is_number() || r.type == Value::Type::kBool)) return Value::number(as_double(l) + as_double(r));
                fail(std::string("cannot add ") + type_name(l) + " and " + type_name(r));
            }
            if (op == "*" && ((l.is_string() && r.type == Value::Type::kInt) || (r.is_string() && l.type == Value::Type::kInt))) {
                const std::string& s = l.is_string() ? l.s : r.s;
                const int64_t times = l.is_string() ? r.i : l.i;
                if (times > 0 && static_cast<uint64_t>(times) > limits_.max_output_bytes / std::max<size_t>(s.size(), 1)) {
                    fail("a string grew past the output limit");
                }
                std::string out;
                for (int64_t k = 0; k < times; ++k) out += s;
                return Value::string(out);
            }
            if (l.type == Value::Type::kInt && r.type == Value::Type::kInt && op != "/" && op != "**") {
                if ((op == "//" || op == "%") && r.i == 0) fail("division by zero");
                if (op == "-") return Value::integer(checked(l.i, r.i, '-'));
                if (op == "*") return Value::integer(checked(l.i, r.i, '*'));
                if (op == "//") return Value::integer(static_cast<int64_t>(std::floor(double(l.i) / double(r.i))));
                if (op == "%") return Value::integer(r.i == -1 ? 0 : ((l.i % r.i) + r.i) % r.i);
            }
            const double x = as_double(l), y = as_double(r);
            if (op == "-") return Value::number(x - y);
            if (op == "*") return Value::number(x * y);
            if (op == "/") {
                if (y == 0) fail("division by zero");
                return Value::number(x / y);
            }
            if (op == "//") {
                if (y == 0) fail("division by zero");
                return Value::number(std::floor(x / y));
            }
            if (op == "%") {
                if (y == 0) fail("division by zero");
                return Value::number(x - y * std::floor(x / y));
            }
            if (op == "**") {
                if (l.type == Value::Type::kInt && r.type == Value::Type::kInt && r.i >= 0) return Value::integer(to_int64(std::pow(x, y)));
                return Value::number(std::pow(x, y));
            }
            fail("unknown operator " + op);
        }
        default: break;
    }
    fail("a statement where a value was expected");
}

}  // namespace

Result<Value> from_json(std::string_view json_text) {
    // ordered_json: a dict keeps its keys in the order written (what tojson and items() show).
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (j.is_discarded()) return make_error(ErrorCode::kBadInput, "not valid JSON");
    bool too_deep = false;
    Value v = from_nlohmann(j, 0, &too_deep);
    if (too_deep) return make_error(ErrorCode::kBadInput, "JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
    return v;
}

Result<std::string> Template::render(const Value& globals, const Limits& limits) const {
    std::string out;
    Renderer r(limits, out);
    try {
        r.run(program_->body, globals);
    } catch (const Failure& f) {
        return make_error(ErrorCode::kBadInput, "line " + std::to_string(r.line) + ": " + f.message);
    } catch (const std::exception& e) {  // a library's own refusal (memory, lengths): still the template's
        return make_error(ErrorCode::kBadInput, "line " + std::to_string(r.line) + ": " + e.what());
    }
    return out;
}

}  // namespace ls::jinja
