// JsonLocator: where in a JSON text a value, a repeated key or too deep a nesting is, so that a
// reader's messages name the line (core/json_locator.h).
#include "placelab/core/json_locator.h"

#include <string>

#include <gtest/gtest.h>

namespace placelab {
namespace {

TEST(JsonLocator, FindsTheLineOfNestedValues) {
  const std::string text =
      "{\n"                 // 1
      "  \"a\": 1,\n"       // 2
      "  \"list\": [\n"     // 3
      "    {\"x\": 1},\n"   // 4
      "    {\"x\": 2,\n"    // 5
      "     \"y\": [10,\n"  // 6
      "           20]}\n"   // 7
      "  ],\n"              // 8
      "  \"s/l~\": \"v\"\n" // 9
      "}\n";
  JsonLocator where(text);
  EXPECT_EQ(where.line_of(""), 1);
  EXPECT_EQ(where.line_of("/a"), 2);
  EXPECT_EQ(where.line_of("/list"), 3);
  EXPECT_EQ(where.line_of("/list/0"), 4);
  EXPECT_EQ(where.line_of("/list/0/x"), 4);
  EXPECT_EQ(where.line_of("/list/1"), 5);
  EXPECT_EQ(where.line_of("/list/1/y"), 6);
  EXPECT_EQ(where.line_of("/list/1/y/1"), 7);
  EXPECT_EQ(where.line_of("/s~1l~0"), 9);
  // Pointers that lead nowhere stop at the deepest value that exists.
  EXPECT_EQ(where.line_of("/list/1/z"), 5);
  EXPECT_EQ(where.line_of("/list/7"), 3);
  EXPECT_EQ(where.line_of("/list/01"), 3);
  EXPECT_EQ(where.line_of("/a/b"), 2);
  EXPECT_EQ(where.line_of("/nope"), 1);
}

TEST(JsonLocator, FindsWhereNestingGoesTooDeep) {
  const std::string text = "{\"a\": [1,\n [[\"[[[[\"]]]]}";  // brackets inside a string do not count
  // The string sits inside four containers: the object, "a" and two arrays.
  EXPECT_EQ(JsonLocator(text).first_byte_deeper_than(4), std::nullopt);
  EXPECT_EQ(JsonLocator(text).first_byte_deeper_than(3), text.find('"', 7));
  const auto at = JsonLocator(text).first_byte_deeper_than(2);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(text[*at], '[');
  EXPECT_EQ(JsonLocator(text).line_of_byte(*at), 2);
  // The first value inside 513 brackets is the 514th '['.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(JsonLocator(deep).first_byte_deeper_than(kMaxJsonDepth), kMaxJsonDepth + 1);
}

TEST(JsonLocator, IgnoresBracketsQuotesAndCommasInsideStrings) {
  const std::string text =
      "{\"a\": \"}]\\\"{[,\",\n"       // 1: a string full of structure characters
      " \"b\\u0063\": {\"k\": \"\\\\\"},\n"  // 2: the key "bc", escaped
      " \"t\": [\n"                     // 3
      "  \"x,y\", \"]\",\n"             // 4
      "  true]}";                       // 5
  JsonLocator where(text);
  EXPECT_EQ(where.line_of("/bc"), 2);
  EXPECT_EQ(where.line_of("/bc/k"), 2);
  EXPECT_EQ(where.line_of("/t/0"), 4);
  EXPECT_EQ(where.line_of("/t/1"), 4);
  EXPECT_EQ(where.line_of("/t/2"), 5);
  EXPECT_FALSE(where.find_duplicate_key());
}

TEST(JsonLocator, SkipsAByteOrderMarkAndLeadingBlankLines) {
  const std::string text = "\xEF\xBB\xBF\n\n  {\"a\":\n 1}";
  JsonLocator where(text);
  EXPECT_EQ(where.line_of(""), 3);
  EXPECT_EQ(where.line_of("/a"), 4);
}

TEST(JsonLocator, NeverReadsPastTheEndOfMalformedText) {
  for (std::string text : {"{\"a\": [1, 2", "{\"a", "[\"\\", "{\"a\": {\"b\": \"\\u12", "", "]]]", "{\"a\" 1}"}) {
    JsonLocator where(text);
    EXPECT_GE(where.line_of("/a/b/3"), 1) << text;
    EXPECT_FALSE(where.find_duplicate_key()) << text;
  }
}

TEST(JsonLocator, FindsTheFirstRepeatedKeyWithItsPointerAndLine) {
  const std::string text =
      "{\"ops\": [\n"
      "  {\"name\": \"a\", \"flops\": 1},\n"
      "  {\"name\": \"b\",\n"
      "   \"flops\": 2, \"flops\": 3}]}";
  auto dup = JsonLocator(text).find_duplicate_key();
  ASSERT_TRUE(dup);
  EXPECT_EQ(dup->pointer, "/ops/1/flops");
  EXPECT_EQ(dup->line, 4);

  EXPECT_FALSE(JsonLocator(R"({"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 1}], "d": {}})").find_duplicate_key());
  // Keys are compared after unescaping; pointers escape "/" and "~".
  auto escaped = JsonLocator(R"({"a": 1, "\u0061": 2})").find_duplicate_key();
  ASSERT_TRUE(escaped);
  EXPECT_EQ(escaped->pointer, "/a");
  auto slashed = JsonLocator(R"({"p": [[], {"x/y": 1, "x/y": 2}]})").find_duplicate_key();
  ASSERT_TRUE(slashed);
  EXPECT_EQ(slashed->pointer, "/p/1/x~1y");
  auto nested = JsonLocator(R"([[{"k": 1}], [{"j": [], "k": {}, "k": 2}]])").find_duplicate_key();
  ASSERT_TRUE(nested);
  EXPECT_EQ(nested->pointer, "/1/0/k");
}

TEST(JsonLocator, PointerAtAByteIsTheValueStartingThereOrBefore) {
  const std::string text = "{\"a\": [10, {\"b\": 2345}], \"c\": 6}";
  JsonLocator where(text);
  EXPECT_EQ(where.pointer_at_byte(0), "");
  EXPECT_EQ(where.pointer_at_byte(text.find("10") + 1), "/a/0");
  EXPECT_EQ(where.pointer_at_byte(text.find("2345") + 3), "/a/1/b");
  EXPECT_EQ(where.pointer_at_byte(text.find("6")), "/c");
  EXPECT_EQ(where.pointer_at_byte(text.size() + 10), "/c");
}

TEST(JsonLocator, LineAndColumnOfAByte) {
  JsonLocator where("ab\ncd");
  EXPECT_EQ(where.line_of_byte(0), 1);
  EXPECT_EQ(where.column_of_byte(0), 1);
  EXPECT_EQ(where.line_of_byte(2), 1);  // the newline belongs to the line it ends
  EXPECT_EQ(where.column_of_byte(2), 3);
  EXPECT_EQ(where.line_of_byte(3), 2);
  EXPECT_EQ(where.column_of_byte(3), 1);
  EXPECT_EQ(where.column_of_byte(4), 2);
  EXPECT_EQ(where.line_of_byte(100), 2);  // clamped
  EXPECT_EQ(where.column_of_byte(100), 3);
}

TEST(JsonLocator, PointerTokensEscapeTildeAndSlash) {
  EXPECT_EQ(json_pointer_token("a/b~c"), "a~1b~0c");
  EXPECT_EQ(json_pointer_token("plain"), "plain");
}

}  // namespace
}  // namespace placelab
