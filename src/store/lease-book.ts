// The lease book (docs/decisions/0013-balance-leases.md): reserve, settle and release in memory
// against a slice of each account's balance that this holder leased from the database, and write
// the outcomes behind in group commits. Admission costs no round trip while the lease covers it;
// a lease grows in one statement when it does not. Before: two awaited transactions per request
// held the gateway at ~600 req/s on the embedded store (docs/performance.md).

import { INT8_MAX, type Nano } from '../billing/money.ts';
import type { Driver } from './driver.ts';
import { randomBase62 } from './ids.ts';
import type { Batch, BatchResult, OpenRecord, SettleRecord } from './leases.ts';
import { COPY_MIN_ROWS, growLease, readRoom, type Room, writeBatch } from './leases.ts';
import { PriceSnapshotCatalog } from './price-snapshots.ts';
import { storableText } from './storable-text.ts';
import type { ReserveInput, ReserveResult, SettleOutcome, SettleResult } from './store.ts';
import { StoreError } from './store.ts';

export interface LeaseBookOptions {
  /**
   * An open request is written down (so recovery can resolve it if this process dies) once it
   * has been open this long. Requests that end sooner never cost a row of their own.
   */
  writeOpenAfterMs?: number;
  /**
   * A lease with nothing open or unwritten gives its slack back after this long unused (2 s), so
   * another instance on the same accounts can have it. Null: never on idle, only at close, before
   * a negative adjustment and on a disable: for the embedded store, whose data directory one
   * process holds, there is no other instance, and the first request after every idle spell
   * waited for a grow (decision 0043).
   */
  idleReturnMs?: number | null;
  /**
   * With an idle return: an idle lease keeps its slack up to this long after its last use while
   * the database says its account has room for other holders: active, a balance nobody holds of
   * at least ROOM_FACTOR times the slack, no grow or negative adjustment refused for want of
   * money within this long, and this holder's lease still there. One statement at each idle look
   * (a quarter of idleReturnMs) asks for every lease idle past idleReturnMs; a lease without room
   * gives its slack back at once. Null (the default): slack goes back at
   * idleReturnMs. The Postgres gateway keeps it 60 s (decision 0044).
   */
  idleKeepMs?: number | null;
  /** A lease grows to cover this many reservations of the size that made it grow. */
  growFactor?: bigint;
  /**
   * Writes start at least this far apart (a write due sooner waits), so a steady stream of
   * answers is written in a few larger batches instead of one small batch per loop turn; and a
   * write that is not full starts no sooner than this after its first outcome came, so the
   * first write after a quiet spell takes the burst's first outcomes together (decision 0048).
   */
  minWriteGapMs?: number;
  /**
   * A write of fewer than `fullWrite` outcomes (settlements and releases) waits for more, up to
   * this long after the last write started; a write of `fullWrite` starts at minWriteGapMs.
   */
  maxWriteGapMs?: number;
  /**
   * Outcomes that make a write full: it starts minWriteGapMs after the last (decision 0040:
   * 1,024, so a busy gateway's writes carry hundreds of rows, not the ~150 of a 50 ms gap).
   */
  fullWrite?: number;
  /**
   * A write of at least this many settlements puts them in by COPY (decisions 0038 and 0045); a
   * smaller one goes through the batch function. Default COPY_MIN_ROWS.
   */
  copyMinRows?: number;
}

interface Open extends OpenRecord {
  admittedAt: number;
  /** Its open record is written. */
  persisted: boolean;
  /** Its open record is in a write now (which may still fail). */
  writing: boolean;
}

/** This holder's slice of one account. free = granted - held - pending. */
interface Lease {
  /** What the database holds for this holder (as of the last write). */
  granted: Nano;
  /** Sum of open reservations admitted from the lease. */
  held: Nano;
  /** Charges settled here and not yet written. */
  pending: Nano;
  lastUsed: number;
  /** The grow running: for an admission, or ahead of one ('ahead', which answers nobody). */
  growing: Promise<ReserveResult | 'not_found' | 'ahead'> | null;
  /**
   * An admission that leaves less free than this grows the lease ahead, in the background
   * (decision 0074): a quarter of the lease its last grow left; 0: none until a grow gets more.
   */
  aheadBelow: Nano;
  /**
   * The database confirmed the account (exists, active) and this holder's lease row. Until then
   * every admission asks it, a zero reservation included.
   */
  known: boolean;
  /** When the last room look started (performance.now()); -Infinity: never. */
  roomAskedAt: number;
  /** What that look found: the slack may stay through the idle spell (idleKeepMs). */
  roomy: boolean;
}

interface QueuedSettle {
  record: SettleRecord;
  resolve: (r: SettleResult) => void;
  reject: (err: Error) => void;
}

interface QueuedRelease {
  requestId: string;
  resolve: (r: 'released') => void;
  reject: (err: Error) => void;
}

function checkCount(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new StoreError('invalid_argument', `${name} must be a non-negative integer`);
  }
}

/**
 * A write of fewer outcomes waits for more, up to maxWriteGapMs after the last (decisions 0026,
 * 0040). A write costs PGlite ~4-5 ms of its thread whatever its size (BEGIN, COPY, the settle
 * function, COMMIT) on a host where a row costs ~25 µs: with 32 here, writes 50 ms apart carried
 * ~150 rows at ~2,800 req/s and the thread spent 72-76 µs a request; at 1,024, 37-39 (c=32 closed
 * loop, scratch, two runs each), and the gateway's throughput went from 0.73-0.75x the bare
 * proxy's to 0.83-0.85x. The crash window keeps its bound in time, maxWriteGapMs.
 */
const FULL_WRITE = 1024;

/** Backoff of a failed write: 50 ms doubling to 2 s; settlements wait in memory meanwhile. */
const retryDelay = (failures: number): number =>
  Math.min(2000, 50 * 2 ** Math.max(0, failures - 1));

/**
 * A timer's delay in whole milliseconds, rounded up. Node keeps one timer list per distinct delay
 * and a fractional one (a due time less now) made a new list each time: an allocation, a
 * priority-queue insert and a libuv timer start, on the path of the request or the stream's end
 * that armed it. Up, so a wait is never shorter than asked.
 */
const wholeMs = (ms: number): number => (ms > 0 ? Math.ceil(ms) : 0);

/**
 * An idle lease stays only while the balance nobody holds is at least this many times its slack
 * (decision 0044): another holder's grow then finds what it needs without it, and the account is
 * far from the point where the slack decides whether a request is admitted.
 */
const ROOM_FACTOR = 4n;

/** A lease grows ahead once less than this share of what its last grow left is free (0074). */
const AHEAD_SHARE = 4n;

/** What a lease can still admit, or give back: granted - held - pending. */
const freeOf = (l: Lease): Nano => l.granted - l.held - l.pending;

export class LeaseBook {
  readonly holderId: string;
  private readonly driver: Driver;
  /** Which price snapshots this book has written (migration 0005). */
  private readonly snapshots = new PriceSnapshotCatalog();
  private readonly instanceId: string;
  private readonly writeOpenAfterMs: number;
  private readonly idleReturnMs: number | null;
  private readonly idleKeepMs: number | null;
  /**
   * When the room look in flight started (performance.now()); null: none is. The next idle look
   * does not start another.
   */
  private roomAskSince: number | null = null;
  private readonly growFactor: bigint;
  private readonly minWriteGapMs: number;
  private readonly maxWriteGapMs: number;
  private readonly fullWrite: number;
  private readonly copyMinRows: number;
  /** When the last write started (performance.now()). */
  private lastWriteAt = -Infinity;
  private readonly opens = new Map<string, Open>();
  private readonly leases = new Map<string, Lease>();
  private settles: QueuedSettle[] = [];
  private releases: QueuedRelease[] = [];
  /** Accounts whose lease slack must go back at the next write (a negative adjustment waits). */
  private readonly shrinkNow = new Set<string>();
  /** Accounts disabled through this store: admission asks the database until it says active. */
  private readonly disabled = new Set<string>();
  /** Every write runs on this chain, one at a time: what arrives meanwhile joins the next. */
  private chain: Promise<void> = Promise.resolve();
  private queued = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  /**
   * Open requests in admission order, for the timer that writes them down: entries settled,
   * released or written meanwhile are skipped when they reach the head.
   */
  private dueOpens: Open[] = [];
  private dueHead = 0;
  /** Armed for when the oldest unwritten open request is due; null when none is waiting. */
  private openTimer: NodeJS.Timeout | null = null;
  /** The due time reserve() left for armDeferred to arm the open timer at; else null. */
  private openArmAt: number | null = null;
  /** Looks for idle leases while any lease is held. */
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(driver: Driver, instanceId: string, options: LeaseBookOptions = {}) {
    this.driver = driver;
    this.instanceId = instanceId;
    this.holderId = `${instanceId}/${randomBase62(6)}`;
    this.writeOpenAfterMs = options.writeOpenAfterMs ?? 20;
    this.idleReturnMs = options.idleReturnMs === undefined ? 2000 : options.idleReturnMs;
    this.idleKeepMs = this.idleReturnMs === null ? null : (options.idleKeepMs ?? null);
    this.growFactor = options.growFactor ?? 16n;
    this.minWriteGapMs = options.minWriteGapMs ?? 50;
    this.maxWriteGapMs = Math.max(this.minWriteGapMs, options.maxWriteGapMs ?? 200);
    this.fullWrite = options.fullWrite ?? FULL_WRITE;
    this.copyMinRows = options.copyMinRows ?? COPY_MIN_ROWS;
  }

  private lease(accountId: string): Lease {
    let l = this.leases.get(accountId);
    if (l === undefined) {
      l = {
        granted: 0n,
        held: 0n,
        pending: 0n,
        lastUsed: 0,
        growing: null,
        aheadBelow: 0n,
        known: false,
        roomAskedAt: -Infinity,
        roomy: false,
      };
      this.leases.set(accountId, l);
    }
    return l;
  }

  async reserve(input: ReserveInput): Promise<ReserveResult> {
    if (this.closed) throw new StoreError('invalid_argument', 'the store is closed');
    if (input.amountNano < 0n) {
      throw new StoreError('invalid_argument', 'a reservation cannot be negative');
    }
    if (this.opens.has(input.requestId)) {
      throw new StoreError('invalid_argument', `request ${input.requestId} is already reserved`);
    }
    let lease = this.lease(input.accountId);
    for (;;) {
      // Looked up again after every wait: a write may have dropped an empty entry meanwhile.
      lease = this.lease(input.accountId);
      const free = freeOf(lease);
      if (input.amountNano <= free && lease.known && !this.disabled.has(input.accountId)) break;
      // Concurrent admissions short of money wait on one grow.
      lease.growing ??= this.startGrow(input.accountId, lease, input.amountNano - free);
      const r = await lease.growing;
      // A grow ahead confirms nothing (the account may have been disabled meanwhile): look again.
      if (r === 'ahead') continue;
      if (r === 'not_found') {
        throw new StoreError('not_found', `account ${input.accountId} not found`);
      }
      if (r !== 'ok') return r;
      this.disabled.delete(input.accountId);
    }
    lease.held += input.amountNano;
    lease.lastUsed = performance.now();
    if (freeOf(lease) < lease.aheadBelow && lease.growing === null) {
      this.growAhead(input.accountId, lease);
    }
    const open: Open = {
      requestId: input.requestId,
      clientRequestId: input.clientRequestId,
      accountId: input.accountId,
      keyId: input.keyId,
      model: input.model,
      endpoint: input.endpoint,
      amountNano: input.amountNano,
      admittedAt: lease.lastUsed,
      persisted: false,
      writing: false,
    };
    this.opens.set(input.requestId, open);
    this.dueOpens.push(open);
    if (this.openTimer === null && this.openArmAt === null) {
      // Armed once the path has gone on to its upstream call (ticks run after the request's
      // microtasks): armed here, cold, a timer was ~30 µs of a paced stream's path. Deferred,
      // the path's `reserved` step went 63 -> 46 µs (bench:ab --stages, session 58).
      this.openArmAt = open.admittedAt + this.writeOpenAfterMs;
      process.nextTick(this.armDeferred);
    }
    this.startIdleCheck();
    return 'ok';
  }

  /**
   * On the write chain: a grow never overlaps a write, so the amount it reads back and the
   * charges the book has not written yet are never counted twice or not at all.
   */
  private startGrow(
    accountId: string,
    lease: Lease,
    missing: Nano,
  ): Promise<ReserveResult | 'not_found'> {
    const growing = this.onChain(() => this.grow(accountId, missing));
    const done = (): void => {
      lease.growing = null;
    };
    growing.then(done, done);
    return growing;
  }

  /**
   * Grows the lease before an admission needs it (decision 0074): a request short of money waits
   * for a grow, and the grow waits on the chain for the write in flight (a commit of 13 ms at the
   * median on a host with a slow disk, 142 at worst): every admission meanwhile waited with it,
   * one spell every ~2 s at 500 req/s. Started while a quarter of the lease is left, it is done
   * before the rest runs out. Its outcome is nobody's answer: a request that finds the lease
   * still short grows it itself and meets the refusal or the error there.
   */
  private growAhead(accountId: string, lease: Lease): void {
    if (this.shrinkNow.has(accountId)) return; // its slack is going back (a negative adjustment)
    lease.aheadBelow = 0n; // one at a time: the grow sets the next mark
    lease.growing = this.startGrow(accountId, lease, 0n).then(
      (): 'ahead' => 'ahead',
      (): 'ahead' => 'ahead',
    );
  }

  /**
   * One round trip: the lease grows by at least what is missing, and by up to growFactor times
   * the request plus what is already held, so a busy account grows rarely (bounded by half of
   * what is available when that is still enough, to leave the rest to other instances).
   */
  private async grow(accountId: string, missing: Nano): Promise<ReserveResult | 'not_found'> {
    const lease = this.lease(accountId);
    const need = missing > 0n ? missing : 0n;
    // No balance (int8) holds more: refused here, not by the database's overflow error, which
    // the relay had to answer as 503 "store unavailable" (max_tokens: 1e14, session 21).
    if (need > INT8_MAX) return 'insufficient';
    const wanted = need + this.growFactor * (need + lease.held + lease.pending);
    const desired = wanted > INT8_MAX ? INT8_MAX : wanted;
    // On the chain, so no write moves it before the grow's answer is in.
    const before = lease.granted;
    const r = await growLease(
      this.driver,
      this.holderId,
      this.instanceId,
      accountId,
      need,
      desired,
    );
    if (r.result !== 'ok') return r.result;
    // The database's amount is the truth: the grow ran between writes, so the charges the book
    // has not written are in neither the amount nor `granted`.
    const now = this.lease(accountId);
    now.granted = r.leaseNano;
    now.known = true;
    // A grow that got nothing more (the balance is all held) sets no mark: the next grow is one a
    // request asks for, and a refusal is its answer.
    now.aheadBelow = r.leaseNano > before ? r.leaseNano / AHEAD_SHARE : 0n;
    return 'ok';
  }

  settle(requestId: string, outcome: SettleOutcome): Promise<SettleResult> {
    checkCount('inputTokens', outcome.inputTokens);
    checkCount('cacheHitTokens', outcome.cacheHitTokens);
    checkCount('outputTokens', outcome.outputTokens);
    checkCount('reasoningTokens', outcome.reasoningTokens);
    if (outcome.costNano < 0n)
      throw new StoreError('invalid_argument', 'a cost cannot be negative');
    const open = this.opens.get(requestId);
    if (open === undefined) return Promise.resolve({ result: 'duplicate' });
    this.opens.delete(requestId);
    // A failed request reached no usable answer: it is never charged.
    const metered = outcome.status === 'failed' ? 0n : outcome.costNano;
    const cost = metered < open.amountNano ? metered : open.amountNano;
    const lease = this.lease(open.accountId);
    lease.held -= open.amountNano;
    lease.pending += cost;
    lease.lastUsed = performance.now();
    // Field by field, not two spreads and a rest: one request's record was 1.6 KB of allocation
    // that way (sampling heap profile, session 7), the largest of the store's own.
    const record: SettleRecord = {
      requestId: open.requestId,
      clientRequestId: open.clientRequestId,
      accountId: open.accountId,
      keyId: open.keyId,
      model: open.model,
      endpoint: open.endpoint,
      amountNano: open.amountNano,
      persisted: open.persisted,
      // A write of its open record in flight commits before this settlement's write (one write
      // at a time), so the settlement takes back any row, and counts as recovered only when a
      // row it knew was written is gone.
      mayHaveRecord: open.persisted || open.writing,
      billedModel: outcome.model ?? open.model,
      channelId: outcome.channelId,
      inputTokens: outcome.inputTokens,
      cacheHitTokens: outcome.cacheHitTokens,
      outputTokens: outcome.outputTokens,
      reasoningTokens: outcome.reasoningTokens,
      estimated: outcome.estimated,
      priceSnapshot: outcome.priceSnapshot,
      peakApplied: outcome.peakApplied,
      campaignId: outcome.campaignId,
      costNano: cost,
      capped: metered > open.amountNano,
      status: outcome.status,
      httpStatus: outcome.httpStatus,
      latencyMs: outcome.latencyMs,
      upstreamRequestId: storableText(outcome.upstreamRequestId),
    };
    return new Promise((resolve, reject) => {
      this.settles.push({ record, resolve, reject });
      this.schedule();
    });
  }

  release(requestId: string): Promise<'released' | 'duplicate'> {
    const open = this.opens.get(requestId);
    if (open === undefined) return Promise.resolve('duplicate');
    this.opens.delete(requestId);
    const lease = this.lease(open.accountId);
    lease.held -= open.amountNano;
    if (this.unwritten(open)) return Promise.resolve('released');
    return new Promise((resolve, reject) => {
      this.releases.push({ requestId, resolve, reject });
      this.schedule();
    });
  }

  /** Runs fn after the current write; the chain itself never rejects. */
  private onChain<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  /** Writes everything now, every open request included; resolves when it is written. */
  flush(): Promise<void> {
    return this.onChain(() => this.write(true));
  }

  /** Gives this account's lease slack back now (a negative adjustment needs it available). */
  returnSlack(accountId: string): Promise<void> {
    if (!this.leases.has(accountId)) return Promise.resolve();
    this.shrinkNow.add(accountId);
    return this.flush();
  }

  /** The account was disabled here: admit nothing from its lease; give the slack back. */
  accountDisabled(accountId: string): Promise<void> {
    this.disabled.add(accountId);
    return this.returnSlack(accountId);
  }

  /** Group commit: one write follows the running one with whatever arrived meanwhile. */
  private schedule(): void {
    if (this.queued || this.retryTimer !== null) return;
    this.queued = true;
    const queuedAt = performance.now();
    const run = (): void => {
      // A small batch waits for more, up to maxWriteGapMs after the last write (decision 0026):
      // a write costs PGlite ~1.5-2 ms of CPU whatever its size, and at 8 concurrent streams
      // (~60 a second) writes 50 ms apart carried ~4 outcomes each. And at least minWriteGapMs
      // after its first outcome came (decision 0048): the first outcome after a quiet spell was
      // written at once, so a burst's first write ran among its first requests (on Postgres, a
      // round trip and the server's CPU on this 2-core host) and carried one or two outcomes.
      const now = performance.now();
      const sinceLast = now - this.lastWriteAt;
      const waited = now - queuedAt;
      if (
        !this.closed &&
        (sinceLast < this.maxWriteGapMs || waited < this.minWriteGapMs) &&
        this.settles.length + this.releases.length < this.fullWrite
      ) {
        // Looks again at most minWriteGapMs later: a write that fills meanwhile goes then.
        setTimeout(
          run,
          wholeMs(
            Math.min(
              this.minWriteGapMs,
              Math.max(this.maxWriteGapMs - sinceLast, this.minWriteGapMs - waited),
            ),
          ),
        );
        return;
      }
      void this.onChain(() => {
        this.queued = false;
        this.lastWriteAt = performance.now();
        return this.write(false);
      });
    };
    // Never as a microtask: every outcome of the same round of I/O callbacks joins the write
    // (started at once, each write took one settlement: ~250 req/s at 4 ms a write on PGlite).
    // And at most one write per minWriteGapMs: a write costs PGlite ~1.1 ms of CPU whatever its
    // size plus ~0.06 ms a settlement, so one write per loop turn at 500 req/s added ~4 ms to
    // p50 latency (when PGlite ran on this thread), and at 3,000-4,000 req/s writes 25 ms apart
    // instead of 10 cut PGlite's CPU per request by ~23% (batches of ~90 instead of ~35). 50 ms
    // instead of 25 (decision 0021): whole-gateway CPU per request -4 to -18% at c=32, and -13%
    // per stream at 8 concurrent streams, where each write carried only a few outcomes.
    const wait = this.lastWriteAt + this.minWriteGapMs - queuedAt;
    if (wait <= 0) setImmediate(run);
    else setTimeout(run, wholeMs(wait));
  }

  /**
   * Open requests are written down by a timer armed for when the oldest is due, not by a poll:
   * a 10 ms interval that looked at every open request cost the event loop ~130 µs a stream at 8
   * back-to-back streams (timers ~290 of ~5,650 ms in the CPU profile, against ~1 ms for the
   * bare proxy). Once it finds requests due it starts a write, and looks again no sooner than
   * minWriteGapMs later, the soonest a next write could start: a request is written down 20-70
   * ms after admission at the defaults, and the timer fires at most 50 times a second.
   */
  private armOpenTimer(at: number): void {
    this.openTimer = setTimeout(() => this.writeDueOpens(), wholeMs(at - performance.now()));
    this.openTimer.unref();
  }

  /** reserve()'s arming, run once its path has gone upstream (closed or armed since: nothing). */
  private readonly armDeferred = (): void => {
    const at = this.openArmAt;
    this.openArmAt = null;
    if (at !== null && this.openTimer === null && !this.closed) this.armOpenTimer(at);
  };

  private writeDueOpens(): void {
    this.openTimer = null;
    if (this.closed) return;
    const now = performance.now();
    let due = false;
    let next: Open | null = null;
    while (this.dueHead < this.dueOpens.length) {
      const o = this.dueOpens[this.dueHead]!;
      if (this.opens.get(o.requestId) === o && this.unwritten(o)) {
        if (now - o.admittedAt < this.writeOpenAfterMs) {
          next = o;
          break;
        }
        // The write scheduled below takes every due request from `opens`, this one included,
        // and a write that fails puts them back for its retry.
        due = true;
      }
      this.dueHead++;
    }
    if (this.dueHead === this.dueOpens.length) {
      this.dueOpens = [];
      this.dueHead = 0;
    } else if (this.dueHead >= 1024 && this.dueHead * 2 >= this.dueOpens.length) {
      this.dueOpens = this.dueOpens.slice(this.dueHead);
      this.dueHead = 0;
    }
    if (due) this.schedule();
    // Not sooner than writeOpenAfterMs when nothing was due either: under short requests the
    // oldest open one is usually answered before it is due, and chasing each next one would
    // fire the timer every few ms.
    if (next !== null) {
      const gap = due ? this.minWriteGapMs : this.writeOpenAfterMs;
      this.armOpenTimer(Math.max(next.admittedAt + this.writeOpenAfterMs, now + gap));
    }
  }

  /** Idle leases give their slack back; looked for every quarter of idleReturnMs. */
  private startIdleCheck(): void {
    if (this.idleTimer !== null || this.closed || this.idleReturnMs === null) return;
    this.idleTimer = setInterval(() => this.returnIdle(), Math.max(5, this.idleReturnMs / 4));
    this.idleTimer.unref();
  }

  private returnIdle(): void {
    const now = performance.now();
    let due = false;
    const ask: string[] = [];
    for (const [account, l] of this.leases) {
      if (!this.idleSince(l, now)) continue;
      if (this.keepsIdle(l, now)) ask.push(account);
      else due = true;
    }
    if (due) this.schedule();
    if (ask.length > 0 && this.roomAskSince === null) void this.askRoom(ask);
    if (this.leases.size === 0 && this.idleTimer !== null) {
      clearInterval(this.idleTimer);
      this.idleTimer = null;
    }
  }

  /**
   * Looks up the room of the accounts whose idle slack stays (decision 0044); off the write
   * chain (it writes nothing, and a write or grow meanwhile only makes a lease busy again).
   */
  private async askRoom(accounts: string[]): Promise<void> {
    const at = performance.now();
    this.roomAskSince = at;
    let room: Map<string, Room> | null = null;
    try {
      room = await readRoom(this.driver, this.holderId, accounts, this.idleKeepMs ?? 0);
    } catch {
      // Unanswered: nothing is known to have room, so the slack goes back (by a write, which
      // reports a database that stays unreachable).
      room = null;
    } finally {
      this.roomAskSince = null;
    }
    if (this.closed) return;
    let due = false;
    const now = performance.now();
    for (const account of accounts) {
      const l = this.leases.get(account);
      if (l === undefined) continue;
      const r = room?.get(account);
      // A peer took this holder's lease back: it presumed this process dead after a pause past
      // the heartbeat's bound. Kept, that slack would admit requests whose charges the write
      // then drops (the lease is 'lost'). Resync as a write does when it finds a lease lost; the
      // next admission asks the database. Only for a lease untouched since the look started: a
      // grow or a charge meanwhile would make the read stale.
      if (
        r !== undefined &&
        r.heldNano < l.granted &&
        l.lastUsed < at &&
        l.growing === null &&
        l.held === 0n &&
        l.pending === 0n
      ) {
        l.granted = r.heldNano;
        l.known = false;
      }
      const slack = freeOf(l);
      l.roomy = r !== undefined && !r.short && r.availNano >= ROOM_FACTOR * slack;
      l.roomAskedAt = at;
      if (this.idle(l, now)) due = true;
    }
    if (due) this.schedule();
  }

  /** Its open record is neither written nor in a write. */
  private unwritten(o: Open): boolean {
    return !o.persisted && !o.writing;
  }

  /** Nothing open or unwritten, unused for idleReturnMs: its slack goes back or is kept. */
  private idleSince(l: Lease, now: number): boolean {
    return (
      l.held === 0n &&
      l.pending === 0n &&
      l.growing === null &&
      this.idleReturnMs !== null &&
      now - l.lastUsed >= this.idleReturnMs
    );
  }

  /** Idle, and its slack stays until a room look says otherwise or idleKeepMs runs out. */
  private keepsIdle(l: Lease, now: number): boolean {
    return (
      this.idleKeepMs !== null &&
      this.idleSince(l, now) &&
      now - l.lastUsed < this.idleKeepMs &&
      freeOf(l) > 0n &&
      // Not looked at since it went idle (the look decides), or looked at and found room.
      (l.roomAskedAt < l.lastUsed || l.roomy) &&
      // A look that has not answered for idleReturnMs (a stuck connection, a lock) confirms
      // nothing: the slack goes back as it did before decision 0044.
      !(this.roomAskSince !== null && now - this.roomAskSince > (this.idleReturnMs ?? 0))
    );
  }

  /** Its slack goes back now. */
  private idle(l: Lease, now: number): boolean {
    return this.idleSince(l, now) && !this.keepsIdle(l, now);
  }

  private async write(all: boolean): Promise<void> {
    const now = performance.now();
    const settles = this.settles;
    const releases = this.releases;
    this.settles = [];
    this.releases = [];
    const opens: Open[] = [];
    for (const o of this.opens.values()) {
      if (this.unwritten(o) && (all || now - o.admittedAt >= this.writeOpenAfterMs)) opens.push(o);
    }
    // Slack goes back from idle leases, from leases asked for, and from all of them at close.
    // It leaves the book before the write, so nothing is admitted from it meanwhile.
    const shrinks: { accountId: string; amountNano: Nano }[] = [];
    for (const [account, l] of this.leases) {
      const slack = freeOf(l);
      if (slack <= 0n) continue;
      if (this.shrinkNow.has(account) || this.closed || this.idle(l, now)) {
        shrinks.push({ accountId: account, amountNano: slack });
        l.granted -= slack;
      }
    }
    this.shrinkNow.clear();
    if (
      settles.length === 0 &&
      releases.length === 0 &&
      opens.length === 0 &&
      shrinks.length === 0
    ) {
      // An entry left empty (a grow refused, a lease found lost) would be judged idle at every
      // look and start a write that writes nothing.
      this.dropEmpty();
      return;
    }
    const batch: Batch = {
      settles: settles.map((s) => s.record),
      releases: releases.map((r) => r.requestId),
      opens,
      shrinks,
    };
    for (const o of opens) o.writing = true;
    let result: BatchResult;
    try {
      result = await writeBatch(
        this.driver,
        this.holderId,
        this.instanceId,
        batch,
        this.snapshots,
        this.copyMinRows,
      );
    } catch (err) {
      // Nothing was written: put it all back for the next try.
      for (const o of opens) o.writing = false;
      for (const x of shrinks) this.lease(x.accountId).granted += x.amountNano;
      this.settles = settles.concat(this.settles);
      this.releases = releases.concat(this.releases);
      this.failures++;
      if (this.failures === 1 || this.failures % 20 === 0) {
        const reason = err instanceof Error ? err.message : String(err);
        console.warn(
          `[store] lease book write failed (${this.failures}x), ${settles.length} outcomes wait: ${reason}`,
        );
      }
      if (this.closed) {
        const e = err instanceof Error ? err : new Error(String(err));
        for (const s of this.settles) s.reject(e);
        for (const r of this.releases) r.reject(e);
        this.settles = [];
        this.releases = [];
        return;
      }
      if (this.retryTimer === null) {
        this.retryTimer = setTimeout(() => {
          this.retryTimer = null;
          this.schedule();
        }, retryDelay(this.failures));
        this.retryTimer.unref();
      }
      return;
    }
    this.failures = 0;
    for (const o of opens) {
      o.persisted = true;
      o.writing = false;
    }
    // A shrink the database did not take found the lease gone (a peer recovered it): hold
    // nothing from it; the next admission grows a new one.
    for (const x of shrinks) {
      if (result.returned.has(x.accountId)) continue;
      const l = this.lease(x.accountId);
      l.granted = 0n;
      l.known = false;
    }
    for (const s of settles) {
      const r = s.record;
      const l = this.lease(r.accountId);
      l.pending -= r.costNano;
      const after = result.balanceAfter.get(r.requestId);
      if (after !== undefined) {
        l.granted -= r.costNano;
        s.resolve({
          result: 'settled',
          costNano: r.costNano,
          capped: r.capped,
          balanceAfterNano: after,
        });
      } else {
        s.resolve({ result: 'duplicate' });
      }
    }
    // A lease a peer took back: resync to what the database still holds for this holder.
    for (const [account, amount] of result.lost) {
      const l = this.lease(account);
      l.granted = amount;
      l.known = false;
    }
    for (const r of releases) r.resolve('released');
    this.dropEmpty();
  }

  /** Entries that hold nothing and wait for nothing leave the book. */
  private dropEmpty(): void {
    for (const [account, l] of this.leases) {
      if (l.granted === 0n && l.held === 0n && l.pending === 0n && l.growing === null) {
        this.leases.delete(account);
      }
    }
  }

  /** Writes every outcome, writes down what is still open, and gives back every idle lease. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.openTimer !== null) clearTimeout(this.openTimer);
    this.openTimer = null;
    if (this.idleTimer !== null) clearInterval(this.idleTimer);
    this.idleTimer = null;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.flush();
  }
}
