// Prices a request at the instant it enters (DESIGN invariant 2): the model's price schedule, the
// peak window and the best campaign in force then. The snapshot, not the price at completion,
// bills the request; it is stored with the usage row as exact strings.
import { campaignAt, peakAt } from '../table/peak-lookup.ts';
import type { ModelEntry, PriceEntry } from '../table/types.ts';
import { MULTIPLIER_SCALE } from './money.ts';

export interface PriceSnapshot {
  price: PriceEntry;
  peakWindowId: string | null;
  /** Parts per 10,000; 10000n when no peak window applies. */
  peakBp: bigint;
  campaignId: string | null;
  /** Parts per 10,000; 10000n when no campaign applies. */
  campaignBp: bigint;
  atMs: number;
}

/** The price in force at the instant, or null when the model has none yet. */
export function priceInForce(model: ModelEntry, atMs: number): PriceEntry | null {
  const prices = model.prices;
  for (let i = prices.length - 1; i >= 0; i--) {
    const p = prices[i]!;
    if (p.effectiveFromMs <= atMs) return p;
  }
  return null;
}

export function priceAtEntry(
  model: ModelEntry,
  accountId: string,
  atMs: number,
): PriceSnapshot | null {
  const price = priceInForce(model, atMs);
  if (price === null) return null;
  const peak = peakAt(model, atMs);
  const campaign = campaignAt(model, accountId, atMs);
  return {
    price,
    peakWindowId: peak === null ? null : peak.id,
    peakBp: peak === null ? MULTIPLIER_SCALE : peak.multiplierBp,
    campaignId: campaign === null ? null : campaign.id,
    campaignBp: campaign === null ? MULTIPLIER_SCALE : campaign.discountBp,
    atMs,
  };
}

/** The snapshot as the usage log stores it: exact decimal strings, never floats. */
export function snapshotRecord(s: PriceSnapshot): Record<string, string | null> {
  return {
    inputNanoPerToken: s.price.inputNano.toString(),
    cacheHitNanoPerToken: s.price.cacheHitNano.toString(),
    outputNanoPerToken: s.price.outputNano.toString(),
    perImage:
      s.price.perImage === null
        ? null
        : JSON.stringify(
            Object.fromEntries([...s.price.perImage].map(([k, v]) => [k, v.toString()])),
          ),
    peakWindowId: s.peakWindowId,
    peakMultiplierBp: s.peakBp.toString(),
    campaignId: s.campaignId,
    campaignDiscountBp: s.campaignBp.toString(),
    effectiveFrom: Number.isFinite(s.price.effectiveFromMs)
      ? new Date(s.price.effectiveFromMs).toISOString()
      : null,
    pricedAt: new Date(s.atMs).toISOString(),
  };
}
