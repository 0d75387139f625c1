#pragma once
// Which server's user code (a handler, an event) this thread is running, which server it is
// starting and which it is stopping: stop() called from there cannot wait for that very code,
// stop() from on_start waits until start() has finished, and stop() from on_stop or a listener
// during a stop returns at once. Set in server_calls.cpp and server_core.cpp, read by
// server_stop.cpp.

namespace ringrpc::detail {

class server_core;

extern thread_local constinit const server_core* running_user_code_of;
extern thread_local constinit const server_core* stopping_server;
extern thread_local constinit const server_core* starting_server;

}  // namespace ringrpc::detail
