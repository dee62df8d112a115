// How store records leave the admin API: snake_case fields, money as yuan decimal strings, instants
// as ISO strings. Key hashes have no field here, so no route can ever return one.
import { nanoToYuan } from '../billing/money.ts';
import type { BlacklistEntry } from '../limits/limiter.ts';
import type { Account, ApiKey, LedgerEntry, Statement, UsageRecord } from '../store/store.ts';

const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());

export function accountJson(a: Account): object {
  const available = a.balanceNano - a.reservedNano;
  return {
    id: a.id,
    name: a.name,
    balance: nanoToYuan(a.balanceNano),
    reserved: nanoToYuan(a.reservedNano),
    leased: nanoToYuan(a.leasedNano),
    available: nanoToYuan(available > 0n ? available : 0n),
    realname_verified: a.realnameVerified,
    status: a.status,
    created_at: iso(a.createdAt),
    updated_at: iso(a.updatedAt),
  };
}

export function keyJson(k: ApiKey): object {
  return {
    id: k.id,
    account_id: k.accountId,
    name: k.name,
    key_prefix: k.keyPrefix,
    allowed_models: k.allowedModels,
    status: k.status,
    expires_at: iso(k.expiresAt),
    created_at: iso(k.createdAt),
    updated_at: iso(k.updatedAt),
  };
}

export function ledgerJson(e: LedgerEntry): object {
  return {
    id: e.id.toString(),
    account_id: e.accountId,
    kind: e.kind,
    amount: nanoToYuan(e.amountNano),
    balance_after: nanoToYuan(e.balanceAfterNano),
    reason: e.reason,
    request_id: e.requestId,
    created_at: iso(e.createdAt),
  };
}

export function statementJson(s: Statement): object {
  return {
    account_id: s.accountId,
    from: iso(s.from),
    to: iso(s.to),
    opening: nanoToYuan(s.openingNano),
    closing: nanoToYuan(s.closingNano),
    topups: nanoToYuan(s.topupsNano),
    adjustments: nanoToYuan(s.adjustmentsNano),
    usage: nanoToYuan(s.usageNano),
    rows: s.rows.map(ledgerJson),
  };
}

export function usageJson(u: UsageRecord): object {
  return {
    request_id: u.requestId,
    client_request_id: u.clientRequestId,
    account_id: u.accountId,
    key_id: u.keyId,
    model: u.model,
    endpoint: u.endpoint,
    channel: u.channelId,
    status: u.status,
    http_status: u.httpStatus,
    input_tokens: u.inputTokens,
    cache_hit_tokens: u.cacheHitTokens,
    output_tokens: u.outputTokens,
    reasoning_tokens: u.reasoningTokens,
    estimated: u.estimated,
    cost: nanoToYuan(u.costNano),
    reserved: nanoToYuan(u.reservedNano),
    capped: u.capped,
    peak_applied: u.peakApplied,
    campaign_id: u.campaignId,
    // Exact strings as the billing layer stored them (nano-yuan per token, multipliers in bp).
    price_snapshot: u.priceSnapshot,
    latency_ms: u.latencyMs,
    upstream_request_id: u.upstreamRequestId,
    created_at: iso(u.createdAt),
  };
}

export function blacklistJson(b: BlacklistEntry): object {
  return {
    source: b.source,
    reason: b.reason,
    until: new Date(b.untilMs).toISOString(),
    added_by: b.addedBy,
  };
}
