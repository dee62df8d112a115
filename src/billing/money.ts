// Money is integer nano-yuan (1e-9 ¥) in BigInt: one token at a price with 3 decimals in ¥ per 1M
// tokens costs a whole number of nano-yuan, so metering is exact (docs/decisions/0001-money-unit.md).

/** An amount of money in nano-yuan (1 ¥ = 1_000_000_000n). */
export type Nano = bigint;

export const NANO_PER_YUAN = 1_000_000_000n;

/** The most any amount can be: money is stored in int8 columns (~¥9.2e9). */
export const INT8_MAX: Nano = 2n ** 63n - 1n;
/** Scale of multipliers (peak, campaign): parts per 10,000, so 1.5 is 15000n and 0 is free. */
export const MULTIPLIER_SCALE = 10_000n;

const DECIMAL = /^([+-])?(\d+)(?:\.(\d+))?$/;

/**
 * Parses an exact decimal string into an integer scaled by 10^scale.
 * Returns null when the text is not a plain decimal or has more decimals than the scale holds.
 */
export function parseScaledDecimal(text: string, scale: number): bigint | null {
  const m = DECIMAL.exec(text.trim());
  if (m === null) return null;
  const [, sign, whole = '0', frac = ''] = m;
  const trimmed = frac.replace(/0+$/, '');
  if (trimmed.length > scale) return null;
  const value = BigInt(whole + trimmed.padEnd(scale, '0'));
  return sign === '-' ? -value : value;
}

/** Formats an integer scaled by 10^scale as a decimal string without trailing zeros ("1.5", "0"). */
export function formatScaledDecimal(value: bigint, scale: number): string {
  const negative = value < 0n;
  const digits = (negative ? -value : value).toString().padStart(scale + 1, '0');
  const whole = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale).replace(/0+$/, '');
  return (negative ? '-' : '') + whole + (frac.length > 0 ? '.' + frac : '');
}

/** "12.5" (yuan) -> 12_500_000_000n; null when malformed or finer than a nano-yuan. */
export function yuanToNano(text: string): Nano | null {
  return parseScaledDecimal(text, 9);
}

/** 12_500_000_000n -> "12.5" (yuan). */
export function nanoToYuan(nano: Nano): string {
  return formatScaledDecimal(nano, 9);
}

/**
 * Divides rounding half away from zero: the one rounding rule for money
 * (applied once per request, after every multiplier).
 */
export function divRound(numerator: bigint, denominator: bigint): bigint {
  const q = numerator / denominator;
  const r = numerator % denominator;
  if (r === 0n) return q;
  const twice = (r < 0n ? -r : r) * 2n;
  const away = numerator < 0n !== denominator < 0n ? -1n : 1n;
  return twice >= (denominator < 0n ? -denominator : denominator) ? q + away : q;
}
