// The sides' turn order: every side follows every other side equally often over a cycle of rounds
// (decision 0056). Before, the rotating order let one gateway follow the other in three rounds of
// four, and its turns met the other's tail.
import { describe, expect, it } from 'vitest';
import { balancedRounds } from '../../bench/turn-order.ts';

describe('balancedRounds', () => {
  for (let n = 1; n <= 6; n++) {
    it(`gives every side one turn a round and every ordered pair of ${n} sides once as neighbours`, () => {
      const rounds = balancedRounds(n);
      for (const round of rounds)
        expect([...round].sort((a, b) => a - b)).toEqual([...Array(n).keys()]);
      const turns = rounds.flat();
      const pairs = new Map<string, number>();
      // Read end to end and around: the cycle repeats, so its last turn precedes its first.
      for (let i = 0; i < turns.length && n > 1; i++) {
        const key = `${turns[i]}>${turns[(i + 1) % turns.length]}`;
        pairs.set(key, (pairs.get(key) ?? 0) + 1);
      }
      const expected = new Map<string, number>();
      for (let a = 0; a < n; a++)
        for (let b = 0; b < n; b++) if (a !== b) expected.set(`${a}>${b}`, 1);
      expect(pairs).toEqual(expected);
    });
  }

  it('refuses a count of sides that is not a positive integer', () => {
    expect(() => balancedRounds(0)).toThrow(RangeError);
    expect(() => balancedRounds(2.5)).toThrow(RangeError);
  });
});
