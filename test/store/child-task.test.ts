// A one-off task in a child process (child-task.ts; pglite-init.ts creates a data directory with
// it): a child that reports its work done is not waited for past its grace, since node can hang
// at exit (nodejs/node#54918); one that fails says why.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { runChildTask } from '../../src/store/child-task.ts';

const task = (name: string): string =>
  fileURLToPath(new URL(`./child-tasks/${name}.ts`, import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('a child task', () => {
  let dir = '';
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  it('that reports done and exits gives its exit code', async () => {
    dir = await mkdtemp(join(tmpdir(), 'switchyard-child-task-'));
    const file = join(dir, 'out.txt');
    const run = await runChildTask(task('finishing'), [file]);
    expect(run).toMatchObject({ done: true, code: 0, ended: false });
    expect(await readFile(file, 'utf8')).toBe('written');
  });

  it('that reports done but does not exit is ended after its grace, and counts as done', async () => {
    const run = await runChildTask(task('lingering'), [], 200);
    expect(run).toMatchObject({ done: true, ended: true, code: null });
    const pid = Number(/pid (\d+)/.exec(run.stderr)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
  });

  it('that fails before it is done gives its code and what it said', async () => {
    const run = await runChildTask(task('failing'), []);
    expect(run).toMatchObject({ done: false, code: 3, ended: false });
    expect(run.stderr).toContain('no room for the data directory');
  });
});
