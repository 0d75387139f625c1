// The log of a program that embeds a server and never configures logging: warn and above only,
// so starting, serving and stopping write nothing to stderr.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "log/log.hpp"
#include "ringrpc/client.hpp"
#include "ringrpc/server.hpp"
#include "test_support.hpp"

namespace ringrpc {
namespace {

TEST(log_default, is_warn_until_configured) {
  EXPECT_FALSE(log::enabled(log_level::info));
  EXPECT_FALSE(log::enabled(log_level::debug));
  EXPECT_TRUE(log::enabled(log_level::warn));
  EXPECT_TRUE(log::enabled(log_level::error));
}

TEST(log_default, an_embedded_server_is_quiet_on_stderr) {
  char path[] = "/tmp/ringrpc_log_default.XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  {
    server_options o;
    o.port = 0;
    server s(o);
    test::start_with_builtins(s);
    auto c = client::connect("127.0.0.1", s.port());
    EXPECT_TRUE(c.call("echo", std::string_view("x")).ok());
    s.stop();
  }
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  ::unlink(path);
  EXPECT_EQ(text.str(), "") << "an embedded server wrote to stderr";
}

}  // namespace
}  // namespace ringrpc
