// Instant → minute of the week in a timezone, and the peak multiplier and campaign in force then.
// Timezone offsets come from Intl once per zone per quarter hour (a formatToParts call costs ~5 µs;
// the cached path is a comparison), so pricing at entry stays a few array reads.
import type { CampaignEntry, ModelEntry, PeakWindowEntry } from './types.ts';

/**
 * Every zone's clock changes fall on a quarter hour of UTC (offsets are whole quarter hours), not
 * always on an hour: America/St_Johns changes at 05:30Z and Australia/Lord_Howe at 15:30Z. Cached
 * per hour, their offset was the old one for the half hour after each change, and a peak window
 * then was missed or charged wrongly (session 21).
 */
const SLOT_MS = 15 * 60_000;
const MINUTES_PER_WEEK = 7 * 1440;
export { MINUTES_PER_WEEK };

interface OffsetCache {
  slotStartMs: number;
  offsetMin: number;
}
const offsets = new Map<string, OffsetCache>();
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(timezone: string): Intl.DateTimeFormat {
  let f = formatters.get(timezone);
  if (f === undefined) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timezone, f);
  }
  return f;
}

/** True when Intl knows the zone name. */
export function isValidTimezone(timezone: string): boolean {
  try {
    formatter(timezone);
    return true;
  } catch {
    return false;
  }
}

/** Offset of the zone from UTC in minutes at the instant (Asia/Shanghai: 480). */
export function tzOffsetMinutes(timezone: string, ms: number): number {
  const slotStartMs = Math.floor(ms / SLOT_MS) * SLOT_MS;
  const cached = offsets.get(timezone);
  if (cached !== undefined && cached.slotStartMs === slotStartMs) return cached.offsetMin;
  const parts = formatter(timezone).formatToParts(new Date(slotStartMs));
  const get = (type: string): number => Number(parts.find((p) => p.type === type)?.value ?? 0);
  const asUtc = Date.UTC(
    get('year'),
    get('month') - 1,
    get('day'),
    get('hour'),
    get('minute'),
    get('second'),
  );
  const offsetMin = Math.round((asUtc - slotStartMs) / 60_000);
  offsets.set(timezone, { slotStartMs, offsetMin });
  return offsetMin;
}

/** Minute of the week (Monday 00:00 = 0) at the instant in the zone. */
export function minuteOfWeek(timezone: string, ms: number): number {
  const localMs = ms + tzOffsetMinutes(timezone, ms) * 60_000;
  const day = Math.floor(localMs / 86_400_000);
  // 1970-01-01 was a Thursday: index 3 when Monday is 0.
  const weekday = (((day + 3) % 7) + 7) % 7;
  const minute = Math.floor((localMs - day * 86_400_000) / 60_000);
  return weekday * 1440 + minute;
}

/** The peak window in force for the model at the instant, or null. */
export function peakAt(model: ModelEntry, ms: number): PeakWindowEntry | null {
  const zones = model.peak;
  if (zones === null) return null;
  for (const zone of zones) {
    const slot = zone.slots[minuteOfWeek(zone.timezone, ms)] ?? 0;
    if (slot !== 0) return zone.windows[slot - 1] ?? null;
  }
  return null;
}

/** The best campaign for the account at the instant (campaigns are sorted best first), or null. */
export function campaignAt(model: ModelEntry, accountId: string, ms: number): CampaignEntry | null {
  const list = model.campaigns;
  if (list === null) return null;
  for (const c of list) {
    if (ms >= c.startsMs && ms < c.endsMs && (c.accounts === null || c.accounts.has(accountId)))
      return c;
  }
  return null;
}
