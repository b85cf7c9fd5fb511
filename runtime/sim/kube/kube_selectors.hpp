// Label and field selectors as the API server parses them from list and watch
// queries, and metav1.LabelSelector objects (a PodDisruptionBudget's selector).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/sim/kube/kube_object_store.hpp"

namespace vigil::kube {

/// One requirement of a label selector.
struct label_requirement {
  enum class op { equals, not_equals, in, not_in, exists, not_exists, greater, less };
  std::string key;
  op operation = op::exists;
  std::vector<std::string> values; ///< one for equals/not_equals/greater/less

  /// `labels` is metadata.labels (null or absent means no labels).
  bool matches(const json& labels) const;
};

struct label_selector {
  std::vector<label_requirement> requirements; ///< all must hold; none: everything
  bool selects_nothing = false;                ///< a null LabelSelector object

  /// Parses the query form ("a=b,c!=d,e in (x,y),f notin (z),g,!h,n>3");
  /// nullopt and a 400 BadRequest naming the term when malformed.
  static std::optional<label_selector> parse(const std::string& text, api_status& error);
  /// From a metav1.LabelSelector object (matchLabels, matchExpressions with
  /// In, NotIn, Exists, DoesNotExist): null selects nothing, {} everything.
  static std::optional<label_selector> from_object(const json& selector,
                                                   api_status& error);

  bool matches_labels(const json& labels) const;
  /// Matches an object by its metadata.labels.
  bool matches(const json& object) const;
};

/// One requirement of a field selector: path = value or path != value.
struct field_requirement {
  std::string path;
  bool negated = false;
  std::string value;
};

struct field_selector {
  std::vector<field_requirement> requirements; ///< all must hold

  /// Parses "path=value,path==value,path!=value" (backslash escapes ',' '='
  /// '!' and '\'); nullopt and a 400 BadRequest naming the term when malformed.
  static std::optional<field_selector> parse(const std::string& text, api_status& error);
  bool matches(const json& object) const;
};

/// The value at a dotted JSON path as the server's field sets render it:
/// strings as they are, booleans "true"/"false", numbers in decimal, "" when absent.
std::string field_value(const json& object, const std::string& dotted_path);

/// Both selectors of a list or watch request.
struct object_filter {
  label_selector labels;
  field_selector fields;

  static std::optional<object_filter> parse(const list_options& options,
                                            api_status& error);
  bool matches(const json& object) const {
    return labels.matches(object) && fields.matches(object);
  }
};

} // namespace vigil::kube
