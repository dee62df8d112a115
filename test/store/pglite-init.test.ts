// The serving gateway creates a new embedded data directory in a child process (so initdb's
// memory leaves with it), then opens it in its worker thread; an existing directory is opened
// as it is, and a directory that cannot be created says why.

import { access, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { initPgliteDataDir } from '../../src/store/pglite-init.ts';
import { openStore } from '../../src/store/open-store.ts';

describe('creating the embedded data directory', () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });
  const parentDir = async (): Promise<string> => {
    const parent = await mkdtemp(join(tmpdir(), 'switchyard-init-'));
    dirs.push(parent);
    return parent;
  };

  it('a new directory is created by a child process, then serves and keeps its data', async () => {
    const dataDir = join(await parentDir(), 'data');
    const store = await openStore({ url: null, dataDir, workerThread: true, heartbeatMs: 0 });
    const account = await store.createAccount({ name: 'fresh' });
    await store.close();
    await access(join(dataDir, 'PG_VERSION'));

    // Already a cluster: nothing to create, and the data is still there.
    await initPgliteDataDir(dataDir);
    const again = await openStore({ url: null, dataDir, workerThread: true, heartbeatMs: 0 });
    try {
      expect((await again.getAccount(account.id))?.name).toBe('fresh');
    } finally {
      await again.close();
    }
  });

  it('a path that cannot hold a data directory fails with its reason', async () => {
    const file = join(await parentDir(), 'not-a-dir');
    await writeFile(file, 'x');
    await expect(initPgliteDataDir(file)).rejects.toThrow(/creating the data directory .* failed/);
  });
});
