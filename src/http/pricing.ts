// The public price list, GET /api/platform/pricing (no auth): every model's price in force now and
// its scheduled changes, the peak windows and the campaigns not yet ended, as exact strings.
import { formatScaledDecimal, nanoToYuan } from '../billing/money.ts';
import { priceInForce } from '../billing/price-at-entry.ts';
import type { CampaignEntry, ModelEntry, PriceEntry, RoutingTable } from '../table/types.ts';

/** Token prices are nano-yuan per token: ¥ per 1M tokens is that value with 3 decimals. */
const perMillion = (nanoPerToken: bigint): string => formatScaledDecimal(nanoPerToken, 3);
/** Multipliers and discounts are parts per 10,000 (1.5 → 15000n). */
const multiplier = (bp: bigint): string => formatScaledDecimal(bp, 4);
const instant = (ms: number): string => new Date(ms).toISOString();

function tokenPrices(p: PriceEntry): { input: string; cache_hit: string; output: string } {
  return {
    input: perMillion(p.inputNano),
    cache_hit: perMillion(p.cacheHitNano),
    output: perMillion(p.outputNano),
  };
}

function perImage(p: PriceEntry | null): Record<string, string> | null {
  if (p === null || p.perImage === null) return null;
  return Object.fromEntries([...p.perImage].map(([size, nano]) => [size, nanoToYuan(nano)]));
}

function modelPrices(m: ModelEntry, nowMs: number): object {
  const current = priceInForce(m, nowMs);
  return {
    model: m.name,
    owned_by: m.ownedBy,
    endpoints: m.endpoints,
    billing: m.billing,
    realname_required: m.realnameRequired,
    // The compiler refuses a model with no price in force at compile time, so null means only
    // that nowMs is before the compile (a clock step back); the entry stays listed.
    price: current === null ? null : tokenPrices(current),
    per_image: perImage(current),
    upcoming: m.prices
      .filter((p) => p.effectiveFromMs > nowMs)
      .map((p) => ({ effective_from: instant(p.effectiveFromMs), ...tokenPrices(p) })),
    peak_windows: m.peak === null ? [] : m.peak.flatMap((zone) => zone.windows.map((w) => w.id)),
    campaigns:
      m.campaigns === null ? [] : m.campaigns.filter((k) => k.endsMs > nowMs).map((k) => k.id),
  };
}

/** A campaign as the public sees it: which accounts it names is private, only that it names some. */
function campaignJson(k: CampaignEntry, nowMs: number): object {
  return {
    id: k.id,
    starts_at: instant(k.startsMs),
    ends_at: instant(k.endsMs),
    models: k.models,
    discount: multiplier(k.discountBp),
    active: k.startsMs <= nowMs && nowMs < k.endsMs,
    selected_accounts_only: k.accounts !== null,
  };
}

export function pricingPayload(table: RoutingTable, nowMs: number): object {
  return {
    version: table.version,
    currency: 'CNY',
    unit: 'yuan per 1M tokens',
    models: table.modelList.map((m) => modelPrices(m, nowMs)),
    peak_windows: table.peakWindows.map((w) => ({
      id: w.id,
      timezone: w.timezone,
      days: w.days,
      ranges: w.ranges,
      multiplier: multiplier(w.multiplierBp),
    })),
    campaigns: table.campaigns.filter((k) => k.endsMs > nowMs).map((k) => campaignJson(k, nowMs)),
  };
}
