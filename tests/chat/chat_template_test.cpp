// The chat template engine (chat/chat_template.h, jinja_*.h) feature by feature.
// Expected texts are what Python jinja2 renders (the whole-template comparison against
// jinja2 itself is test_chat_template_vs_jinja2.py); the limits and error cases check
// that bad templates fail cleanly, with the line, and never crash or hang.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "chat/builtin_templates.h"
#include "jinja_json_context.h"

namespace pagoda {
namespace {

ChatTemplateOptions jinja2_defaults() {
  ChatTemplateOptions o;
  o.trim_blocks = false;
  o.lstrip_blocks = false;
  return o;
}

// Renders `source` with the variables of the JSON object `context`.
Result<std::string> render(const std::string& source, const std::string& context = "{}",
                           const ChatTemplateOptions& options = {}) {
  jinja::Value ctx = test::jinja_context(context);
  if (ctx.is_undefined()) return error("bad JSON in test: {}", context);
  return render_template(source, ctx, options);
}

std::string ok(const std::string& source, const std::string& context = "{}",
               const ChatTemplateOptions& options = {}) {
  Result<std::string> r = render(source, context, options);
  EXPECT_TRUE(r.is_ok()) << source << "\n  -> " << r.status().message();
  return r.is_ok() ? *r : std::string("<error>");
}

// The error message of a render that must fail.
std::string err(const std::string& source, const std::string& context = "{}") {
  Result<std::string> r = render(source, context);
  EXPECT_FALSE(r.is_ok()) << source << "\n  rendered: " << (r.is_ok() ? *r : "");
  return r.is_ok() ? std::string() : r.status().message();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- text, comments, whitespace control ---------------------------------------------

TEST(ChatTemplate, TextWithoutTagsIsCopied) {
  EXPECT_EQ(ok("plain text, unicode é 中文 🎉"), "plain text, unicode é 中文 🎉");
}

TEST(ChatTemplate, CommentsRenderNothing) {
  EXPECT_EQ(ok("a{# a comment {{ x }} #}b"), "ab");
}

TEST(ChatTemplate, OneTrailingNewlineIsDroppedUnlessKept) {
  EXPECT_EQ(ok("x\n\n"), "x\n");
  ChatTemplateOptions keep;
  keep.keep_trailing_newline = true;
  EXPECT_EQ(ok("x\n\n", "{}", keep), "x\n\n");
}

TEST(ChatTemplate, NewlinesAreNormalised) { EXPECT_EQ(ok("a\r\nb\rc"), "a\nb\nc"); }

TEST(ChatTemplate, MinusStripsWhitespaceOnItsSide) {
  EXPECT_EQ(ok("a  \n {{- 'b' -}} \n  c"), "abc");
  EXPECT_EQ(ok("a \n{%- if true %} b {% endif -%}\n c"), "a b c");
}

TEST(ChatTemplate, TrimBlocksDropsTheNewlineAfterABlockTag) {
  const std::string t = "{% if true %}\nyes\n{% endif %}\nend";
  EXPECT_EQ(ok(t), "yes\nend");                     // transformers' settings
  EXPECT_EQ(ok(t, "{}", jinja2_defaults()), "\nyes\n\nend");
}

TEST(ChatTemplate, LstripBlocksDropsIndentationBeforeABlockTag) {
  const std::string t = "<\n    {% if true %}\n    x\n    {% endif %}\n>";
  EXPECT_EQ(ok(t), "<\n    x\n>");
  EXPECT_EQ(ok(t, "{}", jinja2_defaults()), "<\n    \n    x\n    \n>");
}

TEST(ChatTemplate, PlusKeepsWhitespaceDespiteTheOptions) {
  EXPECT_EQ(ok("  {%+ if true %}k{% endif +%}\nz"), "  k\nz");
}

TEST(ChatTemplate, LstripDoesNotApplyToPrintTags) { EXPECT_EQ(ok("  {{ 'x' }}\n"), "  x"); }

TEST(ChatTemplate, RawBlocksAreLiteral) {
  EXPECT_EQ(ok("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
}

// ---- values and expressions ---------------------------------------------------------

TEST(ChatTemplate, PrintsValuesAsPythonStrDoes) {
  EXPECT_EQ(ok("{{ none }} {{ true }} {{ 3 }} {{ 2.5 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 10 / 4 }} {{ 4 / 2 }}"),
            "None True 3 2.5 1e+16 1.5e-05 2.5 2.0");
  EXPECT_EQ(ok("{{ [1, 'a', none, [true]] }} {{ ('x',) }} {{ {'k': \"it's\"} }}"),
            "[1, 'a', None, [True]] ('x',) {'k': \"it's\"}");
}

TEST(ChatTemplate, ArithmeticFollowsPython) {
  EXPECT_EQ(ok("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} "
               "{{ 0.1 + 0.2 }} {{ 'ab' * 2 }} {{ [0] * 3 }} {{ true + 1 }}"),
            "3 -4 2 -2 1024 0.5 0.30000000000000004 abab [0, 0, 0] 2");
}

TEST(ChatTemplate, TildeConcatenatesAsStrings) {
  EXPECT_EQ(ok("{{ 'a' ~ 1 ~ none ~ true ~ missing }}"), "a1NoneTrue");
}

TEST(ChatTemplate, ComparisonsChainAndBooleansShortCircuit) {
  EXPECT_EQ(ok("{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 1 == 1.0 }} {{ [1, 2] == [1, 2] }} "
               "{{ 0 or 'x' }} {{ 1 and 2 }} {{ not none }}"),
            "True False True True x 2 True");
}

TEST(ChatTemplate, MembershipWorksOnStringsListsAndDicts) {
  EXPECT_EQ(ok("{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }}"),
            "True True True True");
}

TEST(ChatTemplate, InlineIfWithoutElseIsUndefined) {
  EXPECT_EQ(ok("[{{ 'x' if false }}] {{ 'a' if false else 'b' }}"), "[] b");
}

TEST(ChatTemplate, SubscriptsSlicesAndNegativeIndices) {
  const std::string ctx = R"({"s": "héllo", "l": [1, 2, 3, 4]})";
  EXPECT_EQ(ok("{{ s[1] }} {{ s[-1] }} {{ s[1:3] }} {{ s[::-1] }} {{ l[-2:] }} {{ l[::2] }} {{ l[9] }}|",
               ctx),
            "é o él olléh [3, 4] [1, 3] |");
}

TEST(ChatTemplate, AttributeAndItemAccessFallBackToEachOther) {
  const std::string ctx = R"({"m": {"role": "user", "items": 5}})";
  EXPECT_EQ(ok("{{ m.role }} {{ m['role'] }} {{ m['items'] }} {{ m.items()|list }}", ctx),
            "user user 5 [('role', 'user'), ('items', 5)]");
}

TEST(ChatTemplate, StringLiteralsDecodeEscapes) {
  EXPECT_EQ(ok(R"({{ 'a\tb\n\x41\u00e9' "-" 'it\'s' }})"), "a\tb\nAé-it's");
}

// ---- undefined values ---------------------------------------------------------------

TEST(ChatTemplate, UndefinedRendersEmptyAndIsFalsy) {
  EXPECT_EQ(ok("[{{ missing }}] {{ missing is defined }} {{ not missing }} {{ missing|length }} "
               "{% for x in missing %}x{% endfor %}{{ missing|default('d') }}"),
            "[] False True 0 d");
}

TEST(ChatTemplate, MissingKeysAndAttributesAreUndefined) {
  EXPECT_EQ(ok("[{{ m.nope }}{{ m['nope'] }}{{ l[5] }}] {{ m.nope is defined }}",
               R"({"m": {}, "l": []})"),
            "[] False");
}

TEST(ChatTemplate, UsingAnUndefinedValueFails) {
  EXPECT_TRUE(contains(err("{{ m.nope.deeper }}", R"({"m": {}})"), "has no attribute 'nope'"));
  EXPECT_TRUE(contains(err("{{ missing.x }}"), "'missing' is undefined"));
  EXPECT_TRUE(contains(err("{{ missing + 1 }}"), "'missing' is undefined"));
  EXPECT_TRUE(contains(err("{{ missing() }}"), "'missing' is undefined"));
  EXPECT_TRUE(contains(err("{{ missing|tojson }}"), "not JSON serializable"));
}

// ---- statements ---------------------------------------------------------------------

TEST(ChatTemplate, IfElifElseTakesTheFirstTrueBranch) {
  const std::string t = "{% if n == 1 %}one{% elif n == 2 %}two{% else %}many{% endif %}";
  EXPECT_EQ(ok(t, R"({"n": 1})"), "one");
  EXPECT_EQ(ok(t, R"({"n": 2})"), "two");
  EXPECT_EQ(ok(t, R"({"n": 5})"), "many");
}

TEST(ChatTemplate, ForLoopProvidesLoopVariables) {
  EXPECT_EQ(ok("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
               "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.cycle('+', '-') }} "
               "{% endfor %}"),
            "103TrueFalse3+ 212FalseFalse3a- 321FalseTrue3b+ ");
}

TEST(ChatTemplate, ForLoopFilterAndElse) {
  EXPECT_EQ(ok("{% for x in range(6) if x is odd %}{{ x }}/{{ loop.length }} {% endfor %}"
               "{% for x in [] %}x{% else %}empty{% endfor %}"),
            "1/3 3/3 5/3 empty");
}

TEST(ChatTemplate, ForLoopUnpacksPairsAndIteratesDicts) {
  EXPECT_EQ(ok("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
               R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;ba");
}

TEST(ChatTemplate, BreakAndContinue) {
  EXPECT_EQ(ok("{% for i in range(10) %}{% if i == 6 %}{% break %}{% endif %}"
               "{% if i is even %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "135");
}

TEST(ChatTemplate, SetInsideALoopDoesNotOutliveTheIteration) {
  EXPECT_EQ(ok("{% set x = 0 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"),
            "1110");
  EXPECT_EQ(ok("{% if true %}{% set y = 'kept' %}{% endif %}{{ y }}"), "kept");
}

TEST(ChatTemplate, NamespaceCarriesValuesOutOfLoops) {
  EXPECT_EQ(ok("{% set ns = namespace(total=0, seen=false) %}{% for i in range(4) %}"
               "{% set ns.total = ns.total + i %}{% set ns.seen = true %}{% endfor %}{{ ns.total }} {{ ns.seen }}"),
            "6 True");
  EXPECT_TRUE(contains(err("{% set d = {} %}{% set d.x = 1 %}"), "non-namespace"));
}

TEST(ChatTemplate, TupleAssignment) {
  EXPECT_EQ(ok("{% set a, b = 1, 'two' %}{{ b }}{{ a }}"), "two1");
  EXPECT_TRUE(contains(err("{% set a, b = [1] %}"), "not enough values to unpack"));
}

TEST(ChatTemplate, SetBlockCapturesAndFilters) {
  EXPECT_EQ(ok("{% set s %} x {{ 1 + 1 }} {% endset %}[{{ s }}]{% set u | trim | upper %} hi {% endset %}[{{ u }}]"),
            "[ x 2 ][HI]");
}

TEST(ChatTemplate, FilterBlock) { EXPECT_EQ(ok("{% filter upper %}abc{% endfilter %}"), "ABC"); }

TEST(ChatTemplate, MacrosTakeDefaultsKeywordsAndExtraArguments) {
  EXPECT_EQ(ok("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }} {{ m(1, 2) }} {{ m(b=3, a=4) }}"),
            "1B 12 43");
  EXPECT_EQ(ok("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}"),
            "1(2,){'k': 3}");
  EXPECT_TRUE(contains(err("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "takes not more than 1"));
  EXPECT_TRUE(contains(err("{% macro m(a) %}{% endmacro %}{{ m(z=1) }}"), "no keyword argument 'z'"));
}

TEST(ChatTemplate, MacrosSeeTheLatestValuesOfTheirScope) {
  EXPECT_EQ(ok("{% set x = 1 %}{% macro m() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ m() }}"), "2");
}

TEST(ChatTemplate, RecursiveMacros) {
  EXPECT_EQ(ok("{% macro down(n) %}{{ n }}{% if n > 0 %}{{ down(n - 1) }}{% endif %}{% endmacro %}{{ down(3) }}"),
            "3210");
}

TEST(ChatTemplate, CallBlocksPassACaller) {
  EXPECT_EQ(ok("{% macro tag(name) %}<{{ name }}>{{ caller() }}</{{ name }}>{% endmacro %}"
               "{% call tag('b') %}bold{% endcall %}"),
            "<b>bold</b>");
  EXPECT_EQ(ok("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
               "{% call(x) each([1, 2]) %}[{{ x }}]{% endcall %}"),
            "[1][2]");
}

TEST(ChatTemplate, WithBlockScopesItsVariables) {
  EXPECT_EQ(ok("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
}

TEST(ChatTemplate, GenerationTagRendersItsBody) {
  EXPECT_EQ(ok("{% generation %}assistant text{% endgeneration %}"), "assistant text");
}

// ---- filters, tests, methods, globals -----------------------------------------------

TEST(ChatTemplate, StringFilters) {
  EXPECT_EQ(ok("[{{ '  a b \n'|trim }}] {{ 'hELLO'|capitalize }} {{ 'a-b c'|title }} {{ 'Ab'|upper }}"
               "{{ 'Ab'|lower }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'héllo'|length }} {{ 'a\nb'|indent(2, true) }}"),
            "[a b] Hello A-B C ABab bba 5   a\n  b");
}

TEST(ChatTemplate, SequenceFilters) {
  const std::string ctx = R"({"ms": [{"role": "user", "n": 2}, {"role": "bot", "n": 1}, {"role": "user", "n": 3}]})";
  EXPECT_EQ(ok("{{ ms|selectattr('role', 'equalto', 'user')|list|length }} "
               "{{ ms|rejectattr('role', 'eq', 'user')|map(attribute='n')|list }} "
               "{{ ms|map(attribute='role')|unique|join(',') }} {{ ms|sort(attribute='n')|map(attribute='n')|join }} "
               "{{ [3, 1, 2]|sort(reverse=true) }} {{ [1, 2]|first }}{{ [1, 2]|last }} {{ [1, 2, 3]|sum }} "
               "{{ [1, 2, 3]|reverse|list }} {{ [4, 9]|max }} {{ 'ab'|list }}",
               ctx),
            "2 [1] user,bot 123 [3, 2, 1] 12 6 [3, 2, 1] 9 ['a', 'b']");
}

TEST(ChatTemplate, ConversionFilters) {
  EXPECT_EQ(ok("{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(-1) }} {{ '2.5'|float }} {{ 3|string }} "
               "{{ missing|default('d') }} {{ ''|default('e', true) }} {{ 2.5|round }} {{ 2.567|round(2) }}"),
            "42 4 -1 2.5 3 d e 2.0 2.57");
}

TEST(ChatTemplate, ToJsonMatchesTransformers) {
  const std::string ctx = R"({"v": {"b": [1, 2.5, null, true], "é": "ü\n\"q\"", "a": {}}})";
  EXPECT_EQ(ok("{{ v|tojson }}", ctx), R"({"b": [1, 2.5, null, true], "é": "ü\n\"q\"", "a": {}})");
  EXPECT_EQ(ok("{{ v.b|tojson(indent=2) }}", ctx), "[\n  1,\n  2.5,\n  null,\n  true\n]");
  EXPECT_EQ(ok("{{ v|tojson(sort_keys=true, separators=(',', ':')) }}", ctx),
            R"({"a":{},"b":[1,2.5,null,true],"é":"ü\n\"q\""})");
  EXPECT_EQ(ok("{{ 'é'|tojson(ensure_ascii=true) }}"), R"("\u00e9")");
}

TEST(ChatTemplate, Tests) {
  EXPECT_EQ(ok("{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} "
               "{{ {} is mapping }} {{ [] is mapping }} {{ 1 is number }} {{ 1.0 is integer }} "
               "{{ [] is iterable }} {{ 6 is divisibleby 3 }} {{ 3 is odd }} {{ 'a' is in ['a'] }} "
               "{{ 2 is gt(1) }} {{ x is not none }}",
               R"({"x": 1})"),
            "True True True True True False True False True True True True True True");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(ok("[{{ ' x '.strip() }}][{{ 'xa'.lstrip('x') }}] {{ 'a b  c'.split() }} {{ 'a,b'.split(',') }} "
               "{{ 'ab'.startswith('a') }} {{ 'ab'.endswith(('x', 'b')) }} {{ 'ab'.upper() }} "
               "{{ 'a b'.title() }} {{ 'a-b'.replace('-', '+') }} {{ '-'.join(['x', 'y']) }} "
               "{{ 'abc'.find('c') }} {{ '{}={x}'.format(1, x=2) }} {{ '%s:%03d' % ('n', 7) }}"),
            "[x][a] ['a', 'b', 'c'] ['a', 'b'] True True AB A B a+b x-y 2 1=2 n:007");
}

TEST(ChatTemplate, DictMethods) {
  EXPECT_EQ(ok("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }}",
               R"({"d": {"a": 1}})"),
            "1 None 0 ['a'] [1]");
}

TEST(ChatTemplate, Globals) {
  EXPECT_EQ(ok("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ dict(a=1) }} {{ namespace(q=5).q }}"),
            "[0, 1, 2] [1, 3, 5] {'a': 1} 5");
}

TEST(ChatTemplate, RaiseExceptionFailsWithTheTemplatesMessage) {
  std::string msg = err("line one\n{{ raise_exception('Roles must alternate!') }}");
  EXPECT_TRUE(contains(msg, "Roles must alternate!")) << msg;
  EXPECT_TRUE(contains(msg, "line 2")) << msg;
}

TEST(ChatTemplate, SandboxRefusesMutatingLists) {
  EXPECT_TRUE(contains(err("{% set l = [] %}{{ l.append(1) }}"), "unsafe"));
  EXPECT_TRUE(contains(err("{{ {}.update({}) }}"), "unsafe"));
}

TEST(ChatTemplate, UnknownFiltersAndTestsFailWhenUsed) {
  EXPECT_TRUE(contains(err("{{ 'x'|frobnicate }}"), "No filter named 'frobnicate'"));
  EXPECT_TRUE(contains(err("{{ 'x' is frobnicated }}"), "No test named 'frobnicated'"));
  EXPECT_EQ(ok("{% if false %}{{ 'x'|frobnicate }}{% endif %}ok"), "ok");  // as in jinja2 3.1
}

TEST(ChatTemplate, TypeErrorsFail) {
  EXPECT_TRUE(contains(err("{{ 'a' + 1 }}"), "can only concatenate str"));
  EXPECT_TRUE(contains(err("{{ 1 < 'a' }}"), "not supported"));
  EXPECT_TRUE(contains(err("{{ 1 // 0 }}"), "division"));
  EXPECT_TRUE(contains(err("{% for x in 3 %}{% endfor %}"), "not iterable"));
  EXPECT_TRUE(contains(err("{{ none() }}"), "not callable"));
}

// ---- malformed templates ------------------------------------------------------------

// Each must fail at parse time with the line of the problem.
struct Malformed {
  const char* source;
  const char* message_part;
  int line;
};

TEST(ChatTemplate, SyntaxErrorsNameTheProblemAndTheLine) {
  const Malformed cases[] = {
      {"ok\n{% if x %}\nnever closed", "Unexpected end of template", 3},
      {"{% for x in y %}\n{% endif %}", "Encountered unknown tag 'endif'", 2},
      {"\n\n{% frobnicate %}", "Encountered unknown tag 'frobnicate'", 3},
      {"{{ }}", "Expected an expression", 1},
      {"x\n{{ 1 + }}", "unexpected 'end of print statement'", 2},
      {"{{ (1 }}", "expected ')'", 1},
      {"{{ 'unterminated }}", "unterminated string", 1},
      {"{# never closed", "Missing end of comment tag", 1},
      {"{% raw %} never closed", "Missing end of raw directive", 1},
      {"{% set 1 = 2 %}", "can't assign", 1},
      {"a\nb\n{% break %}", "'break' outside loop", 3},
      {"{{ a.b = 1 }}", "expected token 'end of print statement'", 1},
      {"{% macro m(a=1, b) %}{% endmacro %}", "non-default argument follows default", 1},
      {"{{ 1 @ 2 }}", "unexpected char '@'", 1},
      {"{{ 99999999999999999999 }}", "integer literal too large", 1},
  };
  for (const Malformed& c : cases) {
    Result<ChatTemplate> t = ChatTemplate::parse(c.source);
    ASSERT_FALSE(t.is_ok()) << c.source;
    const std::string& msg = t.status().message();
    EXPECT_TRUE(contains(msg, c.message_part)) << c.source << "\n  -> " << msg;
    EXPECT_TRUE(contains(msg, "(line " + std::to_string(c.line) + ")")) << c.source << "\n  -> " << msg;
  }
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  std::string msg = err("{% for m in messages %}\n{{ m.x.y }}\n{% endfor %}", R"({"messages": [{}]})");
  EXPECT_TRUE(contains(msg, "(line 2)")) << msg;
}

// ---- limits: hostile templates fail instead of hanging or crashing -----------------

// The default allows a million iterations; a smaller limit keeps the test quick.
ChatTemplateOptions small_limits() {
  ChatTemplateOptions o;
  o.limits.max_iterations = 20000;
  o.limits.work_budget = 200000;
  return o;
}

TEST(ChatTemplate, LoopIterationsAreBounded) {
  Result<std::string> r = render(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "{}",
      small_limits());
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(contains(r.status().message(), "20000 loop iterations")) << r.status().message();
  EXPECT_TRUE(contains(err("{{ range(100001)|length }}"), "Range too big"));
}

TEST(ChatTemplate, MacroRecursionIsBounded) {
  EXPECT_TRUE(contains(err("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "nest too deeply"));
}

TEST(ChatTemplate, DeepNestingIsRefusedNotOverflowed) {
  std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_TRUE(contains(err(deep), "nests too deeply"));
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if true %}";
  EXPECT_TRUE(contains(err(ifs), "nests too deeply"));
}

TEST(ChatTemplate, ExponentialGrowthIsBounded) {
  EXPECT_TRUE(contains(err("{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
                           "{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
                       "too large"));
  EXPECT_TRUE(contains(err("{% set ns = namespace(l=[1]) %}{% for i in range(1000) %}"
                           "{% set ns.l = [ns.l] %}{% endfor %}"),
                       "nest too deeply"));
  // A structure that shares itself 2^60 times: printing or comparing it would never end.
  for (const char* use : {"{{ ns.l }}", "{{ ns.l == ns.m }}", "{{ ns.l|tojson }}"}) {
    Result<std::string> r = render(std::string("{% set ns = namespace(l=[1], m=[1]) %}{% for i in range(60) %}"
                                               "{% set ns.l = [ns.l, ns.l] %}{% set ns.m = [ns.m, ns.m] %}"
                                               "{% endfor %}") + use,
                                   "{}", small_limits());
    ASSERT_FALSE(r.is_ok()) << use;
    EXPECT_TRUE(contains(r.status().message(), "work limit")) << r.status().message();
  }
}

TEST(ChatTemplate, SelfReferenceThroughANamespaceFails) {
  EXPECT_TRUE(contains(err("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}"), "nest too deeply"));
}

// ---- the ChatTemplate API -----------------------------------------------------------

constexpr const char* kLlama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

TEST(ChatTemplateApi, RendersMessagesLikeApplyChatTemplate) {
  Result<ChatTemplate> t = ChatTemplate::parse(kLlama3);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "  Hi!  "}};
  Result<std::string> out = t->render(messages, true, "<|begin_of_text|>", "<|eot_id|>");
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out,
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateApi, ToolsAndDocumentsAreNoneAsInTransformers) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ tools is none }} {{ documents is none }} {{ tools is defined }}");
  ASSERT_TRUE(t.is_ok());
  Result<std::string> out = t->render({}, false, "", "");
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out, "True True True");
}

TEST(ChatTemplateApi, ContextMustBeADict) {
  Result<ChatTemplate> t = ChatTemplate::parse("x");
  ASSERT_TRUE(t.is_ok());
  EXPECT_FALSE(t->render(jinja::Value::list({})).is_ok());
}

TEST(ChatTemplateApi, OneTemplateRendersFromManyThreads) {
  Result<ChatTemplate> t = ChatTemplate::parse(kLlama3);
  ASSERT_TRUE(t.is_ok());
  const std::string want = *t->render({{"user", "hello"}}, true, "<s>", "</s>");
  std::vector<std::string> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      for (int k = 0; k < 50; ++k) got[i] = *t->render({{"user", "hello"}}, true, "<s>", "</s>");
    });
  for (auto& th : threads) th.join();
  for (const std::string& g : got) EXPECT_EQ(g, want);
}

// ---- real templates (golden texts, as transformers renders them) -------------------

std::string fixture(const std::string& name) {
  std::filesystem::path dir;
  if (const char* src = std::getenv("PAGODA_SOURCE_DIR")) {
    dir = std::filesystem::path(src) / "tests" / "chat" / "chat_templates";
  } else {
    dir = std::filesystem::path(__FILE__).parent_path() / "chat_templates";
  }
  std::ifstream in(dir / (name + ".jinja"), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

const std::vector<ChatMessage> kConversation = {
    {"system", "You are a helpful assistant."}, {"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you?"}};

std::string render_fixture(const std::string& name, const std::vector<ChatMessage>& messages,
                           const std::string& bos, const std::string& eos) {
  std::string source = fixture(name);
  EXPECT_FALSE(source.empty()) << "fixture " << name << " not found";
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  if (!t) return "";
  Result<std::string> out = t->render(messages, true, bos, eos);
  return out.is_ok() ? *out : "ERROR: " + out.status().message();
}

TEST(ChatTemplateFixtures, Gemma3FoldsTheSystemPromptIntoTheFirstTurn) {
  EXPECT_EQ(render_fixture("gemma3", kConversation, "<bos>", "<eos>"),
            "<bos><start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n"
            "<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you?<end_of_turn>\n"
            "<start_of_turn>model\n");
}

// The phi3 built-in (for Phi-3 files without a template) writes what llama.cpp's phi3
// fallback writes: <|role|>\n content <|end|>\n per message, then <|assistant|>\n.
TEST(BuiltinTemplates, Phi3TurnsAsLlamaCppWritesThem) {
  const char* source = builtin_chat_template("phi3");
  ASSERT_NE(source, nullptr);
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  Result<std::string> out = t->render(kConversation, true, "<s>", "</s>");
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out,
            "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello<|end|>\n<|assistant|>\nHi there<|end|>\n"
            "<|user|>\nWho are you?<|end|>\n<|assistant|>\n");
}

TEST(ChatTemplateFixtures, Gemma3RejectsBrokenAlternation) {
  std::string out = render_fixture("gemma3", {{"user", "a"}, {"user", "b"}}, "<bos>", "<eos>");
  EXPECT_TRUE(contains(out, "ERROR: ") && contains(out, "Conversation roles must alternate")) << out;
}

TEST(ChatTemplateFixtures, Qwen25AddsItsDefaultSystemPrompt) {
  EXPECT_EQ(render_fixture("qwen2.5", {{"user", "Hello"}}, "", "<|im_end|>"),
            "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateFixtures, Llama2WrapsTheSystemPromptInSysTags) {
  EXPECT_EQ(render_fixture("llama2", kConversation, "<s>", "</s>"),
            "<s>[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello [/INST] Hi there </s>"
            "<s>[INST] Who are you? [/INST]");
}

TEST(ChatTemplateFixtures, MistralV01RejectsASystemMessage) {
  std::string out = render_fixture("mistral-v0.1", kConversation, "<s>", "</s>");
  EXPECT_TRUE(contains(out, "Conversation roles must alternate")) << out;
  EXPECT_EQ(render_fixture("mistral-v0.1", {{"user", "Hi"}, {"assistant", "Yo"}, {"user", "Q"}}, "<s>", "</s>"),
            "<s>[INST] Hi [/INST]Yo</s> [INST] Q [/INST]");
}

}  // namespace
}  // namespace pagoda
