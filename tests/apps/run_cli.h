// Runs the `placelab` binary the way a user does, for the end-to-end tests of tests/apps.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace placelab::testing {

struct CliResult {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// Runs a shell command line, capturing both streams.
inline CliResult shell(const std::string& command_line) {
  const std::string cmd = command_line + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf{};
  while (std::size_t n = fread(buf.data(), 1, buf.size(), pipe)) r.out.append(buf.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

// Runs `placelab <args>` through the shell (PLACELAB_CLI is the built binary), capturing both streams.
inline CliResult placelab(const std::string& args) { return shell(std::string(PLACELAB_CLI) + " " + args); }

}  // namespace placelab::testing
