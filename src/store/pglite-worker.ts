// The worker thread that hosts PGlite for pglite-worker-driver.ts: it runs each message's SQL in
// arrival order and answers with rows (bigints and Dates survive postMessage) or the error.

import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import { pgliteOptions } from './pglite-driver.ts';

export interface WorkerRequest {
  id: number;
  op: 'query' | 'exec' | 'close';
  text: string;
  params: unknown[];
}

export interface WorkerReply {
  id: number;
  rows?: unknown[];
  error?: { message: string; code?: string; name?: string };
}

const { dataDir } = workerData as { dataDir: string | null };
const ready = PGlite.create(pgliteOptions(dataDir));
const port = parentPort!;

port.on('message', (req: WorkerRequest) => {
  void (async () => {
    try {
      const db = await ready;
      if (req.op === 'close') {
        await db.close();
        port.postMessage({ id: req.id, rows: [] } satisfies WorkerReply);
        return;
      }
      if (req.op === 'exec') {
        await db.exec(req.text);
        port.postMessage({ id: req.id, rows: [] } satisfies WorkerReply);
        return;
      }
      const result = await db.query(req.text, req.params);
      port.postMessage({ id: req.id, rows: result.rows } satisfies WorkerReply);
    } catch (err) {
      const e = err as { message?: string; code?: string; name?: string };
      port.postMessage({
        id: req.id,
        error: { message: e.message ?? String(err), code: e.code, name: e.name },
      } satisfies WorkerReply);
    }
  })();
});
