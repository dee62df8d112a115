// PGlite in a worker thread, for the serving gateway: PGlite runs Postgres (WASM) on the thread
// that calls it, so on the main thread every write stalled the event loop for its whole length
// (p50 ~2.7 ms a write under streams, up to 17 ms), and the next request waited behind it
// (docs/performance.md). Here the event loop only posts the SQL and receives the rows.
// Same SQL and results as pglite-driver.ts; one session, so a transaction holds a lock that
// keeps other queries from running inside it.

import { mkdir } from 'node:fs/promises';
import { lockDataDir } from './data-dir-lock.ts';
import type { Driver, Queryable } from './driver.ts';
import { toParams } from './driver.ts';
import { initPgliteDataDir } from './pglite-init.ts';
import { WorkerChannel } from './worker-channel.ts';

/** A message to the worker thread (pglite-worker.js). */
interface WorkerRequest {
  id: number;
  op: 'query' | 'exec' | 'copy' | 'close';
  text: string;
  /** Its parameters; for 'copy', one string: COPY's input. */
  params: unknown[];
}

/**
 * The worker's young generation (MB, both semi-spaces and V8's margin: ~2 MB of semi-space).
 * PGlite's thread allocates ~3–5 MB a second under load and keeps ~14 MB live. With the young
 * generation the gateway's `--max-semi-space-size=16` also gave this thread, V8 counted its old
 * generation as nearly full whenever less than a young generation's worth was left below its
 * limit (~30 MB), so it ran a full mark-compact every 0.6–1.2 s: 7–10 in 10 s at 6,000 req/s,
 * ~300 ms of this thread's and V8's helper threads' CPU (~5 µs a request). With 6 MB: 24 small
 * scavenges and 2–3 mark-compacts, ~90 ms (scratch, --trace-gc-nvp; docs/performance.md,
 * session 20).
 */
const WORKER_YOUNG_GENERATION_MB = 6;

/** dataDir null → in memory (tests); otherwise the directory is created if missing. */
export async function createPgliteWorkerDriver(dataDir: string | null): Promise<Driver> {
  if (dataDir !== null) await mkdir(dataDir, { recursive: true });
  const unlock = dataDir === null ? null : await lockDataDir(dataDir);
  try {
    if (dataDir !== null) await initPgliteDataDir(dataDir);
  } catch (err) {
    await unlock?.();
    throw err;
  }
  const channel = new WorkerChannel<WorkerRequest>(
    new URL('./pglite-worker.js', import.meta.url),
    { dataDir },
    WORKER_YOUNG_GENERATION_MB,
  );
  const send = (op: WorkerRequest['op'], text: string, params: unknown[]): Promise<unknown[]> =>
    channel.send({ op, text, params });
  const copyFrom = async (into: string, data: string): Promise<void> => {
    await send('copy', `COPY ${into} FROM '/dev/blob'`, [data]);
  };
  const direct: Queryable = {
    async query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
      return (await send('query', text, toParams(params))) as T[];
    },
    async exec(text: string): Promise<void> {
      await send('exec', text, []);
    },
    copyFrom,
  };

  // One session: while a transaction is open, other callers wait for it to end.
  let lock: Promise<void> = Promise.resolve();
  const exclusive = async <R>(fn: () => Promise<R>): Promise<R> => {
    const before = lock;
    let release!: () => void;
    lock = new Promise((r) => (release = r));
    await before;
    try {
      return await fn();
    } finally {
      release();
    }
  };

  // Wait for PGlite to start (and fail here, not on the first query, when it cannot).
  try {
    await direct.query('SELECT 1');
  } catch (err) {
    await channel.terminate();
    await unlock?.();
    throw err;
  }
  return {
    kind: 'pglite',
    query: <T>(text: string, params?: readonly unknown[]) =>
      exclusive(() => direct.query<T>(text, params)),
    exec: (text: string) => exclusive(() => direct.exec(text)),
    copyFrom: (into: string, data: string) => exclusive(() => copyFrom(into, data)),
    transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      return exclusive(async () => {
        await direct.exec('BEGIN');
        try {
          const result = await fn(direct);
          await direct.exec('COMMIT');
          return result;
        } catch (err) {
          await direct.exec('ROLLBACK').catch(() => undefined);
          throw err;
        }
      });
    },
    async close(): Promise<void> {
      try {
        if (channel.failed === null) await exclusive(() => send('close', '', []));
      } finally {
        await channel.terminate();
        await unlock?.();
      }
    },
  };
}
