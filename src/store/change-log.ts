// The change log: one row per change to a key or to an account's cached fields, read by every
// instance's key cache (`WHERE seq > $last`) to invalidate entries within one poll (~1 s).

import type { Queryable } from './driver.ts';
import type { ChangeEntry } from './store.ts';

/**
 * Appends a change; call it as the LAST statement of the changing transaction.
 * The table lock (EXCLUSIVE still lets readers through) is held to commit, so seq order is
 * commit order: without it a poller could see seq 6 committed before seq 5 and skip 5 forever.
 * Key and account edits are admin actions (a few per second at most), so serializing them is free.
 */
export async function recordChange(
  tx: Queryable,
  kind: ChangeEntry['kind'],
  id: string,
): Promise<void> {
  await tx.query('LOCK TABLE change_log IN EXCLUSIVE MODE');
  await tx.query('INSERT INTO change_log (kind, id) VALUES ($1, $2)', [kind, id]);
}

export async function latestChangeSeq(db: Queryable): Promise<bigint> {
  const rows = await db.query<{ seq: bigint }>(
    'SELECT coalesce(max(seq), 0)::int8 AS seq FROM change_log',
  );
  return rows[0]?.seq ?? 0n;
}

export async function changesSince(db: Queryable, seq: bigint): Promise<ChangeEntry[]> {
  return db.query<ChangeEntry>(
    'SELECT seq, kind, id FROM change_log WHERE seq > $1::int8 ORDER BY seq',
    [seq],
  );
}
