// The serving gateway's Postgres pool runs in a worker thread (src/store/pg-worker.js, decision
// 0053): what crosses the thread comes back as the in-thread driver returns it, a transaction's
// statements share one connection, errors keep their SQLSTATE, and the event loop itself holds
// no connection to Postgres.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Driver } from '../../src/store/driver.ts';
import { randomBase62 } from '../../src/store/ids.ts';
import { createPgDriver } from '../../src/store/pg-driver.ts';
import { createPgWorkerDriver } from '../../src/store/pg-worker-driver.ts';
import { describeWithoutPostgres, PG_URL, pgAdmin, pgUnreachable } from './pg-server.ts';

const unreachable = await pgUnreachable();

/** Sockets this thread's event loop holds open. */
function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPSocketWrap').length;
}

if (unreachable === null) {
  describe('the Postgres worker thread', () => {
    const schema = `sy_pgworker_${randomBase62(10).toLowerCase()}`;
    const url = `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    let worker: Driver;

    beforeAll(async () => {
      await pgAdmin(`CREATE SCHEMA ${schema}`);
      worker = createPgWorkerDriver({ url, max: 3 });
      await worker.exec('CREATE TABLE w (id text PRIMARY KEY, n int8, at timestamptz, doc jsonb)');
    });
    afterAll(async () => {
      await worker.close();
      await pgAdmin(`DROP SCHEMA ${schema} CASCADE`);
    });

    it('returns bigints, dates, jsonb and nulls as the in-thread driver does', async () => {
      const at = new Date('2026-11-27T10:00:00.123Z');
      await worker.query('INSERT INTO w (id, n, at, doc) VALUES ($1, $2, $3, $4)', [
        'big',
        2n ** 62n + 1n,
        at,
        JSON.stringify({ yuan: '12.5', list: [1, null] }),
      ]);
      await worker.query('INSERT INTO w (id) VALUES ($1)', ['empty']);
      const sql = 'SELECT id, n, at, doc FROM w ORDER BY id';
      const rows = await worker.query(sql);
      expect(rows).toEqual([
        { id: 'big', n: 2n ** 62n + 1n, at, doc: { yuan: '12.5', list: [1, null] } },
        { id: 'empty', n: null, at: null, doc: null },
      ]);
      const inThread = createPgDriver({ url, max: 1 });
      try {
        expect(rows).toEqual(await inThread.query(sql));
      } finally {
        await inThread.close();
      }
    });

    it('rejects with the server error: message, SQLSTATE and severity', async () => {
      const err = await worker.query('INSERT INTO w (id) VALUES ($1)', ['big']).then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(Error);
      expect(err).toMatchObject({ code: '23505', severity: 'ERROR' });
      expect((err as Error).message).toMatch(/duplicate key/);
      await expect(worker.query('SELECT nope FROM w')).rejects.toMatchObject({ code: '42703' });
    });

    it('runs a transaction on one connection, apart from the pool, and rolls it back when its body throws', async () => {
      const pids = new Set<number>();
      await expect(
        worker.transaction(async (tx) => {
          await tx.query("INSERT INTO w (id) VALUES ('rolled')");
          for (let i = 0; i < 3; i++) {
            const [row] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
            pids.add(row!.pid);
          }
          // Outside the transaction nothing of it shows yet.
          const outside = await worker.query("SELECT id FROM w WHERE id = 'rolled'");
          expect(outside).toEqual([]);
          throw new Error('changed my mind');
        }),
      ).rejects.toThrow('changed my mind');
      expect(pids.size).toBe(1);
      expect(await worker.query("SELECT id FROM w WHERE id = 'rolled'")).toEqual([]);
    });

    it('commits transactions that run at once, each on its own connection', async () => {
      const pids = await Promise.all(
        ['t1', 't2', 't3'].map((id) =>
          worker.transaction(async (tx) => {
            await tx.query('INSERT INTO w (id) VALUES ($1)', [id]);
            await tx.copyFrom!('w (id, n)', `${id}-copied\t7\n`);
            const [row] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
            return row!.pid;
          }),
        ),
      );
      expect(new Set(pids).size).toBe(3);
      const ids = await worker.query<{ id: string }>(
        "SELECT id FROM w WHERE id LIKE 't%' ORDER BY id",
      );
      expect(ids.map((r) => r.id)).toEqual([
        't1',
        't1-copied',
        't2',
        't2-copied',
        't3',
        't3-copied',
      ]);
    });

    it('a failed statement inside a transaction leaves nothing of it, and the pool keeps serving', async () => {
      // Postgres answers COMMIT of an aborted transaction with ROLLBACK, as in this thread.
      await worker
        .transaction(async (tx) => {
          await tx.query("INSERT INTO w (id) VALUES ('half')");
          await tx.query('INSERT INTO w (id) VALUES ($1)', ['big']).catch(() => undefined);
        })
        .catch(() => undefined);
      const counts = await Promise.all(
        Array.from({ length: 6 }, () =>
          worker.query<{ n: bigint }>("SELECT count(*) AS n FROM w WHERE id = 'half'"),
        ),
      );
      expect(counts.map((r) => r[0]!.n)).toEqual(Array(6).fill(0n));
    });

    it('a connection lost inside a transaction fails that transaction, not the thread', async () => {
      // pg emits 'error' on a connection out of the pool when it is cut; unheard, that would be
      // an uncaught exception in the worker thread.
      const stopped = vi.spyOn(console, 'error');
      await expect(
        worker.transaction(async (tx) => {
          await tx.query("INSERT INTO w (id) VALUES ('cut')");
          const [row] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await pgAdmin(`SELECT pg_terminate_backend(${row!.pid})`);
          await new Promise((r) => setTimeout(r, 50));
          await tx.query('SELECT 1');
        }),
      ).rejects.toThrow(/terminat|connection/i);
      expect(stopped).not.toHaveBeenCalledWith(expect.stringContaining('worker thread stopped'));
      stopped.mockRestore();
      const counts = await Promise.all(
        Array.from({ length: 6 }, () =>
          worker.query<{ n: bigint }>("SELECT count(*) AS n FROM w WHERE id = 'cut'"),
        ),
      );
      expect(counts.map((r) => r[0]!.n)).toEqual(Array(6).fill(0n));
      await worker.transaction((tx) => tx.query('SELECT 1'));
    });

    it('a thread that dies is started again: what it held fails, what comes after is served', async () => {
      const logged = vi.spyOn(console, 'error').mockImplementation(() => undefined);
      const dying = createPgWorkerDriver({
        url,
        max: 2,
        workerEntry: new URL('./dying-pg-worker.js', import.meta.url),
      });
      try {
        await dying.query('SELECT 1');
        let inside!: () => void;
        const begun = new Promise<void>((r) => (inside = r));
        const held = dying.transaction(async (tx) => {
          await tx.query("INSERT INTO w (id) VALUES ('held-by-dead-thread')");
          inside();
          await new Promise((r) => setTimeout(r, 100));
          await tx.query('SELECT 1');
        });
        const heldResult = held.then(
          () => 'committed',
          (err: Error) => err.message,
        );
        await begun;
        await expect(dying.query('-- die')).rejects.toThrow(/told to die/);
        expect(await heldResult).toMatch(/told to die/);
        const stopped = logged.mock.calls.filter((c) => String(c[0]).includes('thread stopped'));
        expect(stopped).toHaveLength(1);

        const [row] = await dying.query<{ n: bigint }>(
          "SELECT count(*) AS n FROM w WHERE id = 'held-by-dead-thread'",
        );
        expect(row!.n).toBe(0n);
        await dying.transaction((tx) => tx.query("INSERT INTO w (id) VALUES ('after-restart')"));
        const [after] = await worker.query<{ n: bigint }>(
          "SELECT count(*) AS n FROM w WHERE id = 'after-restart'",
        );
        expect(after!.n).toBe(1n);
      } finally {
        logged.mockRestore();
        await dying.close();
      }
    });

    it('holds no connection on the event loop', async () => {
      const before = tcpHandles();
      const second = createPgWorkerDriver({ url, max: 2 });
      try {
        await Promise.all([second.query('SELECT 1'), second.query('SELECT 2')]);
        await second.transaction((tx) => tx.query('SELECT 3'));
        expect(tcpHandles()).toBe(before);
      } finally {
        await second.close();
      }
      // An in-thread driver's pool shows up here: the count above would have seen it.
      const here = createPgDriver({ url, max: 1 });
      try {
        await here.query('SELECT 1');
        expect(tcpHandles()).toBe(before + 1);
      } finally {
        await here.close();
      }
    });

    it('rejects what is sent after close, instead of hanging', async () => {
      const third = createPgWorkerDriver({ url, max: 1 });
      await third.query('SELECT 1');
      await third.close();
      await expect(third.query('SELECT 1')).rejects.toThrow(/worker thread exited/);
    });
  });
} else {
  describeWithoutPostgres('the Postgres worker thread', unreachable);
}
