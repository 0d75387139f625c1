#include "protocol.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>
#include <string>
#include <utility>

#if RINGRPC_LOAD_HAVE_DISCOVERY
#include "target_etcd.hpp"
#endif

namespace ringrpc::load {

// Defined in proto_<scheme>.cpp. Declared here rather than in a header because nothing else may
// build a codec except through make_protocol.
namespace codecs {
std::unique_ptr<protocol> make_ringrpc_protocol(const target& t, const codec_options& options);
std::unique_ptr<protocol> make_echo_protocol(const target& t, const codec_options& options);
std::unique_ptr<protocol> make_redis_protocol(const target& t, const codec_options& options);
std::unique_ptr<protocol> make_http_protocol(const target& t, const codec_options& options);
std::unique_ptr<protocol> make_h2_protocol(const target& t, const codec_options& options);
}  // namespace codecs

namespace {

[[noreturn]] void bad_url(std::string_view url, const std::string& why) {
  throw std::invalid_argument("bad target '" + std::string(url) + "': " + why);
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// A host is an IPv4 literal or a DNS-style name (IPv6 literals come in brackets and are checked
// apart); anything else would only fail later, at
// resolve time, with a less helpful message.
void check_host(std::string_view url, std::string_view host) {
  if (host.empty()) bad_url(url, "missing host");
  if (host.find(':') != std::string_view::npos) bad_url(url, "IPv6 addresses go in brackets: [::1]:PORT");
  const bool numeric = std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isdigit(c) || c == '.';
  });
  std::size_t labels = 0;
  std::size_t start = 0;
  while (start <= host.size()) {
    const auto dot = std::min(host.find('.', start), host.size());
    const auto label = host.substr(start, dot - start);
    if (label.empty()) bad_url(url, "host '" + std::string(host) + "' has an empty label");
    for (const unsigned char c : label) {
      if (!std::isalnum(c) && c != '-' && c != '_') {
        std::string why = "host '";
        why.append(host).append("' contains '").append(1, static_cast<char>(c)).append("'");
        bad_url(url, why);
      }
    }
    if (numeric && (label.size() > 3 || std::stoi(std::string(label)) > 255)) {
      bad_url(url, "'" + std::string(host) + "' is not a valid IPv4 address");
    }
    ++labels;
    start = dot + 1;
  }
  if (numeric && labels != 4) bad_url(url, "'" + std::string(host) + "' is not a valid IPv4 address");
}

std::uint16_t parse_port(std::string_view url, std::string_view text) {
  if (!is_digits(text)) bad_url(url, "port '" + std::string(text) + "' is not a number");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value == 0 || value > 65535) {
    bad_url(url, "port '" + std::string(text) + "' is not in 1..65535");
  }
  return static_cast<std::uint16_t>(value);
}

bool printable_no_space(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

target parse_target(std::string_view url) {
  const auto sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0) {
    bad_url(url, "expected SCHEME://HOST[:PORT][/PATH] with scheme ringrpc, echo, redis, http, h2c or grpc (over TLS: ringrpcs, rediss, https, h2, grpcs)");
  }
  target t;
  t.scheme = lower(url.substr(0, sep));
  // The TLS schemes speak their plaintext protocol inside TLS records.
  static constexpr std::pair<std::string_view, std::string_view> over_tls[] = {
      {"https", "http"}, {"rediss", "redis"}, {"ringrpcs", "ringrpc"}, {"h2", "h2c"}, {"grpcs", "grpc"}};
  for (const auto& [secure, plain] : over_tls) {
    if (t.scheme == secure) {
      t.scheme = std::string(plain);
      t.tls = true;
    }
  }
  if (t.scheme != "ringrpc" && t.scheme != "echo" && t.scheme != "redis" && t.scheme != "http" &&
      t.scheme != "h2c" && t.scheme != "grpc") {
    bad_url(url, "unknown scheme '" + t.scheme + "' (expected ringrpc, echo, redis, http, h2c or grpc)");
  }
  const auto rest = url.substr(sep + 3);
  const auto slash = rest.find('/');
  const auto authority = rest.substr(0, slash);
  const auto path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) bad_url(url, "user info is not supported");

  std::size_t colon = std::string_view::npos;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) bad_url(url, "'[' without ']'");
    t.host = std::string(authority.substr(1, close - 1));
    in6_addr a{};
    if (::inet_pton(AF_INET6, t.host.c_str(), &a) != 1) bad_url(url, "'" + t.host + "' is not an IPv6 address");
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') bad_url(url, "expected ':PORT' after ']'");
      colon = close + 1;
    }
  } else {
    colon = authority.rfind(':');
    t.host = std::string(authority.substr(0, colon));
    check_host(url, t.host);
  }
  if (colon != std::string_view::npos) {
    t.port = parse_port(url, authority.substr(colon + 1));
  } else if (t.tls && (t.scheme == "http" || t.scheme == "h2c")) {
    t.port = 443;
  } else if (t.scheme == "http" || t.scheme == "h2c") {
    t.port = 80;
  } else if (t.scheme == "redis") {
    t.port = 6379;
  } else {
    bad_url(url, t.scheme + " targets need a port");
  }
  if (!printable_no_space(path)) bad_url(url, "the path contains spaces or control characters");

  if (t.scheme == "ringrpc") {
    if (path.size() <= 1) bad_url(url, "missing method (ringrpc://HOST:PORT/METHOD)");
    t.path = std::string(path.substr(1));
  } else if (t.scheme == "http" || t.scheme == "h2c") {
    if (path.find('#') != std::string_view::npos) bad_url(url, "fragments are not sent to servers");
    t.path = path.empty() ? "/" : std::string(path);
  } else if (t.scheme == "grpc") {
    // gRPC's :path is /package.Service/Method: exactly two non-empty parts.
    const auto second = path.size() > 1 ? path.find('/', 1) : std::string_view::npos;
    if (second == std::string_view::npos || second == 1 || second + 1 == path.size() ||
        path.find('/', second + 1) != std::string_view::npos) {
      bad_url(url, "expected grpc://HOST:PORT/package.Service/Method");
    }
    t.path = std::string(path);
  } else if (path.size() > 1) {
    bad_url(url, t.scheme + " targets take no path");
  }
  return t;
}

bool is_registry_url(std::string_view url) {
  const auto sep = url.find("://");
  return sep != std::string_view::npos && lower(url.substr(0, sep)) == "etcd";
}

std::vector<target> resolve_endpoints(std::string_view url) {
  // host:port targets are one endpoint; a registry-backed scheme resolves to its members here.
  if (is_registry_url(url)) {
#if RINGRPC_LOAD_HAVE_DISCOVERY
    return resolve_etcd_endpoints(url, std::chrono::milliseconds(3000));
#else
    throw std::invalid_argument("'" + std::string(url) +
                                "': this build of ringrpc-load has no service discovery (built without libcurl, "
                                "meson option discovery); give the members as host:port targets");
#endif
  }
  return {parse_target(url)};
}

std::unique_ptr<protocol> make_protocol(const target& t, const codec_options& given) {
  if (given.max_reply_bytes == 0) throw std::invalid_argument("max reply bytes must be > 0");
  codec_options options = given;
  if (!options.templates) options.templates = std::make_shared<const request_templates>();
  if (options.stream && t.scheme != "ringrpc" && t.scheme != "grpc") {
    throw std::invalid_argument("--stream goes with ringrpc:// and grpc:// targets (and ringrpcs://, grpcs://) only");
  }
  if (t.scheme == "ringrpc") return codecs::make_ringrpc_protocol(t, options);
  if (t.scheme == "echo") return codecs::make_echo_protocol(t, options);
  if (t.scheme == "redis") return codecs::make_redis_protocol(t, options);
  if (t.scheme == "http") return codecs::make_http_protocol(t, options);
  if (t.scheme == "h2c" || t.scheme == "grpc") return codecs::make_h2_protocol(t, options);
  throw std::invalid_argument("unknown protocol '" + t.scheme + "'");
}

}  // namespace ringrpc::load
