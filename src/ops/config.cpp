// The configuration's entry points: a file (read with care, since the path comes from the
// operator and may name anything), TOML text, and command-line overrides applied all or nothing.

#include "ringrpc/config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "ops/config_toml.hpp"

namespace ringrpc {

using namespace config_detail;


std::size_t event_bus_config::capacity_of(std::string_view name) const {
  const auto it = queue_capacities.find(name);
  return it == queue_capacities.end() ? default_capacity : it->second;
}

namespace {
std::string error_text(const std::string& source, unsigned line, const std::string& key,
                       const std::string& problem) {
  std::string s = source;
  if (line != 0) s.append(":").append(std::to_string(line));  // not `":" + ...`: GCC 12 -O3 -Wrestrict
  s += ": ";
  if (!key.empty()) s += key + ": ";
  return s + problem;
}
}  // namespace

config_error::config_error(std::string source, unsigned line, std::string key, const std::string& problem)
    : std::runtime_error(error_text(source, line, key, problem)),
      _source(std::move(source)),
      _line(line),
      _key(std::move(key)) {}

server_config parse_config(std::string_view toml_text, std::string_view source_name,
                           event_queue_names known_queues) {
  context ctx;
  ctx.source = source_name;
  const toml::table root = parse_toml(ctx, toml_text);
  server_config cfg;
  read_all(ctx, root, cfg, known_queues);
  cross_check(ctx, cfg, known_queues);
  return cfg;
}

namespace {

std::string_view file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

struct fd_closer {
  int fd;
  ~fd_closer() { ::close(fd); }
};

}  // namespace

server_config load_config_file(const std::string& path, event_queue_names known_queues) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    throw config_error(path, 0, "", std::string("cannot open the configuration file: ") + std::strerror(errno));
  }
  const fd_closer closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw config_error(path, 0, "", std::string("cannot read the configuration file: ") + std::strerror(errno));
  }
  // Devices and pipes have no end a reader can rely on (/dev/zero never ends, a FIFO may never
  // be written): only a regular file is read.
  if (!S_ISREG(st.st_mode)) {
    throw config_error(path, 0, "",
                       std::string("is ") + std::string(file_kind(st.st_mode)) +
                           "; the configuration must be a regular file");
  }
  const std::string too_big = "the configuration file is larger than " + std::to_string(max_config_file_bytes) +
                              " bytes (1 MiB), the most that is read";
  if (static_cast<std::uint64_t>(st.st_size) > max_config_file_bytes) throw config_error(path, 0, "", too_big);
  // Read at most one byte past the limit: the file may grow after fstat.
  std::string text(max_config_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw config_error(path, 0, "", std::string("cannot read the configuration file: ") + std::strerror(errno));
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_config_file_bytes) throw config_error(path, 0, "", too_big);
  text.resize(got);
  return parse_config(text, path, known_queues);
}

config_override parse_override(std::string_view key_equals_value) {
  const auto eq = key_equals_value.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw config_error("command line", 0, "",
                       toml_quoted(key_equals_value) + " is not KEY=VALUE (e.g. server.handlers=8)");
  }
  auto trim = [](std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
  };
  return {std::string(trim(key_equals_value.substr(0, eq))), std::string(trim(key_equals_value.substr(eq + 1)))};
}

void apply_overrides(server_config& cfg, std::span<const config_override> overrides,
                     event_queue_names known_queues) {
  context ctx;
  ctx.source = "command line";
  ctx.lenient = true;
  server_config next = cfg;  // on an error, cfg stays as it was
  for (const auto& [key, value] : overrides) {
    // TOML itself splits the key, so quoted parts such as endpoints."a.b".policy work; the
    // value goes in as a string and each getter converts it to the key's type.
    toml::table one;
    try {
      const std::string line = key + " = " + toml_quoted(value);
      one = toml::parse(std::string_view(line), std::string_view("command line"));
    } catch (const toml::parse_error&) {
      throw config_error(ctx.source, 0, key, "not a valid key; write it as in the file, e.g. server.handlers");
    }
    read_all(ctx, one, next, known_queues);
  }
  cross_check(ctx, next, known_queues);
  cfg = std::move(next);
}

}  // namespace ringrpc
