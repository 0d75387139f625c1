#include <algorithm>
#include <memory>
#include <stdexcept>

#include "channel/host_port.hpp"
#include "discovery/prefix_watcher.hpp"
#include "log/log.hpp"
#include "ringrpc/discovery.hpp"

namespace ringrpc::discovery {

namespace {

// Appends the member a key's value records; a value that is not a record is logged and skipped.
void add_member(std::vector<member_address>& members, const std::string& key, const std::string& value) {
  auto rec = decode_member_record(value);
  std::optional<member_address> m;
  if (rec) m = ringrpc::detail::parse_host_port(rec->address);
  if (!m) {
    log::warn("discovery_bad_record", {{"key", key}, {"msg", "not a member record; ignored (docs/deployment.md)"}});
    return;
  }
  m->weight = rec->weight;
  m->zone = rec->zone;
  members.push_back(std::move(*m));
}

struct etcd_target {
  std::string base_url;  // http://HOST:PORT
  std::string prefix;    // PREFIX/SERVICE/
};

etcd_target parse_etcd_target(std::string_view target) {
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
  return {std::string("http://").append(hostport), prefix + "/" + std::string(service) + "/"};
}

class etcd_resolver final : public resolver {
 public:
  etcd_resolver(std::string target, std::string base_url, std::string prefix)
      : _target(std::move(target)), _base(std::move(base_url)), _prefix(std::move(prefix)) {}
  ~etcd_resolver() override { stop(); }

  void start(std::function<void(std::vector<member_address>)> update) override {
    _watcher = std::make_unique<detail::prefix_watcher>(
        _base, _prefix, [update = std::move(update)](const detail::prefix_watcher::snapshot& keys) {
          std::vector<member_address> members;
          for (const auto& [key, value] : keys) add_member(members, key, value);
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
  etcd_target t = parse_etcd_target(target);
  return std::make_shared<etcd_resolver>(std::string(target), std::move(t.base_url), std::move(t.prefix));
}

std::vector<member_address> list_members(std::string_view target, std::chrono::milliseconds timeout) {
  const etcd_target t = parse_etcd_target(target);
  const auto listed = detail::etcd_client(t.base_url, timeout).range_prefix(t.prefix);
  if (!listed) throw std::runtime_error(listed.error);
  std::vector<member_address> members;
  for (const auto& kv : listed.value->kvs) add_member(members, kv.key, kv.value);
  return members;
}

channel open_channel(std::string_view target, channel_options options) {
  if (target.starts_with("etcd://")) return channel(make_etcd_resolver(target), std::move(options));
  return channel::create(target, std::move(options));
}

}  // namespace ringrpc::discovery
