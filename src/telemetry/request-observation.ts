// One request's observer (src/relay/observer.ts) as a class: its span tree, its metrics and its
// access line. A class, not a closure per method: a request's observer lives until its
// settlement is written (up to ~60 ms behind the response, decision 0021), and nine closures
// and their contexts were ~900 of the ~4,100 bytes a pending settlement kept alive (heap
// snapshot diff, session 9), every one of them copied by each scavenge it survived.
import type { Span } from '@opentelemetry/api';
import type { FastifyBaseLogger } from 'fastify';
import type {
  AttemptObserver,
  AttemptOutcome,
  RejectedLayer,
  RequestFacts,
  RequestObserver,
  SettledFacts,
} from '../relay/observer.ts';
import type { EndpointKind } from '../table/endpoints.ts';
import { addCostNano, type GatewayMetrics } from './gateway-metrics.ts';
import type { RejectedBy } from './labels.ts';
import { accessLogLine } from './logging.ts';
import {
  endUpstreamAttempt,
  genAiOperation,
  markRejected,
  setGenAiAttributes,
  type RequestTrace,
} from './tracing.ts';

/** What every request's observer shares: built once per gateway. */
export interface ObservationDeps {
  metrics: GatewayMetrics;
  logger: FastifyBaseLogger;
}

const REJECTED: Record<RejectedLayer, RejectedBy> = {
  auth: 'auth',
  blacklist: 'blacklist',
  validation: 'validation',
  routing: 'routing',
  permission: 'auth',
  rpm: 'rpm',
  balance: 'balance',
  capacity: 'capacity',
};

/** Route name → endpoint kind, for gen_ai.operation.name (bounded: the registry's routes). */
const KIND_BY_ROUTE: Record<string, EndpointKind> = {
  'POST /v1/chat/completions': 'chat',
  'POST /pg/chat/completions': 'chat',
  'POST /v1/messages': 'messages',
  'POST /v1/responses': 'responses',
  'POST /v1/embeddings': 'embeddings',
  'POST /v1/images/generations': 'images_generations',
  'POST /v1/completions': 'completions',
};

class AttemptObservation implements AttemptObserver {
  private readonly metrics: GatewayMetrics;
  private readonly channelId: string;
  private readonly span: Span;

  constructor(metrics: GatewayMetrics, channelId: string, span: Span) {
    this.metrics = metrics;
    this.channelId = channelId;
    this.span = span;
  }

  end(outcome: AttemptOutcome, httpStatus: number | null): void {
    this.metrics.upstreamAttempts.labels(this.channelId, outcome).inc();
    endUpstreamAttempt(this.span, httpStatus, outcome);
  }
}

export class RequestObservation implements RequestObserver {
  private readonly deps: ObservationDeps;
  private readonly requestId: string;
  private readonly route: string;
  private readonly trace: RequestTrace;
  private readonly version: string;
  private readonly started: number;
  private admission: Span | null;
  private facts: RequestFacts = { accountId: null, keyId: null, model: null };
  private settledFacts: SettledFacts | null = null;
  private firstChunkMs: number | null = null;
  private finished = false;
  private settledDone = false;
  private status = 0;

  constructor(
    deps: ObservationDeps,
    requestId: string,
    route: string,
    trace: RequestTrace,
    version: string,
  ) {
    this.deps = deps;
    this.requestId = requestId;
    this.route = route;
    this.trace = trace;
    this.version = version;
    this.started = performance.now();
    this.admission = trace.startAdmission();
  }

  identify(f: RequestFacts): void {
    const facts = this.facts;
    if (f.accountId !== null) facts.accountId = f.accountId;
    if (f.keyId !== null) facts.keyId = f.keyId;
    if (f.model !== null) facts.model = f.model;
  }

  admitted(): void {
    this.endAdmission();
  }

  rejected(layer: RejectedLayer): void {
    const by = REJECTED[layer];
    this.deps.metrics.rejections.labels(by).inc();
    if (this.admission !== null) {
      markRejected(this.admission, this.trace.span, by);
      this.endAdmission();
    }
  }

  attempt(channelId: string, protocol: string, n: number): AttemptObserver {
    this.endAdmission();
    const span = this.trace.startUpstreamAttempt(channelId, protocol, n);
    return new AttemptObservation(this.deps.metrics, channelId, span);
  }

  firstChunk(channelId: string): void {
    this.firstChunkMs = performance.now() - this.started;
    if (this.facts.model !== null)
      this.deps.metrics.timeToFirstToken
        .labels(this.facts.model, channelId)
        .observe(this.firstChunkMs / 1000);
  }

  settled(f: SettledFacts): void {
    const metrics = this.deps.metrics;
    this.settledFacts = f;
    const span = this.trace.startSettlement();
    if (f.usage !== null) {
      metrics.tokens.labels(f.model, 'input').inc(f.usage.inputTokens);
      metrics.tokens.labels(f.model, 'cache_hit').inc(f.usage.cacheHitTokens);
      metrics.tokens.labels(f.model, 'output').inc(f.usage.outputTokens);
    }
    addCostNano(metrics.costYuan.labels(f.model), f.costNano);
    if (this.trace.recording) {
      setGenAiAttributes(this.trace.span, {
        operation: genAiOperation(KIND_BY_ROUTE[this.route] ?? 'chat'),
        providerName: f.provider ?? 'unknown',
        requestModel: f.model,
        responseModel: f.upstreamModel,
        inputTokens: f.usage?.inputTokens ?? 0,
        cacheHitTokens: f.usage?.cacheHitTokens ?? 0,
        outputTokens: f.usage?.outputTokens ?? 0,
        timeToFirstChunkMs: this.firstChunkMs,
        accountId: this.facts.accountId ?? '',
        keyId: this.facts.keyId ?? '',
        channelId: f.channelId,
        costNano: f.costNano,
        configVersion: this.version,
      });
      span.setAttribute('switchyard.settlement.status', f.status);
    }
    span.end();
    this.settledDone = true;
    // Streams settle after their response finished: the request span closes here then.
    if (this.finished) {
      this.trace.end(this.status);
      this.writeAccessLine();
    }
  }

  finish(httpStatus: number): void {
    if (this.finished) return;
    this.finished = true;
    this.status = httpStatus;
    this.endAdmission();
    // A response whose settlement is still being written closes its span when that ends.
    if (this.settledDone || httpStatus !== 200) {
      this.trace.end(httpStatus);
      this.writeAccessLine();
    }
  }

  private endAdmission(): void {
    this.admission?.end();
    this.admission = null;
  }

  private writeAccessLine(): void {
    const metrics = this.deps.metrics;
    const settled = this.settledFacts;
    const model = settled?.model ?? this.facts.model ?? '';
    const channel = settled?.channelId ?? '';
    const statusText = String(this.status);
    metrics.requests.labels(this.route, model, channel, statusText).inc();
    metrics.requestDuration
      .labels(this.route, model, statusText)
      .observe((performance.now() - this.started) / 1000);
    this.deps.logger.info(
      accessLogLine({
        reqId: this.requestId,
        route: this.route,
        model: model === '' ? null : model,
        channel: channel === '' ? null : channel,
        status: this.status,
        usage: settled?.usage ?? null,
        costNano: settled?.costNano ?? null,
        latencyMs: Math.round(performance.now() - this.started),
        accountId: this.facts.accountId,
        keyId: this.facts.keyId,
      }),
      'request',
    );
  }
}
