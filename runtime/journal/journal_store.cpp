#include "runtime/journal/journal_store.hpp"

#include <algorithm>
#include <charconv>

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

std::vector<std::int64_t> rows_to_prune(const journal_prune& round,
                                        const std::vector<journal_position>& scanned) {
  std::vector<std::int64_t> doomed;
  for (const auto& at : scanned)
    if (!(round.through < at)
        && !std::binary_search(round.keep.begin(), round.keep.end(), at.seq))
      doomed.push_back(at.seq);
  return doomed;
}

std::string seq_list(const std::vector<std::int64_t>& seqs) {
  std::string out;
  out.reserve(seqs.size() * 9);
  for (auto seq : seqs) {
    if (!out.empty())
      out += ',';
    out += std::to_string(seq);
  }
  return out;
}

expected<std::vector<std::int64_t>> parse_seq_list(const std::string& text) {
  std::vector<std::int64_t> out;
  const char* at = text.data();
  const char* end = text.data() + text.size();
  while (at < end) {
    std::int64_t seq = 0;
    auto [next, err] = std::from_chars(at, end, seq);
    if (err != std::errc{} || (next < end && *next != ','))
      return failure{"row list",
                     "not a seq at character " + std::to_string(at - text.data())};
    out.push_back(seq);
    at = next < end ? next + 1 : end;
  }
  return out;
}

cordon_claim decide_cordon(const cordon_ask& ask, wall_time now,
                           const std::optional<std::pair<wall_time, std::string>>& trip,
                           std::size_t counted, bool holds) {
  cordon_claim claim;
  claim.counted = counted;
  claim.decided_at = now;
  if (trip) {
    claim.tripped = true;
    claim.tripped_at = trip->first;
    claim.reason = trip->second;
    return claim;
  }
  if (holds) {
    claim.granted = true;
    return claim;
  }
  if (auto reason = ask.over_limit ? ask.over_limit(counted + 1) : std::nullopt) {
    claim.tripped = claim.trips_now = true;
    claim.tripped_at = now;
    claim.reason = std::move(*reason);
    return claim;
  }
  claim.granted = true;
  claim.counted = counted + 1;
  return claim;
}

} // namespace vigil
