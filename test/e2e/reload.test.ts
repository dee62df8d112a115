// Hot reload under traffic: requests keep succeeding while a good edit and then a broken edit
// land; the good one swaps the table (new version), the broken one is reported and changes nothing.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, type Harness } from './harness.ts';

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await startHarness({ watch: true });
  ({ key } = await h.account({ balance: '100' }));
}, 60_000);
afterAll(async () => h?.close());

interface Health {
  config: {
    version: string;
    lastReloadOk: boolean | null;
    lastError: string | null;
    reloads: { success: number; failure: number };
  };
}

async function health(): Promise<Health> {
  return (await (await fetch(`${h.gateway.url}/health`)).json()) as Health;
}

async function waitFor(pred: (s: Health) => boolean): Promise<Health> {
  for (let i = 0; i < 300; i++) {
    const s = await health();
    if (pred(s)) return s;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error('timed out waiting for reload');
}

describe('hot reload', () => {
  it('swaps on a good edit, keeps serving on a broken one, and never fails a request', async () => {
    const statuses: number[] = [];
    let running = true;
    const traffic = (async () => {
      while (running) {
        const res = await fetch(`${h.gateway.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'plain', messages: [{ role: 'user', content: 'x' }] }),
        });
        statuses.push(res.status);
        await res.arrayBuffer();
      }
    })();

    const v1 = (await health()).config.version;
    const pricesPath = join(h.configDir, 'prices.yaml');
    const original = await readFile(pricesPath, 'utf8');
    // A burst of saves compiles once.
    for (let i = 0; i < 5; i++)
      await writeFile(
        pricesPath,
        original.replace(
          '{ model: plain, input: 1, output: 1 }',
          `{ model: plain, input: 1, output: ${2 + i} }`,
        ),
      );
    const afterGood = await waitFor((s) => s.config.version !== v1);
    expect(afterGood.config.lastReloadOk).toBe(true);
    expect(afterGood.config.reloads.success).toBe(1);
    const v2 = afterGood.config.version;
    expect(h.gateway.tables.current.models.get('plain')?.prices[0]?.outputNano).toBe(6000n);
    // Frozen in slices between requests, and wholly frozen before it was swapped in.
    const swapped = h.gateway.tables.current.models.get('plain');
    expect(Object.isFrozen(swapped)).toBe(true);
    expect(Object.isFrozen(swapped?.prices[0])).toBe(true);

    await writeFile(
      pricesPath,
      original.replace(
        '{ model: plain, input: 1, output: 1 }',
        '{ model: plain, input: 0.0001, output: 1 }',
      ),
    );
    const afterBad = await waitFor((s) => s.config.reloads.failure === 1);
    expect(afterBad.config.version).toBe(v2);
    expect(afterBad.config.lastReloadOk).toBe(false);
    expect(afterBad.config.lastError).toContain('prices.yaml:');
    expect(afterBad.config.lastError).toContain('at most 3 decimals');

    const metrics = await (await fetch(`${h.gateway.url}/metrics`)).text();
    expect(metrics).toContain(`switchyard_config_version_info{version="${v2}"} 1`);
    expect(metrics).toMatch(/switchyard_config_reloads_total\{result="failure"\} 1/);

    running = false;
    await traffic;
    expect(statuses.length).toBeGreaterThan(5);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  it('keeps the table a request started with (price at entry)', async () => {
    // The table object captured at entry is frozen and replaced, never mutated.
    const before = h.gateway.tables.current;
    expect(Object.isFrozen(before)).toBe(true);
    expect(Object.isFrozen(before.modelList)).toBe(true);
  });
});
