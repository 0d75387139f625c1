#pragma once
/// \file The future of an asynchronous call's reply: a std::future that refuses to wait where
/// waiting can never end.
///
/// A reply is delivered by a client runtime's thread (client.hpp). Waiting for it on such a
/// thread — in a callback, typically — blocks the very thread that would deliver it (or, for
/// another runtime's call, stalls every connection of this one). So get() and wait() throw
/// std::logic_error at once there unless the result is ready already. Elsewhere it is a plain
/// std::future; converting it to std::future<T> is allowed and drops the check.

#include "ringrpc/cxx20.hpp"

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <utility>
#include "ringrpc/export.hpp"

RINGRPC_API_BEGIN

namespace ringrpc {

namespace detail {
/// True on the thread of any client runtime (client_loop.cpp).
bool on_client_runtime_thread() noexcept;
}  // namespace detail

template <class T>
class reply_future : public std::future<T> {
 public:
  reply_future() noexcept = default;
  reply_future(std::future<T>&& f) noexcept : std::future<T>(std::move(f)) {}  // NOLINT: implicit

  /// As std::future::get(); throws std::logic_error on a client runtime's thread when the
  /// result is not ready (it could never become ready while that thread waits).
  T get() {
    refuse_blocking("get");
    return std::future<T>::get();
  }
  /// As std::future::wait(), with get()'s check.
  void wait() const {
    refuse_blocking("wait");
    std::future<T>::wait();
  }

 private:
  void refuse_blocking(const char* what) const {
    if (!detail::on_client_runtime_thread() || !this->valid()) return;
    if (std::future<T>::wait_for(std::chrono::seconds(0)) == std::future_status::ready) return;
    throw std::logic_error(std::string("ringrpc::reply_future::") + what +
                           ": waiting for a reply on a client runtime's thread (in a callback) would "
                           "wait forever; chain a callback with call_async instead");
  }
};

}  // namespace ringrpc

RINGRPC_API_END
