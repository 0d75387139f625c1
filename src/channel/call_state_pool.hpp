#pragma once
// Recycled objects without a lock per call: each thread keeps its own free list. A call is
// usually made on one thread and finished on the channel's I/O thread, so one thread frees
// what another allocates; the freeing thread hands whole batches to a shared depot and an
// allocating thread with an empty list takes a batch back, so the depot's mutex is taken
// once per batch, not per call. What sits in the lists is bounded by the calls that were in
// flight at once (plus one batch per thread); a thread's list is freed when the thread ends.

#include <cstddef>
#include <mutex>
#include <new>
#include <vector>

namespace ringrpc::detail {

/// T must have a member `T* next_free` and a `void recycle() noexcept` that drops what a
/// reused object must not keep (callbacks, references, oversized buffers).
template <class T>
class recycling_pool {
 public:
  static T* get() {
    local& l = mine();
    if (l.head == nullptr) refill(l);
    if (T* t = l.head) {
      l.head = t->next_free;
      --l.count;
      t->next_free = nullptr;
      return t;
    }
    return new T();
  }

  static void put(T* t) noexcept {
    t->recycle();
    local& l = mine();
    t->next_free = l.head;
    l.head = t;
    if (++l.count >= 2 * batch) spill(l);
  }

 private:
  static constexpr std::size_t batch = 64;

  struct local {
    T* head = nullptr;
    std::size_t count = 0;
    ~local() {
      while (head != nullptr) {
        T* n = head->next_free;
        delete head;
        head = n;
      }
    }
  };
  struct depot {
    std::mutex mu;
    std::vector<T*> batches;  // heads of chains of `batch` objects
    ~depot() {
      for (T* h : batches) {
        while (h != nullptr) {
          T* n = h->next_free;
          delete h;
          h = n;
        }
      }
    }
  };

  static local& mine() noexcept {
    thread_local local l;
    return l;
  }
  static depot& shared() noexcept {
    static depot d;
    return d;
  }

  static void refill(local& l) noexcept {
    depot& d = shared();
    std::lock_guard lock(d.mu);
    if (d.batches.empty()) return;
    l.head = d.batches.back();
    d.batches.pop_back();
    l.count = batch;
  }

  // Keeps `batch` here and moves the chain beyond them to the depot.
  static void spill(local& l) noexcept {
    T* keep_tail = l.head;
    for (std::size_t i = 1; i < batch; ++i) keep_tail = keep_tail->next_free;
    T* chain = keep_tail->next_free;
    keep_tail->next_free = nullptr;
    l.count = batch;
    depot& d = shared();
    try {
      std::lock_guard lock(d.mu);
      d.batches.push_back(chain);
    } catch (const std::bad_alloc&) {
      while (chain != nullptr) {
        T* n = chain->next_free;
        delete chain;
        chain = n;
      }
    }
  }
};

}  // namespace ringrpc::detail
