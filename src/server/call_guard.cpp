#include "server/call_guard.hpp"

#include "server/connection.hpp"

namespace ringrpc::detail {

call_guard::call_guard(const server_options& o)
    : _limits{o.max_metadata_entries, o.max_metadata_bytes},
      _tokens(o.bearer_tokens),
      _every_call(!_tokens.empty()),
      _limiter(o.auth_failures, "rpc") {}

namespace {

// The identity a call carrying an accepted token gets: the connection's, plus the subject.
// One per subject per connection, kept with the connection (calls point at it).
const peer_identity* token_identity(connection& c, const std::string& subject) {
  connection::connection_rare& r = c.rare_part();
  for (const auto& t : r.token_identities) {
    if (t->token_subject == subject) return t.get();
  }
  auto id = r.identity != nullptr ? std::make_shared<peer_identity>(*r.identity)
                                  : std::make_shared<peer_identity>();
  id->token_subject = subject;
  r.token_identities.reserve(r.token_identities.size() + 1);
  r.token_identities.push_back(std::move(id));
  return r.token_identities.back().get();
}

}  // namespace

status call_guard::admit_caller(connection& c, call& k, const frame_view& v, std::int64_t now_ns,
                                std::string& why, refusal& r) {
  const metadata_view md(v.metadata);
  if (v.metadata != nullptr) {
    const metadata_check check = check_metadata(*v.metadata, _limits);
    if (!check.ok()) {
      why = describe(check, *v.metadata, _limits);
      return status::bad_request;
    }
  }
  k.peer = c.identity();
  if (!_tokens.empty()) {
    const status s = check_token(c, k, v.method, md.find("authorization"), now_ns, why, r);
    if (s != status::ok) return s;
  }
  if (_authorizer != nullptr) return decide(*_authorizer, {v.method, k.peer, md}, why, "server");
  return status::ok;
}

status call_guard::check_token(connection& c, call& k, std::string_view method,
                               const std::optional<std::string_view>& value, std::int64_t now_ns,
                               std::string& why, refusal& r) {
  if (!value) {
    // Nothing guessed, nothing spent: a caller that forgot its token is not a guesser.
    why = "this server requires a bearer token: metadata 'authorization: Bearer <token>'";
    return status::unauthenticated;
  }
  // Lock-free, a few loads of one cache line: the only cost the budget adds to a good token.
  if (const std::uint32_t ms = _limiter.blocked_ms(c.address, now_ns); ms != 0) [[unlikely]] {
    _auth_limited.add();
    r.retry_after_ms = ms;
    why.assign("too many failed authentications from ")
        .append(c.address.host())
        .append("; its bearer tokens are refused unchecked for ")
        .append(std::to_string(ms))
        .append(" ms");
    note_auth_failure(c, r);
    return status::unauthenticated;
  }
  const auto token = parse_bearer(*value);
  const bearer_token* accepted = token ? _tokens.match(*token) : nullptr;
  if (accepted == nullptr) {
    r.retry_after_ms = _limiter.note_failure(c.address, now_ns);
    why = token ? "bearer token not accepted" : "the authorization metadata is not of the form 'Bearer <token>'";
    note_auth_failure(c, r);
    return status::unauthenticated;
  }
  k.peer = token_identity(c, accepted->subject);
  if (!token_table::allows(*accepted, method)) {
    why.assign("the bearer token of '").append(accepted->subject).append("' does not allow this method");
    return status::permission_denied;
  }
  return status::ok;
}

void call_guard::note_auth_failure(connection& c, refusal& r) noexcept {
  if (_limiter.per_connection() == 0) return;
  connection::connection_rare* rare = nullptr;
  try {
    rare = &c.rare_part();
  } catch (const std::bad_alloc&) {
    return;
  }
  if (++rare->auth_failures >= _limiter.per_connection() && !r.close) {
    r.close = true;
    _auth_closed.add();
  }
}

status call_guard::admit_endpoint(const authorizer& a, const call& k, const frame_view& v,
                                  std::string& why) noexcept {
  return decide(a, {v.method, k.peer, metadata_view(v.metadata)}, why, "endpoint");
}

status call_guard::decide(const authorizer& a, const authorization_request& r, std::string& why,
                          const char* whose) const noexcept {
  const authorization verdict = a.authorize(r);
  try {
    switch (verdict) {
      case authorization::allow: return status::ok;
      case authorization::unauthenticated:
        why.assign("the ").append(whose).append(" authorizer found no usable identity for this call");
        return status::unauthenticated;
      case authorization::permission_denied: break;
    }
    why.assign("the ").append(whose).append(" authorizer does not allow this caller to call this method");
  } catch (const std::bad_alloc&) {
    why.clear();
  }
  return verdict == authorization::unauthenticated ? status::unauthenticated : status::permission_denied;
}

}  // namespace ringrpc::detail

namespace ringrpc {

namespace {

class function_authorizer final : public authorizer {
 public:
  explicit function_authorizer(std::function<authorization(const authorization_request&)> f)
      : _decide(std::move(f)) {}
  authorization authorize(const authorization_request& r) const noexcept override {
    try {
      return _decide(r);
    } catch (...) {
      return authorization::permission_denied;
    }
  }

 private:
  std::function<authorization(const authorization_request&)> _decide;
};

class authenticated_only final : public authorizer {
 public:
  authorization authorize(const authorization_request& r) const noexcept override {
    return r.peer != nullptr && r.peer->authenticated() ? authorization::allow
                                                        : authorization::unauthenticated;
  }
};

}  // namespace

std::shared_ptr<const authorizer> make_authorizer(
    std::function<authorization(const authorization_request&)> decide) {
  return std::make_shared<function_authorizer>(std::move(decide));
}

std::shared_ptr<const authorizer> require_authenticated() {
  return std::make_shared<authenticated_only>();
}

}  // namespace ringrpc
