// Call-queue throughput: ringrpc::detail::mpmc_queue vs. library queues.
//
// What is compared: items/s moved through a shared queue of void* (one push
// plus one pop per item) with 1 producer + 1 consumer and 2 producers +
// 2 consumers, for
//   (a) our mpmc_queue<void*>                  bounded ring, FIFO, no allocation
//   (b) moodycamel::ConcurrentQueue<void*>, preallocated for the capacity:
//       - with producer/consumer tokens (its fast path). Uses enqueue(), which
//         may allocate: with try_enqueue() an explicit (token) producer keeps
//         the blocks it has filled, so one producer can end up owning every
//         preallocated block and the other then fails forever (this bench
//         deadlocked that way). So this variant is unbounded, no backpressure.
//       - without tokens (how our call sites would use it): try_enqueue()
//         only; implicit producers return emptied blocks to the shared pool,
//         so it behaves as a bounded, allocation-free queue.
//   (c) boost::lockfree::queue<void*, capacity<N>>  fixed-size, no allocation
// All queues get the same nominal capacity and the same retry policy (yield
// on full/empty), so the 2P2C case, which oversubscribes a 2-core machine,
// measures the queues rather than the spin loop.
//
// Why: the server's call queue must be bounded (backpressure), FIFO across
// producers (calls are served in arrival order) and allocation-free on the
// hot path. moodycamel is the usual speed reference but is only FIFO per
// producer and is not strictly bounded; boost::lockfree::queue meets the
// requirements. We keep our own queue only if it is at least as fast as
// these for this use.
//
// Setup: benchmark's ->Threads(n); even thread indices produce, odd ones
// consume. Every thread runs the same iteration count, so pushes and pops
// balance and the shared (function-static) queue is empty between runs.
// Items/s are reported on producer threads only, so the total is items
// moved end-to-end per wall-clock second (UseRealTime).

#include "base/mpmc_queue.hpp"

#include <benchmark/benchmark.h>
#include <boost/lockfree/queue.hpp>
#include <concurrentqueue/concurrentqueue.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <thread>

namespace {

constexpr std::size_t queue_capacity = 4096;
constexpr std::size_t max_producers = 2;

// Each adapter is a per-thread handle onto one shared queue: it owns the
// thread's tokens where the queue has them.

struct ours_adapter {
    explicit ours_adapter(bool /*producer*/) {}
    static ringrpc::detail::mpmc_queue<void*>& queue() {
        static ringrpc::detail::mpmc_queue<void*> q(queue_capacity);
        return q;
    }
    ringrpc::detail::mpmc_queue<void*>& q = queue();
    bool push(void* p) noexcept { return q.try_push(p); }
    bool pop(void*& p) noexcept { return q.try_pop(p); }
};

using moody_queue = moodycamel::ConcurrentQueue<void*>;

// One queue per variant (Tag): blocks held by the token variant's explicit
// producers are never returned to the pool, so sharing a queue would starve
// the tokenless variant's try_enqueue.
template <class Tag>
moody_queue& shared_moody_queue() {
    // Preallocates enough blocks for queue_capacity items spread over the
    // producers, so try_enqueue can succeed without allocating.
    static moody_queue q(queue_capacity, max_producers, max_producers);
    return q;
}

struct moody_token_adapter {
    // Only producers get a ProducerToken: each one creates an explicit
    // producer sub-queue, and we preallocated for max_producers of them.
    explicit moody_token_adapter(bool producer) {
        if (producer) {
            ptok.emplace(q);
        } else {
            ctok.emplace(q);
        }
    }
    moody_queue& q = shared_moody_queue<moody_token_adapter>();
    std::optional<moodycamel::ProducerToken> ptok;
    std::optional<moodycamel::ConsumerToken> ctok;
    bool push(void* p) { return q.enqueue(*ptok, p); }
    bool pop(void*& p) { return q.try_dequeue(*ctok, p); }
};

struct moody_tokenless_adapter {
    explicit moody_tokenless_adapter(bool /*producer*/) {}
    moody_queue& q = shared_moody_queue<moody_tokenless_adapter>();
    bool push(void* p) { return q.try_enqueue(p); }
    bool pop(void*& p) { return q.try_dequeue(p); }
};

struct boost_adapter {
    explicit boost_adapter(bool /*producer*/) {}
    using queue_type =
        boost::lockfree::queue<void*, boost::lockfree::capacity<queue_capacity>>;
    static queue_type& queue() {
        static queue_type q;
        return q;
    }
    queue_type& q = queue();
    bool push(void* p) { return q.bounded_push(p); }
    bool pop(void*& p) { return q.pop(p); }
};

template <class Adapter>
void bm_push_pop(benchmark::State& state) {
    const bool producer = state.thread_index() % 2 == 0;
    Adapter a(producer);
    if (producer) {
        std::uintptr_t n = 0;
        for (auto _ : state) {
            void* p = reinterpret_cast<void*>(++n);
            while (!a.push(p)) {
                std::this_thread::yield();
            }
        }
        state.SetItemsProcessed(state.iterations());
    } else {
        for (auto _ : state) {
            void* p = nullptr;
            while (!a.pop(p)) {
                std::this_thread::yield();
            }
            benchmark::DoNotOptimize(p);
        }
    }
}

}  // namespace

// Threads(2) = 1 producer + 1 consumer, Threads(4) = 2 producers + 2 consumers.
BENCHMARK_TEMPLATE(bm_push_pop, ours_adapter)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK_TEMPLATE(bm_push_pop, moody_token_adapter)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK_TEMPLATE(bm_push_pop, moody_tokenless_adapter)->Threads(2)->Threads(4)->UseRealTime();
BENCHMARK_TEMPLATE(bm_push_pop, boost_adapter)->Threads(2)->Threads(4)->UseRealTime();
