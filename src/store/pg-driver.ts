// Driver over a node-postgres Pool (the multi-instance backend).
// int8 parses to bigint through a type parser on this pool only; global pg parsers stay untouched.

import pg from 'pg';
import type { Driver, Queryable } from './driver.ts';
import { toParams } from './driver.ts';
import { copyFromStdin } from './pg-copy.ts';

const INT8_OID = 20;

const types: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === INT8_OID) return (text: string) => BigInt(text);
    return pg.types.getTypeParser(oid, format ?? 'text');
  }) as pg.CustomTypesConfig['getTypeParser'],
};

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
      // COPY holds one connection from its statement to its end: a pool lends one for it.
      if (!(client instanceof pg.Pool)) return copyFromStdin(client, text, data);
      const one = await client.connect();
      let broken: Error | undefined;
      try {
        await copyFromStdin(one, text, data);
      } catch (err) {
        // The server's own error (pg's DatabaseError, with a severity) leaves the connection
        // usable; anything else (a socket error) may not, and the pool must drop it.
        if ((err as { severity?: unknown }).severity === undefined) broken = err as Error;
        throw err;
      } finally {
        one.release(broken);
      }
    },
  };
}

export function createPgDriver(options: PgDriverOptions): Driver {
  const pool = new pg.Pool({ connectionString: options.url, max: options.max ?? 10, types });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', (err) =>
    console.warn(`[store] idle postgres connection failed: ${err.message}`),
  );
  const base = queryable(pool);
  return {
    kind: 'pg',
    query: base.query,
    exec: base.exec,
    copyFrom: base.copyFrom,
    async transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      const client = await pool.connect();
      // A connection whose ROLLBACK failed is in an unknown state: the pool must discard it.
      let broken: Error | undefined;
      try {
        await client.query('BEGIN');
        const result = await fn(queryable(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch((rollbackErr: unknown) => {
          broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
        });
        throw err;
      } finally {
        client.release(broken);
      }
    },
    async close(): Promise<void> {
      await pool.end();
    },
  };
}
