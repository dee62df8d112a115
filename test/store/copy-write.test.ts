// The COPY write of settlements (decisions 0038 and 0045) against the batch function it stands in
// for, on both stores: each batch below goes through both, each on a fresh database set up the
// same way, and the outcome (what was charged, lost or not written, the usage rows, the balances
// and the ledger) must be the same. Rare paths included: an unknown account, a lease a peer took
// back, an open record a peer recovered, a request id already in the log (COPY fails on it and
// the batch goes through the function), and text COPY must escape.

import { afterEach, describe, expect, it } from 'vitest';
import type { Driver, Queryable } from '../../src/store/driver.ts';
import { randomBase62 } from '../../src/store/ids.ts';
import type { Batch, BatchResult, SettleRecord } from '../../src/store/leases.ts';
import { COPY_MIN_ROWS, growLease, writeBatch } from '../../src/store/leases.ts';
import { createPgDriver } from '../../src/store/pg-driver.ts';
import { createPgliteDriver } from '../../src/store/pglite-driver.ts';
import { PriceSnapshotCatalog } from '../../src/store/price-snapshots.ts';
import { SqlStore } from '../../src/store/sql-store.ts';
import type { UsageRecord } from '../../src/store/store.ts';
import { YUAN } from './conformance.ts';
import { describeWithoutPostgres, PG_URL, pgAdmin, pgUnreachable } from './pg-server.ts';

const HOLDER = 'holder-copy-test';
const INSTANCE = 'instance-copy-test';

/** Where a fresh database comes from, and how it goes away. */
interface Backend {
  name: string;
  open(): Promise<{ driver: Driver; dispose: () => Promise<void> }>;
}

const embedded: Backend = {
  name: 'embedded store',
  async open() {
    const driver = await createPgliteDriver(null);
    return { driver, dispose: () => driver.close() };
  },
};

/** A fresh schema selected through search_path, dropped with the world. */
const postgres: Backend = {
  name: 'Postgres',
  async open() {
    const schema = `sy_copy_${randomBase62(10).toLowerCase()}`;
    await pgAdmin(`CREATE SCHEMA ${schema}`);
    const driver = createPgDriver({
      // The schema's name as the application's, so a test finds its own sessions' lock waits.
      url: `${PG_URL}?application_name=${schema}&options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    });
    return {
      driver,
      async dispose() {
        await driver.close();
        await pgAdmin(`DROP SCHEMA ${schema} CASCADE`);
      },
    };
  },
};

interface World {
  store: SqlStore;
  driver: Driver;
  dispose: () => Promise<void>;
  /** COPY statements the writer ran. */
  copies: number;
  accounts: { rich: string; poor: string; other: string };
  keyId: string;
}

const opened: World[] = [];
afterEach(async () => {
  for (const w of opened.splice(0)) {
    await w.store.close();
    await w.dispose();
  }
});

/** A fresh database: three funded accounts, each leased to HOLDER (poor's lease is 100 nano). */
async function world(backend: Backend, copy: boolean): Promise<World> {
  const { driver: base, dispose } = await backend.open();
  const w = { copies: 0, dispose } as World;
  const counted = (tx: Queryable): Queryable['copyFrom'] =>
    !copy || tx.copyFrom === null
      ? null
      : (into, data) => {
          w.copies++;
          return tx.copyFrom!(into, data);
        };
  w.driver = {
    ...base,
    copyFrom: counted(base),
    transaction: (fn) => base.transaction((tx) => fn({ ...tx, copyFrom: counted(tx) })),
  };
  w.store = await SqlStore.open(w.driver, { heartbeatMs: 0, ownsDriver: false });
  opened.push(w);
  const ids: string[] = [];
  for (const [name, lease] of [
    ['rich', YUAN],
    ['poor', 100n],
    ['other', YUAN],
  ] as const) {
    const a = await w.store.createAccount({ name });
    await w.store.adjustBalance(a.id, 10n * YUAN, 'topup', 'test funds');
    const grown = await growLease(w.driver, HOLDER, INSTANCE, a.id, lease, lease);
    expect(grown.result).toBe('ok');
    ids.push(a.id);
  }
  w.accounts = { rich: ids[0]!, poor: ids[1]!, other: ids[2]! };
  const { record } = await w.store.createKey({
    accountId: ids[0]!,
    name: 'k',
    allowedModels: null,
    expiresAt: null,
  });
  w.keyId = record.id;
  return w;
}

let seq = 0;
function settle(
  w: World,
  account: keyof World['accounts'] | 'unknown',
  costNano: bigint,
  overrides: Partial<SettleRecord> = {},
): SettleRecord {
  seq++;
  return {
    requestId: `req_copy_${seq}`,
    clientRequestId: null,
    accountId: account === 'unknown' ? 'acct_does_not_exist' : w.accounts[account],
    keyId: w.keyId,
    model: 'deepseek-chat',
    endpoint: 'chat_completions',
    amountNano: costNano + 5n,
    persisted: false,
    mayHaveRecord: false,
    billedModel: 'deepseek-chat',
    capped: false,
    channelId: 'ch-main',
    inputTokens: 120,
    cacheHitTokens: 20,
    outputTokens: 300,
    reasoningTokens: 7,
    estimated: false,
    priceSnapshot: { inputNanoPerToken: '2000', outputNanoPerToken: '8000', pricedAt: 'x' },
    peakApplied: true,
    campaignId: null,
    costNano,
    status: 'ok',
    httpStatus: 200,
    latencyMs: 850,
    upstreamRequestId: `up-${seq}`,
    ...overrides,
  };
}

function batch(settles: SettleRecord[]): Batch {
  return { settles, releases: [], opens: [], shrinks: [] };
}

/** What a write left behind, with ids made comparable across the two databases. */
async function outcomeOf(w: World, result: BatchResult, settles: SettleRecord[]) {
  const name = new Map(Object.entries(w.accounts).map(([k, v]) => [v, k]));
  const rows: (Omit<UsageRecord, 'createdAt' | 'accountId' | 'keyId'> & { account: string })[] = [];
  for (const s of settles) {
    const u = await w.store.getUsage(s.requestId);
    if (u === null) continue;
    const { createdAt: _c, accountId, keyId: _k, ...rest } = u;
    rows.push({ ...rest, account: name.get(accountId) ?? accountId });
  }
  const balances: Record<string, bigint> = {};
  for (const [k, id] of Object.entries(w.accounts)) {
    balances[k] = (await w.store.getAccount(id))!.balanceNano;
  }
  const ledger = await w.driver.query<{ account_id: string; amount_nano: bigint; n: string }>(
    `SELECT account_id, amount_nano, coalesce(request_id, reason) AS n FROM ledger
      WHERE kind = 'usage' ORDER BY account_id`,
  );
  const leases = await w.driver.query<{ account_id: string; amount_nano: bigint }>(
    'SELECT account_id, amount_nano FROM leases WHERE holder_id = $1 ORDER BY account_id',
    [HOLDER],
  );
  return {
    balanceAfter: [...result.balanceAfter],
    lost: [...result.lost].map(([a, n]) => [name.get(a), n]),
    recovered: [...result.recovered].sort(),
    rows,
    balances,
    ledger: ledger.map((l) => [name.get(l.account_id), l.amount_nano, l.n]).sort(),
    leases: leases.map((l) => [name.get(l.account_id), l.amount_nano]).sort(),
  };
}

/** Sets up both databases alike (prepare), writes the batch through each path, compares. */
async function bothPaths(
  backend: Backend,
  make: (w: World) => Promise<SettleRecord[]> | SettleRecord[],
  prepare: (w: World, settles: SettleRecord[]) => Promise<void> = async () => {},
) {
  const results = [];
  for (const copy of [true, false]) {
    const w = await world(backend, copy);
    seq = 0;
    const settles = await make(w);
    await prepare(w, settles);
    const result = await writeBatch(
      w.driver,
      HOLDER,
      INSTANCE,
      batch(settles),
      new PriceSnapshotCatalog(),
      1,
    );
    results.push({ copies: w.copies, outcome: await outcomeOf(w, result, settles) });
  }
  const [byCopy, byFunction] = results;
  expect(byCopy!.outcome).toEqual(byFunction!.outcome);
  return { copies: byCopy!.copies, outcome: byCopy!.outcome };
}

function describeCopyWrite(backend: Backend): void {
  describe(`the COPY write of settlements (${backend.name})`, () => {
    it('writes the rows and charges exactly what the batch function does', async () => {
      const { copies, outcome } = await bothPaths(backend, (w) => [
        settle(w, 'rich', 1000n),
        settle(w, 'rich', 0n, { status: 'failed', httpStatus: 502, channelId: null }),
        settle(w, 'rich', 2500n, { capped: true, estimated: true, latencyMs: null }),
        settle(w, 'other', 700n, { clientRequestId: 'caller-id-1', campaignId: 'spring' }),
        settle(w, 'other', YUAN - 700n, { amountNano: YUAN, httpStatus: null }),
      ]);
      expect(copies).toBe(1);
      expect(outcome.rows).toHaveLength(5);
      expect(outcome.balances).toEqual({
        rich: 10n * YUAN - 3500n,
        poor: 10n * YUAN,
        other: 9n * YUAN,
      });
      expect(outcome.ledger).toEqual([
        ['other', -YUAN, '2 requests'],
        ['rich', -3500n, '2 requests'],
      ]);
    });

    it('keeps text as it was, whatever COPY would read as a separator or an escape', async () => {
      const odd = 'a\tb\nc\rd\\e\\N\\t end';
      const { copies, outcome } = await bothPaths(backend, (w) => [
        settle(w, 'rich', 10n, {
          upstreamRequestId: odd,
          billedModel: `model\t${odd}`,
          campaignId: '\\N',
          channelId: 'ch\\',
          clientRequestId: '',
        }),
        settle(w, 'rich', 10n, { upstreamRequestId: '\\N', campaignId: '' }),
      ]);
      expect(copies).toBe(1);
      expect(outcome.rows[0]).toMatchObject({
        upstreamRequestId: odd,
        model: `model\t${odd}`,
        campaignId: '\\N',
        channelId: 'ch\\',
        clientRequestId: '',
      });
      expect(outcome.rows[1]).toMatchObject({ upstreamRequestId: '\\N', campaignId: '' });
    });

    it('drops the rows of an unknown account and charges the rest', async () => {
      const { outcome } = await bothPaths(backend, (w) => [
        settle(w, 'rich', 1000n),
        settle(w, 'unknown', 0n),
        settle(w, 'unknown', 50n),
      ]);
      expect(outcome.rows.map((r) => r.account)).toEqual(['rich']);
      expect(outcome.recovered).toEqual(['req_copy_2', 'req_copy_3']);
      expect(outcome.balances.rich).toBe(10n * YUAN - 1000n);
    });

    it('drops every row of an account whose lease is short, reports it lost, charges the rest', async () => {
      const { outcome } = await bothPaths(backend, (w) => [
        settle(w, 'poor', 60n),
        settle(w, 'rich', 1000n),
        settle(w, 'poor', 60n),
        settle(w, 'other', 5n),
      ]);
      expect(outcome.lost).toEqual([['poor', 100n]]);
      expect(outcome.rows.map((r) => r.account)).toEqual(['rich', 'other']);
      expect(outcome.balances).toMatchObject({ poor: 10n * YUAN, rich: 10n * YUAN - 1000n });
      expect(outcome.ledger).toEqual([
        ['other', -5n, 'req_copy_4'],
        ['rich', -1000n, 'req_copy_2'],
      ]);
    });

    it('does not charge a request whose open record a peer recovered, and sums what stayed', async () => {
      const { outcome } = await bothPaths(
        backend,
        (w) => [
          settle(w, 'rich', 400n, { persisted: true, mayHaveRecord: true }),
          settle(w, 'rich', 300n, { persisted: true, mayHaveRecord: true }),
          settle(w, 'rich', 200n),
          settle(w, 'poor', 90n, { persisted: true, mayHaveRecord: true }),
        ],
        async (w, settles) => {
          // All three open records were written; a peer recovered the first and the poor one.
          await writeBatch(
            w.driver,
            HOLDER,
            INSTANCE,
            { settles: [], releases: [], opens: settles.filter((s) => s.persisted), shrinks: [] },
            new PriceSnapshotCatalog(),
          );
          await w.driver.query('DELETE FROM reservations WHERE request_id = ANY ($1::text[])', [
            [settles[0]!.requestId, settles[3]!.requestId],
          ]);
        },
      );
      expect(outcome.recovered).toEqual(['req_copy_1', 'req_copy_4']);
      expect(outcome.rows.map((r) => r.requestId)).toEqual(['req_copy_2', 'req_copy_3']);
      expect(outcome.ledger).toEqual([['rich', -500n, '2 requests']]);
      expect(outcome.balances).toMatchObject({ rich: 10n * YUAN - 500n, poor: 10n * YUAN });
    });

    it('sends a batch with a request id already in the log through the batch function', async () => {
      const { copies, outcome } = await bothPaths(
        backend,
        (w) => [settle(w, 'rich', 100n), settle(w, 'rich', 200n), settle(w, 'other', 300n)],
        async (w, settles) => {
          await writeBatch(
            w.driver,
            HOLDER,
            INSTANCE,
            batch([{ ...settles[1]!, costNano: 1n }]),
            new PriceSnapshotCatalog(),
            1,
          );
        },
      );
      // The earlier write went by COPY; the batch's own COPY failed and was rolled back.
      expect(copies).toBe(2);
      expect(outcome.recovered).toEqual(['req_copy_2']);
      expect(outcome.rows.map((r) => [r.requestId, r.costNano])).toEqual([
        ['req_copy_1', 100n],
        ['req_copy_2', 1n],
        ['req_copy_3', 300n],
      ]);
      expect(outcome.balances).toMatchObject({ rich: 10n * YUAN - 101n, other: 10n * YUAN - 300n });
    });

    it('writes a batch smaller than COPY_MIN_ROWS through the batch function', async () => {
      const w = await world(backend, true);
      const small = [settle(w, 'rich', 100n), settle(w, 'other', 200n)];
      const snapshots = new PriceSnapshotCatalog();
      await writeBatch(w.driver, HOLDER, INSTANCE, batch(small), snapshots);
      expect(w.copies).toBe(0);
      const large = Array.from({ length: COPY_MIN_ROWS }, () => settle(w, 'rich', 1n));
      const result = await writeBatch(w.driver, HOLDER, INSTANCE, batch(large), snapshots);
      expect(w.copies).toBe(1);
      expect(result.balanceAfter.size).toBe(COPY_MIN_ROWS);
      expect((await w.store.getAccount(w.accounts.rich))?.balanceNano).toBe(
        10n * YUAN - 100n - BigInt(COPY_MIN_ROWS),
      );
    });

    it('a request id twice in one batch is written and charged once', async () => {
      const { copies, outcome } = await bothPaths(backend, (w) => {
        const s = settle(w, 'rich', 100n);
        return [s, { ...s }];
      });
      expect(copies).toBe(1);
      expect(outcome.rows.map((r) => r.requestId)).toEqual(['req_copy_1', 'req_copy_1']);
      expect(outcome.ledger).toEqual([['rich', -100n, 'req_copy_1']]);
      expect(outcome.balances.rich).toBe(10n * YUAN - 100n);
    });
  });
}

describeCopyWrite(embedded);

const unreachable = await pgUnreachable();
if (unreachable === null) {
  describeCopyWrite(postgres);
  describe('the COPY write of settlements (Postgres, two sessions)', () => {
    /** Until a session of this test's pool waits for a lock in switchyard_lock_for_copy. */
    async function untilTheWriteWaits(tx: Queryable): Promise<void> {
      for (let i = 0; i < 500; i++) {
        // A transaction sees one snapshot of the activity view unless it asks for a new one.
        await tx.query('SELECT pg_stat_clear_snapshot()');
        const waiting = await tx.query<{ n: bigint }>(
          `SELECT count(*)::int8 AS n FROM pg_stat_activity
            WHERE application_name = current_setting('application_name')
              AND wait_event_type = 'Lock' AND query LIKE '%switchyard_lock_for_copy%'`,
        );
        if (waiting[0]!.n > 0n) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error('the write never waited in switchyard_lock_for_copy');
    }

    it('dates a write that began first but locked second after the charge it follows', async () => {
      const w = await world(postgres, true);
      const rich = w.accounts.rich;
      const settles = [settle(w, 'rich', 100n), settle(w, 'rich', 200n)];
      let writing: Promise<BatchResult> | null = null;
      // Another session holds the account; the write begins, and waits for it.
      await w.driver.transaction(async (tx) => {
        await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [rich]);
        writing = writeBatch(
          w.driver,
          HOLDER,
          INSTANCE,
          batch(settles),
          new PriceSnapshotCatalog(),
          1,
        );
        await untilTheWriteWaits(tx);
        // That session's charge, dated after the write began (as an adjustment dates it).
        await tx.query('UPDATE accounts SET balance_nano = balance_nano + 7 WHERE id = $1', [rich]);
        await tx.query(
          `INSERT INTO ledger (account_id, kind, amount_nano, balance_after_nano, reason)
           SELECT id, 'adjust', 7, balance_nano, 'test' FROM accounts WHERE id = $1`,
          [rich],
        );
      });
      await writing;
      expect(w.copies).toBe(1);
      // In time order, each ledger row's balance follows the one before it: a statement window
      // cut anywhere reconciles.
      const ledger = await w.driver.query<{
        kind: string;
        amount: bigint;
        after: bigint;
        at: string;
      }>(
        `SELECT kind, amount_nano AS amount, balance_after_nano AS after, created_at::text AS at
           FROM ledger WHERE account_id = $1 ORDER BY created_at, id`,
        [rich],
      );
      expect(ledger.map((l) => l.kind)).toEqual(['topup', 'adjust', 'usage']);
      for (let i = 1; i < ledger.length; i++) {
        expect(ledger[i]!.after).toBe(ledger[i - 1]!.after + ledger[i]!.amount);
      }
      // The write's usage rows carry its ledger row's time.
      const usage = await w.driver.query<{ at: string }>(
        'SELECT DISTINCT created_at::text AS at FROM usage_log WHERE account_id = $1',
        [rich],
      );
      expect(usage).toEqual([{ at: ledger[2]!.at }]);
    });

    it('waits for an open record recovery holds before it locks the account: no deadlock', async () => {
      const w = await world(postgres, true);
      const settles = [
        settle(w, 'rich', 100n, { persisted: true, mayHaveRecord: true }),
        settle(w, 'rich', 200n),
      ];
      // The first request's open record was written down.
      await writeBatch(
        w.driver,
        HOLDER,
        INSTANCE,
        { settles: [], releases: [], opens: [settles[0]!], shrinks: [] },
        new PriceSnapshotCatalog(),
      );
      let writing: Promise<BatchResult> | null = null;
      // Recovery's order (reservations.ts): the open record first, then the account.
      await w.driver.transaction(async (tx) => {
        const held = await tx.query(
          'SELECT 1 FROM reservations WHERE request_id = $1 FOR UPDATE SKIP LOCKED',
          [settles[0]!.requestId],
        );
        expect(held).toHaveLength(1);
        writing = writeBatch(
          w.driver,
          HOLDER,
          INSTANCE,
          batch(settles),
          new PriceSnapshotCatalog(),
          1,
        );
        await untilTheWriteWaits(tx);
        // A writer holding the account while it waited for the record would deadlock here.
        await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [w.accounts.rich]);
        await tx.query('DELETE FROM reservations WHERE request_id = $1', [settles[0]!.requestId]);
      });
      const result = await writing!;
      expect(w.copies).toBe(1);
      // Recovery took the first request back; the second is charged.
      expect([...result.recovered]).toEqual([settles[0]!.requestId]);
      expect((await w.store.getAccount(w.accounts.rich))!.balanceNano).toBe(10n * YUAN - 200n);
    });
  });
} else {
  describeWithoutPostgres('the COPY write of settlements (Postgres)', unreachable);
}
