#pragma once
// How much of one worker's time heavy over-share work may take ahead of other waiting work
// (pool_queue.hpp). Kept by each worker for itself from the start stamps it already reads: no
// clock read, no shared line.

#include <algorithm>
#include <cstdint>

namespace ringrpc::detail {

/// A worker that ran heavy work for d ns owes (share_every - 1) x d ns of other work before
/// heavy work may again go ahead of other waiting work: while other work waits, heavy work
/// gets at most 1 / share_every of the worker's time. (Heavy work still runs whenever nothing
/// else waits; that does not wait for the debt.) A task's time is from its start stamp to the
/// next one, or to the clock read that ends the worker's burst, so a coarse clock's error does
/// not add up over many tasks.
class heavy_budget {
 public:
  /// Caps what one call can make a worker owe, so a very long one (minutes) does not keep the
  /// heavy queue behind other work for hours: at most a minute of other work.
  static constexpr std::int64_t max_owed_ns = 60'000'000'000;

  explicit heavy_budget(unsigned share_every) noexcept : _every(share_every) {}

  /// Whether heavy work may go ahead of other waiting work now. Not while the last task was
  /// heavy and has not been settled yet (its end is the next stamp).
  bool may_go_ahead() const noexcept { return _owed_ns <= 0 && !(_since != 0 && _heavy); }

  /// A task started at `now` (the worker's stamp; it may have run already); `heavy`: whether it
  /// is heavy work. The task before it, if any, ended there.
  void started(std::int64_t now, bool heavy) noexcept {
    settle(now);
    _since = now;
    _heavy = heavy;
  }
  /// The worker ran out of work at `now`: the last task ends here.
  void stopped(std::int64_t now) noexcept {
    settle(now);
    _since = 0;
  }

  std::int64_t owed_ns() const noexcept { return _owed_ns; }

 private:
  void settle(std::int64_t now) noexcept {
    if (_since == 0) return;
    const std::int64_t d = std::max<std::int64_t>(0, now - _since);
    if (_heavy) {
      _owed_ns = std::min(max_owed_ns, _owed_ns + d * static_cast<std::int64_t>(_every - 1));
    } else {
      _owed_ns = std::max<std::int64_t>(0, _owed_ns - d);
    }
  }

  const unsigned _every;
  std::int64_t _owed_ns = 0;
  std::int64_t _since = 0;  // start stamp of the running task; 0: none
  bool _heavy = false;
};

}  // namespace ringrpc::detail
