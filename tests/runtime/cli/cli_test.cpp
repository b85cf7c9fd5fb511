#include "runtime/cli/cli.hpp"

#include <sstream>

#include <gtest/gtest.h>

namespace vigil {
namespace {

struct cli_result {
  int code;
  std::string out;
  std::string err;
};

cli_result run(const std::vector<std::string>& args) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

TEST(cli, help_lists_every_subcommand) {
  auto r = run({"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char* name : {"agent", "control", "breaker", "janitor", "demo", "replay",
                           "parse", "nic", "version"})
    EXPECT_NE(r.out.find("  " + std::string(name)), std::string::npos) << name;
}

TEST(cli, every_subcommand_has_help) {
  for (const auto& cmd : subcommands()) {
    auto r = run({cmd.name, "--help"});
    EXPECT_EQ(r.code, 0) << cmd.name;
    EXPECT_NE(r.out.find("Usage: vigil " + cmd.name), std::string::npos) << cmd.name;
    EXPECT_NE(r.out.find("--config"), std::string::npos) << cmd.name;
  }
  EXPECT_NE(run({"parse", "--help"}).out.find("kmsg|dcgm|topo"), std::string::npos);
  EXPECT_NE(run({"nic", "--help"}).out.find("--sysfs-root"), std::string::npos);
}

TEST(cli, bad_usage_exits_2_with_one_line) {
  const std::vector<std::vector<std::string>> cases = {
    {},
    {"frobnicate"},
    {"version", "--nope"},
    {"replay", "--journal"},
    {"version", "--help=yes"},
    {"parse"},
    {"parse", "xml"},
    {"nic", "probe"},
    {"version", "--log-format", "xml"},
    {"version", "--config", "/nonexistent.yaml"},
    // an option the chosen demo would ignore
    {"demo", "--days", "3"},
    {"demo", "--nodes", "3"}, // the built-in scenario names node 6
    {"demo", "--fleet", "--scenario", "x.yaml"},
    {"demo", "--serve", "--json"},
  };
  for (const auto& args : cases) {
    auto r = run(args);
    EXPECT_EQ(r.code, 2) << (args.empty() ? "" : args[0]);
    if (!args.empty()) {
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  EXPECT_NE(run({"frobnicate"}).err.find("unknown command 'frobnicate'"),
            std::string::npos);
  EXPECT_NE(run({"version", "--nope"}).err.find("--nope: unknown option"),
            std::string::npos);
  EXPECT_NE(run({"replay", "--journal"}).err.find("--journal: needs a value"),
            std::string::npos);
}

TEST(cli, version_and_demo_run) {
  auto v = run({"version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("vigil ", 0), 0u);
  EXPECT_EQ(run({"demo", "--log-format=text"}).code, 0);
}

TEST(cli, breaker_reset_needs_its_verb_and_url_and_names_what_failed) {
  auto no_verb = run({"breaker"});
  EXPECT_EQ(no_verb.code, 2);
  EXPECT_NE(no_verb.err.find("expected 'reset'"), std::string::npos) << no_verb.err;
  auto no_url = run({"breaker", "reset"});
  EXPECT_EQ(no_url.code, 2);
  EXPECT_NE(no_url.err.find("--url"), std::string::npos) << no_url.err;
  auto no_token = run({"breaker", "reset", "--url", "http://127.0.0.1:1", "--token-file",
                       "/nonexistent/token"});
  EXPECT_EQ(no_token.code, 1);
  EXPECT_NE(no_token.err.find("/nonexistent/token"), std::string::npos) << no_token.err;
  auto refused = run({"breaker", "reset", "--url", "http://127.0.0.1:1"});
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("http://127.0.0.1:1/v1/breaker/reset"), std::string::npos)
    << refused.err;
}

TEST(cli, janitor_names_an_unreadable_kubeconfig) {
  auto r = run({"janitor", "--kubeconfig", "/nonexistent/kubeconfig"});
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("/nonexistent/kubeconfig"), std::string::npos) << r.err;
}

// Bad settings stop `vigil control` before anything starts, naming the key or file.
TEST(cli, control_refuses_bad_settings_by_name) {
  auto listen = run({"control", "--listen=nonsense"});
  EXPECT_EQ(listen.code, 1);
  EXPECT_NE(listen.err.find("control.listen"), std::string::npos) << listen.err;
  auto token =
    run({"control", "--listen=127.0.0.1:0", "--token-file=/nonexistent/token"});
  EXPECT_EQ(token.code, 1);
  EXPECT_NE(token.err.find("/nonexistent/token"), std::string::npos) << token.err;
  // HTTPS unless plain HTTP is asked for by name.
  auto no_certificate = run({"control", "--listen=127.0.0.1:0"});
  EXPECT_EQ(no_certificate.code, 1);
  EXPECT_NE(no_certificate.err.find("control.tls_cert_file: not set"), std::string::npos)
    << no_certificate.err;
  EXPECT_NE(no_certificate.err.find("control.plain_http"), std::string::npos)
    << no_certificate.err;
}

TEST(cli, options_parse_both_forms) {
  std::vector<option_spec> specs{{"node", "NAME", ""}, {"once", "", ""}};
  auto a = parse_command_line(specs, {"scan", "--node=n1", "--once", "--", "--literal"});
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->value("node"), "n1");
  EXPECT_TRUE(a->has("once"));
  EXPECT_EQ(a->positional, (std::vector<std::string>{"scan", "--literal"}));
  auto b = parse_command_line(specs, {"--node", "n2"});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->value("node"), "n2");
}

} // namespace
} // namespace vigil
