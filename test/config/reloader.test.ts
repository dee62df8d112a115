// The reloader's compile worker: kept while reloads come, stopped once idle so that a gateway that
// reloaded once does not carry the compiler's isolate (23-51 MB) for the rest of its life.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deepFreeze } from '../../src/config/compile.ts';
import { TableHolder } from '../../src/config/reloader.ts';
import { BASE, ENV, compileFiles } from './helpers.ts';

let dir = "";
const saved = { ...process.env };

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'switchyard-reloader-'));
  for (const [file, text] of Object.entries(BASE)) await writeFile(join(dir, file), text);
  Object.assign(process.env, ENV);
});
afterAll(async () => {
  process.env = saved;
  await rm(dir, { recursive: true, force: true });
});

describe('TableHolder compile worker', () => {
  it('is stopped after its linger and started again by the next reload', async () => {
    const first = compileFiles(BASE, { mode: 'serve' });
    expect(first.table, JSON.stringify(first.diagnostics)).not.toBeNull();
    const holder = new TableHolder(dir, deepFreeze(first.table!), {}, 10, 300);
    try {
      expect(holder.compileWorkerRunning).toBe(false);
      expect(await holder.reload(), holder.status.lastError ?? '').toBe(true);
      expect(holder.compileWorkerRunning).toBe(true);
      // A reload within the linger reuses the worker (and restarts the linger).
      await sleep(100);
      expect(await holder.reload()).toBe(true);
      expect(holder.compileWorkerRunning).toBe(true);
      await sleep(800);
      expect(holder.compileWorkerRunning).toBe(false);

      // The next edit compiles in a new worker and swaps as before.
      await writeFile(
        join(dir, 'models.yaml'),
        BASE['models.yaml']!.replace('owned_by: acme', 'owned_by: acme-labs'),
      );
      expect(await holder.reload(), holder.status.lastError ?? '').toBe(true);
      expect(holder.compileWorkerRunning).toBe(true);
      expect(holder.current.version).not.toBe(first.table!.version);
      expect(holder.status.reloads.success).toBe(3);
    } finally {
      await holder.close();
    }
    expect(holder.compileWorkerRunning).toBe(false);
  });
});
