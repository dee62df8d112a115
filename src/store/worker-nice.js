// The store's worker threads (pglite-worker.js, pg-worker.js) run nicer than the event loop.
// Plain JavaScript, as the workers are (decision 0023).
import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';

/**
 * The writes this thread runs are behind the answers (write-behind, decision 0013); the event
 * loop's requests are not. On a busy 2-core host the two threads, the load and the upstream
 * compete for the cores, and a request waited behind a write's time slice. With this thread at
 * nice 5, at 500 req/s: event-loop delay p99 3.45 → 2.5–2.7 ms and max 16–60 → 8 ms, request
 * p99 8–20 → 5.6–7 ms (two scratch runs each), throughput unchanged. Without contention it
 * changes nothing.
 */
export const WORKER_NICE_STEP = 5;

/**
 * Linux: setpriority() on this thread's own task id, `step` nicer than it runs now (a process
 * already niced stays relative); elsewhere (no /proc) it is skipped.
 */
export function lowerThisThreadsPriority(step) {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + step));
  } catch {
    // Not Linux, or not allowed: run at the process's priority.
  }
}
