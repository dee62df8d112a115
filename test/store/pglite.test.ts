// Runs the store conformance suite on the embedded backend: each database is an in-memory PGlite,
// and several store instances can share one (as several processes share one Postgres).

import type { Driver } from '../../src/store/driver.ts';
import { createPgliteDriver } from '../../src/store/pglite-driver.ts';
import { SqlStore } from '../../src/store/sql-store.ts';
import { describeStoreConformance } from './conformance.ts';

const drivers: Driver[] = [];
const stores: SqlStore[] = [];

describeStoreConformance('embedded PGlite', {
  async createDatabase() {
    const driver = await createPgliteDriver(null);
    drivers.push(driver);
    return {
      async open() {
        const store = await SqlStore.open(driver, { heartbeatMs: 0, ownsDriver: false });
        stores.push(store);
        return store;
      },
    };
  },
  async dispose() {
    for (const store of stores.splice(0)) await store.close();
    for (const driver of drivers.splice(0)) await driver.close();
  },
});
