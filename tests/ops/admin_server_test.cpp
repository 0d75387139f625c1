// The status-page HTTP server over real loopback sockets: routes, status codes, limits, and
// clients that stall or never read while others are served.

#include "ops/admin_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using namespace ringrpc::detail;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;

namespace {

// `source`: a 127.x address to connect from, so a test can play several hosts.
int connect_to(std::uint16_t port, const char* source = nullptr) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::system_error(errno, std::system_category(), "socket");
  if (source != nullptr) {
    sockaddr_in local{};
    local.sin_family = AF_INET;
    if (::inet_pton(AF_INET, source, &local.sin_addr) != 1 ||
        ::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0) {
      ::close(fd);
      throw std::system_error(errno, std::system_category(), "bind");
    }
  }
  timeval tv{};
  tv.tv_sec = 10;  // a hung server fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::system_error(e, std::system_category(), "connect");
  }
  return fd;
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (431, 400): what it sent is still readable
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

std::string read_all(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;  // SO_RCVTIMEO sockets see it without a handler
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

// One request on a fresh connection; the whole response (the server closes after it).
std::string http_exchange(std::uint16_t port, std::string_view request, const char* source = nullptr) {
  const int fd = connect_to(port, source);
  send_all(fd, request);
  std::string r = read_all(fd);
  ::close(fd);
  return r;
}

int status_of(const std::string& response) {
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

std::string body_of(const std::string& response) {
  const auto p = response.find("\r\n\r\n");
  return p == std::string::npos ? std::string() : response.substr(p + 4);
}

std::string get(std::uint16_t port, std::string_view path) {
  return http_exchange(port, "GET " + std::string(path) + " HTTP/1.1\r\nHost: localhost\r\n\r\n");
}

void route_test_pages(admin_server& s) {
  s.route("/hello", [] { return http_response{200, "text/plain; charset=utf-8", "hello\n"}; });
  s.route("/echo-query", [](const http_request& r) {
    return http_response{200, "text/plain", r.method + " " + r.path + " ? " + r.query};
  });
  s.route("/throws", []() -> http_response { throw std::runtime_error("boom"); });
  s.route("/big", [] { return http_response{200, "application/octet-stream", std::string(8 << 20, 'x')}; });
  s.route("/not-ready", [] { return http_response{503, "text/plain", "draining\n"}; });
}

class AdminServer : public ::testing::Test {
 protected:
  void SetUp() override {
    route_test_pages(server);
    route_test_pages(patient);  // started by the tests that use it
  }

  static admin_server_options fast_options() {
    admin_server_options o;
    // Long enough that the timing checks below hold on a loaded machine under sanitizers, short
    // enough to keep the tests quick.
    o.read_timeout = 1500ms;
    // Far above what serving a few requests takes (1.4 s once under ThreadSanitizer on a busy
    // machine, with an 8 MiB body being produced beside them), so a server that waited on a
    // client that does not read is told apart from a slow one.
    o.write_timeout = 10s;
    return o;
  }

  // Timeouts no test outlasts: every test client gives up after 10 s (connect_to), so an answer
  // such a server gave came from the request itself, or the server was not held up by another
  // client, with no clock in the test.
  static admin_server_options patient_options() {
    admin_server_options o;
    o.read_timeout = 60s;
    o.write_timeout = 60s;
    return o;
  }

  admin_server server{fast_options()};
  admin_server patient{patient_options()};
};

}  // namespace

TEST_F(AdminServer, ServesARoute) {
  server.start();
  ASSERT_NE(server.port(), 0);
  const std::string r = get(server.port(), "/hello");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("\r\nContent-Type: text/plain; charset=utf-8\r\n"));
  EXPECT_THAT(r, HasSubstr("\r\nContent-Length: 6\r\n"));
  EXPECT_THAT(r, HasSubstr("\r\nConnection: close\r\n"));
  EXPECT_EQ(body_of(r), "hello\n");
  EXPECT_EQ(server.address(), "127.0.0.1:" + std::to_string(server.port()));
}

TEST_F(AdminServer, HeadHasHeadersButNoBody) {
  server.start();
  const std::string r = http_exchange(server.port(), "HEAD /hello HTTP/1.1\r\n\r\n");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_THAT(r, HasSubstr("Content-Length: 6\r\n"));
  EXPECT_EQ(body_of(r), "");
}

TEST_F(AdminServer, QueryGoesToTheHandlerAndHttp10Works) {
  server.start();
  const std::string r = http_exchange(server.port(), "GET /echo-query?limit=5&x=y HTTP/1.0\r\n\r\n");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_EQ(body_of(r), "GET /echo-query ? limit=5&x=y");
}

TEST_F(AdminServer, HandlerStatusIsPassedThrough) {
  server.start();
  EXPECT_EQ(status_of(get(server.port(), "/not-ready")), 503);
}

TEST_F(AdminServer, UnknownPathIs404) {
  server.start();
  const std::string r = get(server.port(), "/nope");
  EXPECT_EQ(status_of(r), 404);
  EXPECT_THAT(body_of(r), HasSubstr("/hello"));  // lists the pages there are
}

TEST_F(AdminServer, OtherMethodsAre405) {
  server.start();
  for (const char* m : {"POST", "PUT", "DELETE", "OPTIONS"}) {
    const std::string r = http_exchange(server.port(), std::string(m) + " /hello HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(status_of(r), 405) << m;
    EXPECT_THAT(r, HasSubstr("\r\nAllow: GET, HEAD\r\n")) << m;
  }
}

TEST_F(AdminServer, GarbageIs400) {
  server.start();
  EXPECT_EQ(status_of(http_exchange(server.port(), "hello\r\n\r\n")), 400);
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET /hello\r\n\r\n")), 400);          // no version
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET  /hello HTTP/1.1\r\n\r\n")), 400);  // two spaces
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET hello HTTP/1.1\r\n\r\n")), 400);   // not a path
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET /hello HTTP/9\r\n\r\n")), 400);
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET /hello HTTP/1.1\r\nno colon\r\n\r\n")), 400);
  EXPECT_EQ(status_of(http_exchange(server.port(), std::string("\x16\x03\x01\x02\x00\x01\x00\r\n", 10))), 400);
}

TEST_F(AdminServer, BadRequestLineIsAnsweredWithoutWaitingForTheHeaders) {
  // The headers never end; with a read timeout past the client's patience, only the request
  // line can have earned the 400.
  patient.start();
  EXPECT_EQ(status_of(http_exchange(patient.port(), "NOT HTTP AT ALL\r\nmore")), 400);
}

TEST_F(AdminServer, OversizeRequestIs431) {
  server.start();
  const std::string big = "GET /hello HTTP/1.1\r\nX-Filler: " + std::string(9000, 'a') + "\r\n\r\n";
  EXPECT_EQ(status_of(http_exchange(server.port(), big)), 431);
  // Without a terminating blank line at all, the limit still ends it.
  EXPECT_EQ(status_of(http_exchange(server.port(), "GET /hello HTTP/1.1\r\nX: " + std::string(20000, 'b'))), 431);
  // Just under the limit is fine.
  const std::string fits = "GET /hello HTTP/1.1\r\nX: " + std::string(8000, 'c') + "\r\n\r\n";
  ASSERT_LE(fits.size(), 8192u);
  EXPECT_EQ(status_of(http_exchange(server.port(), fits)), 200);
}

TEST_F(AdminServer, HandlerExceptionIs500) {
  server.start();
  const std::string r = get(server.port(), "/throws");
  EXPECT_EQ(status_of(r), 500);
  EXPECT_THAT(body_of(r), HasSubstr("boom"));
}

TEST_F(AdminServer, SlowClientDoesNotBlockOthers) {
  patient.start();
  const int slow = connect_to(patient.port());
  send_all(slow, "GET /hel");  // and nothing more
  // Held up until the slow client's 60 s ran out, these would fail after their own 10 s.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(get(patient.port(), "/hello")), 200);
  pollfd p{slow, POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "the slow client was answered or dropped: it should still be waited for";
  ::close(slow);
}

TEST_F(AdminServer, SlowClientGets408AfterTheReadTimeout) {
  server.start();
  const int slow = connect_to(server.port());
  send_all(slow, "GET /hel");  // and nothing more
  const auto t0 = std::chrono::steady_clock::now();
  const std::string r = read_all(slow);  // the server gives up after read_timeout (1.5 s)
  ::close(slow);
  EXPECT_EQ(status_of(r), 408);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1400ms) << "given up on before its read timeout";
}

TEST_F(AdminServer, ClientThatNeverReadsDoesNotBlockOthers) {
  patient.start();
  const int lazy = connect_to(patient.port());
  send_all(lazy, "GET /big HTTP/1.1\r\n\r\n");  // 8 MiB that it does not read yet
  std::this_thread::sleep_for(50ms);  // the server's write to it is under way
  // Held up behind the lazy client (a 60 s write timeout), these would fail after their 10 s.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(get(patient.port(), "/hello")), 200);
  // And the lazy client was waited for, not dropped to make room: it gets all of it.
  const std::string r = read_all(lazy);
  ::close(lazy);
  EXPECT_EQ(status_of(r), 200);
  EXPECT_EQ(body_of(r).size(), std::size_t{8} << 20);
}

TEST_F(AdminServer, TooManyConnectionsGet503) {
  admin_server_options o = fast_options();
  o.max_connections = 2;
  o.read_timeout = 2s;
  admin_server small(o);
  small.route("/hello", [] { return http_response{200, "text/plain", "hi"}; });
  small.start();
  const int a = connect_to(small.port());
  const int b = connect_to(small.port());
  std::this_thread::sleep_for(100ms);  // both accepted and holding their slots
  EXPECT_EQ(status_of(get(small.port(), "/hello")), 503);
  ::close(a);
  ::close(b);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(status_of(get(small.port(), "/hello")), 200);
}

TEST_F(AdminServer, ManyConcurrentClients) {
  server.start();
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) ok += status_of(get(server.port(), "/hello")) == 200 ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST_F(AdminServer, StopClosesTheListenerAndIsIdempotent) {
  server.start();
  const std::uint16_t port = server.port();
  const int idle = connect_to(port);  // open connections do not hold stop() up
  server.stop();
  server.stop();
  EXPECT_THROW(connect_to(port), std::system_error);
  EXPECT_EQ(read_all(idle), "");
  ::close(idle);
}

TEST_F(AdminServer, RouteAfterStartIsAnError) {
  server.start();
  EXPECT_THROW(server.route("/late", [] { return http_response{}; }), std::logic_error);
}

TEST_F(AdminServer, TakenPortIsAClearError) {
  server.start();
  admin_server_options o;
  o.port = server.port();
  admin_server second(o);
  try {
    second.start();
    FAIL();
  } catch (const std::system_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("admin server: cannot listen on 127.0.0.1:" + std::to_string(server.port())));
    EXPECT_EQ(e.code().value(), EADDRINUSE);
  }
}

TEST(AdminServerProbes, HealthIsAnsweredWhileIdleClientsHoldEverySlot) {
  admin_server_options o;  // the defaults: 32 slots, a 2 s read timeout
  admin_server s(o);
  s.route("/healthz", [] { return http_response{200, "text/plain", "ok\n"}; }, route_kind::probe);
  s.route("/readyz", [] { return http_response{200, "text/plain", "ready\n"}; }, route_kind::probe);
  s.route("/metrics", [] { return http_response{200, "text/plain", "m\n"}; });
  s.start();
  std::vector<int> idle;
  auto open_idle = [&](int n) {
    for (int i = 0; i < n; ++i) idle.push_back(connect_to(s.port()));  // connect, say nothing
    std::this_thread::sleep_for(100ms);  // all accepted
  };
  open_idle(45);  // more than the 32 slots: before, every probe got 503 until they timed out
  int healthy = 0;
  for (int i = 0; i < 20; ++i) healthy += status_of(get(s.port(), i % 2 == 0 ? "/healthz" : "/readyz")) == 200;
  EXPECT_EQ(healthy, 20);
  // A page that is not a probe still waits for a slot.
  EXPECT_EQ(status_of(get(s.port(), "/metrics")), 503);
  open_idle(60);  // more than the slots and the probe room together
  healthy = 0;
  for (int i = 0; i < 20; ++i) healthy += status_of(get(s.port(), "/healthz")) == 200;
  EXPECT_EQ(healthy, 20);
  for (const int fd : idle) ::close(fd);
}

namespace {

// CPU seconds this process has used.
double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// The child of OutOfFileDescriptorsBacksOff: 0 when it passed, else which check failed.
int run_out_of_fds_child() {
  const rlimit low{48, 48};
  if (::setrlimit(RLIMIT_NOFILE, &low) != 0) return 2;
  admin_server s;
  s.route("/healthz", [] { return http_response{200, "text/plain", "ok\n"}; }, route_kind::probe);
  s.start();
  const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // before the fds run out
  if (client < 0) return 3;
  std::vector<int> fillers;
  for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(s.port());
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The kernel completes the handshake into the backlog; accept() then fails with EMFILE.
  if (::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 4;
  send_all(client, "GET /healthz HTTP/1.1\r\n\r\n");
  const double before = cpu_seconds();
  std::this_thread::sleep_for(1s);
  const double used = cpu_seconds() - before;
  // Before: the listener stayed readable and the loop spun a whole core (~1 s in 1 s).
  if (used > 0.3) {
    std::fprintf(stderr, "admin thread used %.3f s of CPU in 1 s while out of fds\n", used);
    return 5;
  }
  if (s.accept_failures() == 0) return 6;  // the fds did not run out: the test proved nothing
  for (const int fd : fillers) ::close(fd);
  timeval tv{};
  tv.tv_sec = 5;
  ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  // Once fds are back, the waiting connection is served.
  if (status_of(read_all(client)) != 200) return 7;
  ::close(client);
  return 0;
}

}  // namespace

TEST(AdminServerAccept, OutOfFileDescriptorsBacksOffInsteadOfSpinning) {
  // A child, so lowering RLIMIT_NOFILE and exhausting it touches nothing else of the test run.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(run_out_of_fds_child());
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "the child did not finish within 30 s";
    }
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2 setrlimit, 3 socket, 4 connect, 5 CPU spin, 6 no EMFILE, 7 not served";
}

// The request parser alone (src/ops/http_request.cpp), as http_fuzz drives it.

TEST(HttpRequestParser, CompleteGetWithQuery) {
  const auto r = parse_http_request("GET /status?format=json HTTP/1.1\r\nHost: x\r\n\r\n", 8192);
  ASSERT_EQ(r.state, http_parse_result::outcome::complete);
  EXPECT_EQ(r.request.method, "GET");
  EXPECT_EQ(r.request.path, "/status");
  EXPECT_EQ(r.request.query, "format=json");
}

TEST(HttpRequestParser, WaitsForTheEndOfTheHead) {
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\nHost: x\r\n", 8192).state,
            http_parse_result::outcome::incomplete);
  EXPECT_EQ(parse_http_request("GET / HT", 8192).state, http_parse_result::outcome::incomplete);
}

TEST(HttpRequestParser, Rejections) {
  const auto bad_line = parse_http_request("GET  / HTTP/1.1\r\n", 8192);
  EXPECT_EQ(bad_line.state, http_parse_result::outcome::rejected);
  EXPECT_EQ(bad_line.status, 400);
  EXPECT_EQ(parse_http_request("GET / HTTP/1.1\r\n folded\r\n\r\n", 8192).status, 400);
  const auto post = parse_http_request("POST / HTTP/1.1\r\n\r\n", 8192);
  EXPECT_EQ(post.status, 405);
  EXPECT_TRUE(post.allow_header);
  EXPECT_EQ(parse_http_request("GET /0123456789 HTTP/1.1\r\nA: b\r\n\r\n", 16).status, 431);
  EXPECT_EQ(parse_http_request("GET /0123456789abcdef", 16).status, 431);
}

TEST(HttpRequestParser, BearerTokenFromAuthorization) {
  const auto r = parse_http_request("GET /status HTTP/1.1\r\nauthorization:  bearer   abc-_.~+/9==\r\n\r\n", 8192);
  ASSERT_EQ(r.state, http_parse_result::outcome::complete);
  EXPECT_TRUE(r.request.has_authorization);
  EXPECT_EQ(r.request.bearer_token, "abc-_.~+/9==");
  const auto none = parse_http_request("GET /status HTTP/1.1\r\nHost: x\r\n\r\n", 8192);
  EXPECT_FALSE(none.request.has_authorization);
  EXPECT_EQ(none.request.bearer_token, "");
  // Other schemes, a bare scheme and characters outside b64token carry no bearer token.
  for (const char* v : {"Basic dTpw", "Bearer", "Bearer ", "Bearertok", "Bearer a=b", "Bearer a b", "Bearer =x"}) {
    const auto o = parse_http_request("GET / HTTP/1.1\r\nAuthorization: " + std::string(v) + "\r\n\r\n", 8192);
    ASSERT_EQ(o.state, http_parse_result::outcome::complete) << v;
    EXPECT_TRUE(o.request.has_authorization) << v;
    EXPECT_EQ(o.request.bearer_token, "") << v;
  }
  const auto two = parse_http_request("GET / HTTP/1.1\r\nAuthorization: Bearer a\r\nAUTHORIZATION: Bearer b\r\n\r\n", 8192);
  EXPECT_EQ(two.state, http_parse_result::outcome::rejected);
  EXPECT_EQ(two.status, 400);
  EXPECT_THAT(two.message, ::testing::Not(HasSubstr("Bearer")));
}

// Pages behind a token, probes open: over real sockets, with the token checker the server is
// given (admin_pages passes the token table's constant-time match).
TEST(AdminServerTokens, PagesNeedTheTokenProbesDoNot) {
  admin_server_options o;
  o.accept_token = [](std::string_view t) { return t == "s3cret"; };
  admin_server server(o);
  server.route("/status", [] { return http_response{200, "text/plain", "status\n"}; });
  server.route("/healthz", [] { return http_response{200, "text/plain", "ok\n"}; }, route_kind::probe);
  server.start();
  const auto with = [&](std::string_view path, std::string_view header) {
    return http_exchange(server.port(), "GET " + std::string(path) + " HTTP/1.1\r\nHost: x\r\n" + std::string(header) + "\r\n");
  };
  const std::string none = with("/status", "");
  EXPECT_EQ(status_of(none), 401);
  EXPECT_THAT(none, HasSubstr("\r\nWWW-Authenticate: Bearer realm=\"ringrpc-admin\"\r\n"));
  const std::string wrong = with("/status", "Authorization: Bearer guess\r\n");
  EXPECT_EQ(status_of(wrong), 401);
  EXPECT_THAT(wrong, HasSubstr("error=\"invalid_token\""));
  EXPECT_THAT(wrong, ::testing::Not(HasSubstr("guess")));
  EXPECT_EQ(status_of(with("/status", "Authorization: Basic czNjcmV0\r\n")), 401);
  EXPECT_EQ(status_of(with("/nowhere", "")), 401);  // a 404 would list the pages
  const std::string right = with("/status", "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(status_of(right), 200);
  EXPECT_EQ(body_of(right), "status\n");
  EXPECT_EQ(status_of(with("/healthz", "")), 200);
  EXPECT_EQ(server.unauthorized(), 4u);
}

// Guessing admin tokens: past its budget an address gets 429 with Retry-After for any token, the
// right one too, unchecked; another address and its right token are untouched; requests without
// a token spend nothing.
TEST(AdminServerTokens, AGuesserGets429PastItsBudgetWhileOthersGetIn) {
  admin_server_options o;
  o.accept_token = [](std::string_view t) { return t == "s3cret"; };
  o.auth_failures = {/*burst*/ 3, /*per_minute: nothing refills during the test*/ 1, 0};
  admin_server server(o);
  server.route("/status", [] { return http_response{200, "text/plain", "status\n"}; });
  server.start();
  const auto from = [&](const char* source, std::string_view token) {
    std::string header = token.empty() ? "" : "Authorization: Bearer " + std::string(token) + "\r\n";
    return http_exchange(server.port(), "GET /status HTTP/1.1\r\nHost: x\r\n" + header + "\r\n", source);
  };
  for (int i = 0; i < 5; ++i) EXPECT_EQ(status_of(from("127.0.0.3", "")), 401) << "no token, no guess";
  for (int i = 0; i < 3; ++i) EXPECT_EQ(status_of(from("127.0.0.3", "guess")), 401) << i;
  for (const char* token : {"guess", "s3cret"}) {
    const std::string r = from("127.0.0.3", token);
    EXPECT_EQ(status_of(r), 429) << r;
    EXPECT_THAT(r, HasSubstr("\r\nRetry-After: "));
    EXPECT_THAT(body_of(r), HasSubstr("too many failed authentications from 127.0.0.3"));
    EXPECT_THAT(r, ::testing::Not(HasSubstr(token)));
  }
  EXPECT_EQ(status_of(from("127.0.0.1", "s3cret")), 200);
  EXPECT_EQ(status_of(from("127.0.0.1", "guess")), 401);
  EXPECT_EQ(server.auth_limited(), 2u);
  EXPECT_EQ(server.unauthorized(), 9u);
}
