// The TTFT goals' 95% interval: rounds drawn again with replacement, the two sides' turns of a
// round kept together, the gateway's p50 over the proxy's in each draw.
import { describe, expect, it } from 'vitest';
import { addedP50Interval, meanInterval } from '../../bench/round-interval.ts';

/** `rounds` turns of `size` streams, each from `at(round, stream)`. */
function turns(rounds: number, size: number, at: (round: number, i: number) => number): number[][] {
  return Array.from({ length: rounds }, (_, r) => Array.from({ length: size }, (_, i) => at(r, i)));
}

/** A spread of TTFTs that differs by round (a spell of the host) and by stream (its wave). */
const noisy = (r: number, i: number): number => 2 + ((r * 7) % 5) * 0.4 + (i % 8) * 0.25;

describe('addedP50Interval', () => {
  it('is the shift itself when the gateway is the proxy plus a constant in every stream', () => {
    const proxy = turns(16, 64, noisy);
    const gateway = proxy.map((turn) => turn.map((v) => v + 0.5));
    const [low, high] = addedP50Interval(gateway, proxy)!;
    expect(low).toBeCloseTo(0.5, 9);
    expect(high).toBeCloseTo(0.5, 9);
  });

  it('is zero for two sides with the same streams, however the rounds differ', () => {
    const proxy = turns(16, 64, noisy);
    expect(addedP50Interval(proxy, proxy)).toEqual([0, 0]);
  });

  it('holds the run’s own figure and narrows as rounds are added', () => {
    // The gateway's turns are the proxy's plus 0.4 ms, plus a round's own 0 to 1.2 ms.
    const extra = (r: number): number => 0.4 + ((r * 3) % 4) * 0.4;
    const proxy = turns(16, 16, noisy);
    const gateway = turns(16, 16, (r, i) => noisy(r, i) + extra(r));
    const [low, high] = addedP50Interval(gateway, proxy)!;
    expect(low).toBeLessThan(high);
    expect(low).toBeGreaterThanOrEqual(0.4);
    expect(high).toBeLessThanOrEqual(1.6);
    const four = (t: number[][]): number[][] => [...t, ...t, ...t, ...t];
    const [low4, high4] = addedP50Interval(four(gateway), four(proxy))!;
    expect(high4 - low4).toBeLessThan(high - low);
  });

  it('gives the same interval for the same results (a seeded draw)', () => {
    const proxy = turns(12, 40, noisy);
    const gateway = turns(12, 40, (r, i) => noisy((r * 5) % 12, i) + 0.3);
    expect(addedP50Interval(gateway, proxy)).toEqual(addedP50Interval(gateway, proxy));
  });

  it('draws only rounds where both sides have streams, and needs two of them', () => {
    expect(addedP50Interval([[3, 3]], [[2, 2]])).toBeNull();
    expect(addedP50Interval([[3, 3], [], [3]], [[2, 2], [2], []])).toBeNull();
    const interval = addedP50Interval([[3, 3], [], [3.5]], [[2, 2], [2], [2.5]]);
    expect(interval).toEqual([1, 1]);
  });
});

describe('meanInterval', () => {
  it('is none for fewer than two runs', () => {
    expect(meanInterval([])).toBeNull();
    expect(meanInterval([0.4])).toBeNull();
  });

  it('is the mean itself when every run read the same', () => {
    expect(meanInterval([0.3, 0.3, 0.3])).toEqual([0.3, 0.3]);
  });

  it("is the mean ± Student's t times the standard error", () => {
    // Mean 0, sample standard deviation 1, three runs: t(2) = 4.303, half-width 4.303/√3.
    const [low, high] = meanInterval([-1, 0, 1])!;
    expect(low).toBeCloseTo(-4.303 / Math.sqrt(3), 9);
    expect(high).toBeCloseTo(4.303 / Math.sqrt(3), 9);
    // Two runs: t(1) = 12.706 over a standard error of 0.5.
    const two = meanInterval([1, 2])!;
    expect(two[0]).toBeCloseTo(1.5 - 12.706 * 0.5, 9);
    expect(two[1]).toBeCloseTo(1.5 + 12.706 * 0.5, 9);
  });

  it('narrows as runs that agree are added', () => {
    const width = (v: number[]): number => {
      const [low, high] = meanInterval(v)!;
      return high - low;
    };
    expect(width([0, 1, 0, 1, 0, 1])).toBeLessThan(width([0, 1, 0, 1]));
    expect(width([0, 1, 0, 1])).toBeLessThan(width([0, 1]));
  });
});
