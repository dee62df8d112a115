// The gateway on its embedded store (as `npm start` runs it): the store's data directory is one
// process's, so its balance lease keeps its slack through an idle spell and the first request
// after a pause is admitted from memory, not after a round trip to the store (decision 0043).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { yuanToNano } from '../../src/billing/money.ts';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;

beforeAll(async () => {
  // store: null: the gateway opens its own store from the config (embedded, in memory).
  h = await startHarness({ store: null });
}, 60_000);
afterAll(async () => h?.close());

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function leased(accountId: string): Promise<string> {
  const r = await fetch(`${h.gateway.url}/api/accounts/${accountId}`, {
    headers: { authorization: 'Bearer e2e-admin-token' },
  });
  expect(r.status).toBe(200);
  return ((await r.json()) as { leased: string }).leased;
}

describe('balance lease of the embedded gateway', () => {
  it('keeps its slack past the 2 s after which a Postgres gateway gives it back', async () => {
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

    await ask();
    const before = await leased(acct.id);
    expect(before).not.toBe('0');
    // Past the 2 s idle return and the quarter-period check that would find it.
    await sleep(2_800);
    expect(await leased(acct.id)).toBe(before);
    await ask();
    expect(await leased(acct.id)).not.toBe('0');
  });
});
