// The serving gateway's PGlite thread runs nicer than the event loop, so on a busy host a write
// in it does not take the core from requests (src/store/pglite-worker.js). Linux only: the
// priority of each thread is read from /proc.

import { readdir, readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.ts';

/** Nice value of each thread of this process, by task id (field 19 of /proc/<pid>/task/<tid>/stat). */
async function threadNices(): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const tid of await readdir(`/proc/${process.pid}/task`)) {
    const stat = await readFile(`/proc/${process.pid}/task/${tid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields.length > 16) out.set(Number(tid), Number(fields[16]));
  }
  return out;
}

describe.skipIf(process.platform !== 'linux')('the PGlite worker thread', () => {
  it('runs 5 nicer than the thread that opened the store', async () => {
    const before = await threadNices();
    const mine = before.get(process.pid) ?? 0;
    const store = await openStore({ url: null, dataDir: null, pgliteWorker: true, heartbeatMs: 0 });
    try {
      await store.listAccounts();
      const after = await threadNices();
      const added = [...after].filter(([tid]) => !before.has(tid)).map(([, nice]) => nice);
      expect(added).toContain(Math.min(19, mine + 5));
      expect(after.get(process.pid)).toBe(mine);
    } finally {
      await store.close();
    }
  });
});
