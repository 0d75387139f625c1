// Tests for ringrpc::detail::mpmc_queue.
#include "base/mpmc_queue.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"  // RINGRPC_TEST_TSAN

namespace {

using ringrpc::detail::mpmc_queue;

#if defined(RINGRPC_TEST_TSAN)
constexpr std::uint32_t stress_items_per_producer = 20'000;
#else
constexpr std::uint32_t stress_items_per_producer = 200'000;
#endif

TEST(MpmcQueue, SingleThreadFifoOrder) {
    mpmc_queue<int> q(16);
    for (int i = 0; i < 16; ++i) {
        ASSERT_TRUE(q.try_push(i));
    }
    for (int i = 0; i < 16; ++i) {
        int v = -1;
        ASSERT_TRUE(q.try_pop(v));
        EXPECT_EQ(v, i);
    }
}

TEST(MpmcQueue, CapacityRoundsUpToPowerOfTwo) {
    EXPECT_EQ(mpmc_queue<int>(1).capacity(), 2u);
    EXPECT_EQ(mpmc_queue<int>(2).capacity(), 2u);
    EXPECT_EQ(mpmc_queue<int>(3).capacity(), 4u);
    EXPECT_EQ(mpmc_queue<int>(4).capacity(), 4u);
    EXPECT_EQ(mpmc_queue<int>(5).capacity(), 8u);
    EXPECT_EQ(mpmc_queue<int>(1000).capacity(), 1024u);
    EXPECT_EQ(mpmc_queue<int>(1024).capacity(), 1024u);
    EXPECT_EQ(mpmc_queue<int>(1025).capacity(), 2048u);
}

TEST(MpmcQueue, ZeroCapacityThrows) {
    EXPECT_THROW(mpmc_queue<int>(0), std::invalid_argument);
}

TEST(MpmcQueue, FullReturnsFalse) {
    mpmc_queue<int> q(5);  // rounds to 8
    ASSERT_EQ(q.capacity(), 8u);
    for (int i = 0; i < 8; ++i) {
        ASSERT_TRUE(q.try_push(i));
    }
    EXPECT_EQ(q.size_approx(), 8u);
    EXPECT_FALSE(q.try_push(100));
    EXPECT_FALSE(q.try_push(101));
    // A rejected push must not disturb the contents.
    int v = -1;
    ASSERT_TRUE(q.try_pop(v));
    EXPECT_EQ(v, 0);
    EXPECT_TRUE(q.try_push(8));
    EXPECT_FALSE(q.try_push(9));
    for (int i = 1; i <= 8; ++i) {
        ASSERT_TRUE(q.try_pop(v));
        EXPECT_EQ(v, i);
    }
    EXPECT_TRUE(q.empty_approx());
}

TEST(MpmcQueue, EmptyReturnsFalseAndLeavesOutUntouched) {
    mpmc_queue<int> q(4);
    EXPECT_TRUE(q.empty_approx());
    EXPECT_EQ(q.size_approx(), 0u);
    int v = 42;
    EXPECT_FALSE(q.try_pop(v));
    EXPECT_EQ(v, 42);
    ASSERT_TRUE(q.try_push(7));
    EXPECT_FALSE(q.empty_approx());
    ASSERT_TRUE(q.try_pop(v));
    EXPECT_EQ(v, 7);
    v = 42;
    EXPECT_FALSE(q.try_pop(v));
    EXPECT_EQ(v, 42);
    EXPECT_TRUE(q.empty_approx());
}

TEST(MpmcQueue, WrapAroundManyTimes) {
    mpmc_queue<std::uint64_t> q(4);
    std::uint64_t next_push = 0;
    std::uint64_t next_pop = 0;
    // Vary the fill level so every cell is written at every offset many times
    // (~25k laps of the 4-cell ring).
    for (int round = 0; round < 20'000; ++round) {
        const int burst = 1 + round % 4;
        for (int i = 0; i < burst; ++i) {
            ASSERT_TRUE(q.try_push(next_push++));
        }
        ASSERT_EQ(q.size_approx(), static_cast<std::size_t>(burst));
        if (burst == 4) {
            ASSERT_FALSE(q.try_push(0));
        }
        for (int i = 0; i < burst; ++i) {
            std::uint64_t v = 0;
            ASSERT_TRUE(q.try_pop(v));
            ASSERT_EQ(v, next_pop++);
        }
        std::uint64_t v = 0;
        ASSERT_FALSE(q.try_pop(v));
    }
    EXPECT_EQ(next_pop, next_push);
}

TEST(MpmcQueue, MoveOnlyType) {
    mpmc_queue<std::unique_ptr<int>> q(2);
    ASSERT_TRUE(q.try_push(std::make_unique<int>(1)));
    ASSERT_TRUE(q.try_push(std::make_unique<int>(2)));
    EXPECT_FALSE(q.try_push(std::make_unique<int>(3)));
    std::unique_ptr<int> out;
    ASSERT_TRUE(q.try_pop(out));
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(*out, 1);
    ASSERT_TRUE(q.try_pop(out));
    EXPECT_EQ(*out, 2);
}

struct counted {
    static inline int live = 0;
    std::string payload;  // non-trivial, so leaks show up under ASan
    explicit counted(std::string s) : payload(std::move(s)) { ++live; }
    counted(counted&& o) noexcept : payload(std::move(o.payload)) { ++live; }
    counted& operator=(counted&& o) noexcept {
        payload = std::move(o.payload);
        return *this;
    }
    ~counted() { --live; }
};

TEST(MpmcQueue, DestroysElementsLeftInQueue) {
    counted::live = 0;
    {
        mpmc_queue<counted> q(8);
        for (int i = 0; i < 11; ++i) {  // wrap the ring once
            ASSERT_TRUE(q.try_push(counted(std::string(100, 'a' + i))));
            if (i < 6) {
                counted out("");
                ASSERT_TRUE(q.try_pop(out));
                EXPECT_EQ(out.payload, std::string(100, 'a' + i));
            }
        }
        EXPECT_EQ(counted::live, 5);
    }
    EXPECT_EQ(counted::live, 0);
}

// Values are (producer << 32) | sequence number.
TEST(MpmcQueue, MultiProducerMultiConsumerStress) {
    constexpr std::uint32_t producers = 4;
    constexpr std::uint32_t consumers = 4;
    constexpr std::uint32_t per_producer = stress_items_per_producer;
    constexpr std::uint64_t total = std::uint64_t{producers} * per_producer;

    // Small capacity so producers regularly hit "full" and the ring wraps
    // thousands of times.
    mpmc_queue<std::uint64_t> q(64);
    std::atomic<std::uint64_t> consumed{0};
    std::atomic<bool> go{false};
    // A broken queue tends to hang (lost items) rather than crash; give up
    // after a generous deadline so the test fails with diagnostics instead.
    std::atomic<bool> timed_out{false};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    const auto past_deadline = [&] {
        if (std::chrono::steady_clock::now() > deadline) {
            timed_out.store(true, std::memory_order_relaxed);
        }
        return timed_out.load(std::memory_order_relaxed);
    };
    std::vector<std::vector<std::uint64_t>> received(consumers);

    std::vector<std::thread> threads;
    for (std::uint32_t p = 0; p < producers; ++p) {
        threads.emplace_back([&, p] {
            while (!go.load(std::memory_order_acquire)) {
                std::this_thread::yield();
            }
            for (std::uint32_t i = 0; i < per_producer; ++i) {
                const std::uint64_t v = (std::uint64_t{p} << 32) | i;
                while (!q.try_push(v)) {
                    if (past_deadline()) {
                        return;
                    }
                    std::this_thread::yield();
                }
            }
        });
    }
    for (std::uint32_t c = 0; c < consumers; ++c) {
        threads.emplace_back([&, c] {
            auto& mine = received[c];
            mine.reserve(total);
            while (!go.load(std::memory_order_acquire)) {
                std::this_thread::yield();
            }
            while (consumed.load(std::memory_order_relaxed) < total) {
                std::uint64_t v = 0;
                if (q.try_pop(v)) {
                    mine.push_back(v);
                    consumed.fetch_add(1, std::memory_order_relaxed);
                } else {
                    if (past_deadline()) {
                        return;
                    }
                    std::this_thread::yield();
                }
            }
        });
    }
    go.store(true, std::memory_order_release);
    for (auto& t : threads) {
        t.join();
    }

    EXPECT_FALSE(timed_out.load()) << "stress test hit its deadline (lost items?)";
    EXPECT_TRUE(q.empty_approx());
    std::uint64_t extra = 0;
    EXPECT_FALSE(q.try_pop(extra));

    std::vector<std::vector<bool>> seen(producers, std::vector<bool>(per_producer, false));
    std::uint64_t received_total = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t out_of_order = 0;
    std::uint64_t bad_values = 0;
    for (std::uint32_t c = 0; c < consumers; ++c) {
        // Per consumer, each producer's sequence numbers must be increasing.
        std::vector<std::int64_t> last(producers, -1);
        for (const std::uint64_t v : received[c]) {
            const auto p = static_cast<std::uint32_t>(v >> 32);
            const auto i = static_cast<std::uint32_t>(v & 0xffff'ffffu);
            if (p >= producers || i >= per_producer) {
                ++bad_values;
                continue;
            }
            ++received_total;
            if (seen[p][i]) {
                ++duplicates;
            }
            seen[p][i] = true;
            if (static_cast<std::int64_t>(i) <= last[p]) {
                ++out_of_order;
            }
            last[p] = i;
        }
    }
    std::uint64_t missing = 0;
    for (const auto& per : seen) {
        for (const bool b : per) {
            missing += b ? 0 : 1;
        }
    }
    EXPECT_EQ(bad_values, 0u);
    EXPECT_EQ(duplicates, 0u);
    EXPECT_EQ(missing, 0u);
    EXPECT_EQ(out_of_order, 0u);
    EXPECT_EQ(received_total, total);
}

}  // namespace
