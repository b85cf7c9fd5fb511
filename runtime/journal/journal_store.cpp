#include "runtime/journal/journal_store.hpp"

namespace vigil {

expected<std::unique_ptr<journal_store>> make_journal_store(const std::string& url) {
  if (url.rfind("sqlite:", 0) == 0) {
    auto path = url.substr(7);
    if (path.empty())
      return failure{"journal url", "sqlite: needs a file path (sqlite:PATH)"};
    return make_sqlite_journal_store(std::move(path));
  }
  if (url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0)
    return make_pq_journal_store(url);
  return failure{"journal url",
                 "'" + url + "' is neither sqlite:PATH nor postgresql://…"};
}

} // namespace vigil
