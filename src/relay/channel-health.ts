// Per-channel health in this process: consecutive failures put a channel in cooldown (doubling
// from 2 s up to 60 s), a 429 with Retry-After cools it for that long, and a success heals it.
// Cooling channels are skipped by channel choice and recover by themselves when the time passes.

const BASE_COOLDOWN_MS = 2_000;
const MAX_COOLDOWN_MS = 60_000;
/** Failures in a row before a channel cools down: one blip is not a trend. */
const FAILURES_TO_COOL = 3;

interface Health {
  failures: number;
  coolUntilMs: number;
  cooldowns: number;
}

export class ChannelHealth {
  private readonly byChannel = new Map<string, Health>();
  /** Called with (channelId, cooling) when a channel enters or leaves cooldown, for the gauge. */
  onChange: ((channelId: string, cooling: boolean) => void) | null = null;

  private get(id: string): Health {
    let h = this.byChannel.get(id);
    if (h === undefined) {
      h = { failures: 0, coolUntilMs: 0, cooldowns: 0 };
      this.byChannel.set(id, h);
    }
    return h;
  }

  isCooling(id: string, nowMs: number): boolean {
    const h = this.byChannel.get(id);
    return h !== undefined && h.coolUntilMs > nowMs;
  }

  success(id: string): void {
    const h = this.byChannel.get(id);
    if (h === undefined || (h.failures === 0 && h.coolUntilMs === 0)) return;
    const wasCooling = h.coolUntilMs > 0;
    h.failures = 0;
    h.cooldowns = 0;
    h.coolUntilMs = 0;
    if (wasCooling) this.onChange?.(id, false);
  }

  /** Records a failure; retryAfterMs (from a 429) cools the channel at once for that long. */
  failure(id: string, nowMs: number, retryAfterMs: number | null = null): void {
    const h = this.get(id);
    h.failures++;
    if (retryAfterMs !== null && retryAfterMs > 0) {
      h.coolUntilMs = nowMs + Math.min(retryAfterMs, MAX_COOLDOWN_MS);
      this.onChange?.(id, true);
      return;
    }
    if (h.failures >= FAILURES_TO_COOL) {
      h.coolUntilMs = nowMs + Math.min(BASE_COOLDOWN_MS * 2 ** h.cooldowns, MAX_COOLDOWN_MS);
      h.cooldowns++;
      h.failures = 0;
      this.onChange?.(id, true);
    }
  }

  snapshot(
    nowMs: number,
  ): Record<string, { cooling: boolean; coolUntilMs: number; failures: number }> {
    const out: Record<string, { cooling: boolean; coolUntilMs: number; failures: number }> = {};
    for (const [id, h] of this.byChannel)
      out[id] = {
        cooling: h.coolUntilMs > nowMs,
        coolUntilMs: h.coolUntilMs,
        failures: h.failures,
      };
    return out;
  }
}
