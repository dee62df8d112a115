// Narrowing helpers for JSON that arrived from the network as `unknown`: one place that says what
// counts as an object, a count or a string, so the adapters never cast blindly.

import type { JsonObject } from './types.ts';

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * A count above this is no supplier's real usage. It is kept at this bound rather than refused:
 * the charge is capped at the reservation anyway, and 1e16 tokens once made the settlement fail
 * its safe-integer check, so the request was never charged and its hold stayed (session 21).
 */
export const MAX_COUNT = 2 ** 40;

/**
 * A non-negative integer count at `key` (at most MAX_COUNT), or null when absent, null, negative
 * or not a number.
 */
export function countAt(obj: JsonObject, key: string): number | null {
  const v = obj[key];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0
    ? Math.min(Math.trunc(v), MAX_COUNT)
    : null;
}

export function stringAt(obj: JsonObject, key: string): string | null {
  const v = obj[key];
  return typeof v === 'string' ? v : null;
}

export function objectAt(obj: JsonObject, key: string): JsonObject | null {
  const v = obj[key];
  return isObject(v) ? v : null;
}

/** JSON.parse that returns undefined instead of throwing on malformed text. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}
