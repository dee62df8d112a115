// The order the sides take their turns in: rounds in which every side has one turn, chosen so that
// over a cycle of rounds every side follows every other side equally often.
//
// A turn inherits the tail of the one before it (write-behind settlements, a limiter's returns,
// the sweep of a gateway that was just busy), even after the 400 ms gap between turns. The order
// rotated before (round r started at side r), which keeps the sides' cyclic order: the second
// gateway followed the first in three rounds of four, and bench:ab's 'this' followed 'base' in
// three of four (decision 0056).

/**
 * Rounds for `n` sides, as lists of side indexes: n - 1 rounds (one for a single side), each a
 * permutation of 0..n-1, whose turns read end to end, the last round's last side followed by the
 * first round's first, hold every ordered pair of distinct sides exactly once as neighbours. The
 * caller repeats them: round k takes `rounds[k % rounds.length]`.
 */
export function balancedRounds(n: number): number[][] {
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`balancedRounds: ${n} sides`);
  if (n === 1) return [[0]];
  const count = n - 1;
  const used = new Set<number>();
  const pair = (a: number, b: number): number => a * n + b;
  // Depth-first from side 0: extend the sequence a turn at a time with a side not yet in this
  // round whose pair with the turn before is unused; at the end the closing pair (last, 0) must
  // be free. Small n only (the bench has at most 5 sides): it finishes at once.
  const turns: number[] = [0];
  const extend = (): boolean => {
    const prev = turns[turns.length - 1]!;
    if (turns.length === count * n) return !used.has(pair(prev, 0));
    const inRound = turns.slice(turns.length - (turns.length % n));
    for (let side = 0; side < n; side++) {
      const p = pair(prev, side);
      if (side === prev || inRound.includes(side) || used.has(p)) continue;
      used.add(p);
      turns.push(side);
      if (extend()) return true;
      turns.pop();
      used.delete(p);
    }
    return false;
  };
  if (!extend()) throw new Error(`balancedRounds: no order found for ${n} sides`);
  const rounds: number[][] = [];
  for (let i = 0; i < count; i++) rounds.push(turns.slice(i * n, (i + 1) * n));
  return rounds;
}
