// The main thread's end of a store worker thread (PGlite's, decision 0014; Postgres', decision
// 0053): each request is posted with an id and answered with rows or an error, and a worker that
// dies fails what waits on it and everything sent after.

import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';

/** The error the worker's SQL raised, with its SQLSTATE code when it had one. */
export class StoreWorkerError extends Error {
  readonly code: string | undefined;
  /** Postgres' severity (ERROR, FATAL…) when the server raised it; undefined otherwise. */
  readonly severity: string | undefined;
  constructor(message: string, code: string | undefined, severity?: string) {
    super(message);
    this.name = 'StoreWorkerError';
    this.code = code;
    this.severity = severity;
  }
}

/** The worker's answer to the request with the same id. */
export interface WorkerReply {
  id: number;
  rows?: unknown[];
  error?: { message: string; code?: string; severity?: string };
}

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
 * Starts `entry` with its own small young generation (MB). The process flag is lifted while the
 * worker's heap is made (before its 'online') and put back after: the main thread's heap was
 * sized at start and keeps its semi-spaces.
 */
function startWorker(entry: URL, workerData: unknown, youngGenerationMb: number): Worker {
  const semi = semiSpaceFlag();
  if (semi !== null) setFlagsFromString('--max-semi-space-size=0');
  const worker = new Worker(entry, {
    workerData,
    resourceLimits: { maxYoungGenerationSizeMb: youngGenerationMb },
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

export class WorkerChannel<Request extends { id: number }> {
  private readonly worker: Worker;
  private readonly waiting = new Map<
    number,
    { resolve: (rows: unknown[]) => void; reject: (e: Error) => void }
  >();
  private nextId = 1;
  private dead: Error | null = null;
  private terminating = false;

  constructor(entry: URL, workerData: unknown, youngGenerationMb: number) {
    this.worker = startWorker(entry, workerData, youngGenerationMb);
    this.worker.on('message', (reply: WorkerReply) => {
      const w = this.waiting.get(reply.id);
      if (w === undefined) return;
      this.waiting.delete(reply.id);
      const e = reply.error;
      if (e !== undefined) w.reject(new StoreWorkerError(e.message, e.code, e.severity));
      else w.resolve(reply.rows ?? []);
    });
    const fail = (err: Error): void => {
      if (this.dead === null && !this.terminating)
        console.error(`[store] the store's worker thread stopped: ${err.message}`);
      this.dead ??= err;
      for (const w of this.waiting.values()) w.reject(err);
      this.waiting.clear();
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`the store's worker thread exited (${code})`)));
  }

  /** Why the worker is gone (its error or exit), or null while it runs. */
  get failed(): Error | null {
    return this.dead;
  }

  /** Posts `request` (its id is set here) and resolves with the worker's rows. */
  send(request: Omit<Request, 'id'>): Promise<unknown[]> {
    if (this.dead !== null) return Promise.reject(this.dead);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      this.worker.postMessage({ ...request, id });
    });
  }

  async terminate(): Promise<void> {
    this.terminating = true;
    await this.worker.terminate();
  }
}
