#pragma once
// Flow control of one stream in one direction, in messages and payload bytes (the rules are
// docs/design/streams.md, "Credit"): the sender's side spends credit, the receiver's side checks
// arrivals against what it granted and decides when to grant more. Both sides of a connection
// use the same two types, so the rules live once. Not thread-safe: each lives with one owner.

#include <cstddef>
#include <cstdint>

namespace ringrpc::detail {

/// The window each direction starts with when the opener names none: a protocol constant, so a
/// client may send its first messages without waiting for a grant.
inline constexpr std::uint32_t default_stream_window_messages = 16;
inline constexpr std::uint64_t default_stream_window_bytes = 256 * 1024;

/// Unused credit may not exceed these: a grant past them is a protocol error, never a wrap.
inline constexpr std::uint64_t max_stream_credit_messages = (std::uint64_t{1} << 31) - 1;
inline constexpr std::int64_t max_stream_credit_bytes = std::int64_t{1} << 62;

/// What the sender may still send.
class send_credit {
 public:
  /// A window named by the peer (StreamOpen) may be anything; what passes the maxima is held
  /// to them.
  send_credit(std::uint32_t messages, std::uint64_t bytes) noexcept
      : _messages(messages < max_stream_credit_messages ? messages : max_stream_credit_messages),
        _bytes(static_cast<std::int64_t>(bytes < static_cast<std::uint64_t>(max_stream_credit_bytes)
                                             ? bytes
                                             : static_cast<std::uint64_t>(max_stream_credit_bytes))) {}

  /// A message may go while a message of credit is left and the byte credit is positive; the
  /// byte credit may then go negative by that one message, so a message larger than the whole
  /// window still goes once the window is free (no fragmentation).
  bool can_send() const noexcept { return _messages > 0 && _bytes > 0; }
  /// Spends the credit of one message of `bytes` payload bytes; call only when can_send().
  void spend(std::size_t bytes) noexcept {
    --_messages;
    _bytes -= static_cast<std::int64_t>(bytes);
  }
  /// Adds a grant. False, and nothing added, when the unused credit would pass the maxima.
  bool grant(std::uint32_t messages, std::uint64_t bytes) noexcept {
    if (messages > max_stream_credit_messages - _messages) return false;
    if (bytes > static_cast<std::uint64_t>(max_stream_credit_bytes - _bytes)) return false;
    _messages += messages;
    _bytes += static_cast<std::int64_t>(bytes);
    return true;
  }
  std::uint64_t messages() const noexcept { return _messages; }
  std::int64_t bytes() const noexcept { return _bytes; }

 private:
  std::uint64_t _messages;
  std::int64_t _bytes;  // max_stream_credit_bytes at most; may go below 0 by one message
};

/// Credit to give back to the peer.
struct credit_grant {
  std::uint32_t messages = 0;
  std::uint64_t bytes = 0;
  explicit operator bool() const noexcept { return messages != 0 || bytes != 0; }
};

/// The receiver's side of the batching rule: what its reader consumed and has not granted back
/// yet, granted all at once when half the window (in messages or bytes) is consumed, so grants
/// go out in batches rather than one frame per message.
class owed_credit {
 public:
  /// The window as receive_credit holds it (within the maxima, never 0).
  owed_credit(std::uint32_t window_messages, std::uint64_t window_bytes) noexcept
      : _window_messages(window_messages), _window_bytes(window_bytes) {}

  /// The reader consumed a message of `bytes`. Returns what to grant now (often nothing).
  credit_grant consumed(std::size_t bytes) noexcept {
    ++_owed.messages;
    _owed.bytes += bytes;
    if (_owed.messages * 2 < _window_messages && _owed.bytes * 2 < _window_bytes) return {};
    const credit_grant g = _owed;
    _owed = {};
    return g;
  }
  std::uint32_t window_messages() const noexcept { return _window_messages; }
  std::uint64_t window_bytes() const noexcept { return _window_bytes; }

 private:
  std::uint32_t _window_messages;
  std::uint64_t _window_bytes;
  credit_grant _owed;
};

/// What the receiver allowed, what arrived, and the grants it owes as its reader consumes.
class receive_credit {
 public:
  using grant = credit_grant;

  /// A window past the maxima is held to them, as the peer's send_credit holds it: the
  /// half-window that triggers a grant must be reachable with the credit the peer really has.
  receive_credit(std::uint32_t window_messages, std::uint64_t window_bytes) noexcept
      : _owed(window_messages == 0 ? default_stream_window_messages
              : window_messages < max_stream_credit_messages
                  ? window_messages
                  : static_cast<std::uint32_t>(max_stream_credit_messages),
              window_bytes == 0 ? default_stream_window_bytes
              : window_bytes < static_cast<std::uint64_t>(max_stream_credit_bytes)
                  ? window_bytes
                  : static_cast<std::uint64_t>(max_stream_credit_bytes)),
        _peer(_owed.window_messages(), _owed.window_bytes()) {}

  /// A message of `bytes` arrived. False when the peer had no credit for it: it broke the rules.
  bool arrive(std::size_t bytes) noexcept {
    if (!_peer.can_send()) return false;
    _peer.spend(bytes);
    return true;
  }
  /// The reader consumed a message of `bytes`. Returns what to grant now (owed_credit's rule).
  grant consumed(std::size_t bytes) noexcept {
    const grant g = _owed.consumed(bytes);
    // What we grant is what was spent, so the peer's unused credit never passes the window
    // plus one message: this cannot fail.
    if (g) _peer.grant(g.messages, g.bytes);
    return g;
  }
  std::uint32_t window_messages() const noexcept { return _owed.window_messages(); }
  std::uint64_t window_bytes() const noexcept { return _owed.window_bytes(); }

 private:
  owed_credit _owed;  // first: _peer starts from its window
  send_credit _peer;  // the peer's credit as we granted it: what it may still send
};

}  // namespace ringrpc::detail
