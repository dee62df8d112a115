// Money through the running gateway: many concurrent requests against a small balance never
// overspend it, every cost is in the usage log, and the statement reconciles to the balance.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
}, 60_000);
afterAll(async () => h?.close());

describe('balance under concurrency', () => {
  it('never goes below zero and accounts for every cost (race of 60 requests)', async () => {
    // plain: ¥1/M in and out, max_output_tokens 100. One request reserves roughly
    // (body bytes + 100) × 1000 nano; 0.0008 yuan = 800,000 nano covers only a few at once.
    const { key, accountId } = await h.account({ balance: '0.0008' });
    const before = (await h.store.getAccount(accountId))!;
    const from = new Date(Date.now() - 1000);
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        fetch(`${h.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${key}`,
            'content-type': 'application/json',
            'x-request-id': `race-${accountId}-${i}`,
          },
          body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'x' }] }),
        }).then(async (r) => ({ status: r.status, body: await r.text() })),
      ),
    );
    const ok = results.filter((r) => r.status === 200).length;
    const refused = results.filter(
      (r) => r.status === 403 && r.body.includes('insufficient_user_quota'),
    ).length;
    expect(ok + refused).toBe(60);
    expect(ok).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
    // Wait for settlements, then reconcile.
    for (let i = 0; i < 100 && (await h.store.getAccount(accountId))!.reservedNano !== 0n; i++)
      await new Promise((r) => setTimeout(r, 20));
    const after = (await h.store.getAccount(accountId))!;
    expect(after.reservedNano).toBe(0n);
    expect(after.balanceNano >= 0n).toBe(true);
    const rows = await h.store.listUsage({ accountId, limit: 1000 });
    expect(rows.filter((r) => r.status === 'ok').length).toBe(ok);
    const spent = rows.reduce((s, r) => s + r.costNano, 0n);
    expect(before.balanceNano - after.balanceNano).toBe(spent);

    const st = await h.store.statement(accountId, from, new Date(Date.now() + 1000));
    expect(st.openingNano + st.topupsNano + st.adjustmentsNano - st.usageNano).toBe(st.closingNano);
    expect(st.usageNano).toBe(spent);
  });

  it('prices a request at entry: the snapshot is stored with its usage row', async () => {
    const { key } = await h.account({ balance: '1' });
    const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'x' }] }),
    });
    const row = await h.usage(res.headers.get('x-request-id')!);
    expect(row.priceSnapshot).toMatchObject({
      inputNanoPerToken: '1000',
      outputNanoPerToken: '1000',
      peakMultiplierBp: '10000',
      campaignId: null,
    });
    expect(row.costNano).toBe(BigInt(row.inputTokens + row.outputTokens) * 1000n);
  });
});
