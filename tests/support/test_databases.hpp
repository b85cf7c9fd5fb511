// Real databases for tests: a fresh PostgreSQL database on the server that
// scripts/with-postgres started, or a fresh SQLite file in a temporary directory.
#pragma once

#include <cstdlib>
#include <random>
#include <string>

#include <libpq-fe.h>
#include <unistd.h>

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

/// Creates an empty database and returns its URL; "" without a server.
inline std::string fresh_postgres_database() {
  const auto server = postgres_server_url();
  if (server.empty())
    return "";
  const auto name = unique_name("vigil_test_");
  PGconn* conn = PQconnectdb(server.c_str());
  PGresult* res = PQexec(conn, ("CREATE DATABASE " + name).c_str());
  const bool created = PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  PQfinish(conn);
  if (!created)
    return "";
  return server.substr(0, server.rfind('/') + 1) + name;
}

/// A fresh directory under /tmp, for SQLite files and spools.
inline std::string fresh_directory() {
  std::string pattern = "/tmp/vigil-test.XXXXXX";
  return mkdtemp(pattern.data()) != nullptr ? pattern : "/tmp";
}

/// Runs one of the with-postgres control scripts (VIGIL_TEST_PG_STOP/START).
inline bool run_postgres_control(const char* variable) {
  const char* script = std::getenv(variable);
  return script != nullptr && std::system(script) == 0;
}

} // namespace vigil::test
