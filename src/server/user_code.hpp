#pragma once
// Which server's user code (a handler, an event) this thread is running, and which server it is
// stopping: stop() called from there cannot wait for that very code, and stop() from on_stop
// or a listener during a stop returns at once. Set in server_calls.cpp, read by server_stop.cpp.

namespace ringrpc::detail {

class server_core;

extern thread_local constinit const server_core* running_user_code_of;
extern thread_local constinit const server_core* stopping_server;

}  // namespace ringrpc::detail
