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

/**
 * Shared records by price entry, then by peak window and campaign. A price entry lives as long as
 * the table that compiled it, so the records go with it.
 */
const sharedRecords = new WeakMap<
  PriceEntry,
  Map<string, Readonly<Record<string, string | null>>>
>();

/**
 * The snapshot as the usage log stores it (exact decimal strings, never floats), without the
 * entry time, which goes beside it (`SplitPriceSnapshot`). It is the same for every request on
 * one price, peak window and campaign, so it is built once per combination and the same frozen
 * object comes back. Built per request (six bigint and two date conversions), it and its
 * re-reading in the store cost ~2.5 µs a request (decision 0019, session 8).
 */
export function sharedSnapshotRecord(s: PriceSnapshot): Readonly<Record<string, string | null>> {
  let byState = sharedRecords.get(s.price);
  if (byState === undefined) {
    byState = new Map();
    sharedRecords.set(s.price, byState);
  }
  const key = `${s.peakWindowId}\u0000${s.peakBp}\u0000${s.campaignId}\u0000${s.campaignBp}`;
  let record = byState.get(key);
  if (record === undefined) {
    record = Object.freeze({
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
    });
    byState.set(key, record);
  }
  return record;
}
