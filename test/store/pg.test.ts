// Runs the store conformance suite on Postgres. Each database is a fresh schema
// (sy_test_<random>) selected through search_path, dropped afterwards.
// Without a reachable server the suite is skipped locally and fails under CI.

import { randomBase62 } from '../../src/store/ids.ts';
import { openStore } from '../../src/store/open-store.ts';
import type { SqlStore } from '../../src/store/sql-store.ts';
import type { StoreHarness } from './conformance.ts';
import { describeStoreConformance } from './conformance.ts';
import { describeLeaseConformance } from './lease-conformance.ts';
import { describeWithoutPostgres, PG_URL, pgAdmin, pgUnreachable } from './pg-server.ts';

const unreachable = await pgUnreachable();

if (unreachable === null) {
  const schemas: string[] = [];
  const stores: SqlStore[] = [];
  // Once with one statement per reserve and settle on a pool in this thread (as CLI commands run
  // it); once as the gateway runs it: the lease book, the pool in a worker thread.
  for (const leases of [false, true]) {
    const harness: StoreHarness = {
      async createDatabase() {
        const schema = `sy_test_${randomBase62(10).toLowerCase()}`;
        await pgAdmin(`CREATE SCHEMA ${schema}`);
        schemas.push(schema);
        const url = `${PG_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
        return {
          async open(override) {
            const store = await openStore({
              url,
              dataDir: null,
              heartbeatMs: 0,
              leases: override ?? leases,
              workerThread: leases,
            });
            stores.push(store);
            return store;
          },
        };
      },
      async dispose() {
        for (const store of stores.splice(0)) await store.close();
        const dropped = schemas.splice(0);
        if (dropped.length > 0) await pgAdmin(`DROP SCHEMA ${dropped.join(', ')} CASCADE`);
      },
    };
    describeStoreConformance(`Postgres${leases ? ', leases, worker thread' : ''}`, harness);
    if (leases) {
      describeLeaseConformance('Postgres', harness);
      // Every settlement by COPY (decision 0045), not only batches of COPY_MIN_ROWS and more.
      describeLeaseConformance('Postgres, every write by COPY', harness, { copyMinRows: 1 });
    }
  }
} else {
  describeWithoutPostgres('store (Postgres)', unreachable);
}
