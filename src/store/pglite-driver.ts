// Driver over PGlite, the embedded Postgres (WASM) that is the default store: a data directory,
// or memory when none is given. One connection, so PGlite itself serializes queries.

import { mkdir } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import type { PGliteOptions, Transaction } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.ts';
import type { Driver, Queryable } from './driver.ts';
import { toParams } from './driver.ts';

const INT8_OID = 20;

/**
 * PGlite's options for a data directory (null: in memory). PGlite parses int8 to a JS number by
 * default, which loses nano-yuan above 2^53 (9e6 ¥); int8 comes back as bigint instead.
 * Shared with the worker thread (pglite-worker.ts) and the first-start child (pglite-init.ts).
 * shared_buffers is 16MB, not Postgres' 128MB: PGlite's buffers live in the WASM heap, and the
 * default's touched pages were ~120 MB of the gateway's RSS (330 → 209 MB for a process with
 * the store open) with no measurable change in CPU per settlement; the OS page cache sits below.
 */
export function pgliteOptions(dataDir: string | null): PGliteOptions {
  const parsers = { [INT8_OID]: (text: string) => BigInt(text) };
  const startParams = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];
  return dataDir === null ? { parsers, startParams } : { dataDir, parsers, startParams };
}

function queryable(db: PGlite | Transaction): Queryable {
  return {
    async query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
      const result = await db.query<T>(text, toParams(params));
      return result.rows;
    },
    async exec(text: string): Promise<void> {
      await db.exec(text);
    },
  };
}

/** dataDir null → in memory (tests); otherwise the directory is created if missing. */
export async function createPgliteDriver(dataDir: string | null): Promise<Driver> {
  if (dataDir !== null) await mkdir(dataDir, { recursive: true });
  const unlock = dataDir === null ? null : await lockDataDir(dataDir);
  let db: PGlite;
  try {
    db = await PGlite.create(pgliteOptions(dataDir));
  } catch (err) {
    await unlock?.();
    throw err;
  }
  const base = queryable(db);
  return {
    kind: 'pglite',
    query: base.query,
    exec: base.exec,
    transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      return db.transaction((tx) => fn(queryable(tx)));
    },
    async close(): Promise<void> {
      await db.close();
      await unlock?.();
    },
  };
}
