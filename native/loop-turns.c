// The event loop's turn count, for path-turns (src/http/path-turns.ts, decision 0068). An unref'd
// libuv prepare handle adds one to a counter before every poll; JavaScript reads it from a
// Uint32Array. Path-turns must know whether a request is the first its turn of the loop started.
// Without this it learns it from a setImmediate per request that clears a flag in the check
// phase, ~24 µs of a paced request's path cold (docs/performance.md, session 58, finding 2);
// the counter is one array read. Node-API (ABI-stable), built by scripts/build-native.js.
#include <stdint.h>
#include <stdlib.h>
#include <node_api.h>
#include <uv.h>

typedef struct {
  uv_prepare_t prepare;
  uint32_t* count;
  napi_ref buffer;
  napi_async_cleanup_hook_handle cleanup;
} Counter;

static void OnPrepare(uv_prepare_t* handle) {
  Counter* c = (Counter*)handle->data;
  *c->count += 1;
}

static void OnClosed(uv_handle_t* handle) {
  Counter* c = (Counter*)handle->data;
  napi_remove_async_cleanup_hook(c->cleanup);
  free(c);
}

// The environment is ending (a worker stops, the process exits): close the handle first.
static void OnCleanup(napi_async_cleanup_hook_handle hook, void* arg) {
  (void)hook;
  Counter* c = (Counter*)arg;
  uv_prepare_stop(&c->prepare);
  uv_close((uv_handle_t*)&c->prepare, OnClosed);
}

// loopTurns(): a Uint32Array of one element that counts this thread's loop turns from now on.
static napi_value LoopTurns(napi_env env, napi_callback_info info) {
  (void)info;
  uv_loop_t* loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return NULL;
  void* data;
  napi_value buffer, view;
  if (napi_create_arraybuffer(env, sizeof(uint32_t), &data, &buffer) != napi_ok) return NULL;
  if (napi_create_typedarray(env, napi_uint32_array, 1, buffer, 0, &view) != napi_ok) return NULL;
  Counter* c = (Counter*)calloc(1, sizeof(Counter));
  if (c == NULL) {
    napi_throw_error(env, NULL, "loopTurns: out of memory");
    return NULL;
  }
  c->count = (uint32_t*)data;
  // The handle writes into the buffer for as long as it runs: the buffer must outlive it.
  if (napi_create_reference(env, buffer, 1, &c->buffer) != napi_ok ||
      uv_prepare_init(loop, &c->prepare) != 0) {
    free(c);
    napi_throw_error(env, NULL, "loopTurns: could not start the counter");
    return NULL;
  }
  c->prepare.data = c;
  uv_prepare_start(&c->prepare, OnPrepare);
  uv_unref((uv_handle_t*)&c->prepare);  // counting never keeps the process alive
  napi_add_async_cleanup_hook(env, OnCleanup, c, &c->cleanup);
  return view;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "loopTurns", NAPI_AUTO_LENGTH, LoopTurns, NULL, &fn) != napi_ok) {
    return NULL;
  }
  if (napi_set_named_property(env, exports, "loopTurns", fn) != napi_ok) return NULL;
  return exports;
}
