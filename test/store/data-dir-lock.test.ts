// The embedded store's directory lock: a live owner keeps others out, a dead one's lock is taken over.
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DataDirBusyError, lockDataDir } from '../../src/store/data-dir-lock.ts';

describe('data directory lock', () => {
  it('refuses a directory held by a live process and names it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sy-lock-'));
    await writeFile(join(dir, 'switchyard.lock'), String(process.ppid));
    await expect(lockDataDir(dir)).rejects.toBeInstanceOf(DataDirBusyError);
    await expect(lockDataDir(dir)).rejects.toThrow(`in use by process ${process.ppid}`);
  });

  it('takes over the lock of a process that died, and releases it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sy-lock-'));
    await writeFile(join(dir, 'switchyard.lock'), '2147483646');
    const release = await lockDataDir(dir);
    expect(await readFile(join(dir, 'switchyard.lock'), 'utf8')).toBe(String(process.pid));
    await release();
    await expect(readFile(join(dir, 'switchyard.lock'), 'utf8')).rejects.toThrow();
  });
});
