// Sums a V8 .cpuprofile (node --cpu-prof) into self time per function and per file or package,
// so the profile of the gateway under load reads as a short table in the report.
// Run alone: `node bench/cpuprofile-summary.ts <file.cpuprofile> [--top 25]`.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface SelfTimeRow {
  name: string;
  /** Self time in ms and as a share of the profile's non-idle time. */
  selfMs: number;
  percent: number;
}

export interface ProfileSummary {
  totalMs: number;
  /** Time not idle: what the process spent working. */
  busyMs: number;
  functions: SelfTimeRow[];
  /** By source file under src/, by package under node_modules, by node: module otherwise. */
  places: SelfTimeRow[];
}

const IDLE = new Set(['(idle)', '(program)']);

/** Where a frame lives: `src/relay/relay.ts`, `fastify`, `node:internal/http`, `(gc)`. */
export function placeOf(frame: CallFrame): string {
  const url = frame.url;
  if (url === '') return frame.functionName.startsWith('(') ? frame.functionName : '(native)';
  const nm = url.lastIndexOf('/node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : (rest[0] ?? url);
  }
  const src = url.lastIndexOf('/src/');
  if (src !== -1) return url.slice(src + 1);
  const bench = url.lastIndexOf('/bench/');
  if (bench !== -1) return url.slice(bench + 1);
  if (url.startsWith('node:')) {
    const parts = url.split('/');
    return parts.length > 2 ? `${parts[0]}/${parts[1]}` : url;
  }
  return url;
}

function top(map: Map<string, number>, busyUs: number, n: number): SelfTimeRow[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({
      name,
      selfMs: Math.round(us / 100) / 10,
      percent: Math.round((us / busyUs) * 1000) / 10,
    }));
}

/**
 * Self time per function and place; only samples taken within [fromUs, toUs] of the profile's
 * clock count (the load window, without start-up and shutdown) when a window is given.
 */
export function summariseProfile(
  profile: CpuProfile,
  n = 25,
  window: { fromUs: number; toUs: number } | null = null,
): ProfileSummary {
  const byId = new Map<number, ProfileNode>();
  for (const node of profile.nodes) byId.set(node.id, node);
  const fn = new Map<string, number>();
  const place = new Map<string, number>();
  let busyUs = 0;
  let totalUs = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byId.get(profile.samples[i] as number);
    at += profile.timeDeltas[i] ?? 0;
    if (window !== null && (at < window.fromUs || at > window.toUs)) continue;
    // timeDeltas[i] is the time before sample i; the next delta is the time spent in it.
    const us = profile.timeDeltas[i + 1] ?? 0;
    totalUs += us;
    if (node === undefined || IDLE.has(node.callFrame.functionName)) continue;
    busyUs += us;
    const f = node.callFrame;
    const where = placeOf(f);
    const key = `${f.functionName || '(anonymous)'} ${where}:${f.lineNumber + 1}`;
    fn.set(key, (fn.get(key) ?? 0) + us);
    place.set(where, (place.get(where) ?? 0) + us);
  }
  return {
    totalMs: Math.round(totalUs / 1000),
    busyMs: Math.round(busyUs / 1000),
    functions: top(fn, busyUs, n),
    places: top(place, busyUs, n),
  };
}

/**
 * The profiles that process `pid` wrote to `dir`: its main thread's and its workers'. node names
 * each `CPU.<date>.<time>.<pid>.<thread id>.<seq>.cpuprofile`, thread 0 being the main thread; a
 * gateway on PGlite writes its worker's beside it, and its initdb child one of its own.
 */
export async function profileFiles(
  dir: string,
  pid: number,
): Promise<{ main: string; workers: string[] }> {
  let main: string | null = null;
  const workers: string[] = [];
  for (const file of await readdir(dir)) {
    const [, , , filePid, thread] = file.split('.');
    if (!file.endsWith('.cpuprofile') || Number(filePid) !== pid) continue;
    if (thread === '0') main = join(dir, file);
    else workers.push(join(dir, file));
  }
  if (main === null) throw new Error(`no main-thread profile of process ${pid} in ${dir}`);
  return { main, workers };
}

export async function readProfile(file: string): Promise<CpuProfile> {
  return JSON.parse(await readFile(file, 'utf8')) as CpuProfile;
}

export async function summariseProfileFile(
  file: string,
  n = 25,
  window: { fromUs: number; toUs: number } | null = null,
): Promise<ProfileSummary> {
  return summariseProfile(await readProfile(file), n, window);
}

export function printProfileSummary(s: ProfileSummary, n = 25): void {
  console.log(`cpu profile: ${s.busyMs} ms busy of ${s.totalMs} ms (self time, share of busy)`);
  console.log('  by file or package');
  for (const r of s.places.slice(0, n)) {
    console.log(
      `    ${r.percent.toFixed(1).padStart(5)}%  ${String(r.selfMs).padStart(8)} ms  ${r.name}`,
    );
  }
  console.log('  by function');
  for (const r of s.functions.slice(0, n)) {
    console.log(
      `    ${r.percent.toFixed(1).padStart(5)}%  ${String(r.selfMs).padStart(8)} ms  ${r.name}`,
    );
  }
}

if (import.meta.main) {
  const file = process.argv[2];
  if (file === undefined)
    throw new Error('usage: node bench/cpuprofile-summary.ts <file.cpuprofile>');
  const i = process.argv.indexOf('--top');
  const n = i >= 0 ? Number(process.argv[i + 1]) : 25;
  printProfileSummary(await summariseProfileFile(file, n), n);
}
