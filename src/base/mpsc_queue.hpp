#pragma once
// Intrusive unbounded multi-producer single-consumer queue: the hand-off from many handler
// threads to one ring thread. push() is one atomic exchange and never fails or allocates.

#include <atomic>

namespace ringrpc::detail {

struct mpsc_node {
  std::atomic<mpsc_node*> next{nullptr};
};

/// Any thread may push(); only the owning consumer thread may pop() or call empty().
/// A node belongs to the queue from push() until pop() returns it.
class mpsc_queue {
 public:
  mpsc_queue() noexcept : _head(&_stub), _tail(&_stub) {}
  mpsc_queue(const mpsc_queue&) = delete;
  mpsc_queue& operator=(const mpsc_queue&) = delete;

  void push(mpsc_node* n) noexcept {
    n->next.store(nullptr, std::memory_order_relaxed);
    // The exchange orders producers; linking the previous node afterwards is what makes the
    // node visible to the consumer, hence release there.
    mpsc_node* prev = _head.exchange(n, std::memory_order_acq_rel);
    prev->next.store(n, std::memory_order_release);
  }

  /// Returns null when empty, and also, briefly, while a producer is between its exchange and
  /// its link. That producer then still checks the consumer's sleep flag after linking, so a
  /// consumer that goes to sleep on a null pop is always woken.
  mpsc_node* pop() noexcept {
    mpsc_node* tail = _tail;
    mpsc_node* next = tail->next.load(std::memory_order_acquire);
    if (tail == &_stub) {
      if (next == nullptr) return nullptr;
      _tail = next;
      tail = next;
      next = next->next.load(std::memory_order_acquire);
    }
    if (next != nullptr) {
      _tail = next;
      return tail;
    }
    if (tail != _head.load(std::memory_order_acquire)) return nullptr;
    push(&_stub);
    next = tail->next.load(std::memory_order_acquire);
    if (next != nullptr) {
      _tail = next;
      return tail;
    }
    return nullptr;
  }

  /// True when nothing has been pushed that pop() has not returned. Consumer only.
  bool empty() const noexcept {
    // Only the stub can be the tail of an empty queue: a real node at the tail is still queued.
    return _tail == &_stub && _stub.next.load(std::memory_order_seq_cst) == nullptr &&
           _head.load(std::memory_order_seq_cst) == &_stub;
  }

 private:
  alignas(64) std::atomic<mpsc_node*> _head;
  alignas(64) mpsc_node* _tail;
  mpsc_node _stub;
};

}  // namespace ringrpc::detail
