// Configuration keys that do nothing are warnings naming the key: [admin] port or host while
// the admin server is disabled, [endpoints.NAME] for an endpoint nobody registers. A stop
// without a reason logs no `reason=""`.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "log/event_log.hpp"
#include "log/log.hpp"
#include "ops/config_ineffective.hpp"
#include "ringrpc/config.hpp"
#include "ringrpc/event_bus.hpp"

namespace ringrpc {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> captured_lines(const std::function<void()>& what) {
  auto lines = std::make_shared<std::vector<std::string>>();
  auto mu = std::make_shared<std::mutex>();
  log_options o;
  o.level = log_level::info;
  log::configure(o, [lines, mu](std::string_view l) {
    std::lock_guard lock(*mu);
    lines->emplace_back(l);
  });
  what();
  log::configure(o, [](std::string_view) {});
  std::lock_guard lock(*mu);
  return *lines;
}

TEST(config_ineffective, admin_port_without_enabled_is_named) {
  const auto cfg = parse_config("[admin]\nport = 9464\n", "t.toml");
  const auto keys = config_detail::ineffective_keys(cfg);
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].key, "admin.port");
  EXPECT_THAT(keys[0].why, HasSubstr("enabled = true"));

  const auto lines = captured_lines([&] { config_detail::warn_ineffective(keys); });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("level=warn event=config_key_ignored key=admin.port"));
}

TEST(config_ineffective, enabled_admin_or_defaults_are_quiet) {
  EXPECT_TRUE(config_detail::ineffective_keys(parse_config("[admin]\nenabled = true\nport = 9464\n", "t")).empty());
  EXPECT_TRUE(config_detail::ineffective_keys(parse_config("", "t")).empty());
  const auto host = config_detail::ineffective_keys(parse_config("[admin]\nhost = \"0.0.0.0\"\n", "t"));
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].key, "admin.host");
}

TEST(config_ineffective, unregistered_endpoints_are_named) {
  const auto cfg = parse_config("[endpoints.echo]\npolicy = \"direct\"\n[endpoints.orders]\npolicy = \"direct\"\n", "t");
  const auto keys = config_detail::unregistered_endpoint_keys(cfg, {"echo", "sleep"});
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].key, "endpoints.orders");
  EXPECT_THAT(keys[0].why, HasSubstr("echo, sleep"));
}

TEST(config_ineffective, example_config_endpoints_are_the_stock_servers) {
  const auto cfg = load_config_file(RINGRPC_EXAMPLE_CONFIG);
  const auto keys = config_detail::unregistered_endpoint_keys(cfg, {"echo", "sleep", "burn", "reflection"});
  EXPECT_TRUE(keys.empty()) << "examples/ringrpc.toml names endpoints ringrpc-server does not register: "
                            << (keys.empty() ? "" : keys[0].key);
  EXPECT_TRUE(config_detail::ineffective_keys(cfg).empty()) << "its [admin] is enabled";
}

TEST(event_log, a_stop_without_reason_has_no_empty_reason) {
  const auto lines = captured_lines([] {
    auto listener = log::make_event_log_listener();
    event stopping;
    stopping.kind = event_kind::server_stopping;
    listener->on_event(stopping);
  });
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("event=server_stopping"));
  EXPECT_THAT(lines[0], Not(HasSubstr("reason")));
}

}  // namespace
}  // namespace ringrpc
