// The worker thread that runs the Postgres store's pool for pg-worker-driver.ts (decision 0053):
// the protocol's writes, reads and parsing, the pool's checkouts and its timers stay off the
// gateway's event loop, which only posts each statement and receives its rows (bigints, Dates
// and parsed jsonb survive postMessage). A transaction holds one connection across messages,
// by the id the driver gave it. Plain JavaScript (decision 0023); the messages' types are
// PgWorkerRequest in pg-worker-driver.ts and WorkerReply in worker-channel.ts.

import { parentPort, workerData } from 'node:worker_threads';
import { copyFromStdin } from './pg-copy.js';
import { beginOnPool, copyOnPool, createPgPool } from './pg-pool.js';
import { lowerThisThreadsPriority, WORKER_NICE_STEP } from './worker-nice.js';

const { url, max } = workerData;
lowerThisThreadsPriority(WORKER_NICE_STEP);
const pool = createPgPool(url, max);
/** Open transactions by the driver's id: their connection and how to end them. */
const open = new Map();
const port = parentPort;

function transactionOf(req) {
  const t = open.get(req.tx);
  if (t === undefined) throw new Error(`no open transaction ${req.tx}`);
  return t;
}

/** Where a statement runs: its transaction's connection, or any of the pool's (tx 0). */
function clientOf(req) {
  return req.tx === 0 ? pool : transactionOf(req).client;
}

async function run(req) {
  switch (req.op) {
    case 'query':
      return (await clientOf(req).query(req.text, req.params)).rows;
    case 'exec':
      await clientOf(req).query(req.text);
      return [];
    case 'copy':
      if (req.tx === 0) await copyOnPool(pool, req.text, req.params[0]);
      else await copyFromStdin(transactionOf(req).client, req.text, req.params[0]);
      return [];
    case 'begin':
      open.set(req.tx, await beginOnPool(pool));
      return [];
    case 'end': {
      const t = transactionOf(req);
      open.delete(req.tx);
      await t.end(req.params[0] === true);
      return [];
    }
    case 'close':
      // As pool.end() in this thread: it waits for the connections out (transactions still
      // running end by their own messages, which this thread goes on answering).
      await pool.end();
      return [];
    default:
      throw new Error(`unknown op ${req.op}`);
  }
}

port.on('message', (req) => {
  run(req).then(
    (rows) => port.postMessage({ id: req.id, rows }),
    (err) =>
      port.postMessage({
        id: req.id,
        error: { message: err?.message ?? String(err), code: err?.code, severity: err?.severity },
      }),
  );
});
