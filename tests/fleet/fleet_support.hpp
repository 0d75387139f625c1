#pragma once
// Real peers for the fleet tests: an etcd and ringrpc-server processes on free loopback ports,
// each bounded in time and stopped by its PID (TERM, then KILL), never left behind.

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "discovery/etcd_client.hpp"

extern char** environ;

namespace fleet {

inline std::uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A child process with stdout and stderr in `log`.
class process {
 public:
  process() = default;
  process(const std::vector<std::string>& argv, const std::string& log) : _log(log) {
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) throw std::runtime_error("cannot open " + log);
    const pid_t parent = ::getpid();
    _pid = ::fork();
    if (_pid == 0) {
      // Dies with the test: a test process killed by a sanitizer's abort (no destructors run)
      // must not leave etcd or a server behind.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      ::dup2(out, 1);
      ::dup2(out, 2);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out);
    if (_pid < 0) throw std::runtime_error("cannot start " + argv[0]);
  }
  process(process&& o) noexcept : _pid(o._pid), _log(std::move(o._log)), _status(o._status) { o._pid = -1; }
  process& operator=(process&& o) noexcept {
    if (this != &o) {
      stop();
      _pid = o._pid;
      _log = std::move(o._log);
      _status = o._status;
      o._pid = -1;
    }
    return *this;
  }
  ~process() { stop(); }

  pid_t pid() const noexcept { return _pid; }
  std::string output() const { return read_file(_log); }
  bool running() {
    if (_pid <= 0) return false;
    int st = 0;
    if (::waitpid(_pid, &st, WNOHANG) == _pid) {
      _status = st;
      _pid = -1;
      return false;
    }
    return true;
  }
  void signal(int sig) {
    if (_pid > 0) ::kill(_pid, sig);
  }
  /// Waits up to `limit` for the process to exit; its wait status, or -1 if it is still running.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (running()) {
      if (std::chrono::steady_clock::now() >= until) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return _status;
  }
  /// TERM, up to 5 s, then KILL.
  void stop() {
    if (_pid <= 0) return;
    signal(SIGTERM);
    if (wait_exit(std::chrono::seconds(5)) == -1) {
      signal(SIGKILL);
      wait_exit(std::chrono::seconds(5));
    }
  }
  /// Waits until the output contains `text`.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds limit) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      if (output().find(text) != std::string::npos) return true;
      if (!running()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  pid_t _pid = -1;
  std::string _log;
  int _status = 0;
};

/// A single-member etcd in a temporary data directory.
class etcd_peer {
 public:
  etcd_peer(std::string binary, std::string dir) : _binary(std::move(binary)), _dir(std::move(dir)) {}
  ~etcd_peer() { stop(); }

  /// Starts it (a fresh data directory when `fresh`); false with the reason in why() when it
  /// does not come up within 10 s.
  bool start(bool fresh) {
    if (fresh) {
      std::filesystem::remove_all(_dir + "/data");
      if (_client_port == 0) {
        _client_port = free_port();
        _peer_port = free_port();
      }
    }
    const std::string c = "http://127.0.0.1:" + std::to_string(_client_port);
    const std::string p = "http://127.0.0.1:" + std::to_string(_peer_port);
    _proc = process({_binary, "--data-dir", _dir + "/data", "--name", "fleet", "--listen-client-urls", c,
                     "--advertise-client-urls", c, "--listen-peer-urls", p, "--initial-advertise-peer-urls", p,
                     "--initial-cluster", "fleet=" + p, "--log-level", "warn"},
                    _dir + "/etcd.log");
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      if (!_proc.running()) {
        _why = "etcd exited: " + _proc.output();
        return false;
      }
      // Ready once it answers a range (the server is up and has a leader).
      if (ringrpc::discovery::detail::etcd_client(c, std::chrono::milliseconds(500)).range_prefix("/")) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    _why = "etcd did not answer within 10 s: " + _proc.output();
    return false;
  }
  void stop() { _proc.stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(_client_port); }
  std::string hostport() const { return "127.0.0.1:" + std::to_string(_client_port); }
  const std::string& why() const { return _why; }

 private:
  std::string _binary;
  std::string _dir;
  std::uint16_t _client_port = 0;
  std::uint16_t _peer_port = 0;
  process _proc;
  std::string _why;
};

}  // namespace fleet
