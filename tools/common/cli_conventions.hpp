#pragma once
// What every ringrpc command line shares: `--version` prints "TOOL VERSION" and exits 0, and a
// usage error exits 2 whatever CLI11 calls it (its own codes, 105 for a bad value, 109 for an
// extra argument and so on, never become the exit status). Header-only: ringrpc-gen, which a
// subproject builds without the other tools, includes it too.

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "ringrpc/version.hpp"

namespace ringrpc::tools {

/// The exit status of every usage error, for the tools' --help epilogues.
inline constexpr std::string_view usage_exit_line =
    "2 usage: an unknown option, a bad or missing value, an extra argument\n"
    "    (CLI11's own codes such as 105 and 109 are reported as 2)";

/// The name in "Usage: NAME ..." (not argv[0], so man pages made from --help show no build
/// path) and `--version`.
inline void set_name_and_version(CLI::App& app, std::string_view tool) {
  app.name(std::string(tool));
  app.set_version_flag("--version", std::string(tool).append(" ").append(ringrpc::version()),
                       "print the version and exit");
}

/// What main() returns for a ParseError: 0 for --help and --version (CLI11 prints them), 2 for
/// any usage error (CLI11 prints its message first).
inline int parse_error_exit(CLI::App& app, const CLI::ParseError& e) {
  return app.exit(e) == 0 ? 0 : 2;
}

}  // namespace ringrpc::tools
