// Narrowing helpers for JSON that arrived from the network as `unknown`: one place that says what
// counts as an object, a count or a string, so the adapters never cast blindly.

import type { JsonObject } from './types.ts';

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A non-negative integer count at `key`, or null when absent, null, negative or not a number. */
export function countAt(obj: JsonObject, key: string): number | null {
  const v = obj[key];
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.trunc(v) : null;
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
