// A sliding-window log for the memory limiter: the timestamps of admitted events in a ring that
// grows on demand up to the limit, so a bucket of limit K holds at most K numbers (8 bytes each).

const INITIAL_CAPACITY = 4;

export class SlidingLog {
  /** Window length this log was last used with; the sweep prunes by it. */
  windowMs: number;
  count: number;
  private times: Float64Array;
  private head: number;

  constructor(windowMs: number) {
    this.windowMs = windowMs;
    this.count = 0;
    this.times = new Float64Array(INITIAL_CAPACITY);
    this.head = 0;
  }

  /** Drops the events at or before `cutoff` (they left the window). */
  prune(cutoff: number): void {
    const times = this.times;
    const size = times.length;
    while (this.count > 0 && (times[this.head] as number) <= cutoff) {
      this.head = this.head + 1 === size ? 0 : this.head + 1;
      this.count--;
    }
  }

  /** Appends an event; the ring grows up to `max` (past it only if the caller pushes more). */
  push(at: number, max: number): void {
    if (this.count === this.times.length) this.grow(max);
    const size = this.times.length;
    const tail = this.head + this.count;
    this.times[tail >= size ? tail - size : tail] = at;
    this.count++;
  }

  /** The oldest event still in the log; only meaningful when `count > 0`. */
  oldest(): number {
    return this.times[this.head] as number;
  }

  /** The newest event; only meaningful when `count > 0`. */
  newest(): number {
    const size = this.times.length;
    const last = this.head + this.count - 1;
    return this.times[last >= size ? last - size : last] as number;
  }

  clear(): void {
    this.count = 0;
    this.head = 0;
  }

  // Doubling keeps a bucket that fills to 10,000/min at 14 copies in its life, and one that
  // sees 3 requests at 4 slots (32 bytes).
  private grow(max: number): void {
    const old = this.times;
    const next = new Float64Array(Math.min(old.length * 2, Math.max(max, old.length + 1)));
    for (let i = 0; i < this.count; i++) {
      const at = this.head + i;
      next[i] = old[at >= old.length ? at - old.length : at] as number;
    }
    this.times = next;
    this.head = 0;
  }
}
