// A value or a failure that names what went wrong; the error type of vigil's
// pure code (parsers, decoders, config), which must stay free of CAF headers.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace vigil {

/// What went wrong and where: `where` is a field path ("entitiesImpacted[2]"),
/// a config key ("journal.batch_max_events") or a file name; may be empty.
struct failure {
  std::string where;
  std::string what;

  /// "where: what", or just "what" when there is no location.
  std::string to_string() const { return where.empty() ? what : where + ": " + what; }
};

/// Either a T or a failure. Deliberately tiny: has_value, *, ->, error().
template <class T>
class expected {
public:
  expected(T value) : storage_(std::move(value)) {}
  expected(failure err) : storage_(std::move(err)) {}

  bool has_value() const { return storage_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& operator*() & { return std::get<0>(storage_); }
  const T& operator*() const& { return std::get<0>(storage_); }
  T&& operator*() && { return std::get<0>(std::move(storage_)); }
  T* operator->() { return &std::get<0>(storage_); }
  const T* operator->() const { return &std::get<0>(storage_); }

  const failure& error() const { return std::get<1>(storage_); }

private:
  std::variant<T, failure> storage_;
};

/// Success carries nothing; used by validators.
struct ok_t {};
using status = expected<ok_t>;
inline status ok() {
  return ok_t{};
}

} // namespace vigil
