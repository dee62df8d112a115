// The default single-process setup: the embedded store in a data directory keeps its data across
// restarts and does not re-run migrations.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hashKey } from '../../src/store/key-secret.ts';
import { openStore } from '../../src/store/open-store.ts';

describe('embedded store in a data directory', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it('keeps accounts, balances and keys across a restart', async () => {
    const parent = await mkdtemp(join(tmpdir(), 'switchyard-store-'));
    dirs.push(parent);
    const dataDir = join(parent, 'data');

    const first = await openStore({ url: null, dataDir, heartbeatMs: 0 });
    const account = await first.createAccount({ name: 'Laptop' });
    await first.adjustBalance(account.id, 5_000_000_000n, 'topup', 'first run');
    const { plaintext } = await first.createKey({
      accountId: account.id,
      name: 'local',
      allowedModels: null,
      expiresAt: null,
    });
    await first.close();

    const second = await openStore({ url: null, dataDir, heartbeatMs: 0 });
    try {
      expect(await second.migrate()).toEqual({ applied: [] });
      expect((await second.getAccount(account.id))?.balanceNano).toBe(5_000_000_000n);
      expect((await second.findKeyByHash(hashKey(plaintext)))?.key.name).toBe('local');
    } finally {
      await second.close();
    }
  });
});
