// The Postgres store's driver for the serving gateway: the node-postgres pool runs in a worker
// thread (pg-worker.js, decision 0053) and this end posts each statement and receives its rows.
// On the event loop a query cost ~120 µs of the main thread (socket write and read, the
// protocol's parsing, the pool's checkout and idle timer) against ~30 µs for a message round
// trip, and the write-behind, the lease book and the key cache's poll ran between streams'
// chunks. Same SQL and results as pg-driver.ts.

import type { Driver, Queryable } from './driver.ts';
import { toParams, withinTransaction } from './driver.ts';
import { WorkerChannel } from './worker-channel.ts';

/** A message to the worker thread (pg-worker.js). */
interface PgWorkerRequest {
  id: number;
  op: 'query' | 'exec' | 'copy' | 'begin' | 'end' | 'close';
  /** The transaction the statement runs in (the connection it holds); 0: any pool connection. */
  tx: number;
  text: string;
  /** The statement's parameters; for 'copy', COPY's input; for 'end', whether to commit. */
  params: unknown[];
}

/**
 * The worker's young generation (MB). It allocates the protocol's buffers and the rows, a few
 * hundred KB a second under the bench's streams; the gateway's `--max-semi-space-size=16` is not
 * for this thread (see worker-channel.ts).
 */
const WORKER_YOUNG_GENERATION_MB = 4;

export interface PgWorkerDriverOptions {
  /** postgres://… ; `?options=-c%20search_path%3Dmy_schema` selects a schema. */
  url: string;
  /** Pool size; default 10. */
  max?: number;
  /**
   * The thread's entry; default pg-worker.js. Tests start a wrapper of it that can be told to
   * die, to prove the thread is started again.
   */
  workerEntry?: URL;
}

export function createPgWorkerDriver(options: PgWorkerDriverOptions): Driver {
  const start = (): WorkerChannel<PgWorkerRequest> =>
    new WorkerChannel<PgWorkerRequest>(
      options.workerEntry ?? new URL('./pg-worker.js', import.meta.url),
      { url: options.url, max: options.max ?? 10 },
      WORKER_YOUNG_GENERATION_MB,
    );
  let channel = start();
  let closed = false;
  /**
   * The thread, started again when it died (an uncaught error in it): what it held is lost (its
   * transactions fail with it), but the store answers again, as a pool in this thread would
   * after a lost connection. After close() a call fails.
   */
  const live = (): WorkerChannel<PgWorkerRequest> => {
    if (channel.failed !== null && !closed) channel = start();
    return channel;
  };
  let nextTx = 1;
  const on = (tx: number, at: () => WorkerChannel<PgWorkerRequest>): Queryable => ({
    async query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
      return (await at().send({ op: 'query', tx, text, params: toParams(params) })) as T[];
    },
    async exec(text: string): Promise<void> {
      await at().send({ op: 'exec', tx, text, params: [] });
    },
    async copyFrom(into: string, data: string): Promise<void> {
      await at().send({ op: 'copy', tx, text: `COPY ${into} FROM STDIN`, params: [data] });
    },
  });
  const pool = on(0, live);
  return {
    kind: 'pg',
    query: pool.query,
    exec: pool.exec,
    copyFrom: pool.copyFrom,
    async transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      const tx = nextTx++;
      // Its statements go to the thread that holds its connection, dead or not.
      const holder = live();
      await holder.send({ op: 'begin', tx, text: '', params: [] });
      const end = async (commit: boolean): Promise<void> => {
        await holder.send({ op: 'end', tx, text: '', params: [commit] });
      };
      return withinTransaction(
        on(tx, () => holder),
        end,
        fn,
      );
    },
    async close(): Promise<void> {
      closed = true;
      try {
        if (channel.failed === null)
          await channel.send({ op: 'close', tx: 0, text: '', params: [] });
      } finally {
        await channel.terminate();
      }
    },
  };
}
