#include "runtime/sim/kube/kube_patch.hpp"

#include <algorithm>
#include <map>

namespace vigil::kube {

namespace {

// A patch the server refuses; caught in apply_patch and turned into a Status.
struct patch_failure {
  int code;
  std::string reason;
  std::string message;
};

const std::string patch_directive = "$patch";
const std::string retain_keys_directive = "$retainKeys";
const std::string delete_from_list_prefix = "$deleteFromPrimitiveList/";
const std::string element_order_prefix = "$setElementOrder/";

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string directive_of(const json& value) {
  if (!value.is_object())
    return {};
  auto it = value.find(patch_directive);
  return it != value.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

json merge_object(json original, const json& patch, const std::string& path);

// The patch's content where the original has nothing to merge with: nulls
// and directives dropped, list items marked replace/delete left out.
json without_directives(const json& value, const std::string& path) {
  if (value.is_object())
    return merge_object(json::object(), value, path);
  if (!value.is_array())
    return value;
  json out = json::array();
  for (const auto& item : value)
    if (directive_of(item).empty())
      out.push_back(without_directives(item, path));
  return out;
}

json merge_keyed_list(json result, const json& patch, const std::string& path,
                      const std::string& key) {
  for (const auto& item : patch) {
    if (!item.is_object() || !item.contains(key))
      throw patch_failure{422, "Invalid",
                          "map: " + item.dump() + " does not contain declared merge key: "
                            + key + " (at " + path + ")"};
    auto same = std::find_if(result.begin(), result.end(), [&](const json& existing) {
      return existing.is_object() && existing.contains(key) && existing[key] == item[key];
    });
    if (directive_of(item) == "delete") {
      if (same != result.end())
        result.erase(same);
    } else if (same != result.end()) {
      *same = merge_object(*same, item, path);
    } else {
      result.push_back(without_directives(item, path));
    }
  }
  return result;
}

json merge_list(const json& original, const json& patch, const std::string& path) {
  const auto strategy = strategic_list_strategy(path);
  const bool replace_marker =
    std::any_of(patch.begin(), patch.end(),
                [](const json& item) { return directive_of(item) == "replace"; });
  if (replace_marker || strategy.how == list_strategy::kind::replace)
    return without_directives(patch, path);
  if (strategy.how == list_strategy::kind::merge_by_key)
    return merge_keyed_list(original, patch, path, strategy.merge_key);
  json result = original;
  for (const auto& item : patch)
    if (std::find(result.begin(), result.end(), item) == result.end())
      result.push_back(item);
  return result;
}

void delete_from_primitive_list(json& original, const std::string& field,
                                const json& values) {
  auto it = original.find(field);
  if (it == original.end() || !it->is_array() || !values.is_array())
    return;
  json kept = json::array();
  for (const auto& item : *it)
    if (std::find(values.begin(), values.end(), item) == values.end())
      kept.push_back(item);
  *it = std::move(kept);
}

void merge_field(json& original, const std::string& key, const json& value,
                 const std::string& path) {
  auto it = original.find(key);
  if (value.is_null() || directive_of(value) == "delete") {
    original.erase(key);
  } else if (value.is_object()) {
    const bool mergeable = it != original.end() && it->is_object();
    original[key] = merge_object(mergeable ? *it : json::object(), value, path);
  } else if (value.is_array()) {
    const bool mergeable = it != original.end() && it->is_array();
    original[key] = merge_list(mergeable ? *it : json::array(), value, path);
  } else {
    original[key] = value;
  }
}

void retain_keys(json& original, const json& keys) {
  if (!keys.is_array())
    return;
  for (auto it = original.begin(); it != original.end();) {
    if (std::find(keys.begin(), keys.end(), it.key()) == keys.end())
      it = original.erase(it);
    else
      ++it;
  }
}

json merge_object(json original, const json& patch, const std::string& path) {
  if (!original.is_object() || directive_of(patch) == "replace")
    original = json::object();
  for (const auto& [key, value] : patch.items()) {
    if (key == patch_directive || key == retain_keys_directive
        || starts_with(key, element_order_prefix))
      continue;
    if (starts_with(key, delete_from_list_prefix))
      delete_from_primitive_list(original, key.substr(delete_from_list_prefix.size()),
                                 value);
    else
      merge_field(original, key, value, child_path(path, key));
  }
  if (patch.contains(retain_keys_directive))
    retain_keys(original, patch[retain_keys_directive]);
  return original;
}

store_result patch_error(int code, std::string reason, std::string message) {
  store_result result;
  result.error = api_status{code, std::move(reason), std::move(message), nullptr};
  return result;
}

store_result apply_unchecked(const json& target, const json& patch, patch_type kind) {
  switch (kind) {
    case patch_type::merge: {
      if (!patch.is_object())
        return patch_error(400, "BadRequest", "a merge patch must be a JSON object");
      json result = target;
      result.merge_patch(patch);
      return {std::move(result), {}};
    }
    case patch_type::json_patch:
      if (!patch.is_array())
        return patch_error(400, "BadRequest", "a JSON patch must be a JSON array");
      return {target.patch(patch), {}};
    case patch_type::strategic_merge:
      if (!patch.is_object())
        return patch_error(400, "BadRequest",
                           "a strategic merge patch must be a JSON object");
      return {merge_object(target, patch, ""), {}};
  }
  return patch_error(400, "BadRequest", "unknown patch type");
}

} // namespace

list_strategy strategic_list_strategy(const std::string& dotted_path) {
  using kind = list_strategy::kind;
  static const std::map<std::string, list_strategy> strategies = {
    {"metadata.ownerReferences", {kind::merge_by_key, "uid"}},
    {"metadata.finalizers", {kind::merge_primitives, ""}},
    {"status.conditions", {kind::merge_by_key, "type"}},
    {"status.addresses", {kind::merge_by_key, "type"}},
    {"spec.containers", {kind::merge_by_key, "name"}},
    {"spec.initContainers", {kind::merge_by_key, "name"}},
    {"spec.ephemeralContainers", {kind::merge_by_key, "name"}},
    {"spec.volumes", {kind::merge_by_key, "name"}},
    {"spec.imagePullSecrets", {kind::merge_by_key, "name"}},
    {"spec.containers.env", {kind::merge_by_key, "name"}},
    {"spec.initContainers.env", {kind::merge_by_key, "name"}},
    {"spec.containers.ports", {kind::merge_by_key, "containerPort"}},
    {"spec.initContainers.ports", {kind::merge_by_key, "containerPort"}},
    {"spec.containers.volumeMounts", {kind::merge_by_key, "mountPath"}},
    {"spec.initContainers.volumeMounts", {kind::merge_by_key, "mountPath"}},
    {"spec.containers.volumeDevices", {kind::merge_by_key, "devicePath"}},
  };
  const std::string pod_template = "spec.template.";
  const auto path = starts_with(dotted_path, pod_template)
                      ? dotted_path.substr(pod_template.size())
                      : dotted_path;
  auto it = strategies.find(path);
  return it == strategies.end() ? list_strategy{} : it->second;
}

store_result apply_patch(const json& target, const json& patch, patch_type kind) {
  try {
    auto result = apply_unchecked(target, patch, kind);
    if (result.ok() && !result.value->is_object())
      return patch_error(422, "Invalid", "the patched object is not a JSON object");
    return result;
  } catch (const patch_failure& failure) {
    return patch_error(failure.code, failure.reason, failure.message);
  } catch (const json::parse_error& e) {
    return patch_error(400, "BadRequest", std::string{"malformed patch: "} + e.what());
  } catch (const json::exception& e) {
    return patch_error(422, "Invalid",
                       std::string{"the patch cannot be applied: "} + e.what());
  }
}

} // namespace vigil::kube
