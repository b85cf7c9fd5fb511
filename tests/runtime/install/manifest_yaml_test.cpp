// The YAML printer of `vigil install`: whatever it prints reads back, through
// a YAML reader typed as Kubernetes types it, as exactly what was printed.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/install/manifest_yaml.hpp"

namespace vigil::install {
namespace {

object round_trip(const object& value) {
  return yaml_to_json(YAML::Load(to_yaml(value)));
}

const std::vector<std::string>& tricky_strings() {
  static const std::vector<std::string> strings{"true",
                                                "True",
                                                "yes",
                                                "no",
                                                "on",
                                                "off",
                                                "y",
                                                "n",
                                                "null",
                                                "~",
                                                "Null",
                                                "8443",
                                                "-1",
                                                "0.5",
                                                ".5",
                                                "1e3",
                                                "0x1F",
                                                "0o17",
                                                "017",
                                                "1_000",
                                                "60:30",
                                                ".inf",
                                                "",
                                                " leading",
                                                "trailing ",
                                                "a: b",
                                                "a:b",
                                                "#hash",
                                                "a #b",
                                                "- dash",
                                                "-",
                                                "*star",
                                                "&anchor",
                                                "!tag",
                                                "%percent",
                                                "@at",
                                                "`tick",
                                                "{brace}",
                                                "[bracket]",
                                                "'single'",
                                                "\"double\"",
                                                "10%",
                                                "1Gi",
                                                "v1",
                                                "nvidia.com/gpu.present",
                                                "key=value",
                                                "tab\there",
                                                "caf\xc3\xa9",
                                                "two\nlines",
                                                "two\nlines\n",
                                                "kept\n\n\n",
                                                "\nleading newline",
                                                "trailing blank \nline",
                                                "  indented\nsecond",
                                                "first\n  indented second\n",
                                                "windows\r\nline",
                                                "bell\x07",
                                                "a|b",
                                                "a > b",
                                                "?question",
                                                "ends with colon:",
                                                "https://vigil-control.vigil.svc:8443",
                                                "--token-file=/var/run/vigil/token"};
  return strings;
}

TEST(manifest_yaml, every_string_reads_back_as_itself) {
  for (const auto& text : tricky_strings()) {
    object value = {{"key", text}, {"list", object::array({text, text})}};
    EXPECT_EQ(round_trip(value), value) << "'" << text << "' printed as\n"
                                        << to_yaml(value);
    object keyed = {{text.empty() ? "empty" : text, 1}};
    if (text.find('\n') == std::string::npos && text.find('\r') == std::string::npos) {
      EXPECT_EQ(round_trip(keyed), keyed) << "key '" << text << "'\n" << to_yaml(keyed);
    }
  }
}

TEST(manifest_yaml, numbers_booleans_null_and_empty_collections_keep_their_type) {
  object value = {{"int", 8443},
                  {"negative", -3},
                  {"float", 0.25},
                  {"true", true},
                  {"false", false},
                  {"null", nullptr},
                  {"map", object::object()},
                  {"list", object::array()},
                  {"nested", {{"a", object::array({1, "1", true, "true"})}}}};
  EXPECT_EQ(round_trip(value), value) << to_yaml(value);
}

TEST(manifest_yaml, lists_of_maps_and_lists_of_lists) {
  object value = {
    {"containers",
     object::array({{{"name", "agent"}, {"args", object::array({"a", "--b=c"})}},
                    {{"name", "second"}, {"ports", object::array({{{"port", 1}}})}}})},
    {"matrix", object::array({object::array({1, 2}), object::array({"x"})})}};
  EXPECT_EQ(round_trip(value), value) << to_yaml(value);
}

TEST(manifest_yaml, multi_line_text_is_a_literal_block_and_keys_keep_their_order) {
  object value = {{"zeta", 1}, {"script", "#!/bin/sh\necho hi\n"}, {"alpha", 2}};
  const auto text = to_yaml(value);
  EXPECT_EQ(text, "zeta: 1\nscript: |\n  #!/bin/sh\n  echo hi\nalpha: 2\n");
}

TEST(manifest_yaml, quoted_scalars_are_strings_plain_ones_are_typed) {
  auto value = parse_yaml(
    "a: \"8443\"\nb: 8443\nc: 'true'\nd: yes\ne: ~\nf: 1.5\ng: text\n", "test");
  EXPECT_EQ(value["a"], "8443");
  EXPECT_EQ(value["b"], 8443);
  EXPECT_EQ(value["c"], "true");
  EXPECT_EQ(value["d"], true);
  EXPECT_TRUE(value["e"].is_null());
  EXPECT_EQ(value["f"], 1.5);
  EXPECT_EQ(value["g"], "text");
}

TEST(manifest_yaml, bad_yaml_names_what_and_the_line) {
  try {
    parse_yaml("a: 1\nb: [unclosed\n", "crds/x.yaml");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("crds/x.yaml: line"), std::string::npos)
      << e.what();
  }
}

TEST(manifest_yaml, a_stream_has_comments_and_separators) {
  std::vector<manifest> manifests{{"first\n\nafter a blank", {{"kind", "A"}}},
                                  {"", {{"kind", "B"}}}};
  EXPECT_EQ(to_yaml_stream(manifests),
            "# first\n#\n# after a blank\nkind: A\n---\nkind: B\n");
  std::vector<object> documents;
  for (const auto& doc : YAML::LoadAll(to_yaml_stream(manifests)))
    documents.push_back(yaml_to_json(doc));
  ASSERT_EQ(documents.size(), 2u);
  EXPECT_EQ(documents[1]["kind"], "B");
}

} // namespace
} // namespace vigil::install
