// libFuzzer target: arbitrary text as a configuration file, through parse_config (toml++ and
// every check of every section), the way ringrpc-server reads --config.
//
// Invariants checked (abort on violation):
//  - the only exception is config_error;
//  - a config that parses is described as TOML that parses again, to the same description
//    (describe() promises text that parse_config gives back), and validate() accepts it;
//  - the JSON description is valid JSON (nlohmann parses it back).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "ringrpc/config.hpp"

namespace {

// What ringrpc-server names: parse_config checks [events.queues] against them.
constexpr std::string_view queue_names[] = {"log", "metrics"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The file reader refuses more than this; beyond it only toml++'s time would be measured.
  if (size > ringrpc::max_config_file_bytes) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ringrpc::server_config cfg;
  try {
    cfg = ringrpc::parse_config(text, "fuzz.toml", queue_names);
  } catch (const ringrpc::config_error&) {
    return 0;
  }
  const std::string described = ringrpc::describe(cfg);
  ringrpc::server_config again;
  try {
    again = ringrpc::parse_config(described, "described", queue_names);
    ringrpc::validate(cfg, queue_names);
  } catch (const ringrpc::config_error& e) {
    std::fprintf(stderr, "config_fuzz: the description of a valid config is refused: %s\n%s\n", e.what(),
                 described.c_str());
    std::abort();
  }
  FUZZ_CHECK(ringrpc::describe(again) == described);
  const std::string json = ringrpc::describe(cfg, ringrpc::config_text_format::json);
  FUZZ_CHECK(nlohmann::json::accept(json));
  return 0;
}
