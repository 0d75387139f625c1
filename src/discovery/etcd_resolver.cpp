#include <algorithm>
#include <memory>
#include <stdexcept>

#include "channel/host_port.hpp"
#include "discovery/prefix_watcher.hpp"
#include "log/log.hpp"
#include "ringrpc/discovery.hpp"

namespace ringrpc::discovery {

namespace {

class etcd_resolver final : public resolver {
 public:
  etcd_resolver(std::string target, std::string base_url, std::string prefix)
      : _target(std::move(target)), _base(std::move(base_url)), _prefix(std::move(prefix)) {}
  ~etcd_resolver() override { stop(); }

  void start(std::function<void(std::vector<member_address>)> update) override {
    _watcher = std::make_unique<detail::prefix_watcher>(
        _base, _prefix, [this, update = std::move(update)](const detail::prefix_watcher::snapshot& keys) {
          std::vector<member_address> members;
          for (const auto& [key, value] : keys) {
            auto rec = decode_member_record(value);
            std::optional<member_address> m;
            if (rec) m = ringrpc::detail::parse_host_port(rec->address);
            if (!m) {
              log::warn("discovery_bad_record", {{"key", key}, {"msg", "not a member record; ignored (docs/deployment.md)"}});
              continue;
            }
            m->weight = rec->weight;
            m->zone = rec->zone;
            members.push_back(std::move(*m));
          }
          update(std::move(members));
        });
    _watcher->start();
  }

  void stop() noexcept override {
    if (_watcher) _watcher->stop();
  }

  std::string describe() const override { return _target; }

 private:
  std::string _target;
  std::string _base;
  std::string _prefix;
  std::unique_ptr<detail::prefix_watcher> _watcher;
};

}  // namespace

std::shared_ptr<resolver> make_etcd_resolver(std::string_view target) {
  constexpr std::string_view scheme = "etcd://";
  const auto bad = [&](const char* why) {
    return std::invalid_argument(std::string("channel target \"").append(target).append("\": ").append(why) +
                                 " (expected etcd://HOST:PORT/SERVICE[?prefix=/PREFIX])");
  };
  if (!target.starts_with(scheme)) throw bad("not an etcd:// target");
  std::string_view rest = target.substr(scheme.size());
  std::string prefix = "/ringrpc/services";
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    const auto query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!query.starts_with("prefix=") || query.size() <= 8 || query[7] != '/') throw bad("the only query is prefix=/...");
    prefix = std::string(query.substr(7));
    while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  }
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos || slash + 1 == rest.size()) throw bad("no service name");
  const auto hostport = rest.substr(0, slash);
  const auto service = rest.substr(slash + 1);
  if (!ringrpc::detail::parse_host_port(hostport)) throw bad("etcd address is not HOST:PORT");
  if (service.find('/') != std::string_view::npos) throw bad("a service name has no '/'");
  return std::make_shared<etcd_resolver>(std::string(target), std::string("http://").append(hostport),
                                         prefix + "/" + std::string(service) + "/");
}

channel open_channel(std::string_view target, channel_options options) {
  if (target.starts_with("etcd://")) return channel(make_etcd_resolver(target), std::move(options));
  return channel::create(target, std::move(options));
}

}  // namespace ringrpc::discovery
