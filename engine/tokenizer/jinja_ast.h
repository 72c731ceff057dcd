// The parsed form of a Jinja template, shared by the parser and the evaluator.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/jinja.h"

namespace ls::jinja {

struct Node;
using NodeP = std::shared_ptr<Node>;

struct Node {
    enum Kind {
        // statements
        kText, kOutput, kIf, kFor, kSet, kMacro, kCallBlock, kFilterBlock, kBreak, kContinue,
        // expressions
        kLiteral, kName, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kTernary, kList, kDict,
    } kind = kText;
    size_t line = 0;
    std::string text;                // text, name, operator, attribute, filter or test name
    Value value;                     // kLiteral
    std::vector<NodeP> kids;         // operands; kCall/kFilter/kTest: callee or subject, then positional args
    std::vector<std::string> names;  // loop or set targets, macro parameters, keyword-argument names
    std::vector<NodeP> defaults;     // macro parameter defaults, keyword-argument values
    std::vector<NodeP> body, else_body;
    bool negated = false;            // kTest: "is not"
};

struct Template::Program {
    std::vector<NodeP> body;
};

size_t line_of(std::string_view src, size_t pos);

}  // namespace ls::jinja
