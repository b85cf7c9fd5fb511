// Real databases for tests: a fresh PostgreSQL database on the server that
// scripts/with-postgres started, or a fresh SQLite file in a temporary directory.
#pragma once

#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

#include <libpq-fe.h>
#include <unistd.h>

#include "tests/support/fresh_directory.hpp"

namespace vigil::test {

/// The server's URL, or "" when the tests run without scripts/with-postgres.
inline std::string postgres_server_url() {
  const char* url = std::getenv("VIGIL_TEST_POSTGRES_URL");
  return url != nullptr ? url : "";
}

inline std::string unique_name(const std::string& prefix) {
  std::random_device rd;
  return prefix + std::to_string(getpid()) + "_" + std::to_string(rd() % 1000000000);
}

/// Creates an empty database and returns its URL; "" without a server. From
/// template0, which takes no connections, so parallel tests cannot collide on
/// "template1 is being accessed by other users". Throws when the server is
/// there but refuses: a test must fail then, never skip.
inline std::string
fresh_postgres_database(const std::string& server = postgres_server_url()) {
  if (server.empty())
    return "";
  const auto name = unique_name("vigil_test_");
  PGconn* conn = PQconnectdb(server.c_str());
  PGresult* res =
    PQexec(conn, ("CREATE DATABASE " + name + " TEMPLATE template0").c_str());
  const bool created = PQresultStatus(res) == PGRES_COMMAND_OK;
  const std::string problem = PQerrorMessage(conn);
  PQclear(res);
  PQfinish(conn);
  if (!created)
    throw std::runtime_error("cannot create a test database: " + problem);
  return server.substr(0, server.rfind('/') + 1) + name;
}

/// Runs one of the with-postgres control scripts (VIGIL_TEST_PG_STOP/START).
inline bool run_postgres_control(const char* variable) {
  const char* script = std::getenv(variable);
  return script != nullptr && std::system(script) == 0;
}

} // namespace vigil::test
