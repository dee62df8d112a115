// The compiled routing table: the runtime's only view of config (DESIGN invariant 1). Built once
// by src/config/compile.ts, frozen, swapped whole on reload. Absent is null, decided at compile.
import type { EndpointKind, Protocol } from './endpoints.ts';

export type Effort = 'low' | 'high' | 'max';
export const EFFORTS: readonly Effort[] = ['low', 'high', 'max'];

export interface ChannelTimeouts {
  connectMs: number;
  firstByteMs: number;
  totalMs: number;
}

export interface ChannelEntry {
  id: string;
  protocol: Protocol;
  /** Up to and including /v1, no trailing slash; 'builtin:demo' is the in-process demo upstream. */
  baseUrl: string;
  /** Secrets: never printed (see printTable). Rotated round-robin. */
  apiKeys: readonly string[];
  priority: number;
  weight: number;
  /** Most requests in flight; null is unlimited. */
  capacity: number | null;
  timeouts: ChannelTimeouts;
  headers: Readonly<Record<string, string>>;
}

export interface Candidate {
  channel: ChannelEntry;
  upstreamModel: string;
  weight: number;
  /** The channel's protocol serves this endpoint only through a translation. */
  translate: boolean;
}

/** Candidates of one priority; tiers are ordered highest priority first. */
export interface Tier {
  priority: number;
  candidates: readonly Candidate[];
  totalWeight: number;
}

export interface Route {
  model: string;
  endpoint: EndpointKind;
  tiers: readonly Tier[];
}

/** Prices in nano-yuan per token (¥ per 1M tokens × 1000) or per image. */
export interface PriceEntry {
  /** Epoch ms; -Infinity when the price has no effective_from. */
  effectiveFromMs: number;
  inputNano: bigint;
  cacheHitNano: bigint;
  outputNano: bigint;
  /** Size tier ("1024x1024") to nano-yuan per image; null for token-billed models. */
  perImage: ReadonlyMap<string, bigint> | null;
}

export interface PeakWindowEntry {
  id: string;
  timezone: string;
  /** Parts per 10,000 (1.5 → 15000). */
  multiplierBp: bigint;
  /** For the price list: "mon", ... and "HH:MM-HH:MM". */
  days: readonly string[];
  ranges: readonly string[];
}

/** One timezone's week, minute by minute: slot[i] is 0 or 1 + the index of the window in force. */
export interface PeakZone {
  timezone: string;
  slots: Uint8Array;
  windows: readonly PeakWindowEntry[];
}

export interface CampaignEntry {
  id: string;
  startsMs: number;
  endsMs: number;
  /** Parts per 10,000: 0 is free, 5000 half price. */
  discountBp: bigint;
  /** null: every account. */
  accounts: ReadonlySet<string> | null;
  models: readonly string[];
}

export interface ReasoningEntry {
  family: string;
  defaultEffort: Effort;
  /** Effort → protocol → parameters merged into the upstream body (null: nothing to merge). */
  params: Readonly<
    Record<Effort, Readonly<Record<Protocol, Readonly<Record<string, unknown>> | null>>>
  >;
}

export interface ModelCapabilities {
  tools: boolean;
  imageInput: boolean;
  responseFormat: boolean;
  reasoning: boolean;
}

export interface ModelEntry {
  name: string;
  ownedBy: string;
  family: string | null;
  endpoints: readonly EndpointKind[];
  capabilities: ModelCapabilities;
  realnameRequired: boolean;
  billing: 'token' | 'image';
  maxOutputTokens: number;
  /** One route per open endpoint; an endpoint absent here is not open for the model. */
  routes: ReadonlyMap<EndpointKind, Route>;
  /** Ordered by effectiveFromMs ascending; the last one in force at an instant applies. */
  prices: readonly PriceEntry[];
  /** null: no peak window covers this model. */
  peak: readonly PeakZone[] | null;
  /** Best (lowest discount) first; null: no campaign names this model. */
  campaigns: readonly CampaignEntry[] | null;
  /** Requests per minute; null is unlimited. */
  rpm: number | null;
  reasoning: ReasoningEntry | null;
}

export interface BlacklistRule {
  on: 'auth_failure' | 'rate_limited';
  max: number;
  windowMs: number;
  banMs: number;
}

export interface LimitsEntry {
  rpmScope: 'account' | 'key' | 'platform';
  channelCapacityDefault: number | null;
  blacklistSource: 'ip' | 'key';
  blacklistRules: readonly BlacklistRule[];
}

export interface GatewayEntry {
  listen: { host: string; port: number };
  store: { url: string | null; dataDir: string | null };
  redis: { url: string | null; onUnreachable: 'fail_open' | 'fail_closed'; leaseMs: number };
  telemetry: { exporter: 'none' | 'otlp'; otlpEndpoint: string | null; serviceName: string };
  metrics: { enabled: boolean; port: number | null; token: string | null };
  admin: { token: string | null; readonlyToken: string | null };
  trustedProxies: readonly string[];
  /** See src/telemetry/memory-trimmer.ts. */
  memoryTrim: { enabled: boolean; checkMs: number; idleBelow: number; minReclaimBytes: number };
  bodyLimitBytes: number;
  defaultMaxOutputTokens: number;
}

export interface RoutingTable {
  /** Content hash of the compiled config (secrets included only as a hash). */
  version: string;
  compiledAtMs: number;
  models: ReadonlyMap<string, ModelEntry>;
  /** The same models, sorted by name (for listings). */
  modelList: readonly ModelEntry[];
  channels: ReadonlyMap<string, ChannelEntry>;
  peakWindows: readonly PeakWindowEntry[];
  campaigns: readonly CampaignEntry[];
  limits: LimitsEntry;
  gateway: GatewayEntry;
}
