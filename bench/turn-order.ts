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
  const turns: number[] = [];
  const used = new Set<number>();
  const pair = (a: number, b: number): number => a * n + b;
  // Depth-first: extend the sequence a turn at a time with a side not yet in this round whose pair
  // with the turn before is unused. The first turn is side 0, so the closing pair (last, 0) must
  // be free at the end. Small n only (the bench has at most 5 sides): it finishes at once.
  const extend = (): boolean => {
    if (turns.length === count * n) {
      const closing = pair(turns[turns.length - 1]!, turns[0]!);
      return !used.has(closing);
    }
    const roundStart = turns.length - (turns.length % n);
    const inRound = turns.slice(roundStart);
    const prev = turns.length === 0 ? null : turns[turns.length - 1]!;
    for (let side = 0; side < (prev === null ? 1 : n); side++) {
      if (inRound.includes(side) || side === prev) continue;
      const p = prev === null ? null : pair(prev, side);
      if (p !== null) {
        if (used.has(p)) continue;
        used.add(p);
      }
      turns.push(side);
      if (extend()) return true;
      turns.pop();
      if (p !== null) used.delete(p);
    }
    return false;
  };
  if (!extend()) throw new Error(`balancedRounds: no order found for ${n} sides`);
  const rounds: number[][] = [];
  for (let i = 0; i < count; i++) rounds.push(turns.slice(i * n, (i + 1) * n));
  return rounds;
}
