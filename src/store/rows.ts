// Database rows (snake_case, as the drivers return them) and their mapping to the camelCase
// records of store.ts. int8 arrives as bigint from both drivers (see pg-driver, pglite-driver).

import { joinSnapshot } from './price-snapshots.ts';
import type {
  Account,
  AccountStatus,
  ApiKey,
  KeyStatus,
  LedgerEntry,
  LedgerKind,
  PriceSnapshot,
  UsageRecord,
  UsageStatus,
} from './store.ts';

export interface AccountRow {
  id: string;
  name: string;
  balance_nano: bigint;
  reserved_nano: bigint;
  leased_nano: bigint;
  realname_verified: boolean;
  status: AccountStatus;
  created_at: Date;
  updated_at: Date;
}

export interface ApiKeyRow {
  id: string;
  account_id: string;
  name: string;
  key_prefix: string;
  allowed_models: string[] | null;
  status: KeyStatus;
  expires_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface LedgerRow {
  id: bigint;
  account_id: string;
  kind: LedgerKind;
  amount_nano: bigint;
  balance_after_nano: bigint;
  reason: string | null;
  request_id: string | null;
  created_at: Date;
}

export interface UsageRow {
  request_id: string;
  /** Before migration 0007 the column is not there: undefined reads as null. */
  client_request_id?: string | null;
  account_id: string;
  key_id: string;
  model: string;
  channel_id: string | null;
  endpoint: string;
  input_tokens: bigint;
  cache_hit_tokens: bigint;
  output_tokens: bigint;
  reasoning_tokens: bigint;
  estimated: boolean;
  /** Written inline (before migration 0005, and by the one-statement path). */
  price_snapshot: PriceSnapshot | null;
  /** Or by reference: price_snapshots' row (joined in as shared_snapshot) and the entry time. */
  shared_snapshot: PriceSnapshot | null;
  priced_at_ms: bigint | null;
  peak_applied: boolean;
  campaign_id: string | null;
  cost_nano: bigint;
  reserved_nano: bigint;
  capped: boolean;
  status: UsageStatus;
  http_status: number | null;
  latency_ms: number | null;
  upstream_request_id: string | null;
  created_at: Date;
}

// reserved_nano holds open reservations and whole leases; the part of the leases not written down
// as open requests is the leases' slack, shown apart (leased) so `reserved` means open requests.
const LEASE_SLACK = `(coalesce((SELECT sum(l.amount_nano) FROM leases l WHERE l.account_id = accounts.id), 0)
  - coalesce((SELECT sum(r.amount_nano) FROM reservations r
               WHERE r.account_id = accounts.id AND r.leased), 0))::int8`;
export const ACCOUNT_COLUMNS = `id, name, balance_nano, reserved_nano, ${LEASE_SLACK} AS leased_nano,
  realname_verified, status, created_at, updated_at`;
export const API_KEY_COLUMNS =
  'id, account_id, name, key_prefix, allowed_models, status, expires_at, created_at, updated_at';
export const LEDGER_COLUMNS =
  'id, account_id, kind, amount_nano, balance_after_nano, reason, request_id, created_at';

export function toAccount(r: AccountRow): Account {
  return {
    id: r.id,
    name: r.name,
    balanceNano: r.balance_nano,
    reservedNano: r.reserved_nano - r.leased_nano,
    leasedNano: r.leased_nano,
    realnameVerified: r.realname_verified,
    status: r.status,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export function toApiKey(r: ApiKeyRow): ApiKey {
  return {
    id: r.id,
    accountId: r.account_id,
    name: r.name,
    keyPrefix: r.key_prefix,
    allowedModels: r.allowed_models === null ? null : Object.freeze([...r.allowed_models]),
    status: r.status,
    expiresAt: r.expires_at,
    createdAt: r.created_at,
    updatedAt: r.updated_at,
  };
}

export function toLedgerEntry(r: LedgerRow): LedgerEntry {
  return {
    id: r.id,
    accountId: r.account_id,
    kind: r.kind,
    amountNano: r.amount_nano,
    balanceAfterNano: r.balance_after_nano,
    reason: r.reason,
    requestId: r.request_id,
    createdAt: r.created_at,
  };
}

export function toUsageRecord(r: UsageRow): UsageRecord {
  return {
    requestId: r.request_id,
    clientRequestId: r.client_request_id ?? null,
    accountId: r.account_id,
    keyId: r.key_id,
    model: r.model,
    channelId: r.channel_id,
    endpoint: r.endpoint,
    inputTokens: Number(r.input_tokens),
    cacheHitTokens: Number(r.cache_hit_tokens),
    outputTokens: Number(r.output_tokens),
    reasoningTokens: Number(r.reasoning_tokens),
    estimated: r.estimated,
    priceSnapshot: joinSnapshot(r.price_snapshot, r.shared_snapshot, r.priced_at_ms),
    peakApplied: r.peak_applied,
    campaignId: r.campaign_id,
    costNano: r.cost_nano,
    reservedNano: r.reserved_nano,
    capped: r.capped,
    status: r.status,
    httpStatus: r.http_status,
    latencyMs: r.latency_ms,
    upstreamRequestId: r.upstream_request_id,
    createdAt: r.created_at,
  };
}
