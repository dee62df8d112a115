// The PGlite thread's prepared statements (src/store/pglite-statements.js, decision 0073) give
// the same rows as PGlite's own `db.query` for every kind of value the store sends and reads,
// keep working after errors and schema changes, and close what they stop using.

import { PGlite } from '@electric-sql/pglite';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { pgliteOptions } from '../../src/store/pglite-options.js';
import { MAX_PREPARED, PreparedStatements } from '../../src/store/pglite-statements.js';

let db: PGlite;
let statements: PreparedStatements;

// One database (PGlite takes ~2 s to start); each test starts from a new table and no statements.
beforeAll(async () => {
  db = await PGlite.create(pgliteOptions(null));
});

beforeEach(async () => {
  await db.exec(`DEALLOCATE ALL; DROP TABLE IF EXISTS t; CREATE TABLE t (
    id text PRIMARY KEY, amount int8 NOT NULL, at timestamptz, flag boolean, doc jsonb)`);
  statements = new PreparedStatements(db);
});

afterAll(async () => {
  await db.close();
});

const preparedCount = async (): Promise<number> =>
  Number(
    (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements'))
      .rows[0]!.n,
  );

describe('PreparedStatements', () => {
  it('writes and reads every kind of value as db.query does', async () => {
    const insert = `INSERT INTO t (id, amount, at, flag, doc) VALUES ($1, $2::int8, $3, $4, $5::jsonb)
      RETURNING id, amount, at, flag, doc`;
    const params = ['a', '9007199254740993', '2026-12-07T04:00:00.123Z', true, '{"k":[1,"x"]}'];
    const mine = await statements.query(insert, params);
    const theirs = (await db.query(insert.replace('VALUES ($1', "VALUES ('b' || $1"), params)).rows;
    expect(mine).toEqual([
      {
        id: 'a',
        amount: 9007199254740993n,
        at: new Date('2026-12-07T04:00:00.123Z'),
        flag: true,
        doc: { k: [1, 'x'] },
      },
    ]);
    expect(theirs).toEqual([{ ...mine[0], id: 'ba' }]);
    // Arrays, nulls, a row-less statement, a statement without parameters.
    const select =
      'SELECT id, amount FROM t WHERE id = ANY($1::text[]) AND amount = ANY($2::int8[]) ORDER BY id';
    expect(await statements.query(select, [['a', 'ba', 'zz'], ['9007199254740993']])).toEqual(
      (await db.query(select, [['a', 'ba', 'zz'], ['9007199254740993']])).rows,
    );
    expect(
      await statements.query('UPDATE t SET at = $1, doc = $2 WHERE id = $3', [
        null,
        undefined,
        'a',
      ]),
    ).toEqual([]);
    expect(await statements.query('SELECT at, doc FROM t WHERE id = $1', ['a'])).toEqual([
      { at: null, doc: null },
    ]);
    expect(await statements.query('SELECT count(*)::int8 AS n FROM t', [])).toEqual([{ n: 2n }]);
  });

  it('prepares a text once and runs it again by name', async () => {
    const text = 'INSERT INTO t (id, amount) VALUES ($1, $2)';
    for (let i = 0; i < 5; i++) await statements.query(text, [`k${i}`, i]);
    expect(statements.size).toBe(1);
    expect(await preparedCount()).toBe(1);
    expect(await statements.query('SELECT sum(amount) AS s FROM t', [])).toEqual([{ s: '10' }]);
  });

  it("passes Postgres' errors on with their code, and the statement works after one", async () => {
    const text = 'INSERT INTO t (id, amount) VALUES ($1, $2)';
    await statements.query(text, ['x', 1]);
    await expect(statements.query(text, ['x', 2])).rejects.toMatchObject({ code: '23505' });
    await expect(statements.query('SELEC nothing', [])).rejects.toMatchObject({ code: '42601' });
    await statements.query(text, ['y', 2]);
    expect(await statements.query('SELECT id FROM t ORDER BY id', [])).toEqual([
      { id: 'x' },
      { id: 'y' },
    ]);
  });

  it('prepares a text again when its result type changed (a migration), outside a transaction', async () => {
    await db.query("INSERT INTO t (id, amount) VALUES ('a', 1)");
    const text = 'SELECT * FROM t WHERE id = $1';
    expect(Object.keys((await statements.query(text, ['a']))[0]!)).toHaveLength(5);
    await db.exec('ALTER TABLE t ADD COLUMN note text');
    const [row] = await statements.query(text, ['a']);
    expect(row).toMatchObject({ id: 'a', amount: 1n, note: null });
    // The replaced statement is closed with the next prepare.
    await statements.query('SELECT 1 AS one', []);
    expect(await preparedCount()).toBe(2);
  });

  it('inside a transaction, a changed result type fails that call and the next one works', async () => {
    await db.query("INSERT INTO t (id, amount) VALUES ('a', 1)");
    const text = 'SELECT * FROM t WHERE id = $1';
    await statements.query(text, ['a']);
    await db.exec('ALTER TABLE t ADD COLUMN note text');
    await db.exec('BEGIN');
    await expect(statements.query(text, ['a'])).rejects.toMatchObject({ code: '0A000' });
    await db.exec('ROLLBACK');
    expect(await statements.query(text, ['a'])).toEqual([
      { id: 'a', amount: 1n, at: null, flag: null, doc: null, note: null },
    ]);
  });

  it('runs a call once when the 0A000 it meets is not a changed result type', async () => {
    // A function may raise 0A000 itself: that is its error, not a stale statement to run again.
    await db.exec(`CREATE SEQUENCE IF NOT EXISTS calls;
      CREATE OR REPLACE FUNCTION unsupported(x int) RETURNS int LANGUAGE plpgsql AS $$
      BEGIN PERFORM nextval('calls'); RAISE EXCEPTION 'not here' USING ERRCODE = '0A000'; END $$`);
    const before = await statements.query('SELECT nextval($1) AS n', ['calls']);
    await expect(statements.query('SELECT unsupported($1)', [1])).rejects.toMatchObject({
      code: '0A000',
      message: 'not here',
    });
    const after = await statements.query('SELECT nextval($1) AS n', ['calls']);
    expect((after[0]!.n as bigint) - (before[0]!.n as bigint)).toBe(2n);
  });

  it(`keeps at most ${MAX_PREPARED} texts and closes the least recently used`, async () => {
    const hot = 'SELECT $1::int AS n';
    await statements.query(hot, [0]);
    for (let i = 1; i <= MAX_PREPARED + 10; i++) {
      await statements.query(`SELECT $1::int + ${i} AS n`, [i]);
      if (i % 50 === 0) expect(await statements.query(hot, [i])).toEqual([{ n: i }]);
    }
    expect(statements.size).toBe(MAX_PREPARED);
    // Closed names go with the next prepare: at most one prepare's worth stay open beyond the cap.
    expect(await preparedCount()).toBeLessThanOrEqual(MAX_PREPARED + 1);
    expect(await statements.query(hot, [7])).toEqual([{ n: 7 }]);
    expect(await statements.query('SELECT $1::int + 1 AS n', [1])).toEqual([{ n: 2 }]);
  });
});
