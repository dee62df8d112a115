// What the relay needs from the running gateway: the table in force, the store, the key cache, the
// limiter, the upstream pools and channel health, telemetry. One object, built by createGateway.
import type { FastifyBaseLogger } from 'fastify';
import type { TableHolder } from '../config/reloader.ts';
import type { GatewayLimiter } from '../limits/resilient-limiter.ts';
import type { KeyCache } from '../store/key-cache.ts';
import type { Store } from '../store/store.ts';
import type { RequestObserver } from './observer.ts';
import type { PendingWork } from './pending-work.ts';
import type { ChannelHealth } from './channel-health.ts';
import type { Upstreams } from './upstreams.ts';

export interface RelayOptions {
  /** Attempts per request across channels, before the first byte reaches the client. */
  maxAttempts: number;
  /** Pause before attempt n (n ≥ 1): backoffMs × 2^(n-1), capped at 8×. */
  backoffMs: number;
}

export interface GatewayContext {
  tables: Pick<TableHolder, 'current' | 'status'>;
  store: Store;
  keys: KeyCache;
  limiter: GatewayLimiter;
  upstreams: Upstreams;
  health: ChannelHealth;
  /** Starts the observer of one request (spans, metrics, access log). */
  observe: (
    requestId: string,
    route: string,
    method: string,
    headers: Record<string, string | string[] | undefined>,
  ) => RequestObserver;
  log: FastifyBaseLogger;
  relay: RelayOptions;
  /** Settlements still being written; close() waits for them so nothing is lost on shutdown. */
  inflight: PendingWork;
}
