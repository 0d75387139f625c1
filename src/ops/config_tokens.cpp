// `[auth] tokens_file`: the bearer tokens a server accepts, kept out of the configuration file
// (which /status shows and which is often world-readable) in a file of their own.
//
// Format: one token per line, `SUBJECT TOKEN [METHODS]` separated by spaces or tabs; blank lines
// and lines starting with '#' are skipped. SUBJECT is a name for logs and authorizers (letters,
// digits and `_ - . @ :`); TOKEN uses RFC 6750 b64token characters; METHODS, if given, is a
// comma-separated list of the methods or endpoints the token may call (bearer_token::methods).
// Errors name the file and line, never the token.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ringrpc/config.hpp"
#include "ringrpc/metadata.hpp"

namespace ringrpc {

namespace {

constexpr std::size_t max_tokens_file_bytes = 1u << 20;
constexpr std::size_t max_tokens = 10'000;

bool subject_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '@' || c == ':';
}

std::string read_small_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw config_error(path, 0, "auth.tokens_file", std::string("cannot open: ") + std::strerror(errno));
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } c{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    throw config_error(path, 0, "auth.tokens_file", "is not a regular file");
  }
  std::string text(max_tokens_file_bytes + 1, '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw config_error(path, 0, "auth.tokens_file", std::string("cannot read: ") + std::strerror(errno));
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got > max_tokens_file_bytes) throw config_error(path, 0, "auth.tokens_file", "is larger than 1 MiB");
  text.resize(got);
  return text;
}

}  // namespace

std::vector<bearer_token> parse_bearer_tokens(std::string_view text, const std::string& source) {
  std::vector<bearer_token> out;
  unsigned line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto skip_blank = [&line] {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    };
    skip_blank();
    if (line.empty() || line.front() == '#') continue;
    auto word = [&line] {
      std::size_t n = 0;
      while (n < line.size() && line[n] != ' ' && line[n] != '\t') ++n;
      std::string_view w = line.substr(0, n);
      line.remove_prefix(n);
      return w;
    };
    const std::string_view subject = word();
    skip_blank();
    const std::string_view token = word();
    skip_blank();
    std::string_view methods = word();
    skip_blank();
    if (token.empty() || !line.empty()) {
      throw config_error(source, line_no, "auth.tokens_file", "expected 'SUBJECT TOKEN [METHODS]' on this line");
    }
    std::vector<std::string> allowed;
    while (!methods.empty()) {
      const auto comma = methods.find(',');
      const std::string_view m = methods.substr(0, comma);
      if (m.empty()) throw config_error(source, line_no, "auth.tokens_file", "an empty method in the list");
      allowed.emplace_back(m);
      methods.remove_prefix(comma == std::string_view::npos ? methods.size() : comma + 1);
      if (comma != std::string_view::npos && methods.empty()) {
        throw config_error(source, line_no, "auth.tokens_file", "an empty method in the list");
      }
    }
    for (char ch : subject) {
      if (!subject_char(ch)) {
        throw config_error(source, line_no, "auth.tokens_file",
                           "the subject may use letters, digits and _ - . @ : only");
      }
    }
    // Checked as the server will see it: what follows "Bearer " in the metadata.
    if (!parse_bearer(std::string("Bearer ").append(token))) {
      throw config_error(source, line_no, "auth.tokens_file",
                         "the token may use letters, digits and - . _ ~ + / (then '=' padding) only");
    }
    if (out.size() == max_tokens) throw config_error(source, line_no, "auth.tokens_file", "more than 10000 tokens");
    out.push_back({std::string(token), std::string(subject), std::move(allowed)});
  }
  return out;
}

std::vector<bearer_token> load_bearer_tokens(const std::string& path) {
  return parse_bearer_tokens(read_small_file(path), path);
}

}  // namespace ringrpc
