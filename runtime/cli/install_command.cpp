#include "runtime/cli/install_command.hpp"

#include <fstream>
#include <ostream>
#include <sstream>

#include "runtime/install/install_manifests.hpp"

namespace vigil {

std::vector<option_spec> install_option_specs() {
  return {
    {"namespace", "NS",
     "where the control plane and agents go (default: control.lease_namespace, vigil)"},
    {"image", "REF", "the vigil image (default: vigil:<version>)"},
    {"output", "yaml|json", "a YAML stream (default) or one JSON v1 List"},
    {"dcgm-url", "URL|none",
     "the agents' dcgm-exporter page; $(HOST_IP) is each node's IP (default "
     "http://$(HOST_IP):9400/metrics: an exporter on the host network or with hostPort "
     "9400; none: the agents read no exporter)"},
  };
}

int run_install(command_context& ctx) {
  auto fail = [&](const failure& f) {
    ctx.err << "vigil install: " << f.to_string() << "\n";
    return 1;
  };
  install::install_options options;
  options.namespace_name = ctx.args.value("namespace").value_or("");
  options.image = ctx.args.value("image").value_or("");
  options.dcgm_url =
    ctx.args.value("dcgm-url").value_or(std::string(install::default_dcgm_url));
  const auto output = ctx.args.value("output").value_or("yaml");
  if (output != "yaml" && output != "json")
    return fail({"--output", "'" + output + "' is not yaml or json"});
  if (auto path = ctx.args.value("config")) {
    std::ifstream in(*path);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in)
      return fail({*path, "cannot be read"});
    options.config_text = text.str();
    options.config_source = *path;
  }
  auto result = install::install_manifests(options);
  if (!result)
    return fail(result.error());
  for (const auto& note : result->notes)
    ctx.err << "vigil install: " << note << "\n";
  if (output == "json") {
    install::object list = {
      {"apiVersion", "v1"}, {"kind", "List"}, {"items", install::object::array()}};
    for (const auto& m : result->manifests)
      list["items"].push_back(m.body);
    ctx.out << list.dump(2) << "\n";
  } else {
    ctx.out << "# vigil install"
            << (options.config_text.empty() ? "" : " --config " + options.config_source)
            << ": every object vigil needs. Apply with `kubectl apply -f -`.\n"
            << install::to_yaml_stream(result->manifests);
  }
  return 0;
}

} // namespace vigil
