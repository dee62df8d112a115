// PGlite in a worker thread, for the serving gateway: PGlite runs Postgres (WASM) on the thread
// that calls it, so on the main thread every write stalled the event loop for its whole length
// (p50 ~2.7 ms a write under streams, up to 17 ms), and the next request waited behind it
// (docs/performance.md). Here the event loop only posts the SQL and receives the rows.
// Same SQL and results as pglite-driver.ts; one session, so a transaction holds a lock that
// keeps other queries from running inside it.

import { mkdir } from 'node:fs/promises';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import { lockDataDir } from './data-dir-lock.ts';
import type { Driver, Queryable } from './driver.ts';
import { toParams } from './driver.ts';
import { initPgliteDataDir } from './pglite-init.ts';

/** The error PGlite raised in the worker, with its SQLSTATE code when it had one. */
export class PgliteWorkerError extends Error {
  readonly code: string | undefined;
  constructor(message: string, code: string | undefined) {
    super(message);
    this.name = 'PgliteWorkerError';
    this.code = code;
  }
}

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

/**
 * The `--max-semi-space-size` this process was started with (V8's flags are process-wide, and
 * that flag overrides a worker's resourceLimits), or null when it was not given.
 */
function semiSpaceFlag(): string | null {
  const args = [...process.execArgv, ...(process.env.NODE_OPTIONS ?? '').split(/\s+/)];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.startsWith('--max-semi-space-size=')) return a.slice('--max-semi-space-size='.length);
    if (a === '--max-semi-space-size' && args[i + 1] !== undefined) return args[i + 1]!;
  }
  return null;
}

/**
 * Starts the worker with its own small young generation. The process flag is lifted while the
 * worker's heap is made (before its 'online') and put back after: the main thread's heap was
 * sized at start and keeps its semi-spaces.
 */
function startWorker(dataDir: string | null): Worker {
  const semi = semiSpaceFlag();
  if (semi !== null) setFlagsFromString('--max-semi-space-size=0');
  const worker = new Worker(new URL('./pglite-worker.js', import.meta.url), {
    workerData: { dataDir },
    resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
  });
  if (semi !== null) {
    let restored = false;
    const restore = (): void => {
      if (restored) return;
      restored = true;
      setFlagsFromString(`--max-semi-space-size=${semi}`);
    };
    worker.once('online', restore);
    worker.once('error', restore);
    worker.once('exit', restore);
  }
  return worker;
}

/** The worker's answer to the request with the same id. */
interface WorkerReply {
  id: number;
  rows?: unknown[];
  error?: { message: string; code?: string; name?: string };
}

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
  const worker = startWorker(dataDir);
  let nextId = 1;
  const waiting = new Map<
    number,
    { resolve: (rows: unknown[]) => void; reject: (e: Error) => void }
  >();
  let dead: Error | null = null;
  worker.on('message', (reply: WorkerReply) => {
    const w = waiting.get(reply.id);
    if (w === undefined) return;
    waiting.delete(reply.id);
    if (reply.error !== undefined)
      w.reject(new PgliteWorkerError(reply.error.message, reply.error.code));
    else w.resolve(reply.rows ?? []);
  });
  const fail = (err: Error): void => {
    dead = err;
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  worker.on('error', fail);
  worker.on('exit', (code) => fail(new Error(`the PGlite worker exited (${code})`)));

  const send = (op: WorkerRequest['op'], text: string, params: unknown[]): Promise<unknown[]> => {
    if (dead !== null) return Promise.reject(dead);
    const id = nextId++;
    return new Promise((resolve, reject) => {
      waiting.set(id, { resolve, reject });
      worker.postMessage({ id, op, text, params } satisfies WorkerRequest);
    });
  };
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
    await worker.terminate();
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
        if (dead === null) await exclusive(() => send('close', '', []));
      } finally {
        await worker.terminate();
        await unlock?.();
      }
    },
  };
}
