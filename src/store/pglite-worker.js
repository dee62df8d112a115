// The worker thread that hosts PGlite for pglite-worker-driver.ts: it runs each message's SQL in
// arrival order and answers with rows (bigints and Dates survive postMessage) or the error.
// Plain JavaScript (decision 0023): a .ts entry makes Node load its TypeScript stripper (amaro and
// its WASM) into this thread's isolate too, +16.8 MB of RSS for the life of the process. The
// messages' types are WorkerRequest and WorkerReply in pglite-worker-driver.ts.

import { readlinkSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { pgliteOptions } from './pglite-options.js';

/**
 * The writes this thread runs are behind the answers (write-behind, decision 0013); the event
 * loop's requests are not. On a busy 2-core host the two threads, the load and the upstream
 * compete for the cores, and a request waited behind a write's time slice. With this thread at
 * nice 5, at 500 req/s: event-loop delay p99 3.45 → 2.5–2.7 ms and max 16–60 → 8 ms, request
 * p99 8–20 → 5.6–7 ms (two scratch runs each), throughput unchanged. Without contention it
 * changes nothing.
 */
const WORKER_NICE_STEP = 5;

/**
 * Linux: setpriority() on this thread's own task id, `step` nicer than it runs now (a process
 * already niced stays relative); elsewhere (no /proc) it is skipped.
 */
function lowerThisThreadsPriority(step) {
  try {
    const tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, Math.min(19, getPriority(tid) + step));
  } catch {
    // Not Linux, or not allowed: run at the process's priority.
  }
}

const { dataDir } = workerData;
lowerThisThreadsPriority(WORKER_NICE_STEP);
const ready = PGlite.create(pgliteOptions(dataDir));
const port = parentPort;

port.on('message', (req) => {
  void (async () => {
    try {
      const db = await ready;
      if (req.op === 'close') {
        await db.close();
        port.postMessage({ id: req.id, rows: [] });
        return;
      }
      if (req.op === 'exec') {
        await db.exec(req.text);
        port.postMessage({ id: req.id, rows: [] });
        return;
      }
      if (req.op === 'copy') {
        await db.query(req.text, [], { blob: new Blob([req.params[0]]) });
        port.postMessage({ id: req.id, rows: [] });
        return;
      }
      const result = await db.query(req.text, req.params);
      port.postMessage({ id: req.id, rows: result.rows });
    } catch (err) {
      port.postMessage({
        id: req.id,
        error: { message: err?.message ?? String(err), code: err?.code, name: err?.name },
      });
    }
  })();
});
