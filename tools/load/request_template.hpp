#pragma once
// Request templates: a request text (an HTTP path or body, a redis key, a ringrpc payload) with
// placeholders that change per call: {seq}, {random:N}, {line}. A template is compiled once, at
// start-up, into segments; each connection renders it into a buffer it reuses, so a call costs
// no allocation once the buffer has grown to the largest rendering.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ringrpc::load {

/// One piece of a compiled template: literal bytes or a placeholder.
struct template_segment {
  enum class kind : std::uint8_t { literal, seq, random, line };
  kind what = kind::literal;
  std::uint32_t offset = 0;  ///< literal: where its bytes start in the template's literal text
  std::uint32_t length = 0;  ///< literal: how many bytes
  std::uint64_t bound = 0;   ///< random: the number drawn is below this (>= 1)
};

/// A compiled template. Immutable after compile(): shared by every connection.
class request_template {
 public:
  /// The empty template (renders nothing).
  request_template() = default;
  /// Compiles `text`. `{{` and `}}` stand for `{` and `}`. Throws std::invalid_argument, naming
  /// `where` (e.g. "--template"), for an unknown placeholder, a bad bound, or a lone brace.
  static request_template compile(std::string_view text, std::string_view where);
  /// Whether `text` has a placeholder or an escape (and so needs compiling to be sent right).
  static bool has_braces(std::string_view text) noexcept;

  const std::vector<template_segment>& segments() const noexcept { return _segments; }
  /// No placeholder: every call renders the same bytes (literal_text()).
  bool is_literal() const noexcept { return !_uses_seq && !_uses_line && !_uses_random; }
  bool uses_seq() const noexcept { return _uses_seq; }
  bool uses_line() const noexcept { return _uses_line; }
  bool uses_random() const noexcept { return _uses_random; }
  /// The literal bytes of all segments, in order (the whole rendering when is_literal()).
  std::string_view literal_text() const noexcept { return _literals; }
  /// The most bytes one rendering can take with `longest_line` as {line}'s longest (what an
  /// echoing target sends back, so what a reply may need room for).
  std::size_t max_rendered_size(std::size_t longest_line) const noexcept;

 private:
  std::string _literals;
  std::vector<template_segment> _segments;
  bool _uses_seq = false, _uses_line = false, _uses_random = false;
};

/// What the placeholders of one run draw on, shared by its connections (thread-safe): the lines
/// of --data-file, the run's call counter and the seed.
class template_data {
 public:
  /// The largest --data-file read: it is held in memory for the whole run.
  static constexpr std::size_t max_file_bytes = 64u << 20;

  /// Without --data-file ({line} is then refused by check()).
  explicit template_data(std::uint64_t seed = 0) noexcept : _seed(seed) {}
  /// Reads `path` once, whole; throws std::invalid_argument for a file that cannot be read, is
  /// empty or larger than max_file_bytes.
  static std::shared_ptr<template_data> from_file(const std::string& path, std::uint64_t seed);
  /// Lines are split at LF; a CR before it is dropped, and a last LF ends the last line.
  void set_text(std::string text);

  /// Refuses `t` (std::invalid_argument naming `where`) if it uses {line} without a data file,
  /// or, when `one_line_token` (an HTTP path), if a line it may render has a space or a control
  /// character.
  void check(const request_template& t, std::string_view where, bool one_line_token) const;

  std::size_t line_count() const noexcept { return _lines.size(); }
  std::size_t longest_line() const noexcept { return _longest_line; }
  std::string_view line(std::uint64_t call) const noexcept;
  /// The next call's number, from 0 over the whole run: one relaxed atomic add, taken only by a
  /// call whose templates use {seq} or {line}.
  std::uint64_t next_call() noexcept { return _calls.fetch_add(1, std::memory_order_relaxed); }
  /// A seed for the next connection's random numbers, from the run's seed.
  std::uint64_t next_connection_seed() noexcept;
  /// The run's seed (--seed, or one drawn); set before the run starts.
  void set_seed(std::uint64_t seed) noexcept { _seed = seed; }
  std::uint64_t seed() const noexcept { return _seed; }

 private:
  std::string _text;
  std::vector<std::string_view> _lines;  // into _text
  std::size_t _longest_line = 0;
  std::atomic<std::uint64_t> _calls{0};
  std::atomic<std::uint64_t> _connections{0};
  std::uint64_t _seed;
};

/// The values of one call that all its templates share: a path and a body rendered for the same
/// call see the same {seq} and {line}.
struct template_call {
  std::uint64_t seq = 0;
};

/// One connection's renderer: its random generator and the run's shared data. Owned by one
/// engine thread.
class template_renderer {
 public:
  explicit template_renderer(std::shared_ptr<template_data> data);
  /// Starts a call; `counted` says whether any of its templates uses {seq} or {line} (only then
  /// is the shared counter touched).
  template_call begin_call(bool counted) noexcept { return {counted ? _data->next_call() : 0}; }
  /// Appends the rendering of `t` for `call` to `out`.
  void render(const request_template& t, const template_call& call, std::vector<std::byte>& out);
  void render(const request_template& t, const template_call& call, std::string& out);
  /// The next random number below `bound` (>= 1).
  std::uint64_t draw(std::uint64_t bound) noexcept;

 private:
  template <typename Buffer>
  void render_into(const request_template& t, const template_call& call, Buffer& out);

  std::shared_ptr<template_data> _data;
  std::uint64_t _state;  // splitmix64: one word, and good enough for keys and ids
};

}  // namespace ringrpc::load
