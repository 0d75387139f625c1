// The engine's part of --stream: at the end of the run each stream is half-closed once its
// messages are all answered, the drain waits for the ends, and every stream is counted when its
// connection is replaced or the run ends. None of it runs per call: the codec
// (proto_ringrpc_stream.cpp) turns messages into calls, and these run once per drain turn or
// per connection.
#include "engine_worker.hpp"

namespace ringrpc::load::engine_detail {

// Half-closes the streams with nothing in flight (the server then ends them once it has
// answered everything, as echo_stream does); true once every live connection's stream has
// ended, or never opened.
bool worker::close_streams() {
  bool all_ended = true;
  for (conn_state& c : _conns) {
    if (c.dead) continue;
    stream_control* s = c.codec->stream();
    if (s == nullptr || !s->progress().open_sent) continue;
    if (c.in_flight == 0 && !s->progress().half_closed) {
      s->half_close(c.batch[c.filling].bytes);
      want_flush(c);
    }
    all_ended = all_ended && s->progress().ended;
  }
  return all_ended;
}

// One connection's stream, counted once: when its codec is replaced (a reconnection), or at the
// end of the run. Ok means ended Ok after our half-close; anything else failed, by why.
void worker::count_stream(const conn_state& c) {
  const stream_control* s = c.codec == nullptr ? nullptr : c.codec->stream();
  if (s == nullptr || !s->progress().open_sent) return;
  const stream_progress& p = s->progress();
  // Opened is counted when the open went out, so streams_failed is a part of streams_opened (a
  // stream lost before anything came back is opened and failed).
  ++tallies.streams_opened;
  tallies.stream_credit_waits += p.credit_waits;
  if (p.ended && !p.failed && p.half_closed) return;
  ++tallies.streams_failed;
  const std::string kind = p.failed ? p.end_kind : p.ended ? "stream_ended" : c.dead ? "connection_lost" : "no_end";
  ++tallies.stream_failures[kind];
  bool expected = false;
  if (p.failed && p.ended && !p.opened && _run.stream_refused.compare_exchange_strong(expected, true)) {
    _run.stream_refusal = p.end_kind + (p.end_message.empty() ? "" : " \"" + p.end_message + "\"");
  }
}

}  // namespace ringrpc::load::engine_detail
