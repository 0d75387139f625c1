// rx_stamp: a reply's latency from its send stamp and the kernel's stamp of the receive that
// completed it, with the stamps injected (no socket, no clock).
#include "rx_stamp.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

namespace {

using ringrpc::load::parse_recvmsg;
using ringrpc::load::reply_latency;
using ringrpc::load::rx_clock;
using ringrpc::load::rx_stamp_control_bytes;

constexpr std::int64_t us = 1000;
constexpr std::int64_t wall_minus_mono = 1'700'000'000'000'000'000;  // realtime is ~2023 here

TEST(RxStamp, KernelStampMovesToTheMonotonicClock) {
  rx_clock clock;
  const std::int64_t wake = 5'000 * us;
  clock.wake(wake, wake + wall_minus_mono);
  // A receive the kernel stamped 300 us before the loop woke.
  EXPECT_EQ(clock.received(wake - 300 * us + wall_minus_mono), wake - 300 * us);
  EXPECT_EQ(clock.received(0), wake) << "no stamp: the wake-up's clock read";
  EXPECT_EQ(clock.received(wake + 50 * us + wall_minus_mono), wake)
      << "a stamp after the wake-up (wall clock stepped back) is the wake-up";
}

TEST(RxStamp, RepliesSharingAReceiveShareItsStampNotTheWakeUp) {
  // Closed loop: two calls sent by one submit at 1000 us, a third at 1100 us. The first two
  // replies arrived in one receive at 1400 us, the third at 1500 us; the loop, waiting for a
  // batch of three, woke at 1900 us.
  rx_clock clock;
  clock.wake(1900 * us, 1900 * us + wall_minus_mono);
  const std::int64_t first_receive = clock.received(1400 * us + wall_minus_mono);
  const std::int64_t second_receive = clock.received(1500 * us + wall_minus_mono);
  EXPECT_EQ(reply_latency(1000 * us, 1000 * us, first_receive), static_cast<std::uint64_t>(400 * us));
  EXPECT_EQ(reply_latency(1000 * us, 1000 * us, first_receive), static_cast<std::uint64_t>(400 * us));
  EXPECT_EQ(reply_latency(1100 * us, 1100 * us, second_receive), static_cast<std::uint64_t>(400 * us));
  // The same turn timed by the wake-up would have said 900, 900 and 800 us.
  EXPECT_EQ(reply_latency(1000 * us, 1000 * us, clock.received(0)), static_cast<std::uint64_t>(900 * us));
}

TEST(RxStamp, OpenLoopCountsFromTheScheduleAndNeverBeforeTheSend) {
  // Due at 100 us, sent at 130 us, received at 400 us: corrected 300, service 270.
  EXPECT_EQ(reply_latency(100 * us, 130 * us, 400 * us), static_cast<std::uint64_t>(300 * us));
  EXPECT_EQ(reply_latency(130 * us, 130 * us, 400 * us), static_cast<std::uint64_t>(270 * us));
  // A receive stamped before the send (clocks of two CPUs): it arrived at the send, not earlier.
  EXPECT_EQ(reply_latency(130 * us, 130 * us, 120 * us), 0u);
  EXPECT_EQ(reply_latency(100 * us, 130 * us, 120 * us), static_cast<std::uint64_t>(30 * us));
}

// A buffer as a multishot recvmsg fills it: io_uring_recvmsg_out, the control messages, the
// payload.
struct recvmsg_buffer {
  alignas(8) std::array<std::byte, 256> bytes{};
  msghdr layout{};
  int length = 0;

  recvmsg_buffer(const char* payload, bool with_stamp, timespec ts = {}) {
    layout.msg_controllen = rx_stamp_control_bytes;
    io_uring_recvmsg_out out{};
    out.payloadlen = static_cast<unsigned>(std::strlen(payload));
    out.controllen = with_stamp ? static_cast<unsigned>(CMSG_SPACE(sizeof(timespec))) : 0;
    std::memcpy(bytes.data(), &out, sizeof out);
    std::byte* control = bytes.data() + sizeof out;
    if (with_stamp) {
      cmsghdr h{};
      h.cmsg_len = CMSG_LEN(sizeof(timespec));
      h.cmsg_level = SOL_SOCKET;
      h.cmsg_type = SCM_TIMESTAMPNS;
      std::memcpy(control, &h, sizeof h);
      std::memcpy(CMSG_DATA(reinterpret_cast<cmsghdr*>(control)), &ts, sizeof ts);
    }
    std::byte* data = control + rx_stamp_control_bytes;
    std::memcpy(data, payload, out.payloadlen);
    length = static_cast<int>(data + out.payloadlen - bytes.data());
  }
};

TEST(RxStamp, ParsesTheStampAndPayloadOfARecvmsgBuffer) {
  recvmsg_buffer b("HTTP/1.1 200 OK", true, timespec{1'700'000'000, 123'456'789});
  const auto in = parse_recvmsg(b.bytes.data(), b.length, b.layout);
  ASSERT_TRUE(in.valid);
  EXPECT_EQ(in.real_stamp, 1'700'000'000'123'456'789);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(in.payload.data()), in.payload.size()), "HTTP/1.1 200 OK");
}

TEST(RxStamp, AReceiveWithoutStampOrTooShortIsSaidSo) {
  recvmsg_buffer b("pong", false);
  const auto in = parse_recvmsg(b.bytes.data(), b.length, b.layout);
  ASSERT_TRUE(in.valid);
  EXPECT_EQ(in.real_stamp, 0);
  EXPECT_EQ(in.payload.size(), 4u);
  EXPECT_FALSE(parse_recvmsg(b.bytes.data(), 8, b.layout).valid) << "shorter than its header";
}

}  // namespace
