// Counts the work a response leaves behind (settlements being written), so close() can wait for
// it. A count, not a set of promises: one more promise and closure a request only to take it out
// of the set again, kept alive as long as the settlement (decision 0021's ~60 ms).

export class PendingWork {
  private count = 0;
  private drained: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  get size(): number {
    return this.count;
  }

  enter(): void {
    this.count++;
  }

  leave(): void {
    this.count--;
    if (this.count === 0 && this.wake !== null) {
      this.wake();
      this.wake = null;
      this.drained = null;
    }
  }

  /** Resolves when nothing is pending (at once when nothing is). */
  idle(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    this.drained ??= new Promise((resolve) => (this.wake = resolve));
    return this.drained;
  }
}
