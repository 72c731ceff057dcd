// The Jinja interpreter on templates written for these tests: the chat-template environment's
// white-space rules, the statements, filters, tests and methods real chat templates use, and
// errors (with the template's line) for broken or runaway templates.
#include <gtest/gtest.h>

#include "engine/tokenizer/jinja.h"

namespace ls::jinja {
namespace {

std::string render(const std::string& tmpl, const std::string& json = "{}", const Limits& limits = {}) {
    auto t = Template::parse(tmpl);
    if (!t.ok()) return "PARSE ERROR " + t.error().message;
    auto g = from_json(json);
    EXPECT_TRUE(g.ok());
    auto r = t->render(g.value(), limits);
    if (!r.ok()) return "ERROR " + r.error().message;
    return r.value();
}

const char* kMessages = R"({"messages": [
  {"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Hi"},
  {"role": "assistant", "content": "Hello!", "tool_calls": [
     {"type": "function", "function": {"name": "get_time", "arguments": {"zone": "UTC", "fmt": 24}}}]},
  {"role": "tool", "content": "12:00"},
  {"role": "user", "content": "Thanks"}],
 "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})";

TEST(Jinja, ChatMlWithTrimAndLstripBlocks) {
    const std::string tmpl =
        "{{ bos_token }}\n"
        "{% for message in messages %}\n"
        "    {% if message.role == 'tool' %}\n"
        "<|im_start|>tool\n{{ message.content }}<|im_end|>\n"
        "    {% else %}\n"
        "<|im_start|>{{ message['role'] }}\n{{ message.content | trim }}<|im_end|>\n"
        "    {% endif %}\n"
        "{% endfor %}\n"
        "{% if add_generation_prompt %}\n"
        "<|im_start|>assistant\n"
        "{% endif %}";
    EXPECT_EQ(render(tmpl, kMessages),
              "<s>\n"
              "<|im_start|>system\nBe brief.<|im_end|>\n"
              "<|im_start|>user\nHi<|im_end|>\n"
              "<|im_start|>assistant\nHello!<|im_end|>\n"
              "<|im_start|>tool\n12:00<|im_end|>\n"
              "<|im_start|>user\nThanks<|im_end|>\n"
              "<|im_start|>assistant\n");
}

TEST(Jinja, MinusStripsAllWhiteSpaceOnItsSide) {
    EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
    EXPECT_EQ(render("a\n{%- if true %}\nb{% endif -%}\n\nc"), "abc");
    EXPECT_EQ(render("{{ 'a' }}x {# note #} y"), "ax  y");
    // llama.cpp's lexer drops the first line's text when only blanks stand between it and a
    // block tag at the very start of a template; the same here, so the output stays the same.
    EXPECT_EQ(render("x {# note #} y"), " y");
    EXPECT_EQ(render("x\n  {# note #}\ny"), "x\ny");  // a comment alone on its line goes with the line
    EXPECT_EQ(render("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // expressions keep their newlines
}

TEST(Jinja, ToolCallsNamespacesAndMacros) {
    const std::string tmpl =
        "{%- set ns = namespace(last_user=-1, n=0) -%}\n"
        "{%- for m in messages -%}\n"
        "  {%- if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif -%}\n"
        "  {%- set ns.n = ns.n + 1 -%}\n"
        "{%- endfor -%}\n"
        "{%- macro call(tc) -%}\n"
        "[{{ tc.function.name }}]{{ tc.function.arguments | tojson }}\n"
        "{%- endmacro -%}\n"
        "{{ ns.last_user }}/{{ ns.n }}:\n"
        "{%- for m in messages if m.tool_calls is defined -%}\n"
        "{%- for tc in m.tool_calls %}{{ call(tc) }}{% endfor -%}\n"
        "{%- endfor %}";
    EXPECT_EQ(render(tmpl, kMessages), "4/5:[get_time]{\"zone\": \"UTC\", \"fmt\": 24}");
}

TEST(Jinja, ExpressionsFiltersTestsAndMethods) {
    EXPECT_EQ(render("{{ 'abc'[::-1] }}|{{ [1,2,3,4][1:3] }}|{{ 'a,b'.split(',') }}|{{ ' x '.strip() }}."),
              "cba|[2, 3]|['a', 'b']|x.");
    EXPECT_EQ(render("{{ 7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -3 // 2 }} {{ 1.0 }} {{ 0.25 * 2 }}"),
              "3 1 3.5 1024 -2 1.0 0.5");
    EXPECT_EQ(render("{{ true }} {{ none }} {{ undefined_name }}|{{ 'a' ~ 1 ~ none }}|{{ x.y.z }}|{{ x | length }}"),
              "True None |a1||0");  // none and undefined beside a string read as "" (llama.cpp)
    EXPECT_EQ(render("{{ '<{}|{}>'.format('a', 2) }} {{ {0: 'zero', 512: 'big'}[512] }}"), "<a|2> big");
    EXPECT_EQ(render("{{ [3,1,2] | sort | join('-') }} {{ ['a','b'] | length }} {{ 'Hi There' | lower }}"
                     " {{ 'x' if false else 'y' }} {{ [1,2,2] | unique | list }}"),
              "1-2-3 2 hi there y [1, 2]");
    EXPECT_EQ(render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(', ') }}",
                     kMessages),
              "Hi, Thanks");
    EXPECT_EQ(render("{{ messages[0].content.startswith('Be') }} {{ 'user' in ['user'] }} {{ 'b' not in 'abc' }}"
                     " {{ 5 is divisibleby 5 }} {{ 3 is odd }} {{ x is not defined }} {{ {} is mapping }}",
                     kMessages),
              "True True False True True True True");
    EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': [2]}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=[2];");
    EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
    EXPECT_EQ(render("{% for x in range(5) %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}"), "012");
    EXPECT_EQ(render("{% for x in range(4) %}{% if x is even %}{% continue %}{% endif %}{{ x }}{% endfor %}"), "13");
    EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.index }}{{ loop.first }}{{ loop.last }}{% endfor %}"),
              "1TrueFalse2FalseTrue");
    EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}{% set s %}in{{ a }}{% endset %}{{ s | upper }}"), "21IN1");
    EXPECT_EQ(render("{{ {'k': 'é', 'n': [1, none, true]} | tojson }}"), "{\"k\": \"é\", \"n\": [1, null, true]}");
    EXPECT_EQ(render("{{ {'k': [1, 2]} | tojson(indent=2) }}"), "{\n  \"k\": [\n    1,\n    2\n  ]\n}");
    EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
    EXPECT_EQ(render("{{ x | default('d') }} {{ '' | default('d', true) }} {{ 'line1\nline2' | indent(2) }}"),
              "d d line1\n  line2");
    EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");  // loops scope sets
    EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m('A') }}{{ m('A', b='C') }}"), "ABAC");
}

TEST(Jinja, TemplateErrorsNameTheLine) {
    auto bad = [](const std::string& tmpl, const std::string& json = "{}") {
        auto t = Template::parse(tmpl);
        if (!t.ok()) return t.error().message;
        auto r = t->render(from_json(json).value());
        return r.ok() ? std::string("rendered: ") + r.value() : r.error().message;
    };
    EXPECT_EQ(bad("a\n{% if x %}\nb"), "line 3: {% endif %} missing: the template ends first");
    EXPECT_EQ(bad("a\n\n{{ 'x' | no_such_filter }}"), "line 3: unknown filter 'no_such_filter'");
    EXPECT_EQ(bad("{{ 1 +* 2 }}"), "line 1: expected a value before '*'");
    EXPECT_EQ(bad("{% endfor %}"), "line 1: unexpected {% endfor %}");
    EXPECT_EQ(bad("\n{{ raise_exception('no system role') }}"),
              "line 2: the template raised an exception: no system role");
    EXPECT_EQ(bad("{{ 'unterminated }}"), "line 1: string never closed");
    EXPECT_EQ(bad("x\n{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"),
              "line 2: macro calls nested deeper than 64");
    EXPECT_EQ(bad("{% for i in range(100000000) %}{% endfor %}"), "line 1: range() of more than 10000000 items");
    EXPECT_EQ(bad("{{ 1 / 0 }}"), "line 1: division by zero");
    EXPECT_EQ(bad("{{ x + 1 }}"), "line 1: cannot + an undefined value");
    EXPECT_EQ(bad("\n{{ x | tojson }}"), "line 2: filter tojson on an undefined value");
    EXPECT_EQ(bad("{{ none | tojson }}{{ none | string }}{{ x | trim }}."), "rendered: nullNone.");
}

TEST(Jinja, RunawayTemplatesStop) {
    Limits small;
    small.max_output_bytes = 1000;
    EXPECT_EQ(render("{% for i in range(1000) %}xxxxxxxxxx{% endfor %}", "{}", small),
              "ERROR line 1: the output passed 1000 bytes");
    Limits few;
    few.max_steps = 10000;
    EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "{}", few),
              "ERROR line 1: the template ran for too long (over 10000 steps)");
    // Deep nesting in the source is refused, not left to the C++ stack.
    std::string deep, chain, minus;
    for (int i = 0; i < 5000; ++i) deep += "(", chain += "1 + ", minus += "- ";
    EXPECT_NE(render("{{ " + deep + " }}").find("nested too deeply"), std::string::npos);
    EXPECT_NE(render("{{ " + chain + "1 }}").find("nested too deeply"), std::string::npos);
    EXPECT_NE(render("{{ " + minus + "1 }}").find("nested too deeply"), std::string::npos);
    // Numbers and sizes past what fits are errors too.
    EXPECT_EQ(render("{{ 9223372036854775807 + 1 }}"), "ERROR line 1: an integer past 64 bits");
    EXPECT_EQ(render("{{ 2 ** 70 }}"), "ERROR line 1: a number past 64-bit integers");
    EXPECT_EQ(render("{{ 'ab' * 99999999999 }}"), "ERROR line 1: a string grew past the output limit");
    EXPECT_EQ(render("{{ 'x' | indent(99999999) }}"), "ERROR line 1: indent(): width out of range");
    EXPECT_EQ(render("{{ range(9223372036854775800, 9223372036854775807, 5) | length }}"), "2");
    // No value may hold itself, or nest without end (printing and freeing it would recurse).
    EXPECT_EQ(render("{% set l = [] %}{{ l.append(l) }}"), "ERROR line 1: a list or dict cannot contain itself");
    EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.self = ns %}"),
              "ERROR line 1: a list or dict cannot contain itself");
    EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"),
              "ERROR line 1: lists and dicts nested deeper than 200 levels");
    std::string deep_json;
    for (int i = 0; i < 100000; ++i) deep_json += "[";
    EXPECT_FALSE(from_json(deep_json + "1" + std::string(100000, ']')).ok());
}

}  // namespace
}  // namespace ls::jinja
