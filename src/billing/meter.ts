// Usage → cost, exactly: one rational, rounded once, half away from zero, to the nano-yuan
// (decision 0001). Reservations use the same arithmetic rounded up, so they bound the cost.
import { divRound, MULTIPLIER_SCALE, type Nano } from './money.ts';
import type { PriceSnapshot } from './price-at-entry.ts';

export interface MeteredTokens {
  /** Billed at the input price (excludes cache hits). */
  inputTokens: number;
  /** Billed at the cache-hit price: only what the supplier reported as a hit. */
  cacheHitTokens: number;
  outputTokens: number;
}

const SCALE2 = MULTIPLIER_SCALE * MULTIPLIER_SCALE;

function multiply(base: bigint, s: PriceSnapshot): bigint {
  return base * s.peakBp * s.campaignBp;
}

/** The cost of the tokens at the snapshot's prices and multipliers. */
export function tokenCost(tokens: MeteredTokens, s: PriceSnapshot): Nano {
  const base =
    BigInt(tokens.inputTokens) * s.price.inputNano +
    BigInt(tokens.cacheHitTokens) * s.price.cacheHitNano +
    BigInt(tokens.outputTokens) * s.price.outputNano;
  return divRound(multiply(base, s), SCALE2);
}

/** The cost of n images of a size tier; null when the model has no price for that size. */
export function imageCost(size: string, n: number, s: PriceSnapshot): Nano | null {
  const each = s.price.perImage?.get(size);
  if (each === undefined) return null;
  return divRound(multiply(each * BigInt(n), s), SCALE2);
}

/** An upper bound of a token request's cost (rounded up): what admission reserves. */
export function tokenReservation(
  maxInputTokens: number,
  maxOutputTokens: number,
  s: PriceSnapshot,
): Nano {
  const hi = s.price.inputNano > s.price.cacheHitNano ? s.price.inputNano : s.price.cacheHitNano;
  const base = BigInt(maxInputTokens) * hi + BigInt(maxOutputTokens) * s.price.outputNano;
  const scaled = multiply(base, s);
  return (scaled + SCALE2 - 1n) / SCALE2;
}
