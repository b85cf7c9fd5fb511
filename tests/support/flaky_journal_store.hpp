// A real journal store that fails the next `failures` appends, slot
// claims or releases and cordon claims, like a database outage, for the actor tests of
// the journal, ingest and the breaker.
#pragma once

#include <memory>

#include "runtime/journal/journal_store.hpp"

namespace vigil::test {

class flaky_journal_store final : public journal_store {
public:
  explicit flaky_journal_store(std::unique_ptr<journal_store> inner)
    : inner_(std::move(inner)) {}
  int failures = 0;
  status open() override { return inner_->open(); }
  expected<std::vector<append_outcome>>
  append(const std::vector<journal_record>& batch) override {
    if (failures > 0) {
      --failures;
      return failure{"test", "connection refused"};
    }
    return inner_->append(batch);
  }
  expected<std::vector<journal_record>> read(const journal_query& q) override {
    return inner_->read(q);
  }
  expected<journal_tail_page> tail(const journal_position& after, std::size_t limit,
                                   const tail_filter& filter) override {
    return inner_->tail(after, limit, filter);
  }
  expected<journal_pruned> prune(const journal_prune& round) override {
    return inner_->prune(round);
  }
  void set_tail_routing(tail_routing routing) override {
    inner_->set_tail_routing(std::move(routing));
  }
  expected<slot_claim> claim_slot(const std::string& pool, const std::string& node,
                                  wall_time now, const slot_rule& admits) override {
    if (failures > 0) {
      --failures;
      return failure{"test", "connection refused"};
    }
    return inner_->claim_slot(pool, node, now, admits);
  }
  status release_slot(const std::string& node) override {
    if (failures > 0) {
      --failures;
      return failure{"test", "connection refused"};
    }
    return inner_->release_slot(node);
  }
  expected<std::vector<std::string>> slot_holders() override {
    return inner_->slot_holders();
  }
  expected<cordon_claim> claim_cordon(const cordon_ask& ask) override {
    if (failures > 0) {
      --failures;
      return failure{"test", "connection refused"};
    }
    return inner_->claim_cordon(ask);
  }
  expected<cordon_window_reset> reset_cordon_window() override {
    if (failures > 0) {
      --failures;
      return failure{"test", "connection refused"};
    }
    return inner_->reset_cordon_window();
  }
  status put_fleet_snapshot(const fleet_snapshot& s) override {
    return inner_->put_fleet_snapshot(s);
  }
  expected<fleet_snapshot> latest_fleet_snapshot() override {
    return inner_->latest_fleet_snapshot();
  }
  status put_snapshot(const journal_snapshot& s) override {
    return inner_->put_snapshot(s);
  }
  expected<std::optional<journal_snapshot>> latest_snapshot() override {
    return inner_->latest_snapshot();
  }
  expected<std::int64_t> last_seq() override { return inner_->last_seq(); }
  void close() override {}
  std::string describe() const override { return "flaky"; }

private:
  std::unique_ptr<journal_store> inner_;
};

} // namespace vigil::test
