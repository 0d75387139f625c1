#pragma once
// Failing fast on a wrong target: when every answer of a run's first second (or its first
// 1,000 answers) is an error that the same request can never turn into success (no such method,
// no credentials, not allowed, a malformed request, bytes of another protocol), the run stops
// and says so, instead of measuring a table of errors for its whole duration.

#include <cstdint>
#include <string>
#include <string_view>

#include "protocol.hpp"

namespace ringrpc::load {

/// Index of `kind` (an error kind as counted: "unknown_method", "http_404", ...) among the
/// errors that cannot improve, or -1 when it may (a busy server, a timeout, a lost connection).
int hopeless_error_index(std::string_view kind) noexcept;
/// The kind at `index` (as returned by hopeless_error_index); empty when out of range.
std::string_view hopeless_error_name(int index) noexcept;

/// One line for stderr: what every answer was and what to check, e.g. "every answer in the
/// first second was unknown_method (812 calls): 127.0.0.1:7000 has no method 'no.such'; ...".
std::string hopeless_message(std::string_view kind, std::uint64_t count, const target& t);

/// Decides from running counts whether the answers so far are all hopeless. Pure: the engine
/// feeds it the counters and the elapsed time; tests feed it numbers.
class answer_watch {
 public:
  enum class verdict { watching, fine, hopeless };
  static constexpr std::uint64_t enough_answers = 1000;
  static constexpr std::int64_t window_ns = 1'000'000'000;

  /// `ok`: successful calls; `hopeless`: errors that cannot improve; `other`: every other error.
  /// Fine as soon as anything but a hopeless error happened; hopeless once there are
  /// enough_answers of them, or some and window_ns has passed; watching otherwise.
  verdict observe(std::uint64_t ok, std::uint64_t hopeless, std::uint64_t other, std::int64_t elapsed_ns) const noexcept;
};

}  // namespace ringrpc::load
