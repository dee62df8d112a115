// OpenTelemetry tracing for one gateway: its own provider (never the global one), the client's W3C
// trace context honoured, and the per-request span tree with its names and attributes fixed here.

import {
  INVALID_SPAN_CONTEXT,
  ProxyTracer,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import type { Attributes, Context, Span, TextMapGetter, Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOnSampler,
  BasicTracerProvider,
  BatchSpanProcessor,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVICE_NAME,
  ATTR_URL_PATH,
} from '@opentelemetry/semantic-conventions';
import { nanoToYuan } from '../billing/money.ts';
import type { EndpointKind } from '../table/endpoints.ts';
import type { RejectedBy, RetryReason, UpstreamOutcome } from './labels.ts';

export type TracingExporter = 'none' | 'otlp' | 'memory';

export interface TracingOptions {
  exporter: TracingExporter;
  /** Full OTLP/HTTP traces URL (…/v1/traces); null: the exporter's default (OTEL_* env, then localhost:4318). */
  otlpEndpoint: string | null;
  serviceName: string;
  /** Read when a request span starts, to stamp `switchyard.config.version` on it. */
  configVersion?: () => string;
}

/** Request headers as Node gives them (names lower-cased). */
export type IncomingHeaders = Record<string, string | string[] | undefined>;

export interface Tracing {
  readonly tracer: Tracer;
  /** The exporter tests read finished spans from; null unless the exporter is 'memory'. */
  readonly memoryExporter: InMemorySpanExporter | null;
  /** False with exporter 'none': every span is non-recording and costs one small object. */
  readonly recording: boolean;
  /** Null when no config version reader was given. */
  readonly configVersion: (() => string) | null;
  /**
   * With tracing off, the span tree every request without a client trace shares (see
   * startRequestTrace); null when recording.
   */
  readonly untraced: RequestTrace | null;
  /** The client's traceparent/tracestate as a parent context; ROOT_CONTEXT when absent or invalid. */
  extractContext(headers: IncomingHeaders): Context;
  /** Flushes pending spans (OTLP batches) and stops the provider. */
  shutdown(): Promise<void>;
}

// Span names: fixed here so the gateway, its tests and docs/decisions/0006 agree.
export const SPAN_CHAT_COMPLETIONS = 'POST /v1/chat/completions';
export const SPAN_ADMISSION = 'switchyard.admission';
export const SPAN_UPSTREAM_ATTEMPT = 'switchyard.upstream_attempt';
export const SPAN_SETTLEMENT = 'switchyard.settlement';

/** HTTP semantic conventions name a server span `{method} {route}`; build it once per route. */
export function serverSpanName(method: string, route: string): string {
  return `${method} ${route}`;
}

// Attribute keys. The stable HTTP ones come from @opentelemetry/semantic-conventions; the GenAI
// ones are still "development" there, so, as its README advises, they are copied, not imported.
export const ATTR = {
  httpRequestMethod: ATTR_HTTP_REQUEST_METHOD,
  httpRoute: ATTR_HTTP_ROUTE,
  urlPath: ATTR_URL_PATH,
  httpResponseStatusCode: ATTR_HTTP_RESPONSE_STATUS_CODE,
  genAiOperationName: 'gen_ai.operation.name',
  genAiProviderName: 'gen_ai.provider.name',
  genAiRequestModel: 'gen_ai.request.model',
  genAiResponseModel: 'gen_ai.response.model',
  genAiUsageInputTokens: 'gen_ai.usage.input_tokens',
  genAiUsageOutputTokens: 'gen_ai.usage.output_tokens',
  genAiUsageCacheReadInputTokens: 'gen_ai.usage.cache_read.input_tokens',
  genAiResponseTimeToFirstChunk: 'gen_ai.response.time_to_first_chunk',
  requestId: 'switchyard.request_id',
  rejectedBy: 'switchyard.rejected_by',
  attempt: 'switchyard.attempt',
  channelId: 'switchyard.channel.id',
  retryReason: 'switchyard.retry_reason',
  accountId: 'switchyard.account.id',
  keyId: 'switchyard.key.id',
  costYuan: 'switchyard.cost_yuan',
  configVersion: 'switchyard.config.version',
} as const;

const HEADER_GETTER: TextMapGetter<IncomingHeaders> = {
  get: (carrier, key) => carrier[key],
  keys: (carrier) => Object.keys(carrier),
};

// With exporter 'none' the tracer is the API's no-op tracer reached through a ProxyTracer whose
// delegator never delegates: no provider, no sampler, no ids; and unlike `trace.getTracer()` it
// cannot start recording because some other code registered a global provider.
const NEVER_DELEGATE = { getDelegateTracer: (): undefined => undefined };

/**
 * The child spans of a request when tracing is off: one shared non-recording span (all of its
 * methods are no-ops). Each no-op child started under a client's traceparent would re-validate
 * the trace id with two regexes, ~0.25 µs apiece; this costs nothing.
 */
const NOOP_CHILD: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

export function createTracing(opts: TracingOptions): Tracing {
  const configVersion = opts.configVersion ?? null;
  const propagator = new W3CTraceContextPropagator();
  const extractContext = (headers: IncomingHeaders): Context =>
    headers.traceparent === undefined
      ? ROOT_CONTEXT
      : propagator.extract(ROOT_CONTEXT, headers, HEADER_GETTER);

  if (opts.exporter === 'none') {
    const tracer = new ProxyTracer(NEVER_DELEGATE, opts.serviceName);
    return {
      tracer,
      memoryExporter: null,
      recording: false,
      configVersion,
      untraced: new RequestTrace(tracer, NOOP_CHILD, ROOT_CONTEXT),
      extractContext,
      shutdown: async () => {},
    };
  }

  const memoryExporter = opts.exporter === 'memory' ? new InMemorySpanExporter() : null;
  const processor: SpanProcessor =
    memoryExporter !== null
      ? new SimpleSpanProcessor(memoryExporter)
      : new BatchSpanProcessor(
          new OTLPTraceExporter(opts.otlpEndpoint !== null ? { url: opts.otlpEndpoint } : {}),
        );
  const provider = new BasicTracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({ [ATTR_SERVICE_NAME]: opts.serviceName }),
    ),
    // Always on, not parent-based: a client's "not sampled" flag must not hide the gateway's own
    // traces from its operator; the client's trace id is still the parent.
    sampler: new AlwaysOnSampler(),
    spanProcessors: [processor],
  });
  return {
    tracer: provider.getTracer('switchyard'),
    memoryExporter,
    recording: true,
    configVersion,
    untraced: null,
    extractContext,
    shutdown: () => provider.shutdown(),
  };
}

/** The values for `gen_ai.operation.name`: the semantic conventions' names where one exists. */
export type GenAiOperation =
  | 'chat'
  | 'text_completion'
  | 'embeddings'
  | Exclude<EndpointKind, 'chat' | 'messages' | 'responses' | 'completions' | 'embeddings'>;

export function genAiOperation(kind: EndpointKind): GenAiOperation {
  switch (kind) {
    case 'chat':
    case 'messages':
    case 'responses':
      return 'chat';
    case 'completions':
      return 'text_completion';
    default:
      return kind;
  }
}

/** What a finished request puts on its span; every field present, absent is null. */
export interface GenAiSpanFields {
  operation: GenAiOperation;
  /** The channel's supplier, e.g. 'openai', 'anthropic', 'deepseek'. */
  providerName: string;
  requestModel: string;
  responseModel: string | null;
  /** Billed input tokens, cache hits excluded (the Usage shape in src/protocols/usage.ts). */
  inputTokens: number;
  cacheHitTokens: number;
  outputTokens: number;
  timeToFirstChunkMs: number | null;
  accountId: string;
  /** The key's id, never the key. */
  keyId: string;
  channelId: string | null;
  costNano: bigint | null;
  configVersion: string | null;
}

/**
 * Sets the GenAI semantic-convention attributes and the gateway's own. The conventions count
 * cached tokens inside `gen_ai.usage.input_tokens`, so it is inputTokens + cacheHitTokens here.
 */
export function setGenAiAttributes(span: Span, f: GenAiSpanFields): void {
  if (!span.isRecording()) return;
  const attributes: Attributes = {
    [ATTR.genAiOperationName]: f.operation,
    [ATTR.genAiProviderName]: f.providerName,
    [ATTR.genAiRequestModel]: f.requestModel,
    [ATTR.genAiUsageInputTokens]: f.inputTokens + f.cacheHitTokens,
    [ATTR.genAiUsageOutputTokens]: f.outputTokens,
    [ATTR.genAiUsageCacheReadInputTokens]: f.cacheHitTokens,
    [ATTR.accountId]: f.accountId,
    [ATTR.keyId]: f.keyId,
  };
  if (f.responseModel !== null) attributes[ATTR.genAiResponseModel] = f.responseModel;
  if (f.timeToFirstChunkMs !== null) {
    attributes[ATTR.genAiResponseTimeToFirstChunk] = f.timeToFirstChunkMs / 1000;
  }
  if (f.channelId !== null) attributes[ATTR.channelId] = f.channelId;
  if (f.costNano !== null) attributes[ATTR.costYuan] = nanoToYuan(f.costNano);
  if (f.configVersion !== null) attributes[ATTR.configVersion] = f.configVersion;
  span.setAttributes(attributes);
}

/** Marks where admission stopped a request, on the admission span and on the request span. */
export function markRejected(admission: Span, request: Span, by: RejectedBy): void {
  if (!admission.isRecording()) return;
  admission.setAttribute(ATTR.rejectedBy, by);
  admission.setStatus({ code: SpanStatusCode.ERROR, message: `rejected by ${by}` });
  request.setAttribute(ATTR.rejectedBy, by);
}

/**
 * Ends an upstream attempt span. `status` is null when no response arrived (timeout, connect
 * error). Any outcome but 'ok' is an error on a CLIENT span and is the attempt's retry reason.
 */
export function endUpstreamAttempt(
  span: Span,
  status: number | null,
  outcome: UpstreamOutcome,
): void {
  if (span.isRecording()) {
    if (status !== null) span.setAttribute(ATTR.httpResponseStatusCode, status);
    if (outcome !== 'ok') {
      const reason: RetryReason = outcome;
      span.setAttribute(ATTR.retryReason, reason);
      span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
    }
  }
  span.end();
}

/**
 * One request's span tree: the SERVER span and the context its children hang from. Contexts are
 * passed explicitly (no AsyncLocalStorage context manager), so nothing is global or implicit.
 */
export class RequestTrace {
  /** The SERVER span; its name is the route's (see serverSpanName). */
  readonly span: Span;
  /**
   * The parent of every child span: a context holding `span` when recording; with tracing off,
   * the incoming parent context (still carrying the client's trace id, if any).
   */
  readonly context: Context;
  readonly recording: boolean;
  private readonly tracer: Tracer;

  constructor(tracer: Tracer, span: Span, context: Context) {
    this.span = span;
    this.context = context;
    this.recording = span.isRecording();
    this.tracer = tracer;
  }

  /** Auth, limits and reservation; end it, after markRejected() when it refused. */
  startAdmission(): Span {
    if (!this.recording) return NOOP_CHILD;
    return this.tracer.startSpan(SPAN_ADMISSION, { kind: SpanKind.INTERNAL }, this.context);
  }

  /** One per attempt, 1-based; end it with endUpstreamAttempt(). */
  startUpstreamAttempt(channelId: string, providerName: string, attempt: number): Span {
    if (!this.recording) return NOOP_CHILD;
    return this.tracer.startSpan(
      SPAN_UPSTREAM_ATTEMPT,
      {
        kind: SpanKind.CLIENT,
        attributes: {
          [ATTR.channelId]: channelId,
          [ATTR.genAiProviderName]: providerName,
          [ATTR.attempt]: attempt,
        },
      },
      this.context,
    );
  }

  startSettlement(): Span {
    if (!this.recording) return NOOP_CHILD;
    return this.tracer.startSpan(SPAN_SETTLEMENT, { kind: SpanKind.INTERNAL }, this.context);
  }

  /** Ends the SERVER span; only 5xx is an error on a server span (HTTP semantic conventions). */
  end(statusCode: number): void {
    if (this.recording) {
      this.span.setAttribute(ATTR.httpResponseStatusCode, statusCode);
      if (statusCode >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    this.span.end();
  }
}

/**
 * Starts the SERVER span of one request under `parent` (from tracing.extractContext).
 * `name` comes from serverSpanName(method, route), built once per route.
 */
export function startRequestTrace(
  tracing: Tracing,
  name: string,
  parent: Context,
  method: string,
  route: string,
  path: string,
  requestId: string,
): RequestTrace {
  // Off, with no client trace to carry: the no-op tracer would return the same invalid span, so
  // every such request shares one tree. Starting it cost ~22 µs a request when the path ran cold
  // (paced streams, 100 µs sampling, session 12), ~0.15 µs hot.
  if (tracing.untraced !== null && parent === ROOT_CONTEXT) return tracing.untraced;
  const span = tracing.tracer.startSpan(
    name,
    {
      kind: SpanKind.SERVER,
      attributes: tracing.recording
        ? {
            [ATTR.httpRequestMethod]: method,
            [ATTR.httpRoute]: route,
            [ATTR.urlPath]: path,
            [ATTR.requestId]: requestId,
          }
        : undefined,
    },
    parent,
  );
  if (!tracing.recording) {
    // No child will read the context (they are NOOP_CHILD), so skip trace.setSpan: a context
    // copy of ~150 ns; the whole tree with tracing off went from ~1 µs to ~0.15 µs.
    return new RequestTrace(tracing.tracer, span, parent);
  }
  if (tracing.configVersion !== null) {
    span.setAttribute(ATTR.configVersion, tracing.configVersion());
  }
  return new RequestTrace(tracing.tracer, span, trace.setSpan(parent, span));
}
