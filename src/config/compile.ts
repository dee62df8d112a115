// The compiler: the only code that reads raw config (DESIGN invariant 1). It validates every file,
// checks what only the whole config shows, and builds the frozen RoutingTable with prices as
// integers, peak windows as minute tables and candidate channels per (model, endpoint).
import { createHash } from 'node:crypto';
import type {
  CampaignConfig,
  ChannelConfig,
  ConfigFile,
  GatewaySettings,
  LimitsConfig,
  ModelConfig,
  PeakWindowConfig,
  PriceConfig,
  ReasoningFamilyConfig,
} from '../../generated/config.ts';
import { MULTIPLIER_SCALE, parseScaledDecimal } from '../billing/money.ts';
import { canServe, NATIVE, PROTOCOLS, type EndpointKind, type Protocol } from '../table/endpoints.ts';
import { isValidTimezone, MINUTES_PER_WEEK, tzOffsetMinutes } from '../table/peak-lookup.ts';
import { printTable } from '../table/print.ts';
import {
  EFFORTS,
  type CampaignEntry,
  type Candidate,
  type ChannelEntry,
  type Effort,
  type GatewayEntry,
  type LimitsEntry,
  type ModelEntry,
  type PeakWindowEntry,
  type PeakZone,
  type PriceEntry,
  type ReasoningEntry,
  type Route,
  type RoutingTable,
  type Tier,
} from '../table/types.ts';
import type { Diagnostic, Severity } from './diagnostics.ts';
import { interpolate } from './interpolate.ts';
import { escapePointer, LoadedFile, type LoadResult } from './load.ts';
import { validateFile } from './validate.ts';
import { canonicalIp } from '../http/ip-address.ts';

export type CompileMode = 'validate' | 'serve';

export interface CompileOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** validate: an unset ${VAR} is a warning; serve: an error. */
  mode: CompileMode;
  /** The compile instant (tests pin it). */
  nowMs?: number;
}

export interface CompileResult {
  table: RoutingTable | null;
  diagnostics: Diagnostic[];
}

/** Price decimals: ¥ per 1M tokens with 3 decimals is a whole nano-yuan per token (decision 0001). */
const TOKEN_PRICE_SCALE = 3;
const IMAGE_PRICE_SCALE = 9;
const MULTIPLIER_DECIMALS = 4;
const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

interface Item<T> {
  value: T;
  file: LoadedFile;
  pointer: string;
}

class Compiler {
  readonly diagnostics: Diagnostic[] = [];
  readonly opts: CompileOptions;
  readonly nowMs: number;
  readonly secrets: string[] = [];
  /** "file\0pointer" of every schema error, and the ids of the items they broke. */
  readonly brokenPointers = new Set<string>();
  readonly brokenIds = new Set<string>();

  /** True when a schema error lies at or below the pointer of this file. */
  isBroken(file: LoadedFile, pointer: string): boolean {
    for (const key of this.brokenPointers) {
      const [f, p = ''] = key.split('\u0000');
      if (f === file.file && (p === pointer || p.startsWith(pointer + '/'))) return true;
    }
    return false;
  }

  constructor(opts: CompileOptions) {
    this.opts = opts;
    this.nowMs = opts.nowMs ?? Date.now();
  }

  report(severity: Severity, item: Item<unknown>, sub: string, message: string): void {
    const pointer = item.pointer + sub;
    const pos = item.file.nearest(pointer);
    this.diagnostics.push({ severity, file: item.file.file, line: pos.line, col: pos.col, message });
  }

  error(item: Item<unknown>, sub: string, message: string): void {
    this.report('error', item, sub, message);
  }

  warn(item: Item<unknown>, sub: string, message: string): void {
    this.report('warning', item, sub, message);
  }

  /** Interpolates ${VAR}; an unset variable is a warning in validate and an error in serve. */
  str(item: Item<unknown>, sub: string, raw: string | number | undefined, secret = false): string {
    if (raw === undefined) return '';
    const { value, unset } = interpolate(String(raw), this.opts.env);
    for (const name of unset) {
      this.report(
        this.opts.mode === 'serve' ? 'error' : 'warning',
        item,
        sub,
        `environment variable ${name} is not set`,
      );
    }
    if (secret && value !== '') this.secrets.push(value);
    return value;
  }

  /** An exact decimal from its source text, scaled to an integer; null (and an error) otherwise. */
  decimal(item: Item<unknown>, sub: string, raw: number | string, scale: number, what: string): bigint | null {
    const text = typeof raw === 'string' ? raw : (item.file.numberSources.get(item.pointer + sub) ?? String(raw));
    const value = parseScaledDecimal(text, scale);
    if (value === null || value < 0n) {
      this.error(item, sub, `${what} "${text}" must be a non-negative decimal with at most ${scale} decimals`);
      return null;
    }
    return value;
  }

  instant(item: Item<unknown>, sub: string, text: string): number {
    const ms = Date.parse(text);
    if (Number.isNaN(ms)) this.error(item, sub, `"${text}" is not a date-time`);
    return ms;
  }
}

function items<T>(c: Compiler, files: readonly LoadedFile[], section: keyof ConfigFile): Item<T>[] {
  const out: Item<T>[] = [];
  for (const file of files) {
    const list = (file.value as Record<string, unknown> | null)?.[section];
    if (!Array.isArray(list)) continue;
    list.forEach((value, i) => {
      const pointer = `/${section}/${i}`;
      if (!c.isBroken(file, pointer)) {
        out.push({ value: value as T, file, pointer });
        return;
      }
      const v = value as Record<string, unknown> | null;
      for (const idField of ['id', 'name', 'family', 'model']) {
        if (typeof v?.[idField] === 'string') c.brokenIds.add(v[idField]);
      }
    });
  }
  return out;
}

function single<T>(c: Compiler, files: readonly LoadedFile[], section: 'gateway' | 'limits'): Item<T> | null {
  let found: Item<T> | null = null;
  for (const file of files) {
    const value = (file.value as Record<string, unknown> | null)?.[section];
    if (value === undefined || c.isBroken(file, `/${section}`)) continue;
    const item: Item<T> = { value: value as T, file, pointer: `/${section}` };
    if (found !== null) {
      c.error(item, '', `"${section}" is already declared in ${found.file.file}; declare it once`);
      continue;
    }
    found = item;
  }
  return found;
}

export function globToRegExp(pattern: string): RegExp {
  const body = pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*');
  return new RegExp(`^${body}$`);
}

function matcher(patterns: readonly string[] | undefined): (name: string) => boolean {
  if (patterns === undefined || patterns.includes('*')) return () => true;
  const exact = new Set(patterns.filter((p) => !p.includes('*')));
  const globs = patterns.filter((p) => p.includes('*')).map(globToRegExp);
  return (name) => exact.has(name) || globs.some((g) => g.test(name));
}

function checkDuplicates<T>(c: Compiler, list: readonly Item<T>[], id: (v: T) => string, what: string): void {
  const seen = new Map<string, Item<T>>();
  for (const item of list) {
    const key = id(item.value);
    const first = seen.get(key);
    if (first === undefined) seen.set(key, item);
    else c.error(item, '', `duplicate ${what} "${key}" (first declared at ${first.file.file}:${first.file.nearest(first.pointer).line})`);
  }
}

function compileGateway(c: Compiler, item: Item<GatewaySettings> | null): GatewayEntry {
  const g: GatewaySettings = item?.value ?? {};
  const it: Item<unknown> = item ?? { value: {}, file: new LoadedFile('(defaults)', '', {}, new Map()), pointer: '/gateway' };
  const port = (sub: string, raw: string | number | undefined, fallback: number | null): number | null => {
    const text = c.str(it, sub, raw);
    if (text === '') return fallback;
    const n = Number(text);
    if (!Number.isInteger(n) || n < 0 || n > 65535) {
      c.error(it, sub, `port "${text}" must be an integer from 0 to 65535`);
      return fallback;
    }
    return n;
  };
  const orNull = (s: string): string | null => (s === '' ? null : s);
  return {
    listen: { host: c.str(it, '/listen/host', g.listen?.host) || '127.0.0.1', port: port('/listen/port', g.listen?.port, 8080) ?? 8080 },
    store: {
      url: orNull(c.str(it, '/store/url', g.store?.url, true)),
      dataDir: orNull(c.str(it, '/store/data_dir', g.store?.data_dir)),
    },
    redis: {
      url: orNull(c.str(it, '/redis/url', g.redis?.url, true)),
      onUnreachable: g.redis?.on_unreachable ?? 'fail_open',
      leaseMs: g.redis?.lease_ms ?? 100,
    },
    telemetry: {
      exporter: g.telemetry?.exporter ?? 'none',
      otlpEndpoint: orNull(c.str(it, '/telemetry/otlp_endpoint', g.telemetry?.otlp_endpoint)),
      serviceName: g.telemetry?.service_name ?? 'switchyard',
    },
    metrics: {
      enabled: g.metrics?.enabled ?? true,
      port: port('/metrics/port', g.metrics?.port, null),
      token: orNull(c.str(it, '/metrics/token', g.metrics?.token, true)),
    },
    admin: {
      token: orNull(c.str(it, '/admin/token', g.admin?.token, true)),
      readonlyToken: orNull(c.str(it, '/admin/readonly_token', g.admin?.readonly_token, true)),
    },
    trustedProxies: (g.trusted_proxies ?? []).map(canonicalIp),
    memoryTrim: {
      enabled: g.memory_trim?.enabled ?? true,
      checkMs: Math.round((g.memory_trim?.check_seconds ?? 5) * 1000),
      idleBelow: g.memory_trim?.idle_below ?? 0.05,
      minReclaimBytes: (g.memory_trim?.min_reclaim_mb ?? 32) * 1024 * 1024,
    },
    bodyLimitBytes: g.body_limit_bytes ?? 10 * 1024 * 1024,
    defaultMaxOutputTokens: g.default_max_output_tokens ?? 4096,
  };
}

function compileLimits(item: Item<LimitsConfig> | null): LimitsEntry {
  const l = item?.value ?? {};
  return {
    rpmScope: l.rpm?.scope ?? 'account',
    channelCapacityDefault: l.channel_capacity_default ?? null,
    blacklistSource: l.blacklist?.source ?? 'ip',
    blacklistRules: (l.blacklist?.rules ?? []).map((r) => ({
      on: r.on,
      max: r.max,
      windowMs: r.window_seconds * 1000,
      banMs: r.ban_seconds * 1000,
    })),
  };
}

function compileChannel(c: Compiler, item: Item<ChannelConfig>, limits: LimitsEntry): ChannelEntry {
  const ch = item.value;
  const baseUrl = c.str(item, '/base_url', ch.base_url).replace(/\/+$/, '');
  if (baseUrl !== 'builtin:demo' && !/^https?:\/\/[^/]/.test(baseUrl)) {
    c.error(item, '/base_url', `base_url "${baseUrl}" must be an http(s) URL or builtin:demo`);
  }
  const apiKeys = (ch.api_keys ?? []).map((k, i) => c.str(item, `/api_keys/${i}`, k, true));
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(ch.headers ?? {})) {
    headers[name.toLowerCase()] = c.str(item, `/headers/${escapePointer(name)}`, value);
  }
  return {
    id: ch.id,
    protocol: ch.protocol,
    baseUrl,
    apiKeys,
    priority: ch.priority ?? 0,
    weight: ch.weight ?? 1,
    capacity: ch.capacity === undefined ? limits.channelCapacityDefault : ch.capacity,
    timeouts: {
      connectMs: ch.timeouts?.connect_ms ?? 5000,
      firstByteMs: ch.timeouts?.first_byte_ms ?? 60_000,
      totalMs: ch.timeouts?.total_ms ?? 600_000,
    },
    headers,
  };
}

function compilePrices(c: Compiler, list: readonly Item<PriceConfig>[], billing: 'token' | 'image'): PriceEntry[] {
  const out: PriceEntry[] = [];
  const seenFrom = new Set<number>();
  for (const item of list) {
    const p = item.value;
    const effectiveFromMs = p.effective_from === undefined ? -Infinity : c.instant(item, '/effective_from', p.effective_from);
    if (seenFrom.has(effectiveFromMs)) {
      c.error(item, '', `model "${p.model}" already has a price effective from ${p.effective_from ?? 'always'}`);
    }
    seenFrom.add(effectiveFromMs);
    let perImage: Map<string, bigint> | null = null;
    let input = 0n;
    let output = 0n;
    let cacheHit: bigint | null = null;
    if (billing === 'image') {
      if (p.per_image === undefined) {
        c.error(item, '', `model "${p.model}" bills per image: give per_image prices by size`);
      } else {
        perImage = new Map();
        for (const [size, raw] of Object.entries(p.per_image)) {
          perImage.set(size, c.decimal(item, `/per_image/${escapePointer(size)}`, raw, IMAGE_PRICE_SCALE, 'per-image price') ?? 0n);
        }
      }
    } else if (p.input === undefined || p.output === undefined) {
      c.error(item, '', `model "${p.model}" bills per token: give input and output prices (¥ per 1M tokens)`);
    } else if (p.per_image !== undefined) {
      c.error(item, '/per_image', `model "${p.model}" bills per token; per_image applies to billing: image`);
    }
    // Token prices also serve image models that report token usage (billed by model tier).
    if (p.input !== undefined) input = c.decimal(item, '/input', p.input, TOKEN_PRICE_SCALE, 'input price') ?? 0n;
    if (p.output !== undefined) output = c.decimal(item, '/output', p.output, TOKEN_PRICE_SCALE, 'output price') ?? 0n;
    if (p.cache_hit !== undefined) cacheHit = c.decimal(item, '/cache_hit', p.cache_hit, TOKEN_PRICE_SCALE, 'cache_hit price');
    out.push({ effectiveFromMs, inputNano: input, cacheHitNano: cacheHit ?? input, outputNano: output, perImage });
  }
  return out.sort((a, b) => a.effectiveFromMs - b.effectiveFromMs);
}

/** Minutes of the week a window covers, in its own zone. */
function windowMinutes(c: Compiler, item: Item<PeakWindowConfig>): number[] {
  const w = item.value;
  const days = (w.days ?? DAYS).map((d) => DAYS.indexOf(d));
  const out: number[] = [];
  w.ranges.forEach((range, i) => {
    const [from = '', to = ''] = range.split('-');
    const start = Number(from.slice(0, 2)) * 60 + Number(from.slice(3));
    let end = Number(to.slice(0, 2)) * 60 + Number(to.slice(3));
    if (end === start) {
      c.error(item, `/ranges/${i}`, `range "${range}" is empty`);
      return;
    }
    if (end < start) end += 1440;
    for (const day of days) {
      for (let m = start; m < end; m++) out.push((day * 1440 + m) % MINUTES_PER_WEEK);
    }
  });
  return out;
}

interface CompiledWindow {
  item: Item<PeakWindowConfig>;
  entry: PeakWindowEntry;
  minutes: number[];
  matches: (model: string) => boolean;
}

function buildZones(c: Compiler, windows: readonly CompiledWindow[], reported: Set<string>): PeakZone[] {
  const zones = new Map<string, { slots: Uint8Array; windows: PeakWindowEntry[]; compiled: CompiledWindow[] }>();
  const overlap = (a: CompiledWindow, b: CompiledWindow): void => {
    const key = [a.entry.id, b.entry.id].sort().join('\u0000');
    if (reported.has(key)) return;
    reported.add(key);
    c.error(b.item, '', `peak window "${b.entry.id}" overlaps peak window "${a.entry.id}" for the same models`);
  };
  for (const w of windows) {
    let zone = zones.get(w.entry.timezone);
    if (zone === undefined) {
      zone = { slots: new Uint8Array(MINUTES_PER_WEEK), windows: [], compiled: [] };
      zones.set(w.entry.timezone, zone);
    }
    zone.windows.push(w.entry);
    zone.compiled.push(w);
    const slot = zone.windows.length;
    for (const m of w.minutes) {
      const prev = zone.slots[m] ?? 0;
      if (prev !== 0 && prev !== slot) {
        const other = zone.compiled[prev - 1];
        if (other !== undefined) overlap(other, w);
        continue;
      }
      zone.slots[m] = slot;
    }
  }
  // Across zones, compare in UTC with each zone's offset at compile time.
  const list = [...zones.entries()];
  for (let i = 0; i < list.length; i++) {
    for (let j = i + 1; j < list.length; j++) {
      const [tzA, a] = list[i]!;
      const [tzB, b] = list[j]!;
      const shift = tzOffsetMinutes(tzA, c.nowMs) - tzOffsetMinutes(tzB, c.nowMs);
      for (let m = 0; m < MINUTES_PER_WEEK; m++) {
        const sa = a.slots[m] ?? 0;
        if (sa === 0) continue;
        const sb = b.slots[(((m - shift) % MINUTES_PER_WEEK) + MINUTES_PER_WEEK) % MINUTES_PER_WEEK] ?? 0;
        if (sb !== 0) {
          overlap(a.compiled[sa - 1]!, b.compiled[sb - 1]!);
          break;
        }
      }
    }
  }
  return [...zones.entries()].map(([timezone, z]) => ({ timezone, slots: z.slots, windows: z.windows }));
}

function compileReasoning(c: Compiler, item: Item<ReasoningFamilyConfig>): ReasoningEntry {
  const r = item.value;
  const known = new Set<string>(EFFORTS);
  const defaultEffort = (r.default ?? 'low') as Effort;
  if (!known.has(defaultEffort)) {
    c.error(item, '/default', `unknown reasoning effort "${r.default}": use low, high or max`);
  }
  for (const effort of Object.keys(r.efforts)) {
    if (!known.has(effort)) {
      c.error(item, `/efforts/${escapePointer(effort)}`, `unknown reasoning effort "${effort}": use low, high or max`);
    }
    for (const protocol of Object.keys(r.efforts[effort] ?? {})) {
      if (!(PROTOCOLS as readonly string[]).includes(protocol)) {
        c.error(item, `/efforts/${escapePointer(effort)}/${escapePointer(protocol)}`, `unknown protocol "${protocol}" in reasoning mapping: use ${PROTOCOLS.join(' or ')}`);
      }
    }
  }
  const params = {} as Record<Effort, Record<Protocol, Record<string, unknown> | null>>;
  for (const effort of EFFORTS) {
    const byProtocol = r.efforts[effort];
    if (byProtocol === undefined) {
      c.error(item, '/efforts', `reasoning family "${r.family}" has no mapping for effort "${effort}"`);
    }
    params[effort] = { openai: byProtocol?.openai ?? null, anthropic: byProtocol?.anthropic ?? null };
  }
  return { family: r.family, defaultEffort, params };
}

/**
 * Freezes value and every object reachable from it (Maps' values too; Sets hold strings, typed
 * arrays cannot be frozen), pausing after every 1,024 objects so a caller may yield.
 */
function* freezeWalk(value: unknown): Generator<void> {
  const seen = new Set<unknown>();
  const stack: unknown[] = [value];
  let visited = 0;
  while (stack.length > 0) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object' || seen.has(v) || ArrayBuffer.isView(v)) continue;
    seen.add(v);
    if (v instanceof Map) {
      for (const x of v.values()) stack.push(x);
    } else if (!(v instanceof Set)) {
      for (const x of Object.values(v)) stack.push(x);
    }
    Object.freeze(v);
    if (++visited % 1024 === 0) yield;
  }
}

export function deepFreeze<T>(value: T): T {
  for (const _ of freezeWalk(value));
  return value;
}

const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * deepFreeze in slices of at most `sliceMs` of this thread, yielding to the event loop between
 * them: a reloaded 5,000-model table took 37 ms to freeze in one go, a stall every request in
 * flight felt. The table is swapped in only once the whole of it is frozen.
 */
export async function deepFreezeInSlices<T>(value: T, sliceMs = 4): Promise<T> {
  let sliceStart = performance.now();
  for (const _ of freezeWalk(value)) {
    if (performance.now() - sliceStart < sliceMs) continue;
    await yieldToLoop();
    sliceStart = performance.now();
  }
  return value;
}

/** Compiles loaded files into a RoutingTable; table is null when any error was found. */
export function compileConfig(loaded: LoadResult, opts: CompileOptions): CompileResult {
  const c = new Compiler(opts);
  c.diagnostics.push(...loaded.diagnostics);
  // Items with schema errors are left out of the cross checks; their ids are remembered so a
  // reference to them is not reported a second time as "does not exist".
  const files = loaded.files;
  for (const file of files) {
    const problems = validateFile(file);
    for (const { pointer: _pointer, ...d } of problems) c.diagnostics.push(d);
    for (const p of problems) c.brokenPointers.add(`${file.file}\u0000${p.pointer}`);
  }

  const gateway = compileGateway(c, single<GatewaySettings>(c, files, 'gateway'));
  const limitsItem = single<LimitsConfig>(c, files, 'limits');
  const limits = compileLimits(limitsItem);

  const modelItems = items<ModelConfig>(c, files, 'models');
  const channelItems = items<ChannelConfig>(c, files, 'channels');
  const priceItems = items<PriceConfig>(c, files, 'prices');
  const windowItems = items<PeakWindowConfig>(c, files, 'peak_windows');
  const campaignItems = items<CampaignConfig>(c, files, 'campaigns');
  const reasoningItems = items<ReasoningFamilyConfig>(c, files, 'reasoning');

  checkDuplicates(c, modelItems, (m) => m.name, 'model');
  checkDuplicates(c, channelItems, (ch) => ch.id, 'channel id');
  checkDuplicates(c, windowItems, (w) => w.id, 'peak window id');
  checkDuplicates(c, campaignItems, (k) => k.id, 'campaign id');
  checkDuplicates(c, reasoningItems, (r) => r.family, 'reasoning family');

  // Channels.
  const channels = new Map<string, ChannelEntry>();
  const channelItemById = new Map<string, Item<ChannelConfig>>();
  for (const item of channelItems) {
    if (channels.has(item.value.id)) continue;
    channels.set(item.value.id, compileChannel(c, item, limits));
    channelItemById.set(item.value.id, item);
  }

  // Reasoning families.
  const families = new Map<string, ReasoningEntry>();
  for (const item of reasoningItems) {
    if (!families.has(item.value.family)) families.set(item.value.family, compileReasoning(c, item));
  }

  // Prices by model.
  const modelNames = new Set(modelItems.map((m) => m.value.name));
  const pricesByModel = new Map<string, Item<PriceConfig>[]>();
  for (const item of priceItems) {
    if (!modelNames.has(item.value.model)) {
      if (c.brokenIds.has(item.value.model)) continue;
      c.error(item, '/model', `price for unknown model "${item.value.model}"`);
      continue;
    }
    const list = pricesByModel.get(item.value.model) ?? [];
    list.push(item);
    pricesByModel.set(item.value.model, list);
  }

  // Peak windows.
  const compiledWindows: CompiledWindow[] = [];
  for (const item of windowItems) {
    const w = item.value;
    const timezone = w.timezone ?? 'Asia/Shanghai';
    if (!isValidTimezone(timezone)) {
      c.error(item, '/timezone', `unknown timezone "${timezone}" (use an IANA name such as Asia/Shanghai)`);
      continue;
    }
    const multiplierBp = c.decimal(item, '/multiplier', w.multiplier, MULTIPLIER_DECIMALS, 'multiplier') ?? MULTIPLIER_SCALE;
    compiledWindows.push({
      item,
      entry: { id: w.id, timezone, multiplierBp, days: w.days ?? DAYS, ranges: w.ranges },
      minutes: windowMinutes(c, item),
      matches: matcher(w.models),
    });
  }

  // Campaigns.
  const compiledCampaigns: { entry: CampaignEntry; matches: (m: string) => boolean; item: Item<CampaignConfig> }[] = [];
  for (const item of campaignItems) {
    const k = item.value;
    const startsMs = c.instant(item, '/starts_at', k.starts_at);
    const endsMs = c.instant(item, '/ends_at', k.ends_at);
    if (endsMs <= startsMs) {
      c.error(item, '/ends_at', `campaign "${k.id}" ends (${k.ends_at}) before it starts (${k.starts_at})`);
    }
    const discountBp = c.decimal(item, '/discount', k.discount, MULTIPLIER_DECIMALS, 'discount') ?? MULTIPLIER_SCALE;
    if (discountBp > MULTIPLIER_SCALE) {
      c.error(item, '/discount', `campaign "${k.id}" discount ${String(k.discount)} would raise the price; use a multiplier from 0 to 1`);
    }
    compiledCampaigns.push({
      item,
      matches: matcher(k.models),
      entry: { id: k.id, startsMs, endsMs, discountBp, accounts: k.accounts === undefined ? null : new Set(k.accounts), models: k.models },
    });
  }

  // RPM per model.
  const rpmConfig = limitsItem?.value.rpm;
  for (const name of Object.keys(rpmConfig?.models ?? {})) {
    if (!modelNames.has(name) && limitsItem !== null) c.error(limitsItem, `/rpm/models/${escapePointer(name)}`, `rpm for unknown model "${name}"`);
  }

  // Models and routes.
  const usedChannels = new Set<string>();
  const zoneCache = new Map<string, PeakZone[]>();
  const reportedOverlaps = new Set<string>();
  const windowUsed = new Set<string>();
  const campaignUsed = new Set<string>();
  const models = new Map<string, ModelEntry>();
  for (const item of modelItems) {
    const m = item.value;
    if (models.has(m.name)) continue;
    const caps = new Set(m.capabilities ?? []);
    const billing = m.billing ?? 'token';

    // Routes: candidates per endpoint, grouped into priority tiers.
    const candidatesByEndpoint = new Map<EndpointKind, { priority: number; candidate: Candidate }[]>();
    m.channels.forEach((ref, i) => {
      const channel = channels.get(ref.channel);
      if (channel === undefined) {
        if (c.brokenIds.has(ref.channel)) return;
        c.error(item, `/channels/${i}/channel`, `model "${m.name}" names channel "${ref.channel}", which does not exist`);
        return;
      }
      usedChannels.add(channel.id);
      const offered = channelItemById.get(channel.id)?.value.endpoints;
      const cannot: EndpointKind[] = [];
      for (const endpoint of m.endpoints) {
        if (!canServe(channel.protocol, endpoint) || (offered !== undefined && !offered.includes(endpoint))) {
          cannot.push(endpoint);
          continue;
        }
        const list = candidatesByEndpoint.get(endpoint) ?? [];
        list.push({
          priority: ref.priority ?? channel.priority,
          candidate: {
            channel,
            upstreamModel: ref.upstream_model ?? m.name,
            weight: ref.weight ?? channel.weight,
            translate: !NATIVE[channel.protocol].has(endpoint),
          },
        });
        candidatesByEndpoint.set(endpoint, list);
      }
      if (cannot.length > 0) {
        c.warn(item, `/channels/${i}/channel`, `channel "${channel.id}" (${channel.protocol}) cannot serve ${cannot.join(', ')} for model "${m.name}"; other channels must`);
      }
    });
    const routes = new Map<EndpointKind, Route>();
    m.endpoints.forEach((endpoint, i) => {
      const list = candidatesByEndpoint.get(endpoint);
      if (list === undefined) {
        if (m.channels.every((ref) => channels.has(ref.channel))) {
          c.error(item, `/endpoints/${i}`, `endpoint "${endpoint}" is open for model "${m.name}" but none of its channels' protocols can serve it`);
        }
        return;
      }
      const byPriority = new Map<number, Candidate[]>();
      for (const { priority, candidate } of list) {
        const tier = byPriority.get(priority) ?? [];
        tier.push(candidate);
        byPriority.set(priority, tier);
      }
      const tiers: Tier[] = [...byPriority.entries()]
        .sort((a, b) => b[0] - a[0])
        .map(([priority, candidates]) => ({ priority, candidates, totalWeight: candidates.reduce((s, x) => s + x.weight, 0) }));
      routes.set(endpoint, { model: m.name, endpoint, tiers });
    });
    for (const cap of ['tools', 'image_input', 'response_format'] as const) {
      if (caps.has(cap) && !m.endpoints.some((e) => e === 'chat' || e === 'messages' || e === 'responses')) {
        c.warn(item, '/capabilities', `capability "${cap}" has no effect without a chat, messages or responses endpoint`);
      }
    }

    // Prices.
    const priceList = pricesByModel.get(m.name);
    let prices: PriceEntry[] = [];
    if (priceList === undefined) {
      if (!c.brokenIds.has(m.name)) c.error(item, '/name', `model "${m.name}" has no price`);
    } else {
      prices = compilePrices(c, priceList, billing);
      if (prices.length > 0 && prices[0]!.effectiveFromMs > c.nowMs) {
        c.error(item, '/name', `model "${m.name}" has no price in force now (its first price starts later)`);
      }
    }

    // Peak windows and campaigns as per-model lookups, shared between models with the same set.
    const mine = compiledWindows.filter((w) => w.matches(m.name));
    let peak: PeakZone[] | null = null;
    if (mine.length > 0) {
      const key = mine.map((w) => w.entry.id).join('\u0000');
      peak = zoneCache.get(key) ?? buildZones(c, mine, reportedOverlaps);
      zoneCache.set(key, peak);
      for (const w of mine) windowUsed.add(w.entry.id);
    }
    const myCampaigns = compiledCampaigns
      .filter((k) => k.matches(m.name))
      .map((k) => (campaignUsed.add(k.entry.id), k.entry))
      .sort((a, b) => (a.discountBp < b.discountBp ? -1 : a.discountBp > b.discountBp ? 1 : 0));

    // Reasoning.
    let reasoning: ReasoningEntry | null = null;
    if (caps.has('reasoning')) {
      if (m.family === undefined) {
        c.error(item, '/capabilities', `model "${m.name}" has the reasoning capability but no family to map reasoning_effort`);
      } else {
        reasoning = families.get(m.family) ?? null;
        if (reasoning === null && !c.brokenIds.has(m.family)) {
          c.error(item, '/family', `model "${m.name}" is in family "${m.family}", which has no reasoning mapping`);
        }
      }
    }

    const rpmForModel = rpmConfig?.models?.[m.name];
    models.set(m.name, {
      name: m.name,
      ownedBy: m.owned_by,
      family: m.family ?? null,
      endpoints: m.endpoints,
      capabilities: {
        tools: caps.has('tools'),
        imageInput: caps.has('image_input'),
        responseFormat: caps.has('response_format'),
        reasoning: caps.has('reasoning'),
      },
      realnameRequired: m.realname_required ?? false,
      billing,
      maxOutputTokens: m.max_output_tokens ?? gateway.defaultMaxOutputTokens,
      routes,
      prices,
      peak,
      campaigns: myCampaigns.length > 0 ? myCampaigns : null,
      rpm: rpmForModel !== undefined ? rpmForModel : (rpmConfig?.default ?? null),
      reasoning,
    });
  }

  for (const item of channelItems) {
    if (!usedChannels.has(item.value.id) && !c.brokenIds.has(item.value.id)) c.error(item, '/id', `channel "${item.value.id}" serves no model`);
  }
  for (const w of compiledWindows) {
    if (!windowUsed.has(w.entry.id)) c.warn(w.item, '/models', `peak window "${w.entry.id}" matches no model`);
  }
  for (const k of compiledCampaigns) {
    if (!campaignUsed.has(k.entry.id)) c.warn(k.item, '/models', `campaign "${k.entry.id}" matches no model`);
  }

  const hasError = c.diagnostics.some((d) => d.severity === 'error');
  if (hasError) return { table: null, diagnostics: c.diagnostics };

  const modelList = [...models.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const table: RoutingTable = {
    version: '',
    compiledAtMs: c.nowMs,
    models,
    modelList,
    channels,
    peakWindows: compiledWindows.map((w) => w.entry),
    campaigns: compiledCampaigns.map((k) => k.entry),
    limits,
    gateway,
  };
  const hash = createHash('sha256');
  hash.update(JSON.stringify(printTable(table, { withVersion: false })));
  // Secrets change the version without ever being printed: only their digest enters the hash.
  for (const s of c.secrets) hash.update('\u0000' + createHash('sha256').update(s).digest('hex'));
  table.version = hash.digest('hex').slice(0, 16);
  return { table: deepFreeze(table), diagnostics: c.diagnostics };
}
