// The serving gateway's PGlite thread runs nicer than the event loop, so on a busy host a write
// in it does not take the core from requests (src/store/pglite-worker.js). Linux only: the
// priority of each thread is read from /proc.

import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
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
    const store = await openStore({ url: null, dataDir: null, workerThread: true, heartbeatMs: 0 });
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

  it('gets a small young generation of its own when the process runs with --max-semi-space-size', async () => {
    // A child process started as `npm start` starts the gateway: V8's flag is process-wide and
    // would give PGlite's thread 16 MB semi-spaces too (a mark-compact every ~1 s under load).
    // Heap limits read from the process report: old generation + young generation.
    const script = `
      import { Worker } from 'node:worker_threads';
      import { openStore } from ${JSON.stringify(new URL('../../src/store/open-store.ts', import.meta.url).href)};
      const plainLimit = () => new Promise((resolve) => {
        const w = new Worker('require("worker_threads").parentPort.postMessage(require("v8").getHeapStatistics().heap_size_limit)', { eval: true });
        w.once('message', (m) => { resolve(m); void w.terminate(); });
      });
      const store = await openStore({ url: null, dataDir: null, workerThread: true, heartbeatMs: 0 });
      await store.listAccounts();
      const report = process.report.getReport();
      const out = {
        main: report.javascriptHeap.memoryLimit,
        workers: report.workers.map((w) => w.javascriptHeap.memoryLimit),
        plainAfter: await plainLimit(),
      };
      await store.close();
      console.log(JSON.stringify(out));
    `;
    const dir = await mkdtemp(join(tmpdir(), 'switchyard-young-'));
    let stdout: string;
    try {
      await writeFile(join(dir, 'probe.mjs'), script);
      ({ stdout } = await promisify(execFile)(process.execPath, [
        '--max-semi-space-size=16',
        join(dir, 'probe.mjs'),
      ]));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const r = JSON.parse(stdout.trim().split('\n').pop()!) as {
      main: number;
      workers: number[];
      plainAfter: number;
    };
    const MB = 1024 * 1024;
    expect(r.workers).toHaveLength(1);
    // 16 MB semi-spaces make a 48 MB young generation; the PGlite thread's is 6 MB.
    expect(r.main - r.workers[0]!).toBeGreaterThanOrEqual(30 * MB);
    // The flag is back once the thread is up: a worker started later gets the process's sizes.
    expect(r.plainAfter).toBe(r.main);
  });
});
