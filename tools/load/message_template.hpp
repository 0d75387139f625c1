#pragma once
// Request templates of typed messages: --data's JSON with {seq}, {random:N} or {line} for
// --method (FlatBuffers) and --proto (protobuf). The JSON is converted once, at start-up, with a
// sentinel in place of each placeholder; the encoder's output is then searched for the sentinels
// (walking the schema, not the bytes) to make a plan: the fixed bytes, and where each
// placeholder's value goes. A call copies the fixed bytes and writes the values into a buffer
// its connection reuses: no allocation, no JSON, no parser per call.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "request_template.hpp"

namespace ringrpc::load {

/// The placeholders of a request JSON (--data). Only the exact texts {seq}, {random:N} and
/// {line} are placeholders; every other brace is JSON (or text) as before. Outside quotes a
/// placeholder is a whole number value ({line} is refused there); inside quotes, text.
class json_placeholders {
 public:
  /// Whether `json` has a placeholder at all (when not, --data is converted as it always was).
  static bool present(std::string_view json) noexcept;
  /// Finds the placeholders of `json`. Throws std::invalid_argument naming `where`.
  /// `lenient`: the JSON's reader also takes single-quoted strings and comments (FlatBuffers');
  /// the scan knows only double quotes, so with placeholders those are refused.
  static json_placeholders scan(std::string_view json, std::string_view where, bool lenient = false);

  /// The JSON with each placeholder replaced: a number outside quotes, \u0001I\u0002 inside.
  const std::string& sentinel_json() const noexcept { return _json; }
  std::size_t size() const noexcept { return _list.size(); }
  const template_segment& segment(std::size_t i) const noexcept { return _list[i].segment; }

  /// The placeholder (outside quotes) whose sentinel is `value`, or -1.
  int number_index(std::uint64_t value) const noexcept;
  int number_index(double value) const noexcept;
  /// Whether a converted string value holds placeholders.
  static bool has_marker(std::string_view value) noexcept { return value.find('\x01') != std::string_view::npos; }
  /// A converted string value back as a --template text ({{ for its braces), marking the
  /// placeholders it holds as found.
  std::string template_text(std::string_view value);
  /// Marks placeholder `i` found in a field named `field` whose values reach `max` at most;
  /// refuses {random:N} whose N-1 is above it.
  void found_number(int i, std::string_view field, std::uint64_t max);
  /// What to add to a converter's complaint about sentinel_json(): what its numbers stand for.
  std::string parse_hint() const;
  /// Refuses a placeholder the walk of the message did not find where it can go.
  void check_all_found() const;
  /// Whether any placeholder is {seq} or {line}, {random:N}, {line}.
  bool uses_seq_or_line() const noexcept;
  bool uses_random() const noexcept;
  bool uses_line() const noexcept;

 private:
  struct placeholder {
    template_segment segment;
    std::string text;  // as written: "{random:10}"
    bool in_string = false;
    bool found = false;
  };
  std::string _json;
  std::string _where;
  std::vector<placeholder> _list;
  std::uint64_t _base = 0;  // placeholder i outside quotes is the number _base + i
};

/// A compiled typed request: immutable, shared by every connection.
class message_template {
 public:
  virtual ~message_template() = default;
  /// Appends one call's message to `out` (cleared by the caller); `out` keeps its capacity.
  virtual void render(template_renderer& r, const template_call& call, std::vector<std::byte>& out) const = 0;
  /// The most bytes one rendering takes with `longest_line` as {line}'s longest.
  virtual std::size_t max_size(std::size_t longest_line) const noexcept = 0;
  /// Whether a call takes the run's counter ({seq} or {line}).
  bool counted() const noexcept { return _counted; }
  bool uses_random() const noexcept { return _uses_random; }
  bool uses_line() const noexcept { return _uses_line; }
  /// Each template's string values, for template_data::check.
  const std::vector<request_template>& texts() const noexcept { return _texts; }

 protected:
  explicit message_template(const json_placeholders& p)
      : _counted(p.uses_seq_or_line()), _uses_random(p.uses_random()), _uses_line(p.uses_line()) {}
  /// The number of a numeric placeholder for this call.
  static std::uint64_t number(template_renderer& r, const template_call& call, const template_segment& s) noexcept {
    return s.what == template_segment::kind::seq ? call.seq : r.draw(s.bound);
  }
  std::vector<request_template> _texts;

 private:
  bool _counted, _uses_random, _uses_line;
};

}  // namespace ringrpc::load
