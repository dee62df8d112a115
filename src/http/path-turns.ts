// New model paths hold the event loop for ~1 ms a turn at most (the last may run past it). Node
// hands every request that one poll found to its handler back to back, and each gateway path runs
// to its upstream call before the next starts: eight streams that arrive together on a slow host
// keep the loop busy for 2-4 ms, longer than the upstream's round trip, and the heads of the first
// ones wait behind the later ones' paths (docs/performance.md, session 48, finding 3). Here the
// paths of a poll start at once while the first of them started less than the budget ago; the
// rest wait in arrival order and start in later turns, up to a budget of them a turn, each turn
// after a poll, so an upstream head that came meanwhile is written out first (decision 0060). A
// budget and not one path a turn: a wave that fits in the round trip waits for nothing, and one
// path a turn made it later on a fast host. A request alone (the paced case) costs one
// performance.now() and one read of the loop's turn count (native/loop-turns.c, decision 0068);
// without the addon, one setImmediate that marks the turn's end. A waiting path keeps its
// arrival's async context (AsyncResource.bind), as a request listener would.
import { AsyncResource } from 'node:async_hooks';
import { loadAddonFunction } from '../native/load-addon.ts';

/** How long new paths may hold the loop in one turn before a poll must come between. */
export const TURN_BUDGET_MS = 1;

export type LoopTurnCount = { turns: Uint32Array; reason: null } | { turns: null; reason: string };

let loopTurns: LoopTurnCount | undefined;

/**
 * This thread's loop turn count: element 0 goes up by one before each poll of the event loop
 * (libuv's prepare phase). Started once, on first use; where the addon is missing, why.
 */
export function loopTurnCount(): LoopTurnCount {
  if (loopTurns === undefined) {
    const load = loadAddonFunction<() => Uint32Array>('loop-turns', 'loopTurns');
    loopTurns =
      load.fn === null ? { turns: null, reason: load.reason } : { turns: load.fn(), reason: null };
  }
  return loopTurns;
}

/** Runs paths at once while this turn's budget lasts, else in later turns, in order. */
export class PathTurns {
  /** Waiting paths from `next` on; the started ones before it are cleared, then cut off. */
  private readonly waiting: ((() => void) | undefined)[] = [];
  private next = 0;
  /** The loop's turn count, or null: then `ranInPoll` is cleared from a setImmediate. */
  private readonly loop: Uint32Array | null;
  /** The loop turn in which the last turn's first path started (with `loop`). */
  private startedIn = -1;
  /** A path started a turn since the last check phase (without `loop`). */
  private ranInPoll = false;
  /** When the first path of this turn started (on `now`). */
  private turnStart = 0;
  private turnScheduled = false;
  private readonly onTurn = (): void => this.turn();
  private readonly budgetMs: number;
  /** The clock the budget is read on; a test gives its own, so no preemption moves its turns. */
  private readonly now: () => number;

  constructor(
    budgetMs = TURN_BUDGET_MS,
    now: () => number = () => performance.now(),
    loop: Uint32Array | null = loopTurnCount().turns,
  ) {
    this.budgetMs = budgetMs;
    this.now = now;
    this.loop = loop;
  }

  /** Starts `path` now or in a later turn; paths start in the order they were given. */
  run(path: () => void): void {
    if (this.pending === 0) {
      const now = this.now();
      if (!this.startedThisTurn()) {
        this.turnStart = now;
        if (this.loop !== null) this.startedIn = this.loop[0]!;
        else {
          this.ranInPoll = true;
          this.schedule();
        }
        path();
        return;
      }
      if (now - this.turnStart < this.budgetMs) {
        path();
        return;
      }
    }
    this.waiting.push(AsyncResource.bind(path));
    this.schedule();
  }

  /** Paths given but not yet started. */
  get pending(): number {
    return this.waiting.length - this.next;
  }

  private schedule(): void {
    if (this.turnScheduled) return;
    this.turnScheduled = true;
    setImmediate(this.onTurn);
  }

  /** A path started a turn in this turn of the loop (from its poll to the next one's prepare). */
  private startedThisTurn(): boolean {
    return this.loop !== null ? this.startedIn === this.loop[0] : this.ranInPoll;
  }

  private turn(): void {
    this.turnScheduled = false;
    if (this.startedThisTurn()) {
      // The check phase right after the poll that ran a path: one more turn lets the next poll in.
      this.ranInPoll = false;
      if (this.pending > 0) this.schedule();
      return;
    }
    const start = this.now();
    do {
      const path = this.take();
      if (path === undefined) return;
      path();
    } while (this.now() - start < this.budgetMs);
    if (this.pending > 0) this.schedule();
  }

  private take(): (() => void) | undefined {
    if (this.pending === 0) return undefined;
    const path = this.waiting[this.next];
    this.waiting[this.next++] = undefined;
    if (this.pending === 0) {
      this.waiting.length = 0;
      this.next = 0;
    } else if (this.next >= 1024) {
      // A queue that never empties (a loop saturated for minutes) must not keep its past.
      this.waiting.splice(0, this.next);
      this.next = 0;
    }
    return path;
  }
}
