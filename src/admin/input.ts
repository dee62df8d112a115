// Checks of admin inputs (bodies, params, query strings, CLI arguments): each mistake becomes a
// 400 invalid_parameter_error that names the field. Money arrives as yuan decimal strings only.
import { isIP } from 'node:net';
import type { Nano } from '../billing/money.ts';
import { yuanToNano } from '../billing/money.ts';
import { GatewayError } from '../http/errors.ts';
import { canonicalIp } from '../http/ip-address.ts';

/**
 * The largest amount one topup or adjustment may move: ¥1,000,000,000 = 1e18 nano-yuan, so even a
 * few of them stay inside int8 (9.2e18); anything larger is a typo.
 */
export const MAX_AMOUNT_NANO = 1_000_000_000n * 1_000_000_000n;
/** A blacklist entry lasts at most a year (31,536,000 s); longer is a permanent ban, not a layer. */
export const MAX_BAN_SECONDS = 365 * 24 * 3600;
const MAX_TEXT = 500;
const MAX_MODEL_PATTERNS = 256;

export function invalid(field: string, why: string): GatewayError {
  return new GatewayError('invalid_parameter_error', `${field}: ${why}`);
}

/** The body as an object with only the allowed fields; an absent body is an empty object. */
export function bodyObject(body: unknown, allowed: readonly string[]): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  // The gateway parses only application/json; any other content type arrives as raw bytes.
  if (Buffer.isBuffer(body)) {
    throw new GatewayError('unsupported_media_type', 'send the body as application/json');
  }
  if (typeof body !== 'object' || Array.isArray(body)) {
    throw new GatewayError('invalid_parameter_error', 'the request body must be a JSON object');
  }
  const obj = body as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (!allowed.includes(key)) {
      throw invalid(key, `unknown field (allowed: ${allowed.join(', ')})`);
    }
  }
  return obj;
}

/** Query parameters as single strings; a repeated or unknown parameter is a mistake. */
export function queryObject(query: unknown, allowed: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  if (query === undefined || query === null || typeof query !== 'object') return out;
  for (const [key, value] of Object.entries(query as Record<string, unknown>)) {
    if (!allowed.includes(key)) {
      throw invalid(key, `unknown query parameter (allowed: ${allowed.join(', ')})`);
    }
    if (typeof value !== 'string') throw invalid(key, 'give the query parameter once');
    out[key] = value;
  }
  return out;
}

export function text(value: unknown, field: string, required: boolean): string | null {
  if (value === undefined || value === null) {
    if (required) throw invalid(field, 'is required');
    return null;
  }
  if (typeof value !== 'string') throw invalid(field, 'must be a string');
  const trimmed = value.trim();
  if (required && trimmed === '') throw invalid(field, 'must not be empty');
  if (trimmed.length > MAX_TEXT) throw invalid(field, `must be at most ${MAX_TEXT} characters`);
  return trimmed;
}

export function requiredText(value: unknown, field: string): string {
  return text(value, field, true) ?? '';
}

export function optionalBoolean(value: unknown, field: string): boolean | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'boolean') throw invalid(field, 'must be true or false');
  return value;
}

/**
 * A yuan amount: a decimal STRING ("12.5", "-3", "0.000000001"), never a JSON number, so no float
 * ever carries money. 'positive' for topups, 'nonzero' for signed adjustments.
 */
export function yuanAmount(value: unknown, field: string, sign: 'positive' | 'nonzero'): Nano {
  if (typeof value !== 'string') {
    throw invalid(field, 'must be a yuan amount as a decimal string, e.g. "12.5"');
  }
  if (!/^-?\d+(?:\.\d+)?$/.test(value)) {
    throw invalid(field, `"${value}" is not a decimal yuan amount such as "12.5"`);
  }
  const nano = yuanToNano(value);
  if (nano === null) throw invalid(field, `"${value}" has more than 9 decimals (1 nano-yuan)`);
  if (sign === 'positive' && nano <= 0n) throw invalid(field, 'must be greater than 0');
  if (sign === 'nonzero' && nano === 0n) throw invalid(field, 'must not be 0');
  if (nano > MAX_AMOUNT_NANO || nano < -MAX_AMOUNT_NANO) {
    throw invalid(field, 'must be at most 1000000000 yuan in one operation');
  }
  return nano;
}

const ISO_INSTANT =
  /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/;

/**
 * Date.parse rolls an impossible date over ("2099-02-30" is 2 March, "T24:00" the next day): a key
 * created with that expiry got another date back (session 21). The fields are checked first.
 */
function realCalendarFields(m: RegExpExecArray): boolean {
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (month < 1 || month > 12 || day < 1) return false;
  if (day > new Date(Date.UTC(year, month, 0)).getUTCDate()) return false;
  return (
    (m[4] === undefined || Number(m[4]) <= 23) &&
    (m[5] === undefined || Number(m[5]) <= 59) &&
    (m[6] === undefined || Number(m[6]) <= 59)
  );
}

/** An ISO 8601 instant with a zone ("2026-01-01T00:00:00+08:00") or a date (UTC midnight). */
export function instant(value: unknown, field: string): Date {
  const m = typeof value === 'string' ? ISO_INSTANT.exec(value) : null;
  if (m === null) {
    throw invalid(field, 'must be an ISO 8601 instant with a zone, e.g. 2026-01-01T00:00:00+08:00');
  }
  if (!realCalendarFields(m)) throw invalid(field, `"${m[0]}" is not a date on the calendar`);
  const ms = Date.parse(m[0]);
  if (Number.isNaN(ms)) throw invalid(field, `"${m[0]}" is not a valid date`);
  return new Date(ms);
}

export function optionalInstant(value: unknown, field: string): Date | null {
  return value === undefined || value === null ? null : instant(value, field);
}

/** A key's allowed models: null (every model) or a non-empty list of names or '*' globs. */
export function modelPatterns(value: unknown, field: string): string[] | null {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) throw invalid(field, 'must be null or a list of model names');
  if (value.length === 0) {
    throw invalid(field, 'an empty list allows no model; give null for every model');
  }
  if (value.length > MAX_MODEL_PATTERNS) {
    throw invalid(field, `must list at most ${MAX_MODEL_PATTERNS} models`);
  }
  return value.map((m, i) => {
    if (typeof m !== 'string' || !/^[^\s,]{1,200}$/.test(m)) {
      throw invalid(`${field}[${i}]`, 'must be a model name or glob such as "deepseek-*"');
    }
    return m;
  });
}

/** A positive whole number up to max (a JSON integer, or its digits in a query string). */
export function positiveInteger(value: unknown, field: string, max: number): number {
  const n = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1 || n > max) {
    throw invalid(field, `must be a whole number from 1 to ${max}`);
  }
  return n;
}

/** A blacklist source: "ip:<address>" or "key:<key id>", as the limiter stores them. */
export function blacklistSource(value: unknown, field: string): string {
  if (typeof value === 'string') {
    const ip = value.startsWith('ip:') ? value.slice(3) : '';
    // The form clientIp gives the same address; a zone-scoped one (fe80::1%eth0) never matches.
    if (isIP(ip) !== 0 && !ip.includes('%')) return `ip:${canonicalIp(ip)}`;
    if (/^key:key_[A-Za-z0-9]{1,64}$/.test(value)) return value;
  }
  throw invalid(field, 'must be "ip:<address>" or "key:<key id>", e.g. "ip:203.0.113.7"');
}
