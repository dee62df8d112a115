// The profile files of one process, told apart by node's file names: the bench's own gateway
// profile read whichever file its directory listed first, and a gateway on PGlite writes three
// (main thread, PGlite worker, initdb child).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { profileFiles } from '../../bench/cpuprofile-summary.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-profiles-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('profileFiles', () => {
  it("finds a process's main-thread profile and its workers', not another process's", async () => {
    for (const name of [
      'CPU.20261207.182910.5469.1.002.cpuprofile', // the worker, listed first on purpose
      'CPU.20261207.182908.5482.0.001.cpuprofile', // a child process of its own
      'CPU.20261207.182907.5469.0.001.cpuprofile',
      'notes.txt',
    ])
      writeFileSync(join(dir, name), '{}');
    expect(await profileFiles(dir, 5469)).toEqual({
      main: join(dir, 'CPU.20261207.182907.5469.0.001.cpuprofile'),
      workers: [join(dir, 'CPU.20261207.182910.5469.1.002.cpuprofile')],
    });
  });

  it('says which process wrote no main-thread profile', async () => {
    await expect(profileFiles(dir, 999)).rejects.toThrow(
      `no main-thread profile of process 999 in ${dir}`,
    );
  });
});
