// Orders a route's candidates for one request: highest priority tier first, weighted random within
// a tier, cooling channels last (tried only when nothing else is left). Capacity is checked when an
// attempt acquires its slot, so a full channel is skipped at that moment, not guessed here.
import type { Candidate, Route } from '../table/types.ts';
import type { ChannelHealth } from './channel-health.ts';

/** Weighted shuffle (Efraimidis–Spirakis keys), so every candidate appears once, heavy ones early. */
function weightedOrder(candidates: readonly Candidate[]): Candidate[] {
  if (candidates.length === 1) return [candidates[0]!];
  return candidates
    .map((c) => ({ c, key: Math.random() ** (1 / c.weight) }))
    .sort((a, b) => b.key - a.key)
    .map((x) => x.c);
}

export function orderCandidates(route: Route, health: ChannelHealth, nowMs: number): Candidate[] {
  const healthy: Candidate[] = [];
  const cooling: Candidate[] = [];
  for (const tier of route.tiers) {
    for (const c of weightedOrder(tier.candidates)) {
      (health.isCooling(c.channel.id, nowMs) ? cooling : healthy).push(c);
    }
  }
  return cooling.length === 0 ? healthy : healthy.concat(cooling);
}
