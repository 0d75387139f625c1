// The admin server as a newcomer meets it: `/` lists the pages, /metrics carries the process_*
// family and ringrpc_build_info, and `[admin] port` without `enabled = true` is a warning
// naming the key instead of silence.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "log/log.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/ops.hpp"
#include "ringrpc/server.hpp"
#include "ringrpc/version.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

using test::http_get;

double sample(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

server_config admin_on() {
  server_config cfg;
  cfg.server.readers = 1;
  cfg.server.handlers = 1;
  cfg.admin.enabled = true;
  return cfg;
}

TEST(admin_index, slash_lists_the_pages) {
  const auto made = make_server(admin_on());
  server& s = *made;
  s.start();
  const auto [code, body] = http_get(admin_port(s), "/");
  EXPECT_EQ(code, 200);
  for (const char* page : {"/metrics", "/metrics.json", "/status", "/connections", "/healthz", "/readyz"}) {
    EXPECT_NE(body.find(std::string("  ") + page + " "), std::string::npos) << page << " missing from:\n" << body;
  }
  EXPECT_NE(body.find(std::string(version())), std::string::npos);
  s.stop();
}

TEST(admin_index, metrics_have_process_family_and_build_info) {
  const auto made = make_server(admin_on());
  server& s = *made;
  s.start();
  const auto [code, text] = http_get(admin_port(s), "/metrics");
  ASSERT_EQ(code, 200);
  EXPECT_GE(sample(text, "process_cpu_seconds_total"), 0.0) << text;
  EXPECT_GT(sample(text, "process_resident_memory_bytes"), 1e5);
  EXPECT_GT(sample(text, "process_virtual_memory_bytes"), 1e5);
  EXPECT_GT(sample(text, "process_open_fds"), 2.0);
  EXPECT_GT(sample(text, "process_max_fds"), 0.0);
  const double start = sample(text, "process_start_time_seconds");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_GT(start, now - 24 * 3600.0);
  EXPECT_LT(start, now + 5);
  const std::string info = std::string("ringrpc_build_info{version=\"").append(version()).append("\"} 1");
  EXPECT_NE(text.find(info), std::string::npos) << "no " << info;
  s.stop();
}

TEST(admin_index, port_without_enabled_warns_naming_the_key) {
  // The server configures the log from the config: its file is where the warning lands.
  const auto path = std::filesystem::temp_directory_path() /
                    std::string("ringrpc_admin_index_").append(std::to_string(::getpid())).append(".log");
  server_config cfg = parse_config("[admin]\nport = 9464\n", "t.toml");
  cfg.logging.file = path.string();
  { const auto made = make_server(cfg); }
  log::configure(log_options{}, [](std::string_view) {});  // release the file
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  EXPECT_NE(text.find("level=warn event=config_key_ignored key=admin.port"), std::string::npos) << text;
  EXPECT_NE(text.find("enabled = true"), std::string::npos) << text;
}

// ringrpc/ops.hpp on a server that did not come from make_server (nor has its admin pages):
// no admin port, no admin tokens to replace, and the metrics page all the same.
TEST(admin_index, ops_functions_on_a_plain_server) {
  server s(test::threads(1, 1));
  test::start_with_builtins(s);
  EXPECT_EQ(admin_port(s), 0);
  EXPECT_THROW(replace_admin_tokens(s, {{"admin-token", "operator", {}}}), std::logic_error);
  EXPECT_EQ(sample(metrics_text(s), "ringrpc_rpc_calls_received_total"), 0.0);
  s.stop();
  const auto made = make_server(server_config{});  // admin pages off
  EXPECT_EQ(admin_port(*made), 0);
  EXPECT_THROW(replace_admin_tokens(*made, {{"admin-token", "operator", {}}}), std::logic_error);
}

}  // namespace
}  // namespace ringrpc
