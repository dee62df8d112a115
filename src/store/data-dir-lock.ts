// PGlite takes no lock on its data directory, and two processes writing one directory corrupt it.
// A lock file with the owner's pid (created exclusively) keeps a second gateway or CLI out; a lock
// left by a process that died is taken over.
import { open, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';

export class DataDirBusyError extends Error {
  readonly pid: number;
  constructor(dir: string, pid: number) {
    super(
      `the embedded store in ${dir} is in use by process ${pid}; stop it, use the admin API of the ` +
        'running gateway, or set DATABASE_URL to share a Postgres store between processes',
    );
    this.name = 'DataDirBusyError';
    this.pid = pid;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the directory's lock; returns the function that releases it. */
export async function lockDataDir(dir: string): Promise<() => Promise<void>> {
  const path = join(dir, 'switchyard.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const handle = await open(path, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return () => rm(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number((await readFile(path, 'utf8').catch(() => '')).trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid))
        throw new DataDirBusyError(dir, pid);
      await rm(path, { force: true });
    }
  }
  throw new Error(`could not take the lock of ${dir}`);
}
