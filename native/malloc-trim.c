// Switchyard's one native function: glibc's malloc_trim(0), for the idle-time memory trim
// (src/telemetry/allocator-trim.ts, decision 0046). glibc's free() returns only the top of an
// arena to the system; what V8's helper threads free in the middle of theirs stays resident for
// good (30-48 MB in an idle embedded-store gateway after load). malloc_trim(0) walks every arena
// and gives back each free page (madvise MADV_DONTNEED). Node does not import it, so JavaScript
// cannot reach it without this. Built with Node-API (ABI-stable): scripts/build-native.js.
#include <malloc.h>
#include <node_api.h>

static napi_value Trim(napi_env env, napi_callback_info info) {
  (void)info;
  napi_value result;
  if (napi_get_boolean(env, malloc_trim(0) != 0, &result) != napi_ok) return NULL;
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  if (napi_create_function(env, "mallocTrim", NAPI_AUTO_LENGTH, Trim, NULL, &fn) != napi_ok) {
    return NULL;
  }
  if (napi_set_named_property(env, exports, "mallocTrim", fn) != napi_ok) return NULL;
  return exports;
}
