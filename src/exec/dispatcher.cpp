#include "exec/dispatcher.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <stdexcept>
#include <thread>

#include "base/cpu_affinity.hpp"

namespace ringrpc::detail {

namespace {

const std::string default_pool_name = "default";

void check_endpoint_name(const std::string& name, bool allow_dots) {
  if (name.empty()) throw std::invalid_argument("endpoint name must not be empty");
  if (!allow_dots && name.find('.') != std::string::npos) {
    throw std::invalid_argument("endpoint name '" + name +
                                "' must not contain '.': calls to 'NAME.method' are routed to "
                                "the endpoint NAME");
  }
}

}  // namespace

dispatcher::dispatcher(exec_host& host) : _host(host), _table(std::make_shared<table>()) {}

dispatcher::~dispatcher() { shut_down_pools(); }

void dispatcher::add_pool(std::string name, pool_options options) {
  std::lock_guard lock(_mu);
  if (_started) throw std::logic_error("add_pool('" + name + "') after start()");
  if (name.empty()) throw std::invalid_argument("pool name must not be empty");
  if (name == default_pool_name || _pool_options.contains(name)) {
    throw std::invalid_argument("pool '" + name + "' already exists");
  }
  // Validate now, so a bad pool is reported where it was added.
  thread_pool probe(name, options);
  _pool_options.emplace(std::move(name), options);
}

thread_pool* dispatcher::find_pool_locked(const std::string& name) const {
  auto it = _pools.find(name.empty() ? default_pool_name : name);
  return it == _pools.end() ? nullptr : it->second.get();
}

std::unique_ptr<thread_pool> dispatcher::make_owned_pool(const std::string& name,
                                                         const pool_options& options, bool quiet) {
  auto pool = _host.make_pool(name, options, quiet);
  pool->set_owner(this);  // before start(): the workers read it through owns()
  return pool;
}

thread_pool* dispatcher::find_pool(std::string_view name) const {
  std::lock_guard lock(_mu);
  return find_pool_locked(std::string(name));
}

void dispatcher::register_endpoint(std::string name, std::shared_ptr<endpoint> ep,
                                   endpoint_options options, bool allow_dots) {
  check_endpoint_name(name, allow_dots);
  if (!ep) throw std::invalid_argument("endpoint '" + name + "' is null");
  if (options.concurrency == endpoint_concurrency::serial && options.inbox_capacity == 0) {
    throw std::invalid_argument("endpoint '" + name + "': inbox_capacity must be >= 1");
  }
  std::unique_lock lock(_mu);
  if (_live.contains(name)) throw std::invalid_argument("endpoint '" + name + "' is already registered");
  if (!_started) {
    // Pools do not exist yet: check the name now, create the slot in start().
    if (!options.own_pool && !options.pool.empty() && options.pool != default_pool_name &&
        !_pool_options.contains(options.pool)) {
      throw std::invalid_argument("endpoint '" + name + "': no pool named '" + options.pool + "'");
    }
    if (options.own_pool) thread_pool probe(name, *options.own_pool);
    _live.emplace(name, nullptr);
    _pending.push_back({std::move(name), std::move(ep), std::move(options)});
    return;
  }
  auto slot = make_slot_locked(name, std::move(ep), std::move(options));
  endpoint_slot* s = slot.get();
  _live.emplace(name, nullptr);  // reserve the name while on_start runs
  lock.unlock();
  try {
    s->start();  // before publication: nothing can reach the endpoint before on_start
  } catch (...) {
    lock.lock();
    _live.erase(name);
    throw;
  }
  lock.lock();
  _live[name] = s;
  _retired.erase(name);
  _slots.push_back(std::move(slot));
  publish_locked();
}

std::unique_ptr<endpoint_slot> dispatcher::make_slot_locked(const std::string& name,
                                                            std::shared_ptr<endpoint> ep,
                                                            endpoint_options options) {
  std::unique_ptr<thread_pool> own;
  thread_pool* pool = nullptr;
  if (options.policy != dispatch_policy::direct) {  // direct runs everything on the caller
    if (options.own_pool) {
      own = make_owned_pool(name, *options.own_pool);
      own->start();
      pool = own.get();
    } else {
      pool = find_pool_locked(options.pool);
      if (!pool) throw std::invalid_argument("endpoint '" + name + "': no pool named '" + options.pool + "'");
    }
  }
  return std::make_unique<endpoint_slot>(_host, name, std::move(ep), std::move(options), pool,
                                         std::move(own), _ordered.get());
}

bool dispatcher::unregister_endpoint(std::string_view name) {
  endpoint_slot* s = nullptr;
  {
    std::lock_guard lock(_mu);
    auto it = _live.find(name);
    if (it == _live.end()) return false;
    s = it->second;
    if (s == nullptr) {
      if (_started) return false;  // its on_start is still running
      std::erase_if(_pending, [&](const pending& p) { return p.name == name; });
      _live.erase(it);
      return true;
    }
    _live.erase(it);
    // Still routed, so its callers hear "stopped" rather than "unknown" until a new endpoint
    // takes the name.
    _retired[std::string(name)] = s;
    publish_locked();
  }
  // Readers holding the old table still route to the slot; it refuses with SHUTTING_DOWN.
  s->begin_stop();
  return true;
}

void dispatcher::start() {
  std::lock_guard lock(_mu);
  pool_options def;
  def.kind = pool_kind::fixed;
  const unsigned handlers = _host.handler_threads();
  def.threads = handlers != 0 ? handlers : usable_cpus();
  def.queue = static_cast<int>(std::min<std::uint64_t>(
      static_cast<std::uint64_t>(def.threads) * _host.handler_queue_size(), INT32_MAX));
  _pools.emplace(default_pool_name, make_owned_pool(default_pool_name, def));
  for (auto& [name, po] : _pool_options) _pools.emplace(name, make_owned_pool(name, po));
  pool_options ordered;
  ordered.kind = pool_kind::fixed;
  ordered.threads = 1;
  // It runs only endpoints' event lanes, which go in as singletons (never refused, no queue
  // slot taken): the queue itself stays empty.
  ordered.queue = 16;
  _ordered = make_owned_pool("conn-events", ordered, /*quiet=*/true);
  for (auto& [name, p] : _pools) p->start();
  _ordered->start();

  // Endpoints registered before start, in registration order.
  for (auto& p : _pending) {
    auto slot = make_slot_locked(p.name, std::move(p.ep), std::move(p.options));
    slot->start();
    _live[p.name] = slot.get();
    _slots.push_back(std::move(slot));
  }
  _pending.clear();
  _started = true;
  publish_locked();
}

void dispatcher::publish_locked() {
  auto t = std::make_shared<table>();
  for (auto& [name, slot] : _live) {
    if (slot == nullptr) continue;  // still starting
    t->by_name.emplace(name, slot);
    t->all.push_back(slot);
    if (slot->target().hears_connection_events()) t->hearing.push_back(slot);
  }
  for (auto& [name, slot] : _retired) t->by_name.emplace(name, slot);  // live names win
  _table = std::move(t);
  _version.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const dispatcher::table> dispatcher::current() const {
  std::lock_guard lock(_mu);
  return _table;
}

bool dispatcher::stop_endpoints(std::chrono::steady_clock::time_point deadline) {
  std::vector<endpoint_slot*> slots;
  {
    std::lock_guard lock(_mu);
    for (auto& [name, slot] : _live) {
      if (slot != nullptr) _retired[name] = slot;
    }
    _live.clear();
    publish_locked();
    for (auto& s : _slots) slots.push_back(s.get());
  }
  for (auto* s : slots) s->begin_stop();
  for (auto* s : slots) {
    while (!s->stopped()) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return true;
}

void dispatcher::shut_down_pools() {
  // Own pools first: their endpoints may still hand connection events to the ordered thread.
  std::vector<thread_pool*> pools;
  {
    std::lock_guard lock(_mu);
    for (auto& s : _slots) {
      if (s->own_pool()) pools.push_back(s->own_pool());
    }
    for (auto& [name, p] : _pools) pools.push_back(p.get());
    if (_ordered) pools.push_back(_ordered.get());
  }
  for (auto* p : pools) p->shutdown_and_join();
}

std::vector<pool_stats> dispatcher::stats() const {
  std::lock_guard lock(_mu);
  std::vector<pool_stats> out;
  for (auto& [name, p] : _pools) out.push_back(p->stats());
  for (auto& s : _slots) {
    if (s->own_pool()) out.push_back(s->own_pool()->stats());
  }
  return out;
}

std::vector<std::string> dispatcher::busy_pools() const {
  std::lock_guard lock(_mu);
  std::vector<std::string> out;
  auto add = [&](const thread_pool& p) {
    if (p.stats().active > 0) out.push_back(p.describe());
  };
  for (auto& [name, p] : _pools) add(*p);
  for (auto& s : _slots) {
    if (s->own_pool()) add(*s->own_pool());
  }
  if (_ordered) add(*_ordered);
  return out;
}

std::size_t dispatcher::run_queued_here() {
  std::vector<thread_pool*> pools;
  {
    std::lock_guard lock(_mu);
    for (auto& [name, p] : _pools) pools.push_back(p.get());
    for (auto& s : _slots) {
      if (s->own_pool()) pools.push_back(s->own_pool());
    }
    if (_ordered) pools.push_back(_ordered.get());
  }
  std::size_t n = 0;
  for (auto* p : pools) n += p->run_queued_here();  // outside the lock: tasks may post more
  return n;
}

std::vector<std::string> dispatcher::describe_endpoints() const {
  std::lock_guard lock(_mu);
  std::vector<std::string> out;
  for (auto& [name, s] : _live) {
    if (s == nullptr) continue;
    out.push_back(std::string(name).append(": ").append(s->describe()));
  }
  return out;
}

}  // namespace ringrpc::detail
