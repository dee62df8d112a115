// The gateway's balance lease across an idle spell, on each store it opens from its config. The
// embedded store's data directory is one process's, so its lease keeps its slack (decision 0043);
// a Postgres gateway keeps it while the account has room for other instances (decision 0044). In
// both, the first request after a pause is admitted from memory, not after a round trip.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { yuanToNano } from '../../src/billing/money.ts';
import { randomBase62 } from '../../src/store/ids.ts';
import { E2E_CONFIG, startHarness, type Harness } from './harness.ts';

const PG_URL = process.env.SWITCHYARD_TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

async function pgUnreachable(): Promise<string | null> {
  const c = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await c.connect();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await c.end().catch(() => undefined);
  }
}

const unreachable = await pgUnreachable();
if (unreachable !== null && process.env.CI) {
  throw new Error(`PostgreSQL at ${PG_URL} is required in CI: ${unreachable}`);
}
if (unreachable !== null) {
  console.warn(`[skip] idle lease on Postgres: ${PG_URL} unreachable (${unreachable})`);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** After one request, an idle spell past the 2 s idle return, then another request. */
async function idleSpell(h: Harness): Promise<void> {
  const store = h.gateway.ctx.store;
  const acct = await store.createAccount({ name: 'idle', realnameVerified: false });
  await store.adjustBalance(acct.id, yuanToNano('10')!, 'topup', 'e2e');
  const key = (
    await store.createKey({
      accountId: acct.id,
      name: 'idle',
      allowedModels: null,
      expiresAt: null,
    })
  ).plaintext;
  const ask = (): Promise<unknown> =>
    h.openai(key).chat.completions.create({
      model: 'plain',
      messages: [{ role: 'user', content: 'hello' }],
    });
  const leased = async (): Promise<string> => {
    const r = await fetch(`${h.gateway.url}/api/accounts/${acct.id}`, {
      headers: { authorization: 'Bearer e2e-admin-token' },
    });
    expect(r.status).toBe(200);
    return ((await r.json()) as { leased: string }).leased;
  };

  await ask();
  const before = await leased();
  expect(before).not.toBe('0');
  // Past the 2 s idle return and the quarter-period look that would find it.
  await sleep(2_800);
  expect(await leased()).toBe(before);
  await ask();
  expect(await leased()).not.toBe('0');
}

describe('balance lease of the embedded gateway', () => {
  let h: Harness;
  beforeAll(async () => {
    // store: null: the gateway opens its own store from the config (embedded, in memory).
    h = await startHarness({ store: null });
  }, 60_000);
  afterAll(async () => h?.close());

  it('keeps its slack through an idle spell', async () => {
    await idleSpell(h);
  });
});

describe.skipIf(unreachable !== null)('balance lease of a Postgres gateway', () => {
  const schema = `sy_idle_${randomBase62(8).toLowerCase()}`;
  let h: Harness;
  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`CREATE SCHEMA ${schema}`);
    await admin.end();
    const url = `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    h = await startHarness({
      store: null,
      files: (mock) => ({
        ...E2E_CONFIG(mock),
        'gateway.yaml': `gateway:
  listen: { host: 127.0.0.1, port: 0 }
  admin: { token: e2e-admin-token }
  store: { url: "${url}" }
`,
      }),
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  });

  it('keeps its slack through an idle spell while the account has room', async () => {
    await idleSpell(h);
  });
});
