// COPY … FROM STDIN on node-postgres (src/store/pg-copy.js, decision 0045), on a real Postgres:
// rows go in as text COPY reads them, a server error rejects with its SQLSTATE, and the
// connection it ran on serves the next statement, on the pool and inside a transaction; with the
// pool in this thread (CLI commands) and in the gateway's worker thread (decision 0053).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Driver } from '../../src/store/driver.ts';
import { randomBase62 } from '../../src/store/ids.ts';
import { createPgDriver } from '../../src/store/pg-driver.ts';
import { createPgWorkerDriver } from '../../src/store/pg-worker-driver.ts';
import { describeWithoutPostgres, PG_URL, pgAdmin, pgUnreachable } from './pg-server.ts';

const unreachable = await pgUnreachable();

const drivers = [
  ['in this thread', createPgDriver],
  ['worker thread', createPgWorkerDriver],
] as const;

for (const [where, createDriver] of unreachable === null ? drivers : []) {
  describe(`COPY FROM STDIN (Postgres driver, ${where})`, () => {
    const schema = `sy_pgcopy_${randomBase62(10).toLowerCase()}`;
    let driver: Driver;

    beforeAll(async () => {
      await pgAdmin(`CREATE SCHEMA ${schema}`);
      // Two connections, so a connection a failed COPY broke would soon be handed out again.
      driver = createDriver({
        url: `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`,
        max: 2,
      });
      await driver.exec('CREATE TABLE t (id text PRIMARY KEY, n int8, note text)');
    });
    afterAll(async () => {
      await driver.close();
      await pgAdmin(`DROP SCHEMA ${schema} CASCADE`);
    });

    it('writes text-format rows, nulls and escapes included', async () => {
      await driver.copyFrom!('t (id, n, note)', 'a\t1\tplain\nb\t\\N\ttab\\there\nc\t3\t\\N\n');
      await driver.copyFrom!('t (id, n, note)', '');
      const rows = await driver.query<{ id: string; n: bigint | null; note: string | null }>(
        'SELECT id, n, note FROM t ORDER BY id',
      );
      expect(rows).toEqual([
        { id: 'a', n: 1n, note: 'plain' },
        { id: 'b', n: null, note: 'tab\there' },
        { id: 'c', n: 3n, note: null },
      ]);
    });

    it('rejects with the SQLSTATE of a unique violation, and the pool keeps serving', async () => {
      for (let i = 0; i < 3; i++) {
        await expect(driver.copyFrom!('t (id, n)', `z${i}\t1\na\t2\n`)).rejects.toMatchObject({
          code: '23505',
        });
      }
      const n = await Promise.all(
        Array.from({ length: 6 }, () => driver.query<{ n: bigint }>('SELECT count(*) AS n FROM t')),
      );
      expect(n.map((r) => r[0]!.n)).toEqual(Array(6).fill(3n));
    });

    it('inside a transaction: a failed COPY rolls back with it, a good one commits with it', async () => {
      await expect(
        driver.transaction(async (tx) => {
          await tx.query("INSERT INTO t (id) VALUES ('before')");
          await tx.copyFrom!('t (id)', 'a\n');
        }),
      ).rejects.toMatchObject({ code: '23505' });
      await driver.transaction(async (tx) => {
        await tx.copyFrom!('t (id, n)', 'd\t4\ne\t5\n');
        const seen = await tx.query<{ n: bigint }>('SELECT count(*) AS n FROM t');
        expect(seen[0]!.n).toBe(5n);
      });
      const ids = await driver.query<{ id: string }>('SELECT id FROM t ORDER BY id');
      expect(ids.map((r) => r.id)).toEqual(['a', 'b', 'c', 'd', 'e']);
    });

    it('reports bad input as the server reads it, not as a hang', async () => {
      await expect(driver.copyFrom!('t (id, n)', 'x\tnot-a-number\n')).rejects.toMatchObject({
        code: '22P02',
      });
      await expect(driver.copyFrom!('missing (id)', 'x\n')).rejects.toMatchObject({
        code: '42P01',
      });
      expect((await driver.query<{ n: bigint }>('SELECT count(*) AS n FROM t'))[0]!.n).toBe(5n);
    });
  });
}
if (unreachable !== null) {
  describeWithoutPostgres('COPY FROM STDIN (Postgres driver)', unreachable);
}
