#pragma once
// gen_test.fbs's Streamer: one typed stream of each kind, keeping to credit as a handler
// should (Generate writes until would_block and goes on in on_writable; Echo pauses its reading
// while a reply waits for credit). Served by the typed stream tests and gen_test_server.
#include <cstdint>
#include <memory>
#include <string>

#include "gen_test_ringrpc.hpp"

namespace ringrpc::test {

class streamer_service final : public Streamer::service {
 public:
  using handler = typed_stream_handler<StreamRequest, StreamReply>;
  using stream = typed_server_stream<StreamReply>;

  std::unique_ptr<handler> Generate(stream& s, const StreamRequest& request) override {
    auto h = std::make_unique<generate>(request.count(), request.text() ? request.text()->str() : std::string());
    h->on_writable(s);
    return h;
  }
  std::unique_ptr<handler> Collect(stream&) override { return std::make_unique<collect>(); }
  std::unique_ptr<handler> Echo(stream&) override { return std::make_unique<echo>(); }

 private:
  class generate final : public handler {
   public:
    generate(std::uint32_t count, std::string text) : _count(count), _text(std::move(text)) {}
    void on_writable(stream& s) override {
      flatbuffers::FlatBufferBuilder fbb;
      while (_next < _count) {
        if (s.write(fbb, CreateStreamReplyDirect(fbb, _next, _text.c_str())) != write_result::ok) return;
        ++_next;
      }
      s.finish();
    }

   private:
    std::uint32_t _count, _next = 0;
    std::string _text;
  };

  class collect final : public handler {
   public:
    void on_message(stream&, const StreamRequest& m) override {
      ++_count;
      _last = m.text() ? m.text()->str() : std::string();
    }
    void on_half_close(stream& s) override {
      if (_count == 0) {
        s.finish();  // nothing to answer: ends with no reply (ringrpc-call prints nothing then)
        return;
      }
      flatbuffers::FlatBufferBuilder fbb;
      s.finish(fbb, CreateStreamReplyDirect(fbb, _count, _last.c_str()));
    }

   private:
    std::uint32_t _count = 0;
    std::string _last;
  };

  class echo final : public handler {
   public:
    void on_message(stream& s, const StreamRequest& m) override {
      _waiting = m.text() ? m.text()->str() : std::string();
      if (send(s)) return;
      // No credit: keep this one reply and read no further until it is out.
      s.raw().pause_reading();
    }
    void on_writable(stream& s) override {
      if (_has_waiting && send(s)) s.raw().resume_reading();
    }
    void on_half_close(stream& s) override { s.finish(); }  // after every message echoed

   private:
    bool send(stream& s) {
      flatbuffers::FlatBufferBuilder fbb;
      _has_waiting = s.write(fbb, CreateStreamReplyDirect(fbb, _index, _waiting.c_str())) != write_result::ok;
      if (!_has_waiting) ++_index;
      return !_has_waiting;
    }
    std::uint32_t _index = 0;
    std::string _waiting;
    bool _has_waiting = false;
  };
};

}  // namespace ringrpc::test
