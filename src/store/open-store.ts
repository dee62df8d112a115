// Opens the store the configuration asks for: Postgres when a URL is given, otherwise the
// embedded PGlite in dataDir (in memory when dataDir is null). Migrates before returning.

import type { Driver } from './driver.ts';
import { createPgDriver } from './pg-driver.ts';
import { createPgWorkerDriver } from './pg-worker-driver.ts';
import { createPgliteDriver } from './pglite-driver.ts';
import { createPgliteWorkerDriver } from './pglite-worker-driver.ts';
import type { SqlStoreOptions } from './sql-store.ts';
import { SqlStore } from './sql-store.ts';

export interface OpenStoreOptions extends Omit<SqlStoreOptions, 'ownsDriver'> {
  /** postgres://…; null = embedded PGlite. */
  url: string | null;
  /** PGlite data directory; null = in memory. Ignored with a url. */
  dataDir: string | null;
  /**
   * Run the driver in a worker thread (the serving gateway: PGlite's SQL then never stalls the
   * event loop, decision 0014; pg's protocol work leaves it, decision 0053). Off for short-lived
   * CLI commands, which would only pay the thread's start.
   */
  workerThread?: boolean;
}

/** The driver the options ask for: Postgres or PGlite, in this thread or a worker's. */
function openDriver(options: OpenStoreOptions): Promise<Driver> | Driver {
  const worker = options.workerThread === true;
  if (options.url !== null)
    return worker
      ? createPgWorkerDriver({ url: options.url })
      : createPgDriver({ url: options.url });
  return worker ? createPgliteWorkerDriver(options.dataDir) : createPgliteDriver(options.dataDir);
}

export async function openStore(options: OpenStoreOptions): Promise<SqlStore> {
  const driver = await openDriver(options);
  const storeOptions: SqlStoreOptions = { ownsDriver: true };
  if (options.instanceId !== undefined) storeOptions.instanceId = options.instanceId;
  if (options.heartbeatMs !== undefined) storeOptions.heartbeatMs = options.heartbeatMs;
  if (options.leases !== undefined) storeOptions.leases = options.leases;
  return SqlStore.open(driver, storeOptions);
}
