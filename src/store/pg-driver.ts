// Driver over a node-postgres Pool in this thread: CLI commands and tests. The serving gateway
// runs the same pool in a worker thread (pg-worker-driver.ts, decision 0053).

import type pg from 'pg';
import type { Driver, Queryable } from './driver.ts';
import { toParams, withinTransaction } from './driver.ts';
import { copyFromStdin } from './pg-copy.js';
import { beginOnPool, copyOnPool, createPgPool } from './pg-pool.js';

export interface PgDriverOptions {
  /** postgres://… ; `?options=-c%20search_path%3Dmy_schema` selects a schema. */
  url: string;
  /** Pool size; default 10. */
  max?: number;
}

/** Statements on the pool, or on the one client of a transaction. */
function queryable(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
      const result = await client.query(text, toParams(params));
      return result.rows as T[];
    },
    async exec(text: string): Promise<void> {
      await client.query(text);
    },
    async copyFrom(into: string, data: string): Promise<void> {
      const text = `COPY ${into} FROM STDIN`;
      if ('release' in client) return copyFromStdin(client, text, data);
      return copyOnPool(client, text, data);
    },
  };
}

export function createPgDriver(options: PgDriverOptions): Driver {
  const pool = createPgPool(options.url, options.max ?? 10);
  const base = queryable(pool);
  return {
    kind: 'pg',
    query: base.query,
    exec: base.exec,
    copyFrom: base.copyFrom,
    async transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      const { client, end } = await beginOnPool(pool);
      return withinTransaction(queryable(client), end, fn);
    },
    async close(): Promise<void> {
      await pool.end();
    },
  };
}
