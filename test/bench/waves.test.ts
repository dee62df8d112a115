// A closed loop's turns split into each turn's first wave (the burst after a side's idle spell)
// and the rest, so the report can say which part a back-to-back TTFT gap is in.
import { describe, expect, it } from 'vitest';
import { splitWaves } from '../../bench/load.ts';

describe('splitWaves', () => {
  it("takes each turn's first `concurrency` streams as its first wave and the rest as later", () => {
    const turns = [
      [5, 6, 7, 1, 2],
      [8, 9, 3],
    ];
    expect(splitWaves(turns, 2)).toEqual({ first: [5, 6, 8, 9], later: [7, 1, 2, 3] });
  });

  it('leaves nothing later for a turn no longer than its first wave', () => {
    expect(splitWaves([[4, 5], [6]], 3)).toEqual({ first: [4, 5, 6], later: [] });
    expect(splitWaves([], 8)).toEqual({ first: [], later: [] });
  });
});
