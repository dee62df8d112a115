// The store conformance suite: every backend (embedded PGlite, Postgres) runs these same cases
// through a harness that hands out empty databases and store instances on them.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyCache } from '../../src/store/key-cache.ts';
import type { KeySource } from '../../src/store/key-cache.ts';
import { hashKey } from '../../src/store/key-secret.ts';
import type { LeaseBookOptions } from '../../src/store/lease-book.ts';
import { loadMigrations } from '../../src/store/migrate.ts';
import type { SqlStore } from '../../src/store/sql-store.ts';
import type { Account, ApiKey, SettleOutcome, SettleResult } from '../../src/store/store.ts';
import { StoreError } from '../../src/store/store.ts';

export interface StoreDatabase {
  /**
   * Opens one more store instance (own instance id, no heartbeat timer) on this database;
   * `leases` overrides the harness's own choice.
   */
  open(leases?: boolean | LeaseBookOptions): Promise<SqlStore>;
}

export interface StoreHarness {
  /** A new empty database (a fresh PGlite, or a fresh Postgres schema). */
  createDatabase(): Promise<StoreDatabase>;
  /** Closes every store and drops what createDatabase made. */
  dispose(): Promise<void>;
}

export const YUAN = 1_000_000_000n;

export function outcome(costNano: bigint, overrides: Partial<SettleOutcome> = {}): SettleOutcome {
  return {
    model: null,
    channelId: 'ch-main',
    inputTokens: 120,
    cacheHitTokens: 20,
    outputTokens: 300,
    reasoningTokens: 0,
    estimated: false,
    priceSnapshot: {
      inputNanoPerToken: '2000',
      outputNanoPerToken: '8000',
      peakMultiplier: '10000',
    },
    peakApplied: false,
    campaignId: null,
    costNano,
    status: 'ok',
    httpStatus: 200,
    latencyMs: 850,
    upstreamRequestId: 'up-1',
    ...overrides,
  };
}

async function rejection(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof StoreError) return err;
    throw err;
  }
  throw new Error('expected the call to be refused');
}

let seq = 0;
export function requestId(): string {
  seq += 1;
  return `req-${Date.now().toString(36)}-${seq}`;
}

/** Reserves `amountNano` for a new request id of the key's account on `on`. */
export async function reserveOn(
  on: SqlStore,
  account: Account,
  key: ApiKey,
  amountNano: bigint,
  clientRequestId: string | null = null,
): Promise<{ id: string; result: string }> {
  const id = requestId();
  const result = await on.reserve({
    requestId: id,
    clientRequestId,
    accountId: account.id,
    keyId: key.id,
    model: 'deepseek-chat',
    endpoint: 'chat_completions',
    amountNano,
  });
  return { id, result };
}

export function describeStoreConformance(backend: string, harness: StoreHarness): void {
  describe(`store (${backend})`, () => {
    let db: StoreDatabase;
    let store: SqlStore;

    beforeAll(async () => {
      db = await harness.createDatabase();
      store = await db.open();
    });

    afterAll(async () => {
      await harness.dispose();
    });

    async function fundedAccount(
      yuan: bigint,
      name = 'team',
    ): Promise<{ account: Account; key: ApiKey }> {
      const account = await store.createAccount({ name });
      if (yuan > 0n) await store.adjustBalance(account.id, yuan * YUAN, 'topup', 'test funds');
      const { record } = await store.createKey({
        accountId: account.id,
        name: 'default',
        allowedModels: null,
        expiresAt: null,
      });
      return { account: (await store.getAccount(account.id)) as Account, key: record };
    }

    async function accountOf(id: string): Promise<Account> {
      const account = await store.getAccount(id);
      if (account === null) throw new Error(`account ${id} vanished`);
      return account;
    }

    function reserveFor(
      account: Account,
      key: ApiKey,
      amountNano: bigint,
      on: SqlStore = store,
    ): Promise<{ id: string; result: string }> {
      return reserveOn(on, account, key, amountNano);
    }

    describe('migrations', () => {
      it('records every migration file once and applies nothing on a second run', async () => {
        const files = await loadMigrations();
        const rows = await store.driver.query<{ name: string }>(
          'SELECT name FROM schema_migrations ORDER BY name',
        );
        expect(rows.map((r) => r.name)).toEqual(files.map((f) => f.name));
        expect(await store.migrate()).toEqual({ applied: [] });
      });

      it('refuses to start when an applied migration was edited', async () => {
        const files = await loadMigrations();
        const edited = files.map((f, i) => (i === 0 ? { ...f, sql: f.sql + '\n-- edited\n' } : f));
        const err = await rejection(store.migrateWith(edited));
        expect(err.code).toBe('migration_changed');
        expect(err.message).toContain(files[0]?.name);
      });

      it('applies a new migration exactly once', async () => {
        const fresh = await (await harness.createDatabase()).open();
        const files = await loadMigrations();
        const next = [...files, { name: '9999_probe.sql', sql: 'CREATE TABLE probe (x int);' }];
        expect(await fresh.migrateWith(next)).toEqual({ applied: ['9999_probe.sql'] });
        expect(await fresh.migrateWith(next)).toEqual({ applied: [] });
      });

      it('two instances starting together on an empty database both come up', async () => {
        const empty = await harness.createDatabase();
        const [a, b] = await Promise.all([empty.open(), empty.open()]);
        const rows = await a.driver.query<{ n: number }>(
          'SELECT count(*)::int4 AS n FROM schema_migrations',
        );
        expect(rows[0]?.n).toBe((await loadMigrations()).length);
        const created = await a.createAccount({ name: 'shared' });
        expect((await b.getAccount(created.id))?.name).toBe('shared');
      });
    });

    describe('accounts', () => {
      it('a new account is active, unverified and holds nothing', async () => {
        const account = await store.createAccount({ name: 'Acme' });
        expect(account.id).toMatch(/^acct_[A-Za-z0-9]{16}$/);
        expect(account).toMatchObject({
          name: 'Acme',
          balanceNano: 0n,
          reservedNano: 0n,
          realnameVerified: false,
          status: 'active',
        });
        expect(await store.getAccount(account.id)).toEqual(account);
        expect((await store.listAccounts()).map((a) => a.id)).toContain(account.id);
        expect(await store.getAccount('acct_missing')).toBeNull();
      });

      it('status and real-name changes are kept', async () => {
        const account = await store.createAccount({ name: 'Beta', realnameVerified: true });
        expect(account.realnameVerified).toBe(true);
        expect((await store.setAccountStatus(account.id, 'disabled')).status).toBe('disabled');
        expect((await store.setAccountRealname(account.id, false)).realnameVerified).toBe(false);
        expect(await accountOf(account.id)).toMatchObject({
          status: 'disabled',
          realnameVerified: false,
        });
        expect((await rejection(store.setAccountStatus('acct_missing', 'active'))).code).toBe(
          'not_found',
        );
      });

      it('topups and adjustments move the balance and write the ledger', async () => {
        const account = await store.createAccount({ name: 'Gamma' });
        const topup = await store.adjustBalance(account.id, 50n * YUAN, 'topup', 'invoice 17');
        expect(topup).toMatchObject({
          kind: 'topup',
          amountNano: 50n * YUAN,
          balanceAfterNano: 50n * YUAN,
          reason: 'invoice 17',
          requestId: null,
        });
        const adjust = await store.adjustBalance(account.id, -5n * YUAN, 'adjust', 'refund fix');
        expect(adjust.balanceAfterNano).toBe(45n * YUAN);
        expect((await accountOf(account.id)).balanceNano).toBe(45n * YUAN);
      });

      it('an adjustment cannot take the available balance below zero', async () => {
        const { account, key } = await fundedAccount(10n);
        const held = await reserveFor(account, key, 8n * YUAN);
        expect(held.result).toBe('ok');
        const err = await rejection(store.adjustBalance(account.id, -3n * YUAN, 'adjust', 'x'));
        expect(err.code).toBe('insufficient_balance');
        expect((await accountOf(account.id)).balanceNano).toBe(10n * YUAN);
        await store.adjustBalance(account.id, -2n * YUAN, 'adjust', 'exactly the rest');
        expect(await accountOf(account.id)).toMatchObject({
          balanceNano: 8n * YUAN,
          reservedNano: 8n * YUAN,
        });
        await store.release(held.id);
      });

      it('a topup must be positive and the account must exist', async () => {
        const account = await store.createAccount({ name: 'Delta' });
        expect((await rejection(store.adjustBalance(account.id, 0n, 'topup', 'x'))).code).toBe(
          'invalid_argument',
        );
        expect((await rejection(store.adjustBalance(account.id, -1n, 'topup', 'x'))).code).toBe(
          'invalid_argument',
        );
        expect((await rejection(store.adjustBalance('acct_missing', 1n, 'topup', 'x'))).code).toBe(
          'not_found',
        );
      });
    });

    describe('API keys', () => {
      it('a created key is shown once and found by its hash, never stored in plaintext', async () => {
        const account = await store.createAccount({ name: 'Keys', realnameVerified: true });
        const { plaintext, record } = await store.createKey({
          accountId: account.id,
          name: 'ci',
          allowedModels: ['deepseek-*', 'qwen-max'],
          expiresAt: null,
        });
        expect(plaintext).toMatch(/^sk-sy-[A-Za-z0-9]{40}$/);
        expect(record).toMatchObject({
          accountId: account.id,
          name: 'ci',
          keyPrefix: plaintext.slice(0, 10),
          allowedModels: ['deepseek-*', 'qwen-max'],
          status: 'active',
          expiresAt: null,
        });
        expect(record.id).toMatch(/^key_[A-Za-z0-9]{16}$/);
        const found = await store.findKeyByHash(hashKey(plaintext));
        expect(found).toEqual({ key: record, accountStatus: 'active', realnameVerified: true });
        const raw = await store.driver.query<Record<string, unknown>>(
          'SELECT * FROM api_keys WHERE id = $1',
          [record.id],
        );
        expect(
          JSON.stringify(raw, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v)),
        ).not.toContain(plaintext);
        expect(await store.findKeyByHash(hashKey(plaintext + 'x'))).toBeNull();
      });

      it('keys are listed, disabled and deleted', async () => {
        const { account, key } = await fundedAccount(0n);
        const second = await store.createKey({
          accountId: account.id,
          name: 'second',
          allowedModels: null,
          expiresAt: new Date('2030-01-01T00:00:00Z'),
        });
        expect(second.record.expiresAt?.toISOString()).toBe('2030-01-01T00:00:00.000Z');
        expect((await store.listKeys(account.id)).map((k) => k.id)).toEqual([
          key.id,
          second.record.id,
        ]);
        expect((await store.listKeys(null)).map((k) => k.id)).toContain(key.id);
        expect((await store.disableKey(key.id)).status).toBe('disabled');
        const disabled = await store.findKeyByHash(hashKey(second.plaintext));
        expect(disabled?.key.status).toBe('active');
        expect(await store.deleteKey(second.record.id)).toBe(true);
        expect(await store.deleteKey(second.record.id)).toBe(false);
        expect(await store.findKeyByHash(hashKey(second.plaintext))).toBeNull();
        expect((await rejection(store.disableKey('key_missing'))).code).toBe('not_found');
      });

      it('a key cannot be created for a missing account', async () => {
        const err = await rejection(
          store.createKey({
            accountId: 'acct_missing',
            name: 'x',
            allowedModels: null,
            expiresAt: null,
          }),
        );
        expect(err.code).toBe('not_found');
      });
    });

    describe('key cache', () => {
      function counting(source: KeySource): { source: KeySource; lookups: () => number } {
        let n = 0;
        return {
          source: {
            findKeyByHash: (hash) => {
              n += 1;
              return source.findKeyByHash(hash);
            },
            latestChangeSeq: () => source.latestChangeSeq(),
            changesSince: (s) => source.changesSince(s),
          },
          lookups: () => n,
        };
      }

      it('a known key is answered from memory after the first lookup', async () => {
        const account = await store.createAccount({ name: 'Cache' });
        const { plaintext, record } = await store.createKey({
          accountId: account.id,
          name: 'k',
          allowedModels: null,
          expiresAt: null,
        });
        const probe = counting(store);
        const cache = new KeyCache(probe.source);
        await cache.poll();
        const first = await cache.authenticate(plaintext);
        const second = await cache.authenticate(plaintext);
        expect(first).toEqual({ ok: true, key: record, realnameVerified: false });
        expect(second).toEqual(first);
        expect(probe.lookups()).toBe(1);
      });

      it('a connection that sends another key is answered for that key, and a disable still reaches it', async () => {
        const account = await store.createAccount({ name: 'Shared connection' });
        const a = await store.createKey({
          accountId: account.id,
          name: 'a',
          allowedModels: null,
          expiresAt: null,
        });
        const b = await store.createKey({
          accountId: account.id,
          name: 'b',
          allowedModels: null,
          expiresAt: null,
        });
        const cache = new KeyCache(store);
        await cache.poll();
        const socket = {}; // one client connection (or a proxy's) carrying both keys
        expect(await cache.authenticate(a.plaintext, socket)).toMatchObject({ key: a.record });
        expect(await cache.authenticate(b.plaintext, socket)).toMatchObject({ key: b.record });
        expect(await cache.authenticate(a.plaintext, socket)).toMatchObject({ key: a.record });
        // A key of the same shape that differs in its last character is not the one kept.
        const near = a.plaintext.slice(0, -1) + (a.plaintext.endsWith('x') ? 'y' : 'x');
        expect(await cache.authenticate(near, socket)).toEqual({
          ok: false,
          reason: 'unknown_key',
        });
        expect(await cache.authenticate(a.plaintext, socket)).toMatchObject({ ok: true });
        await store.disableKey(a.record.id);
        await cache.poll();
        expect(await cache.authenticate(a.plaintext, socket)).toEqual({
          ok: false,
          reason: 'key_disabled',
        });
      });

      it('unknown and malformed keys are refused, unknown ones remembered briefly', async () => {
        const probe = counting(store);
        const cache = new KeyCache(probe.source);
        await cache.poll();
        const madeUp = 'sk-sy-' + 'A'.repeat(40);
        expect(await cache.authenticate(madeUp)).toEqual({ ok: false, reason: 'unknown_key' });
        expect(await cache.authenticate(madeUp)).toEqual({ ok: false, reason: 'unknown_key' });
        expect(await cache.authenticate('not-a-key')).toEqual({ ok: false, reason: 'unknown_key' });
        expect(probe.lookups()).toBe(1);
      });

      it('an expired key is refused by the clock, without a new lookup', async () => {
        const account = await store.createAccount({ name: 'Expiry' });
        const expiresAt = new Date(Date.now() + 60_000);
        const { plaintext } = await store.createKey({
          accountId: account.id,
          name: 'temp',
          allowedModels: null,
          expiresAt,
        });
        let now = expiresAt.getTime() - 1;
        const probe = counting(store);
        const cache = new KeyCache(probe.source, { now: () => now });
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        now = expiresAt.getTime();
        expect(await cache.authenticate(plaintext)).toEqual({ ok: false, reason: 'key_expired' });
        expect(probe.lookups()).toBe(1);
      });

      it('a known key is read again behind the requests before its safety-net expiry', async () => {
        const account = await store.createAccount({ name: 'Refresh' });
        const { plaintext } = await store.createKey({
          accountId: account.id,
          name: 'k',
          allowedModels: null,
          expiresAt: null,
        });
        let now = Date.now();
        const probe = counting(store);
        const cache = new KeyCache(probe.source, { now: () => now, positiveTtlMs: 60_000 });
        await cache.poll();
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        expect(probe.lookups()).toBe(1);
        // Past three quarters of its 60 s: answered from memory, one re-read started behind it.
        now += 50_000;
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        expect(probe.lookups()).toBe(2);
        // Past the first read's 60 s: the re-read's entry answers, no third lookup.
        now += 20_000;
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        expect(probe.lookups()).toBe(2);
      });

      it('disabling a key on one instance reaches the other instance after its next poll', async () => {
        const peer = await db.open();
        const account = await store.createAccount({ name: 'Fleet' });
        const { plaintext, record } = await store.createKey({
          accountId: account.id,
          name: 'shared',
          allowedModels: null,
          expiresAt: null,
        });
        const cache = new KeyCache(peer);
        await cache.poll();
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        await store.disableKey(record.id);
        await cache.poll();
        expect(await cache.authenticate(plaintext)).toEqual({ ok: false, reason: 'key_disabled' });
      });

      it('disabling an account on one instance reaches the other instance after its next poll', async () => {
        const peer = await db.open();
        const account = await store.createAccount({ name: 'Suspended' });
        const { plaintext } = await store.createKey({
          accountId: account.id,
          name: 'k',
          allowedModels: null,
          expiresAt: null,
        });
        const cache = new KeyCache(peer);
        await cache.poll();
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
        await store.setAccountStatus(account.id, 'disabled');
        await cache.poll();
        expect(await cache.authenticate(plaintext)).toEqual({
          ok: false,
          reason: 'account_disabled',
        });
      });

      it('a key created after a failed attempt with it works after the next poll', async () => {
        const account = await store.createAccount({ name: 'Late' });
        const cache = new KeyCache(store);
        await cache.poll();
        const { plaintext } = await store.createKey({
          accountId: account.id,
          name: 'new',
          allowedModels: null,
          expiresAt: null,
        });
        await cache.poll();
        expect((await cache.authenticate(plaintext)).ok).toBe(true);
      });
    });

    describe('reservations', () => {
      it('reserve then settle charges the cost and records usage and ledger', async () => {
        const { account, key } = await fundedAccount(10n);
        const held = await reserveFor(account, key, 2n * YUAN);
        expect(held.result).toBe('ok');
        expect((await accountOf(account.id)).reservedNano).toBe(2n * YUAN);
        const settled = await store.settle(held.id, outcome(1_234_567n, { model: 'deepseek-v3' }));
        expect(settled).toEqual({
          result: 'settled',
          costNano: 1_234_567n,
          capped: false,
          balanceAfterNano: 10n * YUAN - 1_234_567n,
        });
        expect(await accountOf(account.id)).toMatchObject({
          balanceNano: 10n * YUAN - 1_234_567n,
          reservedNano: 0n,
        });
        const usage = await store.getUsage(held.id);
        expect(usage).toMatchObject({
          requestId: held.id,
          accountId: account.id,
          keyId: key.id,
          model: 'deepseek-v3',
          endpoint: 'chat_completions',
          channelId: 'ch-main',
          inputTokens: 120,
          cacheHitTokens: 20,
          outputTokens: 300,
          costNano: 1_234_567n,
          reservedNano: 2n * YUAN,
          capped: false,
          status: 'ok',
          httpStatus: 200,
          priceSnapshot: {
            inputNanoPerToken: '2000',
            outputNanoPerToken: '8000',
            peakMultiplier: '10000',
          },
        });
        const st = await store.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
        expect(st.rows.at(-1)).toMatchObject({
          kind: 'usage',
          amountNano: -1_234_567n,
          requestId: held.id,
        });
      });

      it('a reservation larger than the available balance is refused and holds nothing', async () => {
        const { account, key } = await fundedAccount(1n);
        expect((await reserveFor(account, key, YUAN + 1n)).result).toBe('insufficient');
        expect((await accountOf(account.id)).reservedNano).toBe(0n);
        expect((await reserveFor(account, key, YUAN)).result).toBe('ok');
        expect((await reserveFor(account, key, 1n)).result).toBe('insufficient');
      });

      it('a zero reservation is admitted even on an empty balance', async () => {
        const { account, key } = await fundedAccount(0n);
        const held = await reserveFor(account, key, 0n);
        expect(held.result).toBe('ok');
        expect(await store.settle(held.id, outcome(0n))).toMatchObject({
          result: 'settled',
          costNano: 0n,
        });
      });

      it('a disabled account cannot reserve', async () => {
        const { account, key } = await fundedAccount(5n);
        await store.setAccountStatus(account.id, 'disabled');
        expect((await reserveFor(account, key, 1n)).result).toBe('account_disabled');
        expect((await accountOf(account.id)).reservedNano).toBe(0n);
      });

      it('a cost above the reservation is capped to it and marked capped', async () => {
        const { account, key } = await fundedAccount(1n);
        const held = await reserveFor(account, key, 100n);
        const settled = await store.settle(held.id, outcome(150n));
        expect(settled).toMatchObject({ result: 'settled', costNano: 100n, capped: true });
        expect((await store.getUsage(held.id))?.costNano).toBe(100n);
        expect((await store.getUsage(held.id))?.capped).toBe(true);
        expect((await accountOf(account.id)).balanceNano).toBe(YUAN - 100n);
      });

      it('a failed request is not charged', async () => {
        const { account, key } = await fundedAccount(1n);
        const held = await reserveFor(account, key, 500n);
        const settled = await store.settle(
          held.id,
          outcome(400n, { status: 'failed', httpStatus: 502 }),
        );
        expect(settled).toMatchObject({ result: 'settled', costNano: 0n });
        expect(await accountOf(account.id)).toMatchObject({ balanceNano: YUAN, reservedNano: 0n });
        expect((await store.getUsage(held.id))?.status).toBe('failed');
        const st = await store.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
        expect(st.rows.map((r) => r.kind)).toEqual(['topup']);
      });

      it('settling the same request twice changes nothing the second time', async () => {
        const { account, key } = await fundedAccount(1n);
        const held = await reserveFor(account, key, 1000n);
        await store.settle(held.id, outcome(700n));
        const before = await accountOf(account.id);
        expect(await store.settle(held.id, outcome(900n))).toEqual({ result: 'duplicate' });
        expect(await accountOf(account.id)).toEqual(before);
        expect((await store.getUsage(held.id))?.costNano).toBe(700n);
        expect(await store.listUsage({ accountId: account.id })).toHaveLength(1);
        expect(await store.settle('req-never-reserved', outcome(1n))).toEqual({
          result: 'duplicate',
        });
      });

      it('a released reservation frees the money and leaves no usage row', async () => {
        const { account, key } = await fundedAccount(1n);
        const held = await reserveFor(account, key, 1000n);
        expect(await store.release(held.id)).toBe('released');
        expect(await store.release(held.id)).toBe('duplicate');
        expect(await store.settle(held.id, outcome(10n))).toEqual({ result: 'duplicate' });
        expect(await accountOf(account.id)).toMatchObject({ balanceNano: YUAN, reservedNano: 0n });
        expect(await store.getUsage(held.id)).toBeNull();
      });

      it('200 concurrent requests never overdraw and every charge reaches the ledger', async () => {
        // 50 ¥-thousandths of room, 1000 nano each: exactly 50 of 200 fit at once.
        const { account, key } = await fundedAccount(0n);
        await store.adjustBalance(account.id, 50_000n, 'topup', 'small balance');
        const reserved = await Promise.all(
          Array.from({ length: 200 }, () => reserveFor(account, key, 1000n)),
        );
        const admitted = reserved.filter((r) => r.result === 'ok');
        expect(admitted).toHaveLength(50);
        expect(reserved.filter((r) => r.result === 'insufficient')).toHaveLength(150);
        expect((await accountOf(account.id)).reservedNano).toBe(50_000n);

        // Then reserve and settle interleaved: costs from 0 to 1499, a third above the hold.
        const settle = (id: string, i: number): Promise<SettleResult> =>
          store.settle(id, outcome(BigInt((i * 373) % 1500)));
        const second = Promise.all(
          Array.from({ length: 200 }, async (_, i) => {
            const r = await reserveFor(account, key, 1000n);
            return r.result === 'ok' ? settle(r.id, i) : null;
          }),
        );
        const first = Promise.all(admitted.map((r, i) => settle(r.id, i + 7)));
        const results = [...(await first), ...(await second)].filter(
          (r): r is SettleResult => r !== null,
        );

        const charged = results.reduce(
          (sum, r) => sum + (r.result === 'settled' ? r.costNano : 0n),
          0n,
        );
        const after = await accountOf(account.id);
        expect(after.reservedNano).toBe(0n);
        expect(after.balanceNano >= 0n).toBe(true);
        expect(50_000n - after.balanceNano).toBe(charged);
        const usage = await store.listUsage({ accountId: account.id, limit: 1000 });
        expect(usage).toHaveLength(results.length);
        expect(usage.reduce((sum, u) => sum + u.costNano, 0n)).toBe(charged);
        expect(usage.some((u) => u.capped)).toBe(true);
        const st = await store.statement(account.id, new Date(0), new Date(Date.now() + 60_000));
        expect(st.usageNano).toBe(charged);
        expect(st.closingNano).toBe(after.balanceNano);
      });
    });

    describe('crash recovery', () => {
      // With leases, an open request is written down within the book's window (20 ms); a crash
      // inside that window leaves no record (docs/decisions/0013). These cases crash after it.
      const written = async (...stores: SqlStore[]): Promise<void> => {
        for (const s of stores) await s.book?.flush();
      };

      async function silence(instanceId: string): Promise<void> {
        await store.driver.query(
          `UPDATE instances SET heartbeat_at = now() - interval '1 hour' WHERE id = $1`,
          [instanceId],
        );
      }

      it("a dead instance's reservations are released once, live ones are kept", async () => {
        const { account, key } = await fundedAccount(1n);
        const dead = await db.open();
        const alive = await db.open();
        const lost = await reserveFor(account, key, 300n, dead);
        const live = await reserveFor(account, key, 200n, alive);
        await written(dead, alive);
        await silence(dead.instanceId);

        expect(await store.recoverDeadInstances(60_000)).toBe(1);
        expect(await accountOf(account.id)).toMatchObject({
          balanceNano: YUAN,
          reservedNano: 200n,
        });
        expect(await store.getUsage(lost.id)).toMatchObject({
          status: 'recovered',
          costNano: 0n,
          reservedNano: 300n,
          model: 'deepseek-chat',
        });
        // The dead instance comes back and tries to finish the request: it already has an outcome.
        expect(await dead.settle(lost.id, outcome(250n))).toEqual({ result: 'duplicate' });
        expect((await store.getUsage(lost.id))?.status).toBe('recovered');
        expect(await store.recoverDeadInstances(60_000)).toBe(0);
        expect(await alive.settle(live.id, outcome(150n))).toMatchObject({ costNano: 150n });
        expect(await accountOf(account.id)).toMatchObject({
          balanceNano: YUAN - 150n,
          reservedNano: 0n,
        });
      });

      it('reservations of an instance that left without settling are recovered at once', async () => {
        const { account, key } = await fundedAccount(1n);
        const leaving = await db.open();
        const held = await reserveFor(account, key, 400n, leaving);
        await leaving.close();
        expect(await store.recoverDeadInstances(60_000)).toBe(1);
        expect((await accountOf(account.id)).reservedNano).toBe(0n);
        expect((await store.getUsage(held.id))?.status).toBe('recovered');
      });

      it('two instances recovering at once resolve each reservation exactly once', async () => {
        const { account, key } = await fundedAccount(1n);
        const dead = await db.open();
        const helper = await db.open();
        const held = await Promise.all(
          Array.from({ length: 30 }, () => reserveFor(account, key, 10n, dead)),
        );
        await written(dead);
        await silence(dead.instanceId);
        const [a, b] = await Promise.all([
          store.recoverDeadInstances(60_000),
          helper.recoverDeadInstances(60_000),
        ]);
        expect(a + b).toBe(30);
        expect((await accountOf(account.id)).reservedNano).toBe(0n);
        const usage = await store.listUsage({ accountId: account.id, limit: 1000 });
        expect(usage.map((u) => u.requestId).sort()).toEqual(held.map((h) => h.id).sort());
        expect(usage.every((u) => u.status === 'recovered')).toBe(true);
      });

      it('an instance never recovers its own reservations', async () => {
        const { account, key } = await fundedAccount(1n);
        const self = await db.open();
        const held = await reserveFor(account, key, 10n, self);
        await silence(self.instanceId);
        expect(await self.recoverDeadInstances(60_000)).toBe(0);
        expect(await self.settle(held.id, outcome(5n))).toMatchObject({ result: 'settled' });
      });
    });

    describe('usage and statements', () => {
      it('usage can be listed by key and model, newest first', async () => {
        const { account, key } = await fundedAccount(1n);
        const other = await store.createKey({
          accountId: account.id,
          name: 'other',
          allowedModels: null,
          expiresAt: null,
        });
        const ids: string[] = [];
        for (const [k, model] of [
          [key, 'deepseek-chat'],
          [other.record, 'qwen-max'],
          [key, 'qwen-max'],
        ] as const) {
          const held = await reserveFor(account, k, 100n);
          await store.settle(held.id, outcome(10n, { model }));
          ids.push(held.id);
        }
        const all = await store.listUsage({ accountId: account.id });
        expect(all.map((u) => u.requestId)).toEqual([...ids].reverse());
        expect((await store.listUsage({ keyId: key.id })).map((u) => u.requestId)).toEqual([
          ids[2],
          ids[0],
        ]);
        expect(
          (await store.listUsage({ accountId: account.id, model: 'qwen-max' })).map(
            (u) => u.requestId,
          ),
        ).toEqual([ids[2], ids[1]]);
        expect(await store.listUsage({ accountId: account.id, limit: 1 })).toHaveLength(1);
        expect(
          await store.listUsage({ accountId: account.id, from: new Date(Date.now() + 60_000) }),
        ).toEqual([]);
      });

      it('every statement reconciles: opening + topups + adjustments - usage = closing', async () => {
        const { account, key } = await fundedAccount(3n);
        await store.adjustBalance(account.id, -1n * YUAN, 'adjust', 'goodwill reversal');
        for (const cost of [123n, 0n, 4_567n, 999_999n]) {
          const held = await reserveFor(account, key, YUAN);
          await store.settle(held.id, outcome(cost));
        }
        await store.adjustBalance(account.id, 7n * YUAN, 'topup', 'second invoice');
        const end = new Date(Date.now() + 60_000);
        const whole = await store.statement(account.id, new Date(0), end);
        expect(whole).toMatchObject({
          openingNano: 0n,
          closingNano: (await accountOf(account.id)).balanceNano,
          topupsNano: 10n * YUAN,
          adjustmentsNano: -1n * YUAN,
          usageNano: 123n + 4_567n + 999_999n,
        });
        // Cut the period at every ledger row: each part balances on its own.
        for (const row of whole.rows) {
          for (const part of [
            await store.statement(account.id, new Date(0), row.createdAt),
            await store.statement(account.id, row.createdAt, end),
          ]) {
            expect(part.openingNano + part.topupsNano + part.adjustmentsNano - part.usageNano).toBe(
              part.closingNano,
            );
          }
        }
      });
    });
  });
}
