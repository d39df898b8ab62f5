// YAML read as a JSON value (src/core/yaml_value): the shapes kubeconfigs use (block and flow
// mappings and sequences, quoted and multi-line scalars, anchors), errors with their line and
// column, and documents built to exhaust the reader (an alias bomb, an alias to itself).
#include <fiber/error.hpp>
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <string>

#include "core/yaml_value.hpp"
#include "support.hpp"

namespace {

using fiber::detail::parse_yaml;

TEST(yaml_value, mappings_sequences_and_scalars_become_objects_arrays_and_strings) {
  auto v = parse_yaml(R"(apiVersion: v1
current-context: "kind-fiber"
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}
users:
  - name: u
    user:
      exec:
        args: [a, "b c", 7]
        command: |
          kubectl
)",
                      "the test");
  EXPECT_EQ(boost::json::serialize(v),
            R"({"apiVersion":"v1","current-context":"kind-fiber","clusters":[{"name":"c","cluster":{"server":)"
            R"("https://127.0.0.1:6443","insecure-skip-tls-verify":"true"}}],"users":[{"name":"u","user":{"exec":)"
            R"({"args":["a","b c","7"],"command":"kubectl\n"}}}]})");
}

TEST(yaml_value, an_empty_text_is_null_and_only_the_first_document_is_read) {
  EXPECT_TRUE(parse_yaml("", "the test").is_null());
  EXPECT_EQ(boost::json::serialize(parse_yaml("a: 1\n---\nb: 2\n", "the test")), R"({"a":"1"})");
}

TEST(yaml_value, anchors_are_expanded_and_a_later_duplicate_key_wins) {
  auto v = parse_yaml("base: &b {x: 1}\nuse: *b\nk: first\nk: second\n", "the test");
  EXPECT_EQ(boost::json::serialize(v), R"({"base":{"x":"1"},"use":{"x":"1"},"k":"second"})");
}

TEST(yaml_value, a_syntax_error_names_the_document_its_line_and_column) {
  fiber_test::expect_error([] { (void)parse_yaml("a: 1\nb: [unclosed\nc: 2\n", "the kubeconfig /x"); },
                           fiber::errc::config_error, {"the kubeconfig /x is not valid YAML", "line "});
}

TEST(yaml_value, a_key_that_is_a_mapping_is_refused) {
  fiber_test::expect_error([] { (void)parse_yaml("? {a: 1}\n: v\n", "the test"); }, fiber::errc::config_error,
                           {"key that is not a plain value", "line 1"});
}

TEST(yaml_value, an_alias_bomb_stops_at_the_node_limit_instead_of_filling_memory) {
  // Each level doubles the last: 2^40 nodes written out.
  std::string text = "l0: &l0 [x, x]\n";
  for (int i = 1; i <= 40; ++i)
    text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [*l" + std::to_string(i - 1) + ", *l" +
            std::to_string(i - 1) + "]\n";
  fiber_test::expect_error([&] { (void)parse_yaml(text, "the test", 100'000); }, fiber::errc::config_error,
                           "expands past 100000 nodes");
}

TEST(yaml_value, an_alias_inside_its_own_anchor_stops_at_the_depth_limit) {
  fiber_test::expect_error([] { (void)parse_yaml("a: &self [*self]\n", "the test"); }, fiber::errc::config_error,
                           "nests deeper than");
}

}  // namespace
