// The worker thread that hosts PGlite for pglite-worker-driver.ts: it runs each message's SQL in
// arrival order and answers with rows (bigints and Dates survive postMessage) or the error.
// Plain JavaScript (decision 0023): a .ts entry makes Node load its TypeScript stripper (amaro and
// its WASM) into this thread's isolate too, +16.8 MB of RSS for the life of the process. The
// messages' types are WorkerRequest and WorkerReply in pglite-worker-driver.ts.

import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { pgliteOptions } from './pglite-options.js';
import { PreparedStatements } from './pglite-statements.js';
import { lowerThisThreadsPriority, WORKER_NICE_STEP } from './worker-nice.js';

const { dataDir } = workerData;
lowerThisThreadsPriority(WORKER_NICE_STEP);
const ready = PGlite.create(pgliteOptions(dataDir));
/** Each query text parsed once, then one pass into the WASM a call (decision 0073). */
let statements = null;
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
      statements ??= new PreparedStatements(db);
      const rows = await statements.query(req.text, req.params);
      port.postMessage({ id: req.id, rows });
    } catch (err) {
      port.postMessage({
        id: req.id,
        error: { message: err?.message ?? String(err), code: err?.code },
      });
    }
  })();
});
