// `bench:ab --profiles`: both gateways' CPU profiles (node --cpu-prof) summed over one section's
// window, in µs a stream by file or package and by function, side by side with this − base. The
// section's process CPU (proc-cpu.ts) says how much more one gateway's main thread spends a
// stream; this says where. A full run read the Postgres gateway's main thread 0.96–1.75 ms a
// paced stream above the embedded one's, and no probe found what it was (session 69).
import {
  profileFiles,
  readProfile,
  summariseProfile,
  type CpuProfile,
  type SelfTimeRow,
} from './cpuprofile-summary.ts';
import { signed } from './report.ts';

/** One section's window in the profiles' clock (CLOCK_MONOTONIC µs, as process.hrtime). */
export interface ProfileWindow {
  title: string;
  fromUs: number;
  toUs: number;
  /** Streams each gateway served in the window. */
  streams: { base: number; this: number };
}

/** A process's profiles from `--cpu-prof-dir`: its main thread's and its workers'. */
export interface ThreadProfiles {
  main: CpuProfile;
  workers: CpuProfile[];
}

export async function readThreadProfiles(dir: string, pid: number): Promise<ThreadProfiles> {
  const files = await profileFiles(dir, pid);
  return {
    main: await readProfile(files.main),
    workers: await Promise.all(files.workers.map(readProfile)),
  };
}

/** µs a stream, from ms over a window's streams. */
function perStreamUs(ms: number, streams: number): number {
  return (ms * 1000) / Math.max(streams, 1);
}

/** µs a stream of each row, by name. */
function perStream(rows: SelfTimeRow[], streams: number): Map<string, number> {
  return new Map(rows.map((r) => [r.name, perStreamUs(r.selfMs, streams)]));
}

/** Rows of both sides, the larger of the two first, `n` of them. */
function sideBySide(
  base: Map<string, number>,
  mine: Map<string, number>,
  n: number,
): [string, number, number][] {
  const names = new Set([...base.keys(), ...mine.keys()]);
  return [...names]
    .map((name): [string, number, number] => [name, base.get(name) ?? 0, mine.get(name) ?? 0])
    .sort((a, b) => Math.max(b[1], b[2]) - Math.max(a[1], a[2]))
    .slice(0, n);
}

function rowLine(name: string, base: number, mine: number): string {
  const cell = (us: number): string => String(Math.round(us)).padStart(7);
  return `    ${cell(base)} ${cell(mine)} ${signed(mine - base, 0).padStart(7)}  ${name}`;
}

/** Prints one section's comparison: main threads by place and by function, workers in all. */
export function printProfileDiff(
  window: ProfileWindow,
  base: ThreadProfiles,
  mine: ThreadProfiles,
  n = 15,
): void {
  const range = { fromUs: window.fromUs, toUs: window.toUs };
  const all = 100_000; // every row: the cut to n comes after both sides are merged
  const b = summariseProfile(base.main, all, range);
  const m = summariseProfile(mine.main, all, range);
  const workersUs = (p: ThreadProfiles, streams: number): number =>
    Math.round(
      perStreamUs(
        p.workers.reduce((sum, w) => sum + summariseProfile(w, 1, range).busyMs, 0),
        streams,
      ),
    );
  const s = window.streams;
  console.log(
    `  ${window.title}, CPU profiles (µs a stream; base ${s.base} streams, this ${s.this} streams):` +
      ` main thread busy base ${Math.round(perStreamUs(b.busyMs, s.base))}, this` +
      ` ${Math.round(perStreamUs(m.busyMs, s.this))}; worker threads base` +
      ` ${workersUs(base, s.base)}, this ${workersUs(mine, s.this)}`,
  );
  for (const [by, key] of [
    ['file or package', 'places'],
    ['function', 'functions'],
  ] as const) {
    console.log(`       base    this  this−base  main thread, by ${by}`);
    for (const [name, bu, mu] of sideBySide(
      perStream(b[key], s.base),
      perStream(m[key], s.this),
      n,
    ))
      console.log(rowLine(name, bu, mu));
  }
}
