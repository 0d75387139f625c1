#pragma once
// One immutable object that many threads read and one thread at a time replaces: the
// channel's member set. Readers take no lock and allocate nothing: they count themselves in one
// of two reader counters (chosen by the epoch's parity), read the pointer, and uncount. The
// writer swaps the pointer, then frees the old object only after a grace period: it flips the
// epoch twice, each time waiting until the counter it left has drained, so every reader that
// could have read the old pointer has finished (the two-phase scheme of userspace RCU).
// std::atomic<std::shared_ptr> would do the job, but libstdc++ 12 implements it with a lock
// bit that ThreadSanitizer cannot follow, and it writes a reference count on every read too.

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

namespace ringrpc::detail {

template <class T>
class snapshot_cell {
 public:
  explicit snapshot_cell(std::unique_ptr<const T> first) : _ptr(first.release()) {}
  ~snapshot_cell() { delete _ptr.load(); }
  snapshot_cell(const snapshot_cell&) = delete;
  snapshot_cell& operator=(const snapshot_cell&) = delete;

  /// Valid while it lives; keep it short (the writer waits for it).
  class reader {
   public:
    explicit reader(const snapshot_cell& c) noexcept
        : _count(c._readers[c._epoch.load() & 1]) {
      _count.fetch_add(1);
      _object = c._ptr.load();
    }
    ~reader() { _count.fetch_sub(1); }
    reader(const reader&) = delete;
    reader& operator=(const reader&) = delete;
    const T& operator*() const noexcept { return *_object; }
    const T* operator->() const noexcept { return _object; }

   private:
    std::atomic<std::uint64_t>& _count;
    const T* _object;
  };

  reader read() const noexcept { return reader(*this); }

  /// Replaces the object; returns once no reader can still see the old one, which it frees.
  /// One writer at a time (the caller serialises writers).
  void publish(std::unique_ptr<const T> next) {
    const T* old = _ptr.exchange(next.release());
    for (int flip = 0; flip < 2; ++flip) {
      const std::uint64_t left = _epoch.fetch_add(1);
      while (_readers[left & 1].load() != 0) std::this_thread::yield();
    }
    delete old;
  }

 private:
  std::atomic<const T*> _ptr;
  std::atomic<std::uint64_t> _epoch{0};
  mutable std::atomic<std::uint64_t> _readers[2] = {};
};

}  // namespace ringrpc::detail
