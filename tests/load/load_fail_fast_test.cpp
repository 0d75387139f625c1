// Failing fast on a wrong target (tools/load/engine_fail_fast.hpp): which errors cannot
// improve, when the first answers decide, and what the message says.

#include "engine_fail_fast.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using namespace ringrpc::load;

constexpr std::int64_t ms = 1'000'000;

TEST(hopeless_error_index, ErrorsNoRetryChangesAndOthers) {
  for (const char* kind : {"unknown_method", "unauthenticated", "permission_denied", "bad_request", "protocol",
                           "http_404", "http_401", "grpc_unimplemented", "grpc_unauthenticated"}) {
    const int i = hopeless_error_index(kind);
    ASSERT_GE(i, 0) << kind;
    EXPECT_EQ(hopeless_error_name(i), kind);
  }
  for (const char* kind : {"server_busy", "timeout", "closed", "connect", "deadline_exceeded", "http_503",
                           "grpc_unavailable", "shutting_down", "unfinished", "resp_err", ""}) {
    EXPECT_EQ(hopeless_error_index(kind), -1) << kind;
  }
  EXPECT_EQ(hopeless_error_name(-1), "");
  EXPECT_EQ(hopeless_error_name(1000), "");
}

TEST(answer_watch, OneSecondOrAThousandAnswersDecide) {
  const answer_watch w;
  using v = answer_watch::verdict;
  EXPECT_EQ(w.observe(0, 0, 0, 0), v::watching);
  EXPECT_EQ(w.observe(0, 999, 0, 999 * ms), v::watching);
  EXPECT_EQ(w.observe(0, 1000, 0, 10 * ms), v::hopeless) << "the first 1,000 answers";
  EXPECT_EQ(w.observe(0, 3, 0, 1000 * ms), v::hopeless) << "the first second";
  EXPECT_EQ(w.observe(0, 0, 0, 5000 * ms), v::watching) << "no answer yet: nothing to judge";
}

TEST(answer_watch, AnyOtherOutcomeMeansTheTargetIsFine) {
  const answer_watch w;
  using v = answer_watch::verdict;
  EXPECT_EQ(w.observe(1, 5000, 0, 2000 * ms), v::fine) << "one call succeeded";
  EXPECT_EQ(w.observe(0, 5000, 1, 2000 * ms), v::fine) << "a busy server, a timeout: may improve";
  EXPECT_EQ(w.observe(0, 0, 1, 0), v::fine);
}

TEST(hopeless_message, NamesTheKindTheCountAndWhatToCheck) {
  target t;
  t.scheme = "ringrpc";
  t.host = "127.0.0.1";
  t.port = 7000;
  t.path = "no.such";
  const std::string m = hopeless_message("unknown_method", 1234, t);
  EXPECT_NE(m.find("unknown_method"), std::string::npos) << m;
  EXPECT_NE(m.find("1234 calls"), std::string::npos) << m;
  EXPECT_NE(m.find("'no.such'"), std::string::npos) << m;
  EXPECT_NE(m.find("ringrpc-call 127.0.0.1:7000 list"), std::string::npos) << m;
  t.scheme = "http";
  t.path = "/missing";
  EXPECT_NE(hopeless_message("http_404", 1, t).find("'/missing'"), std::string::npos);
  EXPECT_NE(hopeless_message("http_404", 1, t).find("1 call)"), std::string::npos);
}

}  // namespace
