// The local Postgres the store tests that need one use: its URL, one statement on a connection of
// its own (schemas made and dropped), and whether it answers at all.

import pg from 'pg';
import { describe, it } from 'vitest';

export const PG_URL =
  process.env.SWITCHYARD_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** Runs one statement on a fresh connection, outside any test's pool. */
export async function pgAdmin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query(sql);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Null when Postgres answers; otherwise why not. */
export function pgUnreachable(): Promise<string | null> {
  return pgAdmin('SELECT 1').then(
    () => null,
    (err: unknown) => (err instanceof Error ? err.message : String(err)),
  );
}

/**
 * Stands in for a suite when Postgres does not answer: under CI a failing test (CI starts
 * Postgres, so its absence is a fault), elsewhere a visible skip.
 */
export function describeWithoutPostgres(suite: string, unreachable: string): void {
  if (process.env.CI) {
    describe(suite, () => {
      it('needs a reachable Postgres under CI', () => {
        throw new Error(`Postgres at ${PG_URL} is unreachable: ${unreachable}`);
      });
    });
    return;
  }
  console.warn(`[skip] ${suite}: Postgres at ${PG_URL} is unreachable (${unreachable})`);
  describe.skip(`${suite}: no Postgres reachable`, () => {
    it('skipped', () => undefined);
  });
}
