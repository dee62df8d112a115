// The upstream side of a streamed attempt: one undici dispatch handler that takes the answer's
// head, then moves its body through the StreamRelay to the client as each chunk arrives, with no
// promise and no microtask hop per chunk.
//
// It replaced `pool.request` plus 'data' listeners on the body it returns (decision 0051): that
// path built, for every stream, an async resource, a Readable for the body, a parsed header
// object and a signal listener inside undici, and passed each chunk through the Readable's push
// and 'data' event. In a scratch loop (8 concurrent 100-chunk streams from a local server, the
// client's CPU alone) a stream cost 664-765 µs through `request` and 613-659 through a handler.

import type { ServerResponse } from 'node:http';
import type { Writable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { chunkSocket, writeChunk } from '../http/chunk-frame.ts';
import type { ClientChunk, StreamRelay } from '../protocols/stream-relay.ts';
import type { RequestAbort } from './request-abort.ts';
import { abortError, headerOf } from './upstream-answer.ts';

/** How the upstream body stopped: its normal end, or a failure (cut, aborted, unreadable). */
export type PumpEnd = { ended: true } | { ended: false; error: unknown };

/**
 * One per streamed attempt. `send()` waits for the answer's head; for a success, `first()` waits
 * for the first text the client would see, so the relay can still fail over before committing
 * (DESIGN invariant 7), and `rest()` then writes everything else from undici's own callback,
 * pausing the upstream while the client's socket drains; for an error status, `errorText()` reads
 * the body whole. An abort of the signal drops the call at any point; a failure between the
 * calls is recorded, never thrown at nobody.
 */
export class UpstreamPump implements Dispatcher.DispatchHandler {
  /** Built by send() once the request is on its way (see send). */
  relay!: StreamRelay;
  private readonly makeRelay: () => StreamRelay;
  private readonly signal: RequestAbort;
  /** The answer's status; 0 until its head came. */
  status: number;
  private rawHeaders: Buffer[] | null;
  /** send()'s waiter, until the head or a failure before it. */
  private head: { resolve: () => void; reject: (err: unknown) => void } | null;
  /** An error answer's body (status >= 400) as it comes, and its reader. */
  private errorChunks: Buffer[] | null;
  private errorBody: Promise<string> | null;
  private errorDone: ((text: string) => void) | null;
  /** Client text produced before rest(): from the upstream's chunks, then any closing text. */
  private pending: string;
  /** Null while the body is open. */
  private outcome: PumpEnd | null;
  /** Set by rest(): where each chunk's text is written. */
  private raw: ServerResponse | null;
  /** The waiting first() or rest(), told of new pending text or of the outcome. */
  private wake: (() => void) | null;
  /** Reading is paused: before the commit, or until `drainSource` drains. */
  private paused: boolean;
  /**
   * Set while the body is paused until the client drains: what `resume` waits on, the response or
   * its socket when written directly. Null otherwise.
   */
  private drainSource: Writable | null;
  /** undici still has the call: neither onComplete nor onError has come. */
  private open: boolean;
  /** undici's: drop the call (from onConnect), read on after a pause (from onHeaders). */
  private abortCall: ((err: Error) => void) | null;
  private resumeCall: (() => void) | null;
  private readonly resume: () => void;
  private readonly onAbort: () => void;

  constructor(makeRelay: () => StreamRelay, signal: RequestAbort) {
    this.makeRelay = makeRelay;
    this.signal = signal;
    this.status = 0;
    this.rawHeaders = null;
    this.head = null;
    this.errorChunks = null;
    this.errorBody = null;
    this.errorDone = null;
    this.pending = '';
    this.outcome = null;
    this.raw = null;
    this.wake = null;
    this.paused = false;
    this.drainSource = null;
    this.open = true;
    this.abortCall = null;
    this.resumeCall = null;
    this.resume = () => {
      this.drainSource = null;
      if (this.outcome === null) this.readOn();
    };
    this.onAbort = () => {
      const err = abortError(this.signal);
      this.cancel(err);
      this.onError(err);
    };
  }

  /**
   * Sends the request through `dispatcher`, then builds the relay. Resolves when the answer's head
   * came (`status` is set); rejects when none came (connect error, headers timeout, abort).
   *
   * undici writes a request whose body is a string to the upstream's socket inside `dispatch`,
   * and the relay is first used when the answer's body comes: built after the dispatch, its
   * ~20 µs (cold, on a paced gateway) are spent while the upstream works on the request instead
   * of before the request leaves (session 60).
   */
  send(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions): Promise<void> {
    const head = new Promise<void>((resolve, reject) => {
      this.head = { resolve, reject };
      if (this.signal.aborted) {
        this.onError(abortError(this.signal));
        return;
      }
      this.signal.listen(this.onAbort);
      dispatcher.dispatch(options, this);
    });
    this.relay = this.makeRelay();
    return head;
  }

  /** One response header's first value (lower-case name); null before the head or without it. */
  header(name: string): string | null {
    return this.rawHeaders === null ? null : headerOf(this.rawHeaders, name);
  }

  /** An error answer's body as text once it has all come; '' when it was cut. */
  errorText(): Promise<string> {
    return this.errorBody ?? Promise.resolve('');
  }

  /**
   * The first non-empty client text: the upstream's, or the relay's closing text alone if the body
   * ended first ('' when there is none). Rejects when the body fails before either.
   */
  first(): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const check = (): void => {
        if (this.pending !== '') {
          this.wake = null;
          resolve(this.take());
        } else if (this.outcome !== null) {
          this.wake = null;
          if (!this.outcome.ended) reject(this.outcome.error);
          else resolve('');
        }
      };
      this.wake = check;
      check();
    });
  }

  /**
   * Writes the rest of the stream to `raw` as it arrives and resolves with how the body stopped
   * (never rejects). An abort of the signal stops it at once.
   */
  rest(raw: ServerResponse): Promise<PumpEnd> {
    this.raw = raw;
    // What arrived before the commit goes out first, through the same path as every chunk.
    if (this.pending !== '') this.deliver(this.take());
    return new Promise<PumpEnd>((resolve) => {
      const onClientClose = (): void => {
        if (!raw.writableFinished)
          this.stop({ ended: false, error: new Error('the client went away') });
      };
      const check = (): void => {
        if (this.outcome === null) return;
        this.wake = null;
        raw.off('close', onClientClose);
        resolve(this.outcome);
      };
      this.wake = check;
      raw.on('close', onClientClose);
      if (this.outcome === null) {
        // The caller's first write (or the pending one) may already have filled the socket.
        if (raw.writableNeedDrain) this.awaitDrain(raw);
        else if (this.drainSource === null) this.readOn();
      }
      check();
    });
  }

  /**
   * Drops the upstream call unless undici has finished it (a stream not read to its end). The
   * error is made only when there is a call to drop: a default `new Error()` was made, stack and
   * all, at every stream's end for nothing (4.0 µs a call against 0.02 in a loop; 1.4-1.5% of the
   * gateway's main thread in a profile of the bench's stream sections, session 45).
   */
  cancel(err?: Error): void {
    if (this.open && this.abortCall !== null)
      this.abortCall(err ?? new Error('the upstream call was dropped'));
  }

  // undici's handler interface (Dispatcher.DispatchHandler, the form its client calls directly).

  onConnect(abort: (err?: Error) => void): void {
    // Aborted while the call waited for a connection: send() has rejected already; nothing goes.
    if (this.signal.aborted) abort(abortError(this.signal));
    else this.abortCall = abort;
  }

  onHeaders(status: number, rawHeaders: Buffer[], resume: () => void): boolean {
    // 1xx heads (100 Continue) come before the answer's own.
    if (status < 200) return true;
    this.status = status;
    this.rawHeaders = rawHeaders;
    this.resumeCall = resume;
    if (status >= 400) {
      this.errorChunks = [];
      this.errorBody = new Promise<string>((resolve) => (this.errorDone = resolve));
    }
    const head = this.head;
    this.head = null;
    head?.resolve();
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.errorChunks !== null) this.errorChunks.push(chunk);
    else this.data(chunk);
    // Once stopped (the client gone, the relay failed) nothing more is read: cancel() or the
    // signal drops the call.
    return !this.paused && this.outcome === null;
  }

  onComplete(): void {
    this.open = false;
    const c = this.errorChunks;
    if (c !== null) {
      const text = c.length === 1 ? c[0]!.toString('utf8') : Buffer.concat(c).toString('utf8');
      this.endError(text, { ended: true });
    } else this.stop({ ended: true });
  }

  onError(err: Error): void {
    this.open = false;
    const head = this.head;
    if (head !== null) {
      this.head = null;
      this.outcome = { ended: false, error: err };
      this.signal.unlisten(this.onAbort);
      head.reject(err);
      return;
    }
    if (this.errorChunks !== null) this.endError('', { ended: false, error: err });
    else this.stop({ ended: false, error: err });
  }

  /** An error answer's end: its text to errorText(); the relay never saw it. */
  private endError(text: string, outcome: PumpEnd): void {
    const done = this.errorDone!;
    this.errorChunks = null;
    this.errorDone = null;
    this.outcome = outcome;
    this.signal.unlisten(this.onAbort);
    done(text);
  }

  private data(chunk: Buffer): void {
    if (this.outcome !== null) return;
    let out: ClientChunk;
    try {
      out = this.relay.push(chunk);
    } catch (error) {
      this.stop({ ended: false, error });
      this.cancel(error instanceof Error ? error : new Error(String(error)));
      return;
    }
    if (out.length !== 0) this.deliver(out);
  }

  private deliver(out: ClientChunk): void {
    if (this.raw !== null) {
      this.write(out);
      return;
    }
    // Before rest(): hold the text and stop reading until the caller commits to this stream. A
    // chunk passed on unchanged holds whole events, so whole characters: it decodes alone.
    this.pending += typeof out === 'string' ? out : out.toString('utf8');
    this.paused = true;
    this.wake?.();
  }

  private write(out: ClientChunk): void {
    const raw = this.raw!;
    if (raw.destroyed) return;
    // An upstream chunk passed on unchanged (nearly every chunk of a stream) goes to the socket as
    // one framed write (chunk-frame.ts, decision 0041); text goes through the response.
    if (typeof out !== 'string') {
      const socket = chunkSocket(raw);
      if (socket !== null) {
        if (!writeChunk(socket, out)) this.awaitDrain(socket);
        return;
      }
    }
    if (!raw.write(out)) this.awaitDrain(raw);
  }

  /** Pauses the upstream until `from` (the response, or its socket when written directly) drains. */
  private awaitDrain(from: Writable): void {
    if (this.drainSource !== null) return;
    this.paused = true;
    this.drainSource = from;
    from.once('drain', this.resume);
  }

  /** Reads on after a pause; undici may deliver what it holds before this returns. */
  private readOn(): void {
    if (!this.paused) return;
    this.paused = false;
    this.resumeCall?.();
  }

  private stop(outcome: PumpEnd): void {
    if (this.outcome !== null) return;
    let end = outcome;
    if (end.ended) {
      // The relay's closing text (e.g. a [DONE] the upstream omitted) goes out before the end.
      try {
        const text = this.relay.end();
        if (text !== '') this.deliver(text);
      } catch (error) {
        end = { ended: false, error };
      }
    }
    this.outcome = end;
    this.signal.unlisten(this.onAbort);
    // A keep-alive socket outlives the stream: its 'drain' must not call back into this pump.
    this.drainSource?.off('drain', this.resume);
    this.drainSource = null;
    this.wake?.();
  }

  private take(): string {
    const text = this.pending;
    this.pending = '';
    return text;
  }
}
