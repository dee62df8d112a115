// What the lease book promises beyond the store contract (docs/decisions/0013-balance-leases.md),
// run on both backends: no round trip per admission while a lease covers it, outcomes written in
// group commits, several holders never admitting more than the balance together, slack that goes
// back, open requests written down for recovery, and a paused holder never charging twice.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Driver } from '../../src/store/driver.ts';
import type { LeaseBookOptions } from '../../src/store/lease-book.ts';
import type { SqlStore } from '../../src/store/sql-store.ts';
import { SplitPriceSnapshot } from '../../src/store/store.ts';
import type { Account, ApiKey, PriceSnapshot } from '../../src/store/store.ts';
import type { StoreDatabase, StoreHarness } from './conformance.ts';
import { outcome, reserveOn, YUAN } from './conformance.ts';

/** Counts what reaches the database through a store's driver (the book shares the object). */
function countCalls(driver: Driver): { queries: number; transactions: number; fail: number } {
  const counts = { queries: 0, transactions: 0, fail: 0 };
  const query = driver.query.bind(driver);
  const transaction = driver.transaction.bind(driver);
  const d = driver as { -readonly [K in keyof Driver]: Driver[K] };
  d.query = (text, params) => {
    counts.queries++;
    if (counts.fail > 0) {
      counts.fail--;
      return Promise.reject(new Error('connection lost (test)'));
    }
    return query(text, params);
  };
  d.transaction = (fn) => {
    counts.transactions++;
    if (counts.fail > 0) {
      counts.fail--;
      return Promise.reject(new Error('connection lost (test)'));
    }
    return transaction(fn);
  };
  return counts;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The next statement through the driver whose text matches fails once (on PGlite the stores of
 * a database share one driver: only the statement asked for may fail). Resolves when it has.
 */
function failOnce(driver: Driver, match: RegExp): Promise<void> {
  return interceptOnce(driver, match, () => Promise.reject(new Error('connection lost (test)')));
}

/**
 * The next matching statement gets `answer` instead of the database; resolves when it came.
 * Rejects, with the driver restored, if none came within 5 s (a book that stopped asking).
 */
function interceptOnce(driver: Driver, match: RegExp, answer: () => Promise<never>): Promise<void> {
  const d = driver as { -readonly [K in keyof Driver]: Driver[K] };
  const query = d.query;
  return new Promise((came, never) => {
    const timer = setTimeout(() => {
      d.query = query;
      never(new Error(`no statement matching ${String(match)} within 5 s`));
    }, 5_000);
    d.query = function (this: Driver, text, params) {
      if (!match.test(text)) return query.call(this, text, params);
      d.query = query;
      clearTimeout(timer);
      came();
      return answer();
    } as Driver['query'];
  });
}

/** Counts the lease grows asked through a driver (on PGlite every store of a database's). */
function countGrows(driver: Driver): { asked: number } {
  const counts = { asked: 0 };
  const d = driver as { -readonly [K in keyof Driver]: Driver[K] };
  const query = d.query;
  d.query = function (this: Driver, text, params) {
    if (/switchyard_grow_lease/.test(text)) counts.asked++;
    return query.call(this, text, params);
  } as Driver['query'];
  return counts;
}

/**
 * The next statement whose text matches waits until `release()`, then goes to the database;
 * `came` resolves when it arrived.
 */
function holdOnce(driver: Driver, match: RegExp): { came: Promise<void>; release: () => void } {
  const d = driver as { -readonly [K in keyof Driver]: Driver[K] };
  const query = d.query;
  let release = (): void => undefined;
  const gate = new Promise<void>((open) => (release = open));
  const came = new Promise<void>((arrived) => {
    d.query = function (this: Driver, text, params) {
      if (!match.test(text)) return query.call(this, text, params);
      d.query = query;
      arrived();
      return gate.then(() => query.call(this, text, params));
    } as Driver['query'];
  });
  return { came, release };
}

/**
 * Resolves a turn of the loop after the next transaction through the driver has ended: once
 * whatever its caller does straight after it has run.
 */
function afterTransaction(driver: Driver): Promise<void> {
  const d = driver as { -readonly [K in keyof Driver]: Driver[K] };
  const transaction = d.transaction;
  return new Promise((ended) => {
    d.transaction = function (this: Driver, fn) {
      d.transaction = transaction;
      return transaction.call(this, fn).finally(() => setImmediate(ended));
    } as Driver['transaction'];
  });
}

/** Polls until the account's lease is `want` (a few seconds at most); the last one read. */
async function leasedBecomes(read: () => Promise<Account | null>, want: bigint): Promise<bigint> {
  for (let i = 0; i < 150; i++) {
    const leased = (await read())?.leasedNano;
    if (leased === want) return leased;
    await sleep(20);
  }
  return (await read())?.leasedNano ?? -1n;
}

/** Polls until the account holds no lease (a few seconds at most). */
async function leaseGone(read: () => Promise<Account | null>): Promise<bigint | undefined> {
  for (let i = 0; i < 150; i++) {
    const leased = (await read())?.leasedNano;
    if (leased === 0n) return leased;
    await sleep(20);
  }
  return (await read())?.leasedNano;
}

/** `book`: lease book options every holder of the suite gets (a test's own come on top). */
export function describeLeaseConformance(
  backend: string,
  harness: StoreHarness,
  book: LeaseBookOptions = {},
): void {
  describe(`lease book (${backend})`, () => {
    let db: StoreDatabase;
    let admin: SqlStore;

    beforeAll(async () => {
      const base = await harness.createDatabase();
      db = {
        open: (leases) =>
          base.open(leases === false ? false : { ...book, ...(leases === true ? {} : leases) }),
      };
      admin = await db.open(false);
    });
    afterAll(async () => {
      await harness.dispose();
    });

    async function funded(nano: bigint): Promise<{ account: Account; key: ApiKey }> {
      const account = await admin.createAccount({ name: 'lease' });
      if (nano > 0n) await admin.adjustBalance(account.id, nano, 'topup', 'test funds');
      const { record } = await admin.createKey({
        accountId: account.id,
        name: 'k',
        allowedModels: null,
        expiresAt: null,
      });
      return { account, key: record };
    }

    it('admits from the lease without a database round trip once it is granted', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      const calls = countCalls(store.driver);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      const afterFirst = calls.queries + calls.transactions;
      expect(afterFirst).toBe(1); // one statement grew the lease
      const more = await Promise.all(
        Array.from({ length: 10 }, () => reserveOn(store, account, key, 1000n)),
      );
      expect(more.every((r) => r.result === 'ok')).toBe(true);
      expect(calls.queries + calls.transactions).toBe(afterFirst);
    });

    it('grows a lease ahead once a quarter of it is left, and admits meanwhile', async () => {
      // Decision 0074. One request of 1,000 grows a lease of 17,000: the mark is 4,250 free.
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      const grows = countGrows(store.driver);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      expect(grows.asked).toBe(1);
      for (let i = 0; i < 11; i++)
        expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      // 12,000 held, 5,000 free: above the mark, nothing asked.
      expect(grows.asked).toBe(1);
      const grow = holdOnce(store.driver, /switchyard_grow_lease/);
      // 13,000 held leaves 4,000: the grow ahead starts, and the admission did not wait for it.
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      await grow.came;
      // While it is held, what the lease still has is admitted: 4 more of 1,000.
      for (let i = 0; i < 4; i++)
        expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      grow.release();
      // It took 16 times what was held when it started (13,000): 17,000 + 208,000.
      expect(await leasedBecomes(() => admin.getAccount(account.id), 225_000n)).toBe(225_000n);
      expect(grows.asked).toBe(2);
      // The next admissions come from the grown lease; no other grow is asked.
      for (let i = 0; i < 5; i++)
        expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      expect(grows.asked).toBe(2);
      await store.close();
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN);
    });

    it('a grow ahead that fails, or gets nothing, answers no request and is not repeated', async () => {
      // A balance of 20,000, of which the first grow takes 17,000.
      const { account, key } = await funded(20_000n);
      const store = await db.open(true);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      for (let i = 0; i < 11; i++) await reserveOn(store, account, key, 1000n);
      // The grow ahead fails (a lost connection): the admission that started it is still ok.
      const failed = failOnce(store.driver, /switchyard_grow_lease/);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      await failed;
      // The mark is spent: the next admissions ask nothing until the lease is short.
      const grows = countGrows(store.driver);
      for (let i = 0; i < 4; i++)
        expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      expect(grows.asked).toBe(0);
      // 17,000 held: the next request is short and grows the lease itself, by the 3,000 left.
      // That leaves 2,000 free, under the new mark (5,000): a grow ahead follows, and gets nothing
      // (the balance is all held), so it sets no mark and is not asked again.
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      expect(await leasedBecomes(() => admin.getAccount(account.id), 20_000n)).toBe(20_000n);
      await sleep(50);
      expect(grows.asked).toBe(2);
      for (let i = 0; i < 2; i++) {
        expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      }
      expect(grows.asked).toBe(2);
      // 20,000 held: the next is refused by its own grow, as without a grow ahead.
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('insufficient');
      expect(grows.asked).toBe(3);
      await store.close();
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(20_000n);
    });

    it('a grow ahead does not answer for an account disabled while it ran', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      for (let i = 0; i < 11; i++) await reserveOn(store, account, key, 1000n);
      const grow = holdOnce(store.driver, /switchyard_grow_lease/);
      expect((await reserveOn(store, account, key, 1000n)).result).toBe('ok');
      await grow.came;
      // Disabled through this store while the grow ahead is held: the next request waits on the
      // grow in flight, which answers nothing for it, and then asks the database itself.
      const statusSet = afterTransaction(store.driver);
      const disabled = store.setAccountStatus(account.id, 'disabled');
      await statusSet;
      const next = reserveOn(store, account, key, 1000n);
      grow.release();
      await disabled;
      expect((await next).result).toBe('account_disabled');
      await store.close();
    });

    it('writes many settlements in a few transactions, each charged exactly once', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      const held = await Promise.all(
        Array.from({ length: 100 }, () => reserveOn(store, account, key, 10_000n)),
      );
      const calls = countCalls(store.driver);
      const results = await Promise.all(
        held.map((h, i) => store.settle(h.id, outcome(BigInt(1000 + i)))),
      );
      expect(results.every((r) => r.result === 'settled')).toBe(true);
      // One statement per write (plus BEGIN/lock/COMMIT on Postgres), a few writes in all.
      expect(calls.queries + calls.transactions).toBeLessThanOrEqual(8);
      const charged = results.reduce((s, r) => s + (r.result === 'settled' ? r.costNano : 0n), 0n);
      expect(charged).toBe(100n * 1000n + 4950n);
      const after = await admin.getAccount(account.id);
      expect(after?.balanceNano).toBe(YUAN - charged);
      const st = await admin.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
      expect(st.usageNano).toBe(charged);
      expect(st.closingNano).toBe(after?.balanceNano);
      // Each row's balance_after follows the ledger's order: the chain never breaks.
      let balance = st.openingNano;
      for (const row of st.rows) {
        balance += row.amountNano;
        expect(row.balanceAfterNano).toBe(balance);
      }
    });

    it('a write charges each account with one ledger row that its usage rows itemise', async () => {
      const { account, key } = await funded(YUAN);
      const other = await funded(YUAN);
      const store = await db.open(true);
      const held = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          i % 2 === 0
            ? reserveOn(store, account, key, 10_000n)
            : reserveOn(store, other.account, other.key, 10_000n),
        ),
      );
      // All forty settle in the same turn of the loop, so they share one write.
      const results = await Promise.all(
        held.map((h, i) => store.settle(h.id, outcome(BigInt(100 + i)))),
      );
      const st = await admin.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
      const usageRows = st.rows.filter((r) => r.kind === 'usage');
      expect(usageRows).toHaveLength(1);
      expect(usageRows[0]).toMatchObject({ requestId: null, reason: '20 requests' });
      const items = await admin.listUsage({ accountId: account.id, limit: 100 });
      expect(items).toHaveLength(20);
      const itemised = items.reduce((s, u) => s + u.costNano, 0n);
      expect(-usageRows[0]!.amountNano).toBe(itemised);
      expect(st.usageNano).toBe(itemised);
      // Each request's balance after its charge follows the batch's order within its account.
      const mine = results.filter((_, i) => i % 2 === 0);
      let balance = YUAN;
      for (const [j, r] of mine.entries()) {
        balance -= BigInt(100 + 2 * j);
        expect(r).toMatchObject({ result: 'settled', balanceAfterNano: balance });
      }
      expect(usageRows[0]!.balanceAfterNano).toBe(balance);

      // The usage rows keep every field, the price snapshot as an object.
      expect(items.find((u) => u.requestId === held[0]!.id)).toMatchObject({
        costNano: 100n,
        reservedNano: 10_000n,
        inputTokens: 120,
        status: 'ok',
        priceSnapshot: outcome(0n).priceSnapshot,
        upstreamRequestId: 'up-1',
      });

      // A write that charges one request names it; absent fields stay SQL nulls.
      const one = await reserveOn(store, account, key, 10_000n);
      await store.settle(
        one.id,
        outcome(7n, { priceSnapshot: null, upstreamRequestId: null, latencyMs: null }),
      );
      const again = await admin.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
      expect(again.rows.at(-1)).toMatchObject({
        kind: 'usage',
        amountNano: -7n,
        requestId: one.id,
      });
      expect(await admin.getUsage(one.id)).toMatchObject({
        priceSnapshot: null,
        upstreamRequestId: null,
        latencyMs: null,
      });
    });

    it('the batch write keeps usage rows to accounts that exist, without a foreign key', async () => {
      // Migration 0006 dropped usage_log's per-row foreign-key trigger; the write checks each
      // account once instead. Free rows need no lease, so only that check stands in their way.
      const { account, key } = await funded(0n);
      const row = (requestId: string, accountId: string): unknown[] => [
        requestId,
        accountId,
        key.id,
        'm',
        null,
        'chat',
        1,
        0,
        1,
        0,
        false,
        null,
        false,
        null,
        '0',
        '0',
        false,
        'failed',
        502,
        5,
        null,
        false,
        null,
      ];
      const known = `req_fk_known_${Date.now()}`;
      const unknown = `req_fk_unknown_${Date.now()}`;
      const rows = await admin.driver.query<{ kind: string; id: string }>(
        `SELECT r_kind AS kind, r_id AS id
           FROM switchyard_write_batch($1, $2, '[]'::jsonb, $3::jsonb, '[]'::jsonb, '[]'::jsonb)`,
        [
          'holder-fk-test',
          'instance-fk-test',
          JSON.stringify([row(known, account.id), row(unknown, 'acct_does_not_exist')]),
        ],
      );
      expect(rows.filter((r) => r.kind === 'unsettled')).toEqual([
        { kind: 'unsettled', id: unknown },
      ]);
      expect(await admin.getUsage(known)).toMatchObject({ accountId: account.id, costNano: 0n });
      expect(await admin.getUsage(unknown)).toBeNull();
    });

    it('stores each price snapshot once, and gives every request its own back', async () => {
      const { account, key } = await funded(YUAN);
      const [a, b] = [await db.open(true), await db.open(true)];
      const tag = `snap-${Math.random().toString(36).slice(2)}`;
      const snap = (output: string, pricedAt: string | null): PriceSnapshot => ({
        tag,
        inputNanoPerToken: '2000',
        outputNanoPerToken: output,
        campaignId: null,
        ...(pricedAt === null ? {} : { pricedAt }),
      });
      const at = (ms: number): string =>
        new Date(Date.UTC(2026, 10, 21, 9, 0, 0, ms)).toISOString();
      // One writer: four requests on one price, one on another, one snapshot without an entry time.
      const given = [
        snap('8000', at(1)),
        snap('8000', at(2)),
        snap('8000', at(3)),
        snap('8000', at(999)),
      ];
      given.push(snap('9000', at(4)), snap('8000', null));
      // The first write fails once: what it carried must still be stored by the retry.
      const calls = countCalls(a.driver);
      const held = await Promise.all(given.map(() => reserveOn(a, account, key, 1000n)));
      calls.fail = 1;
      await Promise.all(
        held.map((h, i) => a.settle(h.id, outcome(10n, { priceSnapshot: given[i]! }))),
      );
      // Later writes by the same writer and by another one, on a snapshot already stored.
      const later = [
        await reserveOn(a, account, key, 1000n),
        await reserveOn(b, account, key, 1000n),
      ];
      await a.settle(later[0]!.id, outcome(10n, { priceSnapshot: snap('8000', at(5)) }));
      await b.settle(later[1]!.id, outcome(10n, { priceSnapshot: snap('8000', at(6)) }));
      // As the gateway hands it over: the shared part as one object, the entry time beside it;
      // through the lease book and through the one-statement path of a store without leases.
      const plain = await db.open(false);
      const split = [
        await reserveOn(b, account, key, 1000n),
        await reserveOn(plain, account, key, 1000n),
      ];
      const splitAt = Date.UTC(2026, 10, 21, 9, 0, 0, 7);
      const shared = snap('8000', null);
      await b.settle(
        split[0]!.id,
        outcome(10n, { priceSnapshot: new SplitPriceSnapshot(shared, splitAt) }),
      );
      await plain.settle(
        split[1]!.id,
        outcome(10n, { priceSnapshot: new SplitPriceSnapshot(shared, splitAt) }),
      );
      for (const h of split) {
        expect((await admin.getUsage(h.id))?.priceSnapshot).toEqual(snap('8000', at(7)));
      }

      for (const [i, h] of held.entries()) {
        expect((await admin.getUsage(h.id))?.priceSnapshot).toEqual(given[i]);
      }
      expect((await admin.getUsage(later[0]!.id))?.priceSnapshot).toEqual(snap('8000', at(5)));
      expect((await admin.getUsage(later[1]!.id))?.priceSnapshot).toEqual(snap('8000', at(6)));
      const listed = await admin.listUsage({ accountId: account.id, limit: 100 });
      expect(
        listed.map((u) => u.priceSnapshot).filter((p) => p?.pricedAt === at(999)),
      ).toHaveLength(1);
      const stored = await admin.driver.query<{ n: bigint }>(
        `SELECT count(*) AS n FROM price_snapshots WHERE snapshot->>'tag' = $1`,
        [tag],
      );
      // Two: the 8000 price (with or without an entry time, its shared part is the same) and 9000.
      expect(Number(stored[0]?.n)).toBe(2);
      await Promise.all([a.close(), b.close(), plain.close()]);
    });

    it('two holders on one account never admit more than the balance together', async () => {
      const { account, key } = await funded(50_000n);
      const [a, b] = [await db.open(true), await db.open(true)];
      const results = await Promise.all(
        Array.from({ length: 120 }, (_, i) => reserveOn(i % 2 === 0 ? a : b, account, key, 1000n)),
      );
      const admitted = results.filter((r) => r.result === 'ok').length;
      expect(admitted).toBeLessThanOrEqual(50);
      expect(admitted).toBeGreaterThan(0);
      const view = await admin.getAccount(account.id);
      expect(view!.balanceNano - view!.reservedNano - view!.leasedNano >= 0n).toBe(true);
    });

    it('gives idle slack back, and a negative adjustment takes the slack first', async () => {
      const { account, key } = await funded(YUAN);
      const idle = await db.open({ idleReturnMs: 30 });
      const h = await reserveOn(idle, account, key, 1000n);
      await idle.settle(h.id, outcome(400n));
      expect((await admin.getAccount(account.id))?.leasedNano).not.toBe(0n);
      for (let i = 0; i < 100 && (await admin.getAccount(account.id))?.leasedNano !== 0n; i++)
        await sleep(20);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 400n,
        reservedNano: 0n,
        leasedNano: 0n,
      });

      const busy = await db.open(true);
      const h2 = await reserveOn(busy, account, key, 1000n);
      await busy.settle(h2.id, outcome(600n));
      // Everything that is left, through the holder of the lease: its slack goes back first.
      await busy.adjustBalance(account.id, -(YUAN - 1000n), 'adjust', 'refund');
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: 0n,
        reservedNano: 0n,
        leasedNano: 0n,
      });
    });

    /** A funded account and a new book holding slack on it after one request charged 400. */
    /** The Postgres gateway's book (decision 0044), with the idle return at 30 ms. */
    const KEEPER: LeaseBookOptions = { idleReturnMs: 30, idleKeepMs: 60_000 };

    async function slackIn(
      funds: bigint,
      options: LeaseBookOptions,
    ): Promise<{ account: Account; key: ApiKey; book: SqlStore; leased: bigint }> {
      const { account, key } = await funded(funds);
      const book = await db.open(options);
      const h = await reserveOn(book, account, key, 1000n);
      await book.settle(h.id, outcome(400n));
      const leased = (await admin.getAccount(account.id))!.leasedNano;
      expect(leased > 0n).toBe(true);
      return { account, key, book, leased };
    }

    it('keeps its slack through idle spells when it is the only holder, and gives it back at close', async () => {
      // The embedded gateway's book (decision 0043): no other instance could take the slack.
      const { account, key, book: only, leased } = await slackIn(YUAN, { idleReturnMs: null });
      // Many times the 30 ms after which the book above gave its slack back.
      await sleep(300);
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased);
      // The next request is admitted from the lease as it stands: no grow.
      const h2 = await reserveOn(only, account, key, 1000n);
      await only.settle(h2.id, outcome(100n));
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased - 100n);
      await only.close();
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 500n,
        reservedNano: 0n,
        leasedNano: 0n,
      });
    });

    it('keeps idle slack while the account has room, and gives it back once another holder is refused', async () => {
      const { account, key, book: keeper, leased } = await slackIn(YUAN, KEEPER);
      // Ten times the idle return: the room look found a balance far above four times the slack.
      await sleep(300);
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased);

      // Another holder asks for all that nobody holds and a bit more: refused, and the account is
      // marked short; the keeper's next look sees it and gives its slack back.
      const other = await db.open(true);
      const free = YUAN - 400n - leased;
      expect((await reserveOn(other, account, key, free + 1n)).result).toBe('insufficient');
      expect(await leaseGone(() => admin.getAccount(account.id))).toBe(0n);
      const admitted = await reserveOn(other, account, key, free + 1n);
      expect(admitted.result).toBe('ok');
      await other.release(admitted.id);
      await Promise.all([keeper.close(), other.close()]);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 400n,
        reservedNano: 0n,
        leasedNano: 0n,
      });
    });

    it('kept idle slack goes back after a negative adjustment elsewhere is refused, or a disable elsewhere', async () => {
      const { account, book: keeper } = await slackIn(YUAN, KEEPER);
      // Through another instance (no lease of its own): all of the balance, the keeper's slack
      // included, is refused and marks the account; the keeper's next look gives it back.
      await expect(
        admin.adjustBalance(account.id, -(YUAN - 400n), 'adjust', 'refund'),
      ).rejects.toMatchObject({ code: 'insufficient_balance' });
      expect(await leaseGone(() => admin.getAccount(account.id))).toBe(0n);
      await admin.adjustBalance(account.id, -(YUAN - 400n), 'adjust', 'refund');
      expect(await admin.getAccount(account.id)).toMatchObject({ balanceNano: 0n, leasedNano: 0n });
      await keeper.close();

      const second = await slackIn(YUAN, KEEPER);
      await sleep(100);
      expect((await admin.getAccount(second.account.id))?.leasedNano).toBe(second.leased);
      await admin.setAccountStatus(second.account.id, 'disabled');
      expect(await leaseGone(() => admin.getAccount(second.account.id))).toBe(0n);
      await second.book.close();
    });

    it('keeps idle slack when what was refused elsewhere is more than the whole balance', async () => {
      // Regression (migration 0010): a client asking for more than its balance marked the account
      // short, and every instance gave its idle slack back, although no slack could have met it.
      const { account, key, book: keeper, leased } = await slackIn(YUAN, KEEPER);
      const other = await db.open(true);
      expect((await reserveOn(other, account, key, YUAN)).result).toBe('insufficient');
      await expect(
        admin.adjustBalance(account.id, -YUAN, 'adjust', 'refund'),
      ).rejects.toMatchObject({ code: 'insufficient_balance' });
      // Ten looks later the keeper still holds its slack.
      await sleep(300);
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased);

      await Promise.all([keeper.close(), other.close()]);
    });

    it('marks the account short once a second however many refusals the slack could meet come', async () => {
      // A reservation held in the database (no lease book): nothing any look gives back. Half the
      // balance held, so all of it is refused although the balance covers it.
      const { account, key } = await funded(YUAN);
      const held = await reserveOn(admin, account, key, YUAN / 2n);
      expect(held.result).toBe('ok');
      const shortAt = async (): Promise<Date | null> =>
        (
          await admin.driver.query<{ short_at: Date | null }>(
            `SELECT short_at FROM accounts WHERE id = $1`,
            [account.id],
          )
        )[0]!.short_at;
      const refund = (): Promise<unknown> =>
        admin.adjustBalance(account.id, -YUAN, 'adjust', 'refund');
      await expect(refund()).rejects.toMatchObject({ code: 'insufficient_balance' });
      const marked = await shortAt();
      expect(marked).not.toBeNull();
      // Again, and a grow elsewhere, both refused within the second: the mark stands as it was.
      await expect(refund()).rejects.toMatchObject({ code: 'insufficient_balance' });
      const other = await db.open(true);
      expect((await reserveOn(other, account, key, (YUAN * 3n) / 4n)).result).toBe('insufficient');
      expect(await shortAt()).toEqual(marked);
      await admin.release(held.id);
      await other.close();
    });

    it('keeps idle slack at four times it nobody holds, and gives it back one nano under', async () => {
      // One request of 1,000 grows a lease of 17,000 (decision 0013's growth); charged 400, it
      // keeps 16,600 of slack. 83,400 funds leave 66,400 for anyone else: four times the slack.
      const options = { idleReturnMs: 50, idleKeepMs: 60_000 };
      const at = await slackIn(83_400n, options);
      const under = await slackIn(83_399n, options);
      expect([at.leased, under.leased]).toEqual([16_600n, 16_600n]);
      expect(await leaseGone(() => admin.getAccount(under.account.id))).toBe(0n);
      expect((await admin.getAccount(at.account.id))?.leasedNano).toBe(16_600n);
      await Promise.all([at.book.close(), under.book.close()]);
    });

    it('a kept lease that a peer recovered is not admitted from: its next request is charged', async () => {
      const { account, key, book: paused, leased } = await slackIn(YUAN, KEEPER);
      await sleep(100);
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased);
      // Its process paused past the heartbeat's bound: a peer takes its lease back.
      await admin.driver.query(
        `UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
        [paused.instanceId],
      );
      await admin.recoverDeadInstances(60_000);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 400n,
        leasedNano: 0n,
      });
      // It wakes up; its next look finds the lease gone, so the next request leases afresh and
      // is charged (admitted from the slack it had, the write would have found the lease lost and
      // dropped the charge).
      await sleep(100);
      await paused.heartbeat();
      const next = await reserveOn(paused, account, key, 1000n);
      expect(next.result).toBe('ok');
      expect(await paused.settle(next.id, outcome(700n))).toMatchObject({
        result: 'settled',
        costNano: 700n,
      });
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 1100n);
      await paused.close();
    });

    it('gives idle slack back when the room look fails or hangs, and when the keep runs out', async () => {
      const {
        account,
        key,
        book: unanswered,
      } = await slackIn(YUAN, { idleReturnMs: 100, idleKeepMs: 60_000 });
      // The book's next statement that reads room; it comes 100 ms after the request at the least.
      await failOnce(unanswered.driver, /short_at/);
      expect(await leaseGone(() => admin.getAccount(account.id))).toBe(0n);
      await unanswered.close();

      // A look that does not answer: after idleReturnMs of waiting on it the slack goes back.
      const stuck = await db.open({ idleReturnMs: 50, idleKeepMs: 60_000 });
      let answer = (): void => undefined;
      const hung = interceptOnce(
        stuck.driver,
        /short_at/,
        () => new Promise<never>((_, fail) => (answer = () => fail(new Error('late (test)')))),
      );
      const h1 = await reserveOn(stuck, account, key, 1000n);
      await stuck.settle(h1.id, outcome(0n));
      await hung;
      expect(await leaseGone(() => admin.getAccount(account.id))).toBe(0n);
      answer();
      await stuck.close();

      // The keep runs out: kept past the idle return, given back after idleKeepMs.
      const brief = await db.open({ idleReturnMs: 50, idleKeepMs: 1_500 });
      const h2 = await reserveOn(brief, account, key, 1000n);
      await brief.settle(h2.id, outcome(100n));
      const leased = (await admin.getAccount(account.id))!.leasedNano;
      expect(leased > 0n).toBe(true);
      await sleep(300);
      expect((await admin.getAccount(account.id))?.leasedNano).toBe(leased);
      expect(await leaseGone(() => admin.getAccount(account.id))).toBe(0n);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 500n,
        leasedNano: 0n,
      });
      await brief.close();
    });

    it('a small write waits for a full one, but the first outcome after a quiet spell does not', async () => {
      const { account, key } = await funded(YUAN);
      // The longest wait is far beyond the test's run: only a full write can end it.
      const store = await db.open({ minWriteGapMs: 0, maxWriteGapMs: 3_600_000, fullWrite: 3 });
      const [a, b, c, d] = await Promise.all(
        Array.from({ length: 4 }, () => reserveOn(store, account, key, 10_000n)),
      );
      const usageRows = async (): Promise<number> =>
        (await admin.driver.query('SELECT 1 FROM usage_log WHERE account_id = $1', [account.id]))
          .length;
      // Nothing was written since the store opened: the first settlement goes at once.
      expect(await store.settle(a!.id, outcome(100n))).toMatchObject({ result: 'settled' });
      const waiting = [store.settle(b!.id, outcome(200n)), store.settle(c!.id, outcome(300n))];
      await sleep(30);
      expect(await usageRows()).toBe(1);
      // The third outcome fills the write: all three are written together.
      const results = await Promise.all([...waiting, store.settle(d!.id, outcome(400n))]);
      expect(results.every((r) => r.result === 'settled')).toBe(true);
      expect(await usageRows()).toBe(4);
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 1000n);
    });

    it('the first outcome after a quiet spell waits minWriteGapMs for the outcomes behind it, and they go in one write', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open({ minWriteGapMs: 150, maxWriteGapMs: 200, fullWrite: 1024 });
      const [a, b] = await Promise.all(
        Array.from({ length: 2 }, () => reserveOn(store, account, key, 10_000n)),
      );
      const usageRows = async (): Promise<number> =>
        (await admin.driver.query('SELECT 1 FROM usage_log WHERE account_id = $1', [account.id]))
          .length;
      const first = store.settle(a!.id, outcome(100n));
      await sleep(40);
      // Before decision 0048 the first was written at once, alone.
      expect(await usageRows()).toBe(0);
      const second = store.settle(b!.id, outcome(200n));
      const results = await Promise.all([first, second]);
      expect(results.every((r) => r.result === 'settled')).toBe(true);
      expect(await usageRows()).toBe(2);
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 300n);
    });

    it('charges every request a caller sent with one x-request-id and finds its rows by it', async () => {
      // Regression: the caller's id was the usage row's key, so a second request sent with the
      // same id got no usage row and was never charged (decision 0036). Both paths: the lease
      // book's batch write and the one-statement settle of a store without leases; then an open
      // request of a dead holder, recovered.
      const { account, key } = await funded(YUAN);
      const book = await db.open(true);
      const plain = await db.open(false);
      const dying = await db.open({ writeOpenAfterMs: 10 });
      const clientId = `caller-chosen-${account.id}`;
      const a = await reserveOn(book, account, key, 5000n, clientId);
      const b = await reserveOn(book, account, key, 5000n, clientId);
      const c = await reserveOn(plain, account, key, 5000n, clientId);
      expect([a.result, b.result, c.result]).toEqual(['ok', 'ok', 'ok']);
      expect(new Set([a.id, b.id, c.id]).size).toBe(3);
      expect(await book.settle(a.id, outcome(100n))).toMatchObject({ costNano: 100n });
      expect(await book.settle(b.id, outcome(200n))).toMatchObject({ costNano: 200n });
      await book.flush();
      expect(await plain.settle(c.id, outcome(400n))).toMatchObject({ costNano: 400n });
      const open = await reserveOn(dying, account, key, 5000n, clientId);
      for (let i = 0; i < 100; i++) {
        const rows = await admin.driver.query<{ client_request_id: string | null }>(
          'SELECT client_request_id FROM reservations WHERE request_id = $1',
          [open.id],
        );
        if (rows.length > 0) {
          expect(rows[0]!.client_request_id).toBe(clientId);
          break;
        }
        await sleep(10);
      }
      await dying.close();
      expect(await admin.recoverDeadInstances(60_000)).toBeGreaterThanOrEqual(1);

      const rows = await admin.listUsage({ clientRequestId: clientId });
      expect(rows.map((r) => [r.requestId, r.status, r.costNano]).sort()).toEqual(
        [
          [a.id, 'ok', 100n],
          [b.id, 'ok', 200n],
          [c.id, 'ok', 400n],
          [open.id, 'recovered', 0n],
        ].sort(),
      );
      expect(rows.every((r) => r.clientRequestId === clientId)).toBe(true);
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 700n);
      // The id finds the newest of its rows; the gateway's own id finds its own.
      expect((await admin.getUsage(clientId))?.requestId).toBe(rows[0]!.requestId);
      expect((await admin.getUsage(b.id))?.clientRequestId).toBe(clientId);
      const own = await reserveOn(plain, account, key, 10n);
      await plain.settle(own.id, outcome(1n));
      expect((await admin.getUsage(own.id))?.clientRequestId).toBeNull();
    });

    it("stamps a write's usage rows and its ledger row with one time, so every period reconciles", async () => {
      // Regression: the usage rows had the transaction's start and the ledger row a later
      // clock_timestamp(), so a period ending between the two listed the rows but not their
      // charge (DESIGN invariant 5, session 21).
      const { account, key } = await funded(YUAN);
      const book = await db.open(true);
      for (let i = 0; i < 3; i++) {
        const h = await reserveOn(book, account, key, 5000n);
        void book.settle(h.id, outcome(100n));
      }
      await book.flush();
      const rows = await admin.listUsage({ accountId: account.id });
      const st = await admin.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
      const usage = st.rows.filter((r) => r.kind === 'usage');
      expect(rows).toHaveLength(3);
      expect(usage).toHaveLength(1);
      for (const r of rows) expect(r.createdAt.getTime()).toBe(usage[0]!.createdAt.getTime());
      // And so a period ending just before that time holds neither, one ending just after both.
      const at = usage[0]!.createdAt.getTime();
      for (const to of [at, at + 1]) {
        const inLog = (await admin.listUsage({ accountId: account.id, to: new Date(to) })).reduce(
          (sum, r) => sum + r.costNano,
          0n,
        );
        const inStatement = (await admin.statement(account.id, new Date(0), new Date(to)))
          .usageNano;
        expect(inLog).toBe(inStatement);
      }
    });

    it('refuses a reservation larger than any balance as insufficient, not as a database error', async () => {
      // Regression: max_tokens: 1e14 made the grow's desired amount overflow int8, and the relay
      // answered the database's error as 503 "store unavailable" (session 21).
      const { account, key } = await funded(YUAN);
      const book = await db.open(true);
      const plain = await db.open(false);
      for (const on of [book, plain]) {
        expect((await reserveOn(on, account, key, 2n ** 63n)).result).toBe('insufficient');
        expect((await reserveOn(on, account, key, 2n ** 62n)).result).toBe('insufficient');
        expect((await reserveOn(on, account, key, 10n)).result).toBe('ok');
      }
    });

    it("stores an upstream's request id that Postgres cannot hold, and keeps writing", async () => {
      // Regression: the upstream's `id` went into the usage row as it came. A NUL or a lone
      // surrogate in it made every write of the batch fail (jsonb refuses both), so the book
      // retried it forever and no later settlement was written either.
      const { account, key } = await funded(YUAN);
      const book = await db.open(true);
      const plain = await db.open(false);
      const odd = ['chatcmpl-\u0000nul', 'chatcmpl-\ud800lone', 'x'.repeat(10_000)];
      const ids: string[] = [];
      for (const [i, upstreamRequestId] of odd.entries()) {
        const on = i === 2 ? plain : book;
        const h = await reserveOn(on, account, key, 5000n);
        ids.push(h.id);
        const settled = await on.settle(h.id, { ...outcome(10n), upstreamRequestId });
        expect(settled).toMatchObject({ result: 'settled', costNano: 10n });
      }
      const after = await reserveOn(book, account, key, 5000n);
      expect(await book.settle(after.id, outcome(20n))).toMatchObject({ costNano: 20n });
      const rows = await Promise.all(ids.map((id) => admin.getUsage(id)));
      expect(rows.map((r) => r?.upstreamRequestId)).toEqual([
        'chatcmpl-nul',
        'chatcmpl-\ufffdlone',
        'x'.repeat(200),
      ]);
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 50n);
    });

    it('writes down an open request admitted behind requests that ended first', async () => {
      // The timer that writes open requests down is set for the oldest one; the ones that ended
      // meanwhile must be skipped, not taken as the last open request (decision 0039).
      const { account, key } = await funded(YUAN);
      const store = await db.open({ writeOpenAfterMs: 10 });
      const a = await reserveOn(store, account, key, 1000n);
      const b = await reserveOn(store, account, key, 1000n);
      const c = await reserveOn(store, account, key, 5000n);
      expect(await store.release(b.id)).toBe('released');
      expect(await store.settle(a.id, outcome(100n))).toMatchObject({ costNano: 100n });
      const d = await reserveOn(store, account, key, 7000n);
      let rows: { request_id: string }[] = [];
      for (let i = 0; i < 100 && rows.length < 2; i++) {
        await sleep(10);
        rows = await admin.driver.query<{ request_id: string }>(
          'SELECT request_id FROM reservations WHERE request_id = ANY($1) AND leased ORDER BY amount_nano',
          [[b.id, c.id, d.id]],
        );
      }
      expect(rows.map((r) => r.request_id)).toEqual([c.id, d.id]);
      expect((await admin.getAccount(account.id))?.reservedNano).toBe(12_000n);
    });

    it('writes an open request down within its window, so recovery can resolve it', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open({ writeOpenAfterMs: 10 });
      const h = await reserveOn(store, account, key, 5000n);
      let rows: { leased: boolean }[] = [];
      for (let i = 0; i < 100 && rows.length === 0; i++) {
        await sleep(10);
        rows = await admin.driver.query<{ leased: boolean }>(
          'SELECT leased FROM reservations WHERE request_id = $1',
          [h.id],
        );
      }
      expect(rows).toEqual([{ leased: true }]);
      expect((await admin.getAccount(account.id))?.reservedNano).toBe(5000n);
    });

    it('a request that settles while its open record is being written leaves no record behind', async () => {
      // Regression: the settlement's write did not take back a record written a moment before,
      // and recovery later counted that request a second time.
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      const h = await reserveOn(store, account, key, 3000n);
      const writing = store.book!.flush();
      await null; // the write has picked the open record up
      const settled = store.settle(h.id, outcome(1000n));
      await writing;
      expect(await settled).toMatchObject({ result: 'settled', costNano: 1000n });
      const rows = await admin.driver.query('SELECT 1 FROM reservations WHERE request_id = $1', [
        h.id,
      ]);
      expect(rows).toHaveLength(0);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 1000n,
        reservedNano: 0n,
      });
    });

    it('a paused holder whose lease was recovered never charges twice', async () => {
      const { account, key } = await funded(YUAN);
      const paused = await db.open(true);
      const written = await reserveOn(paused, account, key, 2000n);
      await paused.book?.flush();
      await admin.driver.query(
        `UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
        [paused.instanceId],
      );
      expect(await admin.recoverDeadInstances(60_000)).toBe(1);
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN,
        reservedNano: 0n,
        leasedNano: 0n,
      });
      // It wakes up: the request already has its outcome, and new ones lease afresh.
      expect(await paused.settle(written.id, outcome(1500n))).toEqual({ result: 'duplicate' });
      await paused.heartbeat();
      const fresh = await reserveOn(paused, account, key, 2000n);
      expect(fresh.result).toBe('ok');
      expect(await paused.settle(fresh.id, outcome(700n))).toMatchObject({ costNano: 700n });
      const after = await admin.getAccount(account.id);
      expect(after?.balanceNano).toBe(YUAN - 700n);
      const usage = await admin.listUsage({ accountId: account.id });
      expect(usage.map((u) => [u.status, u.costNano]).sort()).toEqual([
        ['ok', 700n],
        ['recovered', 0n],
      ]);
    });

    it('keeps outcomes through a failed write and writes them once the database answers', async () => {
      const { account, key } = await funded(YUAN);
      const store = await db.open(true);
      const h = await reserveOn(store, account, key, 1000n);
      const calls = countCalls(store.driver);
      calls.fail = 2;
      const settled = await store.settle(h.id, outcome(321n));
      expect(settled).toMatchObject({ result: 'settled', costNano: 321n });
      expect(calls.queries + calls.transactions).toBeGreaterThanOrEqual(3);
      expect((await admin.getUsage(h.id))?.costNano).toBe(321n);
      expect((await admin.getAccount(account.id))?.balanceNano).toBe(YUAN - 321n);
    });

    it('a closing holder writes what is open and gives its slack back', async () => {
      const { account, key } = await funded(YUAN);
      const leaving = await db.open(true);
      const done = await reserveOn(leaving, account, key, 1000n);
      const open = await reserveOn(leaving, account, key, 3000n);
      await leaving.settle(done.id, outcome(100n));
      await leaving.close();
      expect(await admin.getAccount(account.id)).toMatchObject({
        balanceNano: YUAN - 100n,
        reservedNano: 3000n,
        leasedNano: 0n,
      });
      expect(await admin.recoverDeadInstances(60_000)).toBe(1);
      expect((await admin.getUsage(open.id))?.status).toBe('recovered');
      expect(await admin.getAccount(account.id)).toMatchObject({
        reservedNano: 0n,
        leasedNano: 0n,
      });
    });
  });
}
