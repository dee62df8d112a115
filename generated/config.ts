/* Generated from schemas/*.schema.json by scripts/generate-types.ts: do not edit.
 * Run `npm run generate` after changing a schema. */

/**
 * An id: letters, digits, '.', '_', '-', ':' and '/'; starts with a letter or digit.
 */
export type Identifier = string;
/**
 * An id: letters, digits, '.', '_', '-', ':' and '/'; starts with a letter or digit.
 */
export type Identifier1 = string;
/**
 * An endpoint kind of the /v1 interface (spec section 4).
 */
export type EndpointKind =
  | 'chat'
  | 'responses'
  | 'messages'
  | 'completions'
  | 'embeddings'
  | 'rerank'
  | 'images_generations'
  | 'images_edits'
  | 'images_variations'
  | 'audio_speech'
  | 'audio_transcriptions'
  | 'audio_translations'
  | 'realtime'
  | 'moderations'
  | 'search'
  | 'video'
  | 'drawing'
  | 'music';
/**
 * The wire protocol an upstream channel speaks.
 */
export type Protocol = 'openai' | 'anthropic';
/**
 * The price takes effect at this instant; absent means always.
 */
export type Instant = string;
/**
 * An exact decimal. Write it as a YAML number (2.5) or a string ("2.5"): the compiler reads the source text, never a binary float.
 */
export type Decimal = number | string;
/**
 * An exact decimal. Write it as a YAML number (2.5) or a string ("2.5"): the compiler reads the source text, never a binary float.
 */
export type Decimal1 = number | string;
/**
 * An exact decimal. Write it as a YAML number (2.5) or a string ("2.5"): the compiler reads the source text, never a binary float.
 */
export type Decimal2 = number | string;
/**
 * A model name, or a glob with '*' (e.g. 'deepseek-*', '*').
 */
export type ModelPattern = string;
/**
 * An ISO 8601 date-time with an offset, e.g. 2026-12-01T00:00:00+08:00.
 */
export type Instant1 = string;
/**
 * An exact decimal. Write it as a YAML number (2.5) or a string ("2.5"): the compiler reads the source text, never a binary float.
 */
export type Decimal3 = number | string;

/**
 * One YAML file under config/. Every file may hold any sections; lists from all files are joined, gateway and limits may appear once. Put '# yaml-language-server: $schema=../schemas/config-file.schema.json' on a file's first line for editor completion.
 */
export interface ConfigFile {
  gateway?: GatewaySettings;
  models?: ModelConfig[];
  channels?: ChannelConfig[];
  prices?: PriceConfig[];
  peak_windows?: PeakWindowConfig[];
  campaigns?: CampaignConfig[];
  limits?: LimitsConfig;
  reasoning?: ReasoningFamilyConfig[];
}
/**
 * Process settings: where to listen, which store and Redis, telemetry. Secrets come from ${ENV}.
 */
export interface GatewaySettings {
  listen?: {
    host?: string;
    /**
     * TCP port; a string allows ${PORT:-8080}.
     */
    port?: number | string;
  };
  /**
   * url: a postgres:// URL (usually ${DATABASE_URL:-}); empty means the embedded store in data_dir.
   */
  store?: {
    url?: string;
    /**
     * Embedded store directory; empty for in-memory.
     */
    data_dir?: string;
  };
  redis?: {
    /**
     * redis:// URL; empty means in-memory limiters.
     */
    url?: string;
    on_unreachable?: 'fail_open' | 'fail_closed';
    /**
     * How long a block of RPM hits or capacity slots, reserved in one Redis call for a hot bucket or channel, may be handed out by this process (decision 0031). 0: every request is its own Redis call.
     */
    lease_ms?: number;
  };
  telemetry?: {
    exporter?: 'none' | 'otlp';
    /**
     * OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces
     */
    otlp_endpoint?: string;
    service_name?: string;
  };
  metrics?: {
    enabled?: boolean;
    /**
     * Serve /metrics on this separate port instead of the main one.
     */
    port?: number | string;
    /**
     * Bearer token required on /metrics (usually ${METRICS_TOKEN:-}).
     */
    token?: string;
  };
  admin?: {
    /**
     * Admin API bearer token, from ${SWITCHYARD_ADMIN_TOKEN}.
     */
    token?: string;
    /**
     * A token that may read but not change (403 AUTH_INSUFFICIENT_PRIVILEGE on writes).
     */
    readonly_token?: string;
  };
  /**
   * Peer addresses whose X-Forwarded-For is believed (exact IPs).
   */
  trusted_proxies?: string[];
  /**
   * After a load burst, give its memory back once the event loop is idle: one memory-reducing collection (a 100–200 ms pause, only when idle). V8 alone keeps a burst's heap for good.
   */
  memory_trim?: {
    enabled?: boolean;
    /**
     * How often to look; the event loop must have been idle over the whole period.
     */
    check_seconds?: number;
    /**
     * Event-loop utilisation (0–1) under which a period counts as idle.
     */
    idle_below?: number;
    /**
     * Trim when this much looks reclaimable: RSS grown since the last trim (or start), or V8 heap held beyond its use.
     */
    min_reclaim_mb?: number;
  };
  body_limit_bytes?: number;
  default_max_output_tokens?: number;
}
/**
 * A public model: the name clients send, what it can do, and the channels that serve it.
 */
export interface ModelConfig {
  name: Identifier;
  owned_by: string;
  family?: Identifier1;
  /**
   * @minItems 1
   */
  endpoints: [EndpointKind, ...EndpointKind[]];
  capabilities?: ('tools' | 'image_input' | 'response_format' | 'reasoning')[];
  realname_required?: boolean;
  /**
   * token: ¥ per 1M tokens; image: ¥ per image by size tier.
   */
  billing?: 'token' | 'image';
  /**
   * Output cap used for the reservation when max_tokens is absent.
   */
  max_output_tokens?: number;
  /**
   * @minItems 1
   */
  channels: [
    {
      channel: Identifier;
      /**
       * Defaults to the public name.
       */
      upstream_model?: string;
      /**
       * Overrides the channel's priority for this model.
       */
      priority?: number;
      /**
       * Overrides the channel's weight for this model.
       */
      weight?: number;
    },
    ...{
      channel: Identifier;
      /**
       * Defaults to the public name.
       */
      upstream_model?: string;
      /**
       * Overrides the channel's priority for this model.
       */
      priority?: number;
      /**
       * Overrides the channel's weight for this model.
       */
      weight?: number;
    }[]
  ];
}
/**
 * An upstream supplier connection.
 */
export interface ChannelConfig {
  id: Identifier;
  protocol: Protocol;
  /**
   * Up to and including /v1, e.g. https://api.deepseek.com/v1; 'builtin:demo' is the offline demo upstream.
   */
  base_url: string;
  /**
   * Rotated round-robin.
   *
   * Items: Must be a ${VAR} reference; keys are never written in config.
   */
  api_keys?: string[];
  /**
   * Higher tiers are tried first.
   */
  priority?: number;
  /**
   * Share within a priority tier.
   */
  weight?: number;
  /**
   * Most requests in flight; absent takes limits.channel_capacity_default.
   */
  capacity?: number | null;
  /**
   * What the supplier actually offers; absent means all its protocol can serve.
   */
  endpoints?: EndpointKind[];
  timeouts?: {
    connect_ms?: number;
    first_byte_ms?: number;
    total_ms?: number;
  };
  headers?: {
    [k: string]: string;
  };
}
/**
 * A model's price in ¥ per 1,000,000 tokens (at most 3 decimals), or ¥ per image by size (at most 9 decimals).
 */
export interface PriceConfig {
  model: Identifier;
  effective_from?: Instant;
  input?: Decimal;
  cache_hit?: Decimal1;
  output?: Decimal;
  /**
   * Size tier ('1024x1024') to ¥ per image.
   */
  per_image?: {
    [k: string]: Decimal;
  };
}
/**
 * Hours during which a price multiplier applies.
 */
export interface PeakWindowConfig {
  id: Identifier;
  timezone?: string;
  /**
   * Absent means every day.
   */
  days?: ('mon' | 'tue' | 'wed' | 'thu' | 'fri' | 'sat' | 'sun')[];
  /**
   * @minItems 1
   *
   * Items: HH:MM-HH:MM; a range past midnight (22:00-02:00) runs into the next day; 24:00 ends at midnight.
   */
  ranges: [string, ...string[]];
  multiplier: Decimal2;
  /**
   * Absent means every model.
   */
  models?: ModelPattern[];
}
/**
 * A free or discount period for some models (and optionally some accounts).
 */
export interface CampaignConfig {
  id: Identifier;
  starts_at: Instant1;
  ends_at: Instant1;
  /**
   * @minItems 1
   */
  models: [ModelPattern, ...ModelPattern[]];
  /**
   * Absent means every account.
   */
  accounts?: string[];
  discount: Decimal3;
}
/**
 * The protection layers: per-model RPM, channel capacity, temporary blacklist.
 */
export interface LimitsConfig {
  rpm?: {
    /**
     * Requests per minute per model; null is unlimited.
     */
    default?: number | null;
    scope?: 'account' | 'key' | 'platform';
    /**
     * Model name to its RPM.
     */
    models?: {
      [k: string]: number | null;
    };
  };
  /**
   * In-flight cap for channels that set none; null is unlimited.
   */
  channel_capacity_default?: number | null;
  blacklist?: {
    source?: 'ip' | 'key';
    rules?: {
      on: 'auth_failure' | 'rate_limited';
      max: number;
      window_seconds: number;
      ban_seconds: number;
    }[];
  };
}
/**
 * How reasoning_effort (low, high, max) maps onto each upstream protocol's parameters for one model family.
 */
export interface ReasoningFamilyConfig {
  family: Identifier;
  default?: string;
  /**
   * Effort name (low, high, max) to protocol name to the parameters merged into the upstream body.
   */
  efforts: {
    [k: string]: {
      [k: string]: {};
    };
  };
}
