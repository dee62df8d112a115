// A model request's abort: set when its client goes away or its stream runs past the channel's
// total time, and the one upstream call in flight told at once. It stands where an
// AbortController and its signal stood (decision 0067). node's EventTarget made that pair the
// dearest single item on a paced stream's path to its upstream: a controller and one listener
// 68 µs cold, 6.6 warm (scratch, session 58); without them the path went 779 -> 737 µs (bench:ab
// --stages, paced median). A request makes one upstream call at a time (attempts follow each
// other), so one listener slot is all it needs.

export class RequestAbort {
  /** Set once, by the first abort(). */
  aborted = false;
  /** Why: the error the call in flight fails with; null until aborted. */
  reason: Error | null = null;
  private listener: (() => void) | null = null;

  /** Aborts once: the listening call, if any, is told now; later calls see `aborted`. */
  abort(reason: Error = new Error('the call was aborted')): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listener = this.listener;
    this.listener = null;
    listener?.();
  }

  /** `onAbort` runs when the abort comes, unless unlisten() came first; it replaces any other. */
  listen(onAbort: () => void): void {
    this.listener = onAbort;
  }

  unlisten(onAbort: () => void): void {
    if (this.listener === onAbort) this.listener = null;
  }
}
