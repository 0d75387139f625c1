// The JSON result document (write_json) and reading its plot data back (read_plot_series).

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "report.hpp"
#include "report_internal.hpp"

namespace ringrpc::load {

using report_detail::ns_to_us;

namespace {

nlohmann::json latency_object(const detail::latency_histogram& h, const std::vector<double>& percentiles) {
  nlohmann::json o = nlohmann::json::object();
  o["min"] = ns_to_us(h.min());
  for (const double p : percentiles) o[percentile_key(p)] = ns_to_us(h.value_at_percentile(p));
  o["max"] = ns_to_us(h.max());
  o["mean"] = ns_to_us(h.mean());
  o["stddev"] = ns_to_us(h.stddev());
  return o;
}

// JSON has no NaN or infinity; nlohmann would write null, which readers then trip over.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }

}  // namespace

namespace {

nlohmann::json spectrum_json(const detail::latency_histogram& h) {
  nlohmann::json spectrum = nlohmann::json::array();
  for (const auto& [p, us] : report_detail::latency_spectrum(h)) spectrum.push_back({{"percentile", p}, {"latency_us", us}});
  return spectrum;
}

nlohmann::json seconds_json(const run_result& r) {
  nlohmann::json seconds = nlohmann::json::array();
  for (const second_sample& s : r.per_second) {
    seconds.push_back({{"t_s", finite(s.t_s)},
                       {"width_s", finite(s.width_s)},
                       {"calls_ok", s.calls_ok},
                       {"errors", s.errors},
                       {"p99_us", ns_to_us(s.p99_ns)}});
  }
  return seconds;
}

nlohmann::json steps_json(const run_result& r) {
  nlohmann::json steps = nlohmann::json::array();
  for (const step_result& s : r.steps) {
    nlohmann::json o = {{"start_s", finite(s.start_s)},
                        {"duration_s", finite(s.duration_s)},
                        {"requested_rate", finite(s.requested_rate)},
                        {"issued_rate", finite(s.issued_rate())},
                        {"answered_rate", finite(s.achieved_rate)},
                        {"achieved_rate", finite(s.achieved_rate)},
                        {"scheduled", s.scheduled},
                        {"issued", s.issued},
                        {"late_client", s.late_client},
                        {"late_held", s.late_held},
                        {"answered", s.answered},
                        {"kept_up", s.kept_up},
                        {"p99_us", ns_to_us(s.p99_ns)}};
    if (!s.kept_up) o["reason"] = s.reason;
    if (s.ramp_from >= 0) {
      o["ramp_from"] = finite(s.ramp_from);
      o["ramp_to"] = finite(s.ramp_to);
    }
    steps.push_back(std::move(o));
  }
  return steps;
}

// The --mix kinds ("kind") or a registry's members ("address", with their error total).
nlohmann::json breakdown_json(const std::vector<kind_result>& rows, const char* name_key, bool with_total,
                              const std::vector<double>& percentiles) {
  nlohmann::json out = nlohmann::json::array();
  for (const kind_result& k : rows) {
    nlohmann::json o = {{name_key, k.name}, {"calls_ok", k.calls_ok}, {"errors", k.errors}};
    if (with_total) o["error_total"] = k.error_total();
    o["latency_us"] = latency_object(k.latency_ns, percentiles);
    out.push_back(std::move(o));
  }
  return out;
}

// New connections per second (a connection per call) and the TLS handshakes.
void connections_json(nlohmann::json& j, const run_result& r, const std::vector<double>& percentiles) {
  const auto per_s = [&](std::uint64_t n) { return finite(r.measured_s > 0 ? static_cast<double>(n) / r.measured_s : 0); };
  if (r.new_connection_per_call) {
    j["connections"] = {{"opened", r.connections_measured}, {"per_sec", per_s(r.connections_measured)}};
  }
  if (!r.tls) return;
  j["tls_handshakes"] = {{"count", r.handshake_ns.count()},
                         {"failures", r.handshake_failures},
                         {"latency_us", latency_object(r.handshake_ns, percentiles)}};
  if (r.new_connection_per_call) {
    j["tls_handshakes"]["measured"] = r.handshakes_measured;
    j["tls_handshakes"]["per_sec"] = per_s(r.handshakes_measured);
  }
}

void thresholds_json(nlohmann::json& j, const run_result& r) {
  if (r.verdicts.empty()) return;
  nlohmann::json verdicts = nlohmann::json::array();
  bool any = false;
  for (const threshold_verdict& v : r.verdicts) {
    nlohmann::json o = {{"expression", v.expression}, {"observed", finite(v.observed_value)},
                        {"limit", finite(v.limit_value)}, {"unit", v.unit}, {"failed", v.failed}};
    if (!v.note.empty()) o["note"] = v.note;
    verdicts.push_back(std::move(o));
    any = any || v.failed;
  }
  j["thresholds"] = std::move(verdicts);
  j["thresholds_failed"] = any;
}

}  // namespace

void write_json(const run_result& r, const std::vector<double>& percentiles, std::ostream& out) {
  nlohmann::json j = nlohmann::json::object();
  j["config"] = nlohmann::json::object();
  for (const auto& [key, value] : r.config) j["config"][key] = value;
  j["interrupted"] = r.interrupted;
  j["warmup_s"] = finite(r.warmup_s);
  j["measured_s"] = finite(r.measured_s);
  j["calls_ok"] = r.calls_ok;
  j["calls_per_sec"] = finite(r.calls_per_sec());
  j["errors"] = r.errors;
  if (r.streams) {
    j["streams_opened"] = r.streams_opened;
    j["streams_failed"] = r.streams_failed;
    j["stream_failures"] = r.stream_failures;
    j["stream_credit_waits"] = r.stream_credit_waits;
  }
  if (r.server) j["server_cost"] = server_cost_json(*r.server);
  j["latency_us"] = latency_object(r.latency_ns, percentiles);
  j["latency_clock"] = r.latency_clock;
  connections_json(j, r, percentiles);
  if (r.open_loop) j["service_latency_us"] = latency_object(r.service_ns, percentiles);
  j["requested_rate"] = r.open_loop ? finite(r.requested_rate) : 0.0;
  j["achieved_rate"] = finite(report_detail::achieved_rate(r));
  if (r.open_loop) {
    j["kept_up"] = r.kept_up;
    j["issued_rate"] = finite(r.issued_rate);
    j["answered_rate"] = finite(r.answered_rate);
  }
  const auto per_s = [&](std::uint64_t n) { return finite(r.measured_s > 0 ? static_cast<double>(n) / r.measured_s : 0); };
  j["bytes"] = {{"sent", r.bytes_sent},
                {"received", r.bytes_received},
                {"sent_per_sec", per_s(r.bytes_sent)},
                {"received_per_sec", per_s(r.bytes_received)}};
  j["spectrum"] = spectrum_json(r.latency_ns);
  if (r.open_loop) j["service_spectrum"] = spectrum_json(r.service_ns);
  j["per_second"] = seconds_json(r);
  j["steps"] = steps_json(r);
  if (!r.kinds.empty()) j["kinds"] = breakdown_json(r.kinds, "kind", false, percentiles);
  if (!r.members.empty()) j["members"] = breakdown_json(r.members, "address", true, percentiles);
  thresholds_json(j, r);
  // Texts from the command line (a template) may be any bytes: replaced, not thrown on.
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
}

namespace {

// Reads `key` of `obj` as a number, or explains which file lacks it.
double number_at(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) {
    throw std::runtime_error(where + ": missing number \"" + key + "\"");
  }
  return it->get<double>();
}

}  // namespace

plot_series read_plot_series(const std::string& json_path) {
  std::ifstream in(json_path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open '" + json_path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error("'" + json_path + "' is not valid JSON: " + e.what());
  }
  const std::string hint = " (expected a file written by ringrpc-load --json)";
  if (!j.is_object()) throw std::runtime_error("'" + json_path + "': not a JSON object" + hint);

  plot_series s;
  s.label = std::filesystem::path(json_path).stem().string();

  const auto spectrum = j.find("spectrum");
  if (spectrum == j.end() || !spectrum->is_array()) {
    throw std::runtime_error("'" + json_path + "': no \"spectrum\" array" + hint);
  }
  auto read_points = [&](const nlohmann::json& arr, const char* name, std::vector<std::pair<double, double>>& into) {
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const std::string where = "'" + json_path + "': " + name + "[" + std::to_string(i) + "]";
      const nlohmann::json& point = arr[i];
      if (!point.is_object()) throw std::runtime_error(where + ": not an object");
      into.emplace_back(number_at(point, "percentile", where), number_at(point, "latency_us", where));
    }
  };
  read_points(*spectrum, "spectrum", s.spectrum);
  if (const auto service = j.find("service_spectrum"); service != j.end() && service->is_array()) {
    read_points(*service, "service_spectrum", s.service_spectrum);
  }
  if (const auto rr = j.find("requested_rate"); rr != j.end() && rr->is_number()) s.requested_rate = rr->get<double>();
  if (const auto config = j.find("config"); config != j.end() && config->is_object()) {
    std::map<std::string, nlohmann::json> c;
    for (const auto& [k, v] : config->items()) c[k] = v;
    const auto measured = j.find("measured_s");
    s.title = run_title(c, measured != j.end() && measured->is_number() ? measured->get<double>() : 0);
  }
  if (const auto steps = j.find("steps"); steps != j.end() && steps->is_array()) {
    for (const auto& st : *steps) {
      const auto start = st.find("start_s"), length = st.find("duration_s"), rate = st.find("requested_rate");
      if (!st.is_object() || start == st.end() || length == st.end() || rate == st.end() || !start->is_number() ||
          !length->is_number() || !rate->is_number()) {
        continue;  // files of older versions: the flat requested_rate is drawn instead
      }
      // A ramp segment's ends, when the file has them; a step's one rate otherwise.
      const auto from = st.find("ramp_from"), to = st.find("ramp_to");
      const bool ramp = from != st.end() && to != st.end() && from->is_number() && to->is_number();
      s.requested_steps.emplace_back(start->get<double>(), start->get<double>() + length->get<double>(),
                                     ramp ? from->get<double>() : rate->get<double>(),
                                     ramp ? to->get<double>() : rate->get<double>());
    }
  }

  // Older or hand-made files may lack the time series; the latency plot still works.
  if (const auto seconds = j.find("per_second"); seconds != j.end()) {
    if (!seconds->is_array()) throw std::runtime_error("'" + json_path + "': \"per_second\" is not an array");
    for (std::size_t i = 0; i < seconds->size(); ++i) {
      const std::string where = "'" + json_path + "': per_second[" + std::to_string(i) + "]";
      const nlohmann::json& sample = (*seconds)[i];
      if (!sample.is_object()) throw std::runtime_error(where + ": not an object");
      // A sample covers width_s seconds (older files: always one).
      const auto w = sample.find("width_s");
      const double width = w != sample.end() && w->is_number() && w->get<double>() > 0 ? w->get<double>() : 1.0;
      s.rate.emplace_back(number_at(sample, "t_s", where), number_at(sample, "calls_ok", where) / width);
      s.last_rate_partial = width < 1 - 1e-9;
    }
  }
  return s;
}

}  // namespace ringrpc::load
