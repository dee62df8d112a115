// Driver over PGlite, the embedded Postgres (WASM) that is the default store: a data directory,
// or memory when none is given. One connection, so PGlite itself serializes queries.

import { mkdir } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import type { Transaction } from '@electric-sql/pglite';
import { lockDataDir } from './data-dir-lock.ts';
import type { Driver, Queryable } from './driver.ts';
import { toParams } from './driver.ts';
import { pgliteOptions } from './pglite-options.js';

function queryable(db: PGlite | Transaction): Queryable {
  return {
    async query<T>(text: string, params?: readonly unknown[]): Promise<T[]> {
      const result = await db.query<T>(text, toParams(params));
      return result.rows;
    },
    async exec(text: string): Promise<void> {
      await db.exec(text);
    },
    async copyFrom(into: string, data: string): Promise<void> {
      await db.query(`COPY ${into} FROM '/dev/blob'`, [], { blob: new Blob([data]) });
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
    copyFrom: base.copyFrom,
    transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R> {
      return db.transaction((tx) => fn(queryable(tx)));
    },
    async close(): Promise<void> {
      await db.close();
      await unlock?.();
    },
  };
}
