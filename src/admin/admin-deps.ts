// What the admin routes need from the running gateway: the store, the limiter (for the
// blacklist), the current routing table (for the admin tokens) and the reload status.
import type { Limiter } from '../limits/limiter.ts';
import type { Store } from '../store/store.ts';
import type { RoutingTable } from '../table/types.ts';

export interface AdminDeps {
  store: Store;
  limiter: Limiter;
  /** The table in force; read per request, so a reload that rotates a token applies at once. */
  table: () => RoutingTable;
  /** Reload status, returned as is by GET /api/status. */
  status: () => object;
}
