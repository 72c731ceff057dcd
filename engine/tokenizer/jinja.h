// A Jinja interpreter for chat templates: tokenizer.chat_template rendered as llama.cpp's Jinja
// path renders it (Hugging Face's environment: trim_blocks and lstrip_blocks on, `tojson` without
// sorting, `raise_exception`, `strftime_now`, loop controls, namespaces, macros).
//
// Templates are user input: every failure is an error naming the template line, never a crash
// or a hang. Recursion is bounded, and so are the work done and the size of the output.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/util/result.h"

namespace ls::jinja {

struct Object;
struct Function;

// A template value: Python's types as Jinja sees them.
struct Value {
    enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };
    Type type = Type::kUndefined;
    bool b = false;
    int64_t i = 0;
    double f = 0;
    std::string s;
    std::shared_ptr<std::vector<Value>> array;
    std::shared_ptr<Object> object;
    std::shared_ptr<Function> function;

    static Value none() { Value v; v.type = Type::kNone; return v; }
    static Value boolean(bool x) { Value v; v.type = Type::kBool; v.b = x; return v; }
    static Value integer(int64_t x) { Value v; v.type = Type::kInt; v.i = x; return v; }
    static Value number(double x) { Value v; v.type = Type::kFloat; v.f = x; return v; }
    static Value string(std::string x) { Value v; v.type = Type::kString; v.s = std::move(x); return v; }
    static Value list(std::vector<Value> items = {});
    static Value dict();

    bool is_undefined() const { return type == Type::kUndefined; }
    bool is_none() const { return type == Type::kNone; }
    bool is_string() const { return type == Type::kString; }
    bool is_array() const { return type == Type::kArray; }
    bool is_object() const { return type == Type::kObject; }
    bool is_number() const { return type == Type::kInt || type == Type::kFloat; }
    bool truthy() const;
};

// A dict: insertion order kept (what tojson and `items` show). Keys are mostly strings, but a
// template may write {0: 'a', 512: 'b'}, and compares and sorts them as numbers.
struct Object {
    std::vector<std::pair<Value, Value>> items;
    bool is_namespace = false;
    const Value* find(std::string_view key) const;
    const Value* find(const Value& key) const;
    void set(const std::string& key, Value v) { set(Value::string(key), std::move(v)); }
    void set(const Value& key, Value v);
};

// JSON text -> Value (the messages and tools a caller passes). Error kBadInput on bad JSON.
Result<Value> from_json(std::string_view json_text);

struct Limits {
    size_t max_output_bytes = 16u << 20;
    uint64_t max_steps = 50'000'000;  // expressions and statements evaluated
    int max_depth = 64;               // macro calls and nesting
};

// Parses `source` (errors: kBadInput "line N: what"), then renders it with `globals`.
class Template {
public:
    static Result<Template> parse(std::string_view source);
    Result<std::string> render(const Value& globals, const Limits& limits = {}) const;

    struct Program;

private:
    std::shared_ptr<const Program> program_;
};

}  // namespace ls::jinja
