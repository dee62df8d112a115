// CPU time of benchmark processes and their threads from Linux's /proc: what bench:ab and
// bench:cpu divide by the streams or requests of a turn. Ticks are 10 ms (USER_HZ 100).
import { readdirSync, readFileSync } from 'node:fs';

const TICK_US = 10_000;

/**
 * utime + stime of one /proc `stat` line, in µs; with `reaped`, also cutime + cstime (its
 * children waited for).
 */
function statUs(stat: string, reaped = false): number {
  // Fields after the command's closing parenthesis: utime, stime, cutime and cstime are the 12th
  // to the 15th.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const own = Number(f[11]) + Number(f[12]);
  return (reaped ? own + Number(f[13]) + Number(f[14]) : own) * TICK_US;
}

/** The command (`comm`) a /proc `stat` line names: the process's, or the thread's name. */
function commandOf(stat: string): string {
  return stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
}

/** CPU µs a process has used: its main thread, and all its threads (exited ones included). */
export interface ProcessCpu {
  main: number;
  all: number;
}

/** The process's CPU, or null when it is gone or this is not Linux. */
export function processCpu(pid: number): ProcessCpu | null {
  try {
    return {
      main: statUs(readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')),
      all: statUs(readFileSync(`/proc/${pid}/stat`, 'utf8')),
    };
  } catch {
    return null;
  }
}

/** CPU µs by thread name (the main thread as 'main'), summed over live threads of one name. */
export type ThreadCpu = Map<string, number>;

export function threadCpu(pid: number): ThreadCpu {
  const out: ThreadCpu = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    const name = tid === String(pid) ? 'main' : commandOf(stat);
    out.set(name, (out.get(name) ?? 0) + statUs(stat));
  }
  return out;
}

/** One process's CPU readings: the process (exited threads included) and its live threads by name. */
export interface CpuReading {
  process: ProcessCpu;
  threads: ThreadCpu;
}

/** The process's readings now, or null when it is gone or this is not Linux. */
export function readCpu(pid: number): CpuReading | null {
  const whole = processCpu(pid);
  if (whole === null) return null;
  try {
    return { process: whole, threads: threadCpu(pid) };
  } catch {
    return null;
  }
}

/**
 * A process's CPU µs a stream between two readings: its main thread, all its threads, and of
 * them V8's helper threads (GC's parallel and concurrent work, compile jobs) and its worker
 * threads (the store's). The section's other sides idle meanwhile, so it is the process's own
 * turns plus its idle background through the others'.
 */
export interface CpuPerStream {
  mainUs: number;
  allUs: number;
  helpersUs: number;
  workersUs: number;
}

export function cpuPerStream(
  from: CpuReading | null | undefined,
  to: CpuReading | null | undefined,
  streams: number,
): CpuPerStream | null {
  if (from === null || from === undefined || to === null || to === undefined || streams <= 0)
    return null;
  const per = (us: number): number => Math.round(us / streams);
  const thread = (name: string): number =>
    (to.threads.get(name) ?? 0) - (from.threads.get(name) ?? 0);
  const main = to.process.main - from.process.main;
  const helpers = thread('V8Worker');
  const workers = thread('WorkerThread');
  // The process's total, its main thread and its threads are read one after another, so a 10 ms
  // tick that falls between two of the reads counts in one and not the other: the total's
  // difference can trail its parts' by a tick (a fresh-clone run read 100,000 µs against the
  // main thread's 103,333). The total is never less than its parts, so that is its floor.
  const all = Math.max(to.process.all - from.process.all, main + helpers + workers);
  return { mainUs: per(main), allUs: per(all), helpersUs: per(helpers), workersUs: per(workers) };
}

/** A reading of nothing: what TurnCpu's sums count from. */
const noCpu = (): CpuReading => ({ process: { main: 0, all: 0 }, threads: new Map() });

/**
 * Each side's process CPU over its own turns of a section taken in turns, from a turn's start to
 * the next turn's (so the tail of its work in the gap after its turn is its own), and not over
 * the other sides' turns, where it idles: a section's whole span put an idle gateway's timers and
 * polls (~8–10 ms a second) on its streams three times over, ~0.5 ms a back-to-back stream and
 * ~2 ms a paced one with four sides (session 64). `turn(next)` is called as each turn starts.
 */
export class TurnCpu<K extends string> {
  private readonly pids: Partial<Record<K, number>>;
  /** Each side's CPU summed over its turns so far, as a reading from zero. */
  private readonly used = new Map<K, CpuReading>();
  private side: K | null = null;
  private start: CpuReading | null = null;

  constructor(pids: Partial<Record<K, number>>) {
    this.pids = pids;
  }

  /** Ends the running side's share, if any, and starts `next`'s (null: none). */
  turn(next: K | null): void {
    const side = this.side;
    const start = this.start;
    const now = side === null || start === null ? null : this.read(side);
    if (side !== null && start !== null && now !== null) {
      const sum = this.used.get(side) ?? noCpu();
      sum.process.main += now.process.main - start.process.main;
      sum.process.all += now.process.all - start.process.all;
      for (const [name, us] of now.threads)
        sum.threads.set(name, (sum.threads.get(name) ?? 0) + us - (start.threads.get(name) ?? 0));
      this.used.set(side, sum);
    }
    this.side = next;
    this.start = next === null ? null : this.read(next);
  }

  /** `side`'s CPU a stream over its turns; null without a process, a reading or a stream. */
  perStream(side: K, streams: number): CpuPerStream | null {
    return cpuPerStream(noCpu(), this.used.get(side), streams);
  }

  private read(side: K): CpuReading | null {
    const pid = this.pids[side];
    return pid === undefined ? null : readCpu(pid);
  }
}

/** CPU µs used so far by the host's Postgres and by its Redis (processes by their `comm`). */
export interface ServiceCpu {
  postgres: number;
  'redis-server': number;
}

/**
 * CPU µs used so far by the host's Postgres and Redis processes, or null when this is not Linux.
 * Postgres forks a backend per connection: the postmaster's reaped children count too (its
 * cutime and cstime), so a pool connection closed mid-section is not lost.
 */
export function serviceCpu(): ServiceCpu | null {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return null;
  }
  const total: ServiceCpu = { postgres: 0, 'redis-server': 0 };
  for (const pid of entries) {
    if (!/^\d+$/.test(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // it ended meanwhile
    }
    const command = commandOf(stat);
    if (command === 'postgres' || command === 'redis-server') total[command] += statUs(stat, true);
  }
  return total;
}

/** The host's Postgres and Redis CPU a stream over one side's turns (µs). */
export interface ServiceCpuPerStream {
  postgresUs: number;
  redisUs: number;
}

/**
 * The host's Postgres and Redis CPU over each side's turns of a section (session 63): CPU taken
 * from the same 2 cores as a gateway's own, which its process's figures leave out. A side's share
 * runs from its turn's start to the next turn's, as TurnCpu's does: the gap after a turn holds the
 * tail of its write-behind. Sides on neither read the servers' background (Redis's timers, the
 * Postgres gateway's polls), the floor to read a gateway on them against. Ticks are 10 ms: ±50 µs
 * a stream over a section. `turn(next)` is called as each turn starts.
 */
export class ServiceTurns<K extends string> {
  private readonly used = new Map<K, ServiceCpu>();
  private side: K | null = null;
  private last: ServiceCpu | null = null;

  /** Ends the running side's share, if any, and starts `next`'s (null: none). */
  turn(next: K | null): void {
    const now = serviceCpu();
    if (now === null) return;
    if (this.side !== null && this.last !== null) {
      const sum = this.used.get(this.side) ?? { postgres: 0, 'redis-server': 0 };
      sum.postgres += now.postgres - this.last.postgres;
      sum['redis-server'] += now['redis-server'] - this.last['redis-server'];
      this.used.set(this.side, sum);
    }
    this.side = next;
    this.last = now;
  }

  /** `side`'s Postgres and Redis µs a stream; null without a reading (not Linux) or a stream. */
  perStream(side: K, streams: number): ServiceCpuPerStream | null {
    const used = this.used.get(side);
    if (used === undefined || streams <= 0) return null;
    return {
      postgresUs: Math.round(used.postgres / streams),
      redisUs: Math.round(used['redis-server'] / streams),
    };
  }
}
