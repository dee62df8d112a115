// How far a TTFT goal's figure could move in another run like this one: a 95% interval for a
// gateway's p50 over the bare proxy's, from the run's own rounds. The back-to-back section's
// figure for one gateway read +0.35 to +1.14 ms over four runs of the same code on one host
// (session 49), and its rounds -1.77 to +3.85 over five runs on another (session 50); a miss by
// 0.14 ms said nothing about the code without knowing that spread. Rounds, not streams, are
// drawn: the streams of one turn share a spell of the host and a wave's queue, so they are not
// independent, while a round's turns of each side are taken within seconds of each other (the
// percentile bootstrap over blocks; both sides' turns of a round are drawn together).

import { sortedAt } from './load.ts';

/** A small seeded generator (mulberry32), so the same results print the same interval. */
function generator(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The p50 of the streams of the rounds drawn (indexes into `turns`), into `buffer`. */
function drawnP50(turns: readonly number[][], drawn: Uint32Array, buffer: Float64Array): number {
  let n = 0;
  for (const round of drawn) {
    for (const v of turns[round]!) buffer[n++] = v;
  }
  return sortedAt(buffer.subarray(0, n).sort(), 0.5);
}

/**
 * The 2.5th and 97.5th percentiles of the gateway's p50 minus the proxy's over `draws` resamples
 * of the rounds, each as many rounds as were run, drawn with replacement; null with fewer than
 * two rounds that both sides have streams in. `gateway[i]` and `proxy[i]` are the TTFTs (ms) of
 * the two sides' turns in round i.
 */
export function addedP50Interval(
  gateway: readonly number[][],
  proxy: readonly number[][],
  draws = 2000,
  seed = 1,
): [number, number] | null {
  const rounds: number[] = [];
  for (let i = 0; i < Math.min(gateway.length, proxy.length); i++) {
    if (gateway[i]!.length > 0 && proxy[i]!.length > 0) rounds.push(i);
  }
  if (rounds.length < 2) return null;
  const longest = (turns: readonly number[][]): number =>
    Math.max(...rounds.map((i) => turns[i]!.length));
  const gwBuffer = new Float64Array(longest(gateway) * rounds.length);
  const pxBuffer = new Float64Array(longest(proxy) * rounds.length);
  const random = generator(seed);
  const drawn = new Uint32Array(rounds.length);
  const added = new Float64Array(draws);
  for (let d = 0; d < draws; d++) {
    for (let k = 0; k < drawn.length; k++) {
      drawn[k] = rounds[Math.floor(random() * rounds.length)]!;
    }
    added[d] = drawnP50(gateway, drawn, gwBuffer) - drawnP50(proxy, drawn, pxBuffer);
  }
  added.sort();
  const at = (q: number): number => added[Math.min(draws - 1, Math.max(0, Math.floor(q * draws)))]!;
  return [at(0.025), at(0.975)];
}

/** Student's t at 97.5% for 1 to 30 degrees of freedom; 1.96 past them. */
const T975 = [
  12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.16, 2.145,
  2.131, 2.12, 2.11, 2.101, 2.093, 2.086, 2.08, 2.074, 2.069, 2.064, 2.06, 2.056, 2.052, 2.048,
  2.045, 2.042,
];

/** The arithmetic mean of `values` (NaN for none). */
export function mean(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/**
 * A 95% interval for the mean of `values`, each from a run of its own (`bench:ab --processes`:
 * every process started afresh for each): mean ± t·s/√n. Null with fewer than two. The rounds of
 * one run share its processes, so addedP50Interval cannot see how far a process started again
 * moves the figure; two A/A runs on one host read −0.81 ms (95% interval −1.31 to −0.37) and
 * +1.08 (+0.09 to +2.43) back to back (docs/performance.md, session 54).
 */
export function meanInterval(values: readonly number[]): [number, number] | null {
  const n = values.length;
  if (n < 2) return null;
  const m = mean(values);
  const variance = values.reduce((a, v) => a + (v - m) ** 2, 0) / (n - 1);
  const half = (T975[n - 2] ?? 1.96) * Math.sqrt(variance / n);
  return [m - half, m + half];
}
