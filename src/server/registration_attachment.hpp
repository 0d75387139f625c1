#pragma once
// A registration hook (ringrpc::registration, server.hpp) as one of the parts that live and
// die with the server: stop_blocking finds it to deregister before anything else stops, and
// the /metrics page appends its lines.

#include <memory>
#include <utility>

#include "ringrpc/server.hpp"
#include "server/server_core.hpp"

namespace ringrpc::detail {

class registration_attachment final : public server_attachment {
 public:
  registration_attachment(server_core& core, std::shared_ptr<registration> hook)
      : _core(core), _hook(std::move(hook)) {}
  void start() override { _hook->on_started(_core.port()); }
  void stop() noexcept override { _hook->on_stopped(); }
  void before_stop() noexcept { _hook->before_stop(); }
  const registration& hook() const noexcept { return *_hook; }

 private:
  server_core& _core;
  std::shared_ptr<registration> _hook;
};

}  // namespace ringrpc::detail
