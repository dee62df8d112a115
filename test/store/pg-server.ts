// The local Postgres the store tests that need one use: its URL, one statement on a connection of
// its own (schemas made and dropped), and whether it answers at all.

import pg from 'pg';

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
