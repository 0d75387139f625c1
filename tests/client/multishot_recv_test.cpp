// The client side's multishot receive (src/client/multishot_recv.hpp), which the client
// runtime, the server's downstream connections and ringrpc-load share: what each way a
// receive can end means, and, on a real ring whose completion queue fills, that a receive the
// kernel stops after delivering bytes is armed again rather than taken for the peer's close
// (ringrpc-load lost hundreds of live connections that way at 10,000 flows).
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "client/multishot_recv.hpp"
#include "uring/provided_buffers.hpp"

namespace ringrpc::detail {
namespace {

constexpr std::uint16_t group = 3;

io_uring_cqe cqe_of(int res, std::uint32_t flags) {
  io_uring_cqe cqe{};
  cqe.res = res;
  cqe.flags = flags;
  return cqe;
}

class small_ring : public ::testing::Test {
 protected:
  void SetUp() override {
    // A completion queue of 4: the fifth completion in a row cannot be posted until the test
    // reaps, which is when the kernel stops a multishot receive.
    io_uring_params p{};
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = 4;
    ASSERT_EQ(io_uring_queue_init_params(4, &_ring, &p), 0);
    _buffers = std::make_unique<provided_buffers>(&_ring, group, 64, 256);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, _fds), 0);
  }
  void TearDown() override {
    _buffers.reset();
    io_uring_queue_exit(&_ring);
    ::close(_fds[0]);
    ::close(_fds[1]);
  }
  void arm() {
    io_uring_sqe* sqe = io_uring_get_sqe(&_ring);
    ASSERT_NE(sqe, nullptr);
    _buffers->prep_recv_multishot(sqe, _fds[0]);
    io_uring_sqe_set_data64(sqe, 1);
    ASSERT_EQ(io_uring_submit(&_ring), 1);
  }

  io_uring _ring{};
  std::unique_ptr<provided_buffers> _buffers;
  int _fds[2] = {-1, -1};
};

TEST_F(small_ring, each_way_a_receive_ends_means_what_it_says) {
  EXPECT_EQ(take_recv(*_buffers, cqe_of(-ENOBUFS, 0), false, [](auto) {}), recv_left::rearm);
  EXPECT_EQ(take_recv(*_buffers, cqe_of(0, 0), false, [](auto) {}), recv_left::ended);
  EXPECT_EQ(take_recv(*_buffers, cqe_of(-ECONNRESET, 0), false, [](auto) {}), recv_left::ended);
  EXPECT_EQ(take_recv(*_buffers, cqe_of(-ECANCELED, 0), false, [](auto) {}), recv_left::ended);
}

TEST_F(small_ring, a_receive_stopped_by_a_full_completion_queue_is_armed_again_and_loses_nothing) {
  arm();
  // Each write completes a receive on the way back from the write (task work), so with the
  // completion queue unreaped the fifth one finds it full.
  std::string sent;
  for (int i = 0; i < 12; ++i) {
    const std::string chunk = "chunk " + std::to_string(i) + ";";
    ASSERT_EQ(::write(_fds[1], chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
    sent += chunk;
  }
  std::string got;
  int stopped_with_bytes = 0;
  while (got.size() < sent.size()) {
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec ts{.tv_sec = 5, .tv_nsec = 0};
    ASSERT_EQ(io_uring_wait_cqe_timeout(&_ring, &cqe, &ts), 0) << "received " << got.size() << " of " << sent.size();
    const io_uring_cqe seen = *cqe;
    io_uring_cqe_seen(&_ring, cqe);
    const recv_left left = take_recv(*_buffers, seen, false, [&](std::span<const std::byte> b) {
      got.append(reinterpret_cast<const char*>(b.data()), b.size());
    });
    _buffers->commit();
    if (left == recv_left::armed) continue;
    ASSERT_EQ(left, recv_left::rearm) << "the receive ended with " << seen.res << " after " << got.size() << " bytes";
    if (seen.res > 0) ++stopped_with_bytes;
    arm();
  }
  EXPECT_EQ(got, sent);
  // The case this test is about happened: the kernel posted a final completion that carried
  // bytes (io_uring_prep_recv_multishot(3): a multishot request ends when the CQ ring fills).
  EXPECT_GE(stopped_with_bytes, 1);
}

}  // namespace
}  // namespace ringrpc::detail
