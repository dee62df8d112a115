// Runs the store conformance suite on the embedded backend: each database is an in-memory PGlite,
// and several store instances can share one (as several processes share one Postgres).

import type { Driver } from '../../src/store/driver.ts';
import { createPgliteDriver } from '../../src/store/pglite-driver.ts';
import { createPgliteWorkerDriver } from '../../src/store/pglite-worker-driver.ts';
import { SqlStore } from '../../src/store/sql-store.ts';
import type { StoreHarness } from './conformance.ts';
import { describeStoreConformance } from './conformance.ts';
import { describeLeaseConformance } from './lease-conformance.ts';

const drivers: Driver[] = [];
const stores: SqlStore[] = [];

// With one statement per reserve and settle on PGlite in this thread; then as the gateway runs
// it: the lease book, PGlite in a worker thread.
for (const [leases, worker] of [
  [false, false],
  [true, true],
] as const) {
  const harness: StoreHarness = {
    async createDatabase() {
      const driver = worker ? await createPgliteWorkerDriver(null) : await createPgliteDriver(null);
      drivers.push(driver);
      return {
        async open(override) {
          const store = await SqlStore.open(driver, {
            heartbeatMs: 0,
            ownsDriver: false,
            leases: override ?? leases,
          });
          stores.push(store);
          return store;
        },
      };
    },
    async dispose() {
      for (const store of stores.splice(0)) await store.close();
      for (const driver of drivers.splice(0)) await driver.close();
    },
  };
  describeStoreConformance(`embedded PGlite${leases ? ', leases, worker thread' : ''}`, harness);
  // Every settlement by COPY (decision 0038), not only batches of COPY_MIN_ROWS and more.
  if (leases) describeLeaseConformance('embedded PGlite', harness, { copyMinRows: 1 });
}
