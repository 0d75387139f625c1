#include "output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "interrupt.hpp"

namespace ringrpc::load {

namespace {

[[noreturn]] void cannot(const std::string& path, int err) {
  throw std::runtime_error("cannot write " + path + ": " + std::strerror(err));
}

bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

output_file::output_file(std::string path) : _path(std::move(path)) {
  if (_path.empty()) throw std::runtime_error("an output path is empty");
  if (is_stdout()) return;
  struct stat st{};
  if (::stat(_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) cannot(_path, EISDIR);
  _temp = _path + ".XXXXXX";
  _fd = ::mkstemp(_temp.data());
  if (_fd < 0) cannot(_path, errno);
  remove_on_forced_exit(_temp.c_str());
  // mkstemp makes 0600; a result file should be as readable as any file the user creates.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(_fd, 0666 & ~mask);
}

output_file::~output_file() {
  if (!_temp.empty()) forget_on_forced_exit(_temp.c_str());
  if (_fd >= 0) {
    ::close(_fd);
    ::unlink(_temp.c_str());
  }
}

void output_file::commit(std::string_view text) {
  if (is_stdout()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return;
  }
  if (_fd < 0) throw std::runtime_error("output " + _path + " written twice");
  const bool ok = write_all(_fd, text);
  const int err = errno;
  const int closed = ::close(_fd);
  _fd = -1;
  if (!ok || closed != 0) {
    ::unlink(_temp.c_str());
    cannot(_path, ok ? errno : err);
  }
  const bool renamed = ::rename(_temp.c_str(), _path.c_str()) == 0;
  forget_on_forced_exit(_temp.c_str());
  if (!renamed) {
    const int e = errno;
    ::unlink(_temp.c_str());
    cannot(_path, e);
  }
}

}  // namespace ringrpc::load
