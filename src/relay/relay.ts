// The per-request pipeline of a model route (DESIGN "the two flows"): admit (auth happened in the
// app), resolve, validate, limit, price at entry and reserve, then try candidate channels until one
// answers, relay the answer or stream, and settle from the usage it reported.
import type { ServerResponse } from 'node:http';
import { errors as undiciErrors, type Dispatcher } from 'undici';
import { imageCost, tokenCost, tokenReservation } from '../billing/meter.ts';
import {
  priceAtEntry,
  sharedSnapshotRecord,
  type PriceSnapshot,
} from '../billing/price-at-entry.ts';
import type { Nano } from '../billing/money.ts';
import type { EndpointDef } from '../http/endpoints.ts';
import type { ModelCall } from '../http/model-front.ts';
import { sendWritten } from '../http/chunk-frame.ts';
import { errorBody, GatewayError, type ErrorStyle } from '../http/errors.ts';
import { redactSecrets, scrubSecrets } from '../telemetry/logging.ts';
import { pathStep } from '../telemetry/path-steps.ts';
import type { SlotLease } from '../limits/limiter.ts';
import { parseJson } from '../protocols/json-read.ts';
import type { JsonObject } from '../protocols/types.ts';
import type { Usage } from '../protocols/usage.ts';
import { keyAllowsModel } from '../store/model-patterns.ts';
import { SplitPriceSnapshot, type SettleOutcome, type SettleStatus } from '../store/store.ts';
import type { EndpointKind } from '../table/endpoints.ts';
import type { Candidate, ModelEntry, Route, RoutingTable } from '../table/types.ts';
import { newRequestId } from '../http/request-id.ts';
import { orderCandidates } from './channel-choice.ts';
import type { GatewayContext } from './context.ts';
import { estimateInputTokens, estimateOutputTokens, inputTokenBound } from './estimate.ts';
import type { AttemptObserver, AttemptOutcome, RequestObserver, SettledFacts } from './observer.ts';
import { planFor, type Finished, type UpstreamPlan } from './plans.ts';
import { RequestAbort } from './request-abort.ts';
import { UpstreamPump } from './stream-pump.ts';
import { requestAnswer, type UpstreamAnswer } from './upstream-answer.ts';
import {
  isObj,
  modelOf,
  validateChat,
  validateCompletions,
  validateImages,
  validateMessages,
  validateResponses,
  type ChatFacts,
} from './validate-body.ts';

/** Who is calling, as the app's authentication found it. */
export interface Caller {
  keyId: string;
  accountId: string;
  allowedModels: readonly string[] | null;
  realnameVerified: boolean;
  /** The blacklist source of this request ("ip:…" or "key:…"). */
  source: string;
}

interface Admitted {
  model: ModelEntry;
  route: Route;
  body: JsonObject;
  facts: ChatFacts;
  snapshot: PriceSnapshot;
  reservedNano: Nano;
  imageSize: string | null;
  imageCount: number;
  /**
   * The usage log's key for this request: its own id, or a new one when the caller chose the id
   * (a caller may send one x-request-id with many requests, and each is billed: decision 0036).
   */
  usageId: string;
  /** Candidates ordered at admission, and the first one's slot when it came with the RPM hit. */
  pre: { candidates: Candidate[]; slot: SlotLease | 'full' | 'none' } | null;
}

export function styleOf(def: EndpointDef): ErrorStyle {
  return def.kind === 'messages' ? 'anthropic' : 'openai';
}

/** Resolves the model and endpoint; unknown model or closed endpoint is 404 naming both. */
export function resolveRoute(
  table: RoutingTable,
  modelName: string,
  endpoint: EndpointKind,
): { model: ModelEntry; route: Route } {
  const model = table.models.get(modelName);
  if (model === undefined)
    throw new GatewayError('model_not_found', `model "${modelName}" does not exist`);
  const route = model.routes.get(endpoint);
  if (route === undefined) {
    throw new GatewayError(
      'model_not_found',
      `model "${modelName}" is not open for the ${endpoint} endpoint (open: ${model.endpoints.join(', ')})`,
    );
  }
  return { model, route };
}

const NO_FACTS: ChatFacts = {
  stream: false,
  wantsUsage: false,
  maxTokens: null,
  choices: 1,
  imageBlocks: 0,
  effort: null,
};

function validate(
  endpoint: EndpointKind,
  body: JsonObject,
  model: ModelEntry,
): { facts: ChatFacts; size: string | null; n: number } {
  switch (endpoint) {
    case 'chat':
      return { facts: validateChat(body, model), size: null, n: 0 };
    case 'messages':
      return { facts: validateMessages(body, model), size: null, n: 0 };
    case 'responses':
      return { facts: validateResponses(body, model), size: null, n: 0 };
    case 'images_generations': {
      const sizes =
        model.billing === 'image'
          ? [...(model.prices.at(-1)?.perImage?.keys() ?? [])]
          : ['1024x1024', '1024x1536', '1536x1024', '512x512', '256x256'];
      const img = validateImages(body, model, sizes);
      return { facts: NO_FACTS, size: img.size, n: img.n };
    }
    default:
      if (body.stream === true)
        throw new GatewayError(
          'invalid_parameter_error',
          `stream is not supported on the ${endpoint} endpoint`,
        );
      if (endpoint === 'completions') {
        return { facts: validateCompletions(body), size: null, n: 0 };
      }
      return { facts: NO_FACTS, size: null, n: 0 };
  }
}

/** A slot is held at most for the channel's total time plus a margin, then frees itself. */
function slotTtlMs(channel: Candidate['channel']): number {
  return channel.timeouts.totalMs + 5_000;
}

/** Frees a slot; a failure is logged, never thrown (the slot expires by its ttl anyway). */
function releaseQuietly(ctx: GatewayContext, lease: SlotLease, requestId: string): Promise<void> {
  return ctx.limiter
    .releaseSlot(lease)
    .catch((err: unknown) => ctx.log.warn({ err, reqId: requestId }, 'slot release failed'));
}

async function admit(
  ctx: GatewayContext,
  table: RoutingTable,
  def: EndpointDef,
  caller: Caller,
  rawBody: unknown,
  bodyBytes: number,
  requestId: string,
  clientRequestId: string | null,
  obs: RequestObserver,
  nowMs: number,
  replyHeaders: Record<string, string>,
): Promise<Admitted> {
  const endpoint = def.kind!;
  let modelName: string;
  try {
    modelName = modelOf(rawBody);
  } catch (err) {
    obs.rejected('validation', 'invalid_parameter_error');
    throw err;
  }
  obs.identify({ accountId: caller.accountId, keyId: caller.keyId, model: modelName });
  let resolved: { model: ModelEntry; route: Route };
  try {
    resolved = resolveRoute(table, modelName, endpoint);
  } catch (err) {
    obs.rejected('routing', 'model_not_found');
    throw err;
  }
  const { model, route } = resolved;
  if (!keyAllowsModel(caller.allowedModels, model.name)) {
    obs.rejected('permission', 'no_access_to_model');
    throw new GatewayError('no_access_to_model', `this API key may not use model "${model.name}"`);
  }
  if (model.realnameRequired && !caller.realnameVerified) {
    obs.rejected('permission', 'realname_required');
    throw new GatewayError(
      'realname_required',
      `model "${model.name}" requires real-name verification of the account`,
    );
  }
  const body = rawBody as JsonObject;
  let checked: { facts: ChatFacts; size: string | null; n: number };
  try {
    checked = validate(endpoint, body, model);
  } catch (err) {
    obs.rejected('validation', 'invalid_parameter_error');
    throw err;
  }
  pathStep('validated');

  // Per-model requests per minute, in the configured scope. The first candidate channel's
  // capacity slot is asked for in the same limiter call (one Redis script): on the Postgres+Redis
  // gateway the RPM hit and the slot were two round trips in a row before the upstream call.
  let pre: Admitted['pre'] = null;
  if (model.rpm !== null) {
    const scope = table.limits.rpmScope;
    const bucket =
      scope === 'platform'
        ? `rpm:${model.name}`
        : scope === 'key'
          ? `rpm:${model.name}:key:${caller.keyId}`
          : `rpm:${model.name}:acct:${caller.accountId}`;
    const candidates = orderCandidates(route, ctx.health, nowMs);
    const first = candidates[0]?.channel;
    const r = await ctx.limiter.hitRpmAndAcquire(
      bucket,
      model.rpm,
      first !== undefined && first.capacity !== null
        ? { channelId: first.id, capacity: first.capacity, ttlMs: slotTtlMs(first) }
        : null,
    );
    pathStep('rpm');
    const limit = String(r.rpm.limit);
    const remaining = String(r.rpm.remaining);
    const reset = `${Math.ceil(r.rpm.resetMs / 1000)}s`;
    if (!r.rpm.allowed) {
      obs.rejected('rpm', 'rate_limited');
      await strike(ctx, table, caller.source, 'rate_limited');
      throw new GatewayError(
        'rate_limited',
        `rate limit of ${model.rpm} requests per minute reached for model "${model.name}"`,
        {
          'x-ratelimit-limit-requests': limit,
          'x-ratelimit-remaining-requests': remaining,
          'x-ratelimit-reset-requests': reset,
          'retry-after': String(r.rpm.retryAfterSeconds),
        },
      );
    }
    replyHeaders['x-ratelimit-limit-requests'] = limit;
    replyHeaders['x-ratelimit-remaining-requests'] = remaining;
    replyHeaders['x-ratelimit-reset-requests'] = reset;
    pre = { candidates, slot: r.slot };
  }
  try {
    // Price at entry, and reserve an upper bound of the cost.
    const snapshot = priceAtEntry(model, caller.accountId, nowMs);
    if (snapshot === null) {
      obs.rejected('routing', 'model_not_found');
      throw new GatewayError('model_not_found', `model "${model.name}" has no price in force`);
    }
    let reservedNano: Nano;
    if (endpoint === 'images_generations' && model.billing === 'image') {
      reservedNano = imageCost(checked.size ?? '', checked.n, snapshot) ?? 0n;
    } else {
      // Each answer asked for (n) may take the whole output bound.
      const maxOut = (checked.facts.maxTokens ?? model.maxOutputTokens) * checked.facts.choices;
      reservedNano = tokenReservation(
        inputTokenBound(bodyBytes, checked.facts.imageBlocks),
        maxOut,
        snapshot,
      );
    }
    const usageId = clientRequestId === null ? requestId : newRequestId();
    let reserved;
    try {
      reserved = await ctx.store.reserve({
        requestId: usageId,
        clientRequestId,
        accountId: caller.accountId,
        keyId: caller.keyId,
        model: model.name,
        endpoint,
        amountNano: reservedNano,
      });
    } catch (err) {
      ctx.log.error({ err, reqId: requestId }, 'store reserve failed');
      throw new GatewayError(
        'service_unavailable',
        'the account store is unavailable; try again shortly',
      );
    }
    pathStep('reserved');
    if (reserved !== 'ok') {
      obs.rejected(
        'balance',
        reserved === 'insufficient' ? 'insufficient_user_quota' : 'account_disabled',
      );
      throw reserved === 'insufficient'
        ? new GatewayError('insufficient_user_quota')
        : new GatewayError('account_disabled');
    }
    obs.admitted();
    return {
      model,
      route,
      body,
      facts: checked.facts,
      snapshot,
      reservedNano,
      imageSize: checked.size,
      imageCount: checked.n,
      usageId,
      pre,
    };
  } catch (err) {
    // Refused after the RPM hit (no price, no balance): the slot taken with it goes back.
    if (pre !== null && typeof pre.slot === 'object') void releaseQuietly(ctx, pre.slot, requestId);
    throw err;
  }
}

/** Counts a strike for the blacklist rules on this event; trips the ban when a rule says so. */
export async function strike(
  ctx: GatewayContext,
  table: RoutingTable,
  source: string,
  on: 'auth_failure' | 'rate_limited',
): Promise<void> {
  for (const rule of table.limits.blacklistRules) {
    if (rule.on !== on) continue;
    try {
      await ctx.limiter.recordStrike(source, {
        name: on,
        max: rule.max,
        windowMs: rule.windowMs,
        banMs: rule.banMs,
      });
    } catch (err) {
      ctx.log.warn({ err }, 'blacklist strike not recorded');
    }
  }
}

interface AttemptFailure {
  outcome: AttemptOutcome;
  status: number | null;
  message: string;
  /** The request itself was at fault (an upstream 4xx): answer now, do not fail over. */
  clientFault: boolean;
}

function classify(err: unknown): AttemptFailure {
  if (
    err instanceof undiciErrors.HeadersTimeoutError ||
    err instanceof undiciErrors.BodyTimeoutError
  ) {
    return {
      outcome: 'timeout',
      status: null,
      message: 'the upstream did not answer in time',
      clientFault: false,
    };
  }
  if (err instanceof undiciErrors.ConnectTimeoutError) {
    return {
      outcome: 'timeout',
      status: null,
      message: 'connecting to the upstream timed out',
      clientFault: false,
    };
  }
  const code = (err as { code?: string }).code ?? '';
  return {
    outcome: 'connect_error',
    status: null,
    message: `upstream connection failed (${code || 'error'})`,
    clientFault: false,
  };
}

function retryAfterMs(text: string | null): number | null {
  if (text === null) return null;
  const secs = Number(text);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function upstreamReason(text: string): string {
  try {
    const parsed: unknown = JSON.parse(text);
    if (isObj(parsed)) {
      const e = parsed.error;
      if (isObj(e) && typeof e.message === 'string') return e.message;
      if (typeof parsed.message === 'string') return parsed.message;
    }
  } catch {
    // not JSON: use the text itself
  }
  return text.slice(0, 300);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface StreamStarted {
  kind: 'stream';
  candidate: Candidate;
  /** Its relay is `pump.relay`. */
  pump: UpstreamPump;
  first: string;
  release: () => Promise<void>;
  /** The attempt's observer, ended once the first chunk is sent. */
  attempt: AttemptObserver;
}

interface Answered {
  kind: 'answer';
  candidate: Candidate;
  finished: Finished;
  status: number;
}

/** Outcome of the attempts loop: a started stream, a full answer, or the error to return. */
type Dispatched =
  StreamStarted | Answered | { kind: 'error'; error: GatewayError; attempted: boolean };

async function dispatch(
  ctx: GatewayContext,
  admitted: Admitted,
  endpoint: EndpointKind,
  call: ModelCall,
  requestId: string,
  obs: RequestObserver,
  abort: RequestAbort,
): Promise<Dispatched> {
  const candidates =
    admitted.pre?.candidates ?? orderCandidates(admitted.route, ctx.health, Date.now());
  // The first candidate's slot when it came with the RPM hit (admit): a lease or 'full'.
  let given = admitted.pre?.slot ?? 'none';
  const started = performance.now();
  let attempts = 0;
  let full = 0;
  let lastFailure: AttemptFailure | null = null;
  const beta = call.headers['anthropic-beta'];
  for (const candidate of candidates) {
    const preSlot = given;
    given = 'none';
    if (attempts >= ctx.relay.maxAttempts || abort.aborted) {
      if (typeof preSlot === 'object') void releaseQuietly(ctx, preSlot, requestId);
      break;
    }
    const channel = candidate.channel;
    // Capacity: a full channel is skipped; its slot is held until the answer or stream ends.
    let lease = null;
    if (channel.capacity !== null) {
      lease =
        preSlot === 'none'
          ? await ctx.limiter.acquireSlot(channel.id, channel.capacity, slotTtlMs(channel))
          : preSlot === 'full'
            ? null
            : preSlot;
      if (lease === null) {
        full++;
        continue;
      }
    }
    let released = false;
    const release = async (): Promise<void> => {
      if (released || lease === null) return;
      released = true;
      await releaseQuietly(ctx, lease, requestId);
    };
    if (attempts > 0)
      await sleep(Math.min(ctx.relay.backoffMs * 2 ** (attempts - 1), ctx.relay.backoffMs * 8));
    attempts++;
    const apiKey = ctx.upstreams.apiKey(channel);
    let plan: UpstreamPlan;
    try {
      plan = planFor({
        endpoint,
        candidate,
        model: admitted.model,
        body: admitted.body,
        effort: admitted.facts.effort,
        wantsUsage: admitted.facts.wantsUsage,
        apiKey,
        anthropicBeta: typeof beta === 'string' ? beta : null,
        requestId,
        imageSize: endpoint === 'images_generations' ? admitted.imageSize : null,
      });
    } catch (err) {
      // A body that validation let through but a translation cannot read (a null tool, a block
      // without its source): the request's fault, and nothing went upstream. It was a 502 that
      // kept the channel's capacity slot until its TTL, 15 s (session 21).
      await release();
      ctx.log.warn({ err, reqId: requestId, channel: channel.id }, 'request not translatable');
      return {
        kind: 'error',
        error: new GatewayError(
          'invalid_parameter_error',
          `the request body cannot be sent to this model's upstream protocol (${channel.protocol}): a field has a value of the wrong shape`,
        ),
        attempted: false,
      };
    }
    pathStep('planned');
    const attemptObs = obs.attempt(channel.id, channel.protocol, attempts);
    const pool = ctx.upstreams.pool(channel);
    const request: Dispatcher.DispatchOptions = {
      method: 'POST',
      path: pool.basePath + plan.path,
      headers: plan.headers,
      body: plan.body,
      headersTimeout: channel.timeouts.firstByteMs,
      bodyTimeout: channel.timeouts.firstByteMs,
    };
    // An answer is read whole by one dispatch handler (upstream-answer.ts); a stream's body is
    // read as it comes by another (stream-pump.ts).
    let pump: UpstreamPump | null = null;
    let answer: UpstreamAnswer | null = null;
    try {
      if (plan.stream) {
        pump = new UpstreamPump(() => {
          const relay = plan.relay();
          relay.hideSecrets([apiKey]);
          return relay;
        }, abort);
        await pump.send(pool.pool, request);
      } else answer = await requestAnswer(pool.pool, request, abort);
    } catch (err) {
      await release();
      if (abort.aborted) break;
      lastFailure = classify(err);
      attemptObs.end(lastFailure.outcome, null);
      ctx.health.failure(channel.id, Date.now());
      continue;
    }
    const status = answer?.status ?? pump!.status;
    if (status >= 400) {
      const text = answer !== null ? (answer.text ?? '') : await pump!.errorText();
      await release();
      // An upstream may quote the key it was sent, in whatever shape the key has: the channel's
      // own key is removed by value, then anything shaped like a key (session 21: a key without
      // the `sk-` shape reached the client in a 502 and a 400).
      const reason = scrubSecrets(redactSecrets(upstreamReason(text), [apiKey]));
      if (status === 429 || status >= 500 || status === 401 || status === 403) {
        lastFailure = {
          outcome: status === 429 ? 'http_429' : status >= 500 ? 'http_5xx' : 'http_4xx',
          status,
          message: `upstream ${status}: ${reason}`,
          clientFault: false,
        };
        attemptObs.end(lastFailure.outcome, status);
        ctx.health.failure(
          channel.id,
          Date.now(),
          status === 429 ? retryAfterMs((answer ?? pump!).header('retry-after')) : null,
        );
        continue;
      }
      // 400, 404, 413, 422…: the request itself is at fault; another channel would say the same.
      attemptObs.end('http_4xx', status);
      return {
        kind: 'error',
        error: new GatewayError(
          'invalid_parameter_error',
          `upstream rejected the request: ${reason}`,
        ),
        attempted: true,
      };
    }
    if (answer !== null) {
      let finished: Finished | null = null;
      try {
        if (answer.text === null) throw answer.error;
        finished = plan.finish(JSON.parse(answer.text), answer.text);
      } catch (err) {
        await release();
        if (abort.aborted) break;
        lastFailure = classify(err);
        if (lastFailure.outcome === 'connect_error')
          lastFailure = {
            ...lastFailure,
            outcome: 'stream_cut',
            message: 'the upstream answer was cut or malformed',
          };
        attemptObs.end(lastFailure.outcome, status);
        ctx.health.failure(channel.id, Date.now());
        continue;
      }
      await release();
      if (finished === null) {
        lastFailure = {
          outcome: 'http_5xx',
          status,
          message: 'the upstream answer was not the expected object',
          clientFault: false,
        };
        attemptObs.end('http_5xx', status);
        ctx.health.failure(channel.id, Date.now());
        continue;
      }
      attemptObs.end('ok', status);
      ctx.health.success(channel.id);
      return { kind: 'answer', candidate, finished, status };
    }
    // A stream: wait for its first chunk before committing to this channel, so a stream that dies
    // before saying anything still fails over (DESIGN invariant 7: retry only before the first byte).
    const stream = pump!;
    const relay = stream.relay;
    let first = '';
    try {
      first = await stream.first();
    } catch (err) {
      await release();
      if (abort.aborted) break;
      lastFailure = {
        ...classify(err),
        outcome: 'stream_cut',
        message: 'the upstream stream was cut before its first event',
      };
      attemptObs.end('stream_cut', status);
      ctx.health.failure(channel.id, Date.now());
      continue;
    }
    // Nothing from the upstream at all: a chat relay's closing `[DONE]` alone is not an answer
    // (an empty 200 stream was answered `data: [DONE]` and billed, never failed over).
    if (first === '' || relay.events === 0) {
      stream.cancel();
      await release();
      lastFailure = {
        outcome: 'stream_cut',
        status,
        message: 'the upstream stream ended empty',
        clientFault: false,
      };
      attemptObs.end('stream_cut', status);
      ctx.health.failure(channel.id, Date.now());
      continue;
    }
    // The attempt's success is recorded once the first chunk is on its way (relayModelRoute).
    return {
      kind: 'stream',
      candidate,
      pump: stream,
      first,
      release,
      attempt: attemptObs,
    };
  }
  if (abort.aborted)
    return {
      kind: 'error',
      error: new GatewayError('upstream_error', 'the client went away'),
      attempted: attempts > 0,
    };
  if (attempts === 0 && full > 0) {
    obs.rejected('capacity', 'channel_capacity_exceeded');
    return {
      kind: 'error',
      error: new GatewayError(
        'channel_capacity_exceeded',
        `every channel of model "${admitted.model.name}" is at capacity`,
      ),
      attempted: false,
    };
  }
  const elapsed = Math.round(performance.now() - started);
  if (lastFailure?.outcome === 'timeout') {
    return {
      kind: 'error',
      error: new GatewayError(
        'upstream_timeout',
        `${lastFailure.message} (${attempts} attempt(s), ${elapsed} ms)`,
      ),
      attempted: true,
    };
  }
  return {
    kind: 'error',
    error: new GatewayError(
      'upstream_error',
      `${lastFailure?.message ?? 'no channel could be tried'} (${attempts} attempt(s), ${elapsed} ms)`,
    ),
    attempted: attempts > 0,
  };
}

interface Metered {
  usage: Usage | null;
  estimated: boolean;
  costNano: Nano;
}

function meter(
  admitted: Admitted,
  usage: Usage | null,
  images: number,
  outputEstimate: number,
  partial = false,
): Metered {
  const s = admitted.snapshot;
  if (admitted.model.billing === 'image' && admitted.imageSize !== null) {
    const count = images > 0 ? images : 0;
    return { usage, estimated: false, costNano: imageCost(admitted.imageSize, count, s) ?? 0n };
  }
  if (usage !== null) {
    // A stream cut before its end marker may have reported usage only so far: Anthropic's
    // message_start says output_tokens: 1, and a client that left after 250 deltas paid for 1
    // (session 21). What was relayed is billed at least.
    // And usage without an output count (outputReported false) is estimated the same way.
    if ((partial || !usage.outputReported) && outputEstimate > usage.outputTokens) {
      const floor: Usage = { ...usage, outputTokens: outputEstimate };
      return { usage: floor, estimated: true, costNano: tokenCost(floor, s) };
    }
    return { usage, estimated: false, costNano: tokenCost(usage, s) };
  }
  const input = estimateInputTokens(admitted.body);
  const est: Usage = {
    inputTokens: input,
    cacheHitTokens: 0,
    outputTokens: outputEstimate,
    reasoningTokens: 0,
    cacheHitReported: false,
    outputReported: false,
  };
  return { usage: est, estimated: true, costNano: tokenCost(est, s) };
}

/**
 * Writes the request's one outcome; retried briefly so a store blip does not strand a reservation.
 * What waits for the write keeps only what the observer needs, not the request (its body, its
 * admission): a settlement stays pending up to ~60 ms behind the response (decision 0021), and
 * the ~4.1 KB each one kept alive was most of what every scavenge copied (heap snapshot diff,
 * session 9).
 */
function settle(
  ctx: GatewayContext,
  requestId: string,
  admitted: Admitted,
  candidate: Candidate | null,
  metered: Metered | null,
  status: SettleStatus,
  httpStatus: number,
  startedAt: number,
  upstreamId: string | null,
  obs: RequestObserver,
): Promise<void> {
  const usage = metered?.usage ?? null;
  const costNano = status === 'failed' ? 0n : (metered?.costNano ?? 0n);
  const model = admitted.model.name;
  const snapshot = admitted.snapshot;
  const outcome: SettleOutcome = {
    model,
    channelId: candidate?.channel.id ?? null,
    inputTokens: usage?.inputTokens ?? 0,
    cacheHitTokens: usage?.cacheHitTokens ?? 0,
    outputTokens: usage?.outputTokens ?? 0,
    reasoningTokens: usage?.reasoningTokens ?? 0,
    estimated: metered?.estimated ?? false,
    priceSnapshot: new SplitPriceSnapshot(sharedSnapshotRecord(snapshot), snapshot.atMs),
    peakApplied: snapshot.peakWindowId !== null,
    campaignId: snapshot.campaignId,
    costNano,
    status,
    httpStatus,
    latencyMs: Math.round(performance.now() - startedAt),
    upstreamRequestId: upstreamId,
  };
  return writeOutcome(
    ctx,
    requestId,
    admitted.usageId,
    outcome,
    {
      model,
      channelId: outcome.channelId,
      provider: candidate?.channel.protocol ?? null,
      upstreamModel: candidate?.upstreamModel ?? null,
      usage,
      estimated: outcome.estimated,
      costNano: 0n,
      status,
    },
    obs,
  );
}

/**
 * settle()'s write and its retries; `facts.costNano` is filled from the store's answer. Counted
 * in `ctx.inflight` from its first (synchronous) step to its end, so close() waits for it.
 */
async function writeOutcome(
  ctx: GatewayContext,
  requestId: string,
  usageId: string,
  outcome: SettleOutcome,
  facts: SettledFacts,
  obs: RequestObserver,
): Promise<void> {
  ctx.inflight.enter();
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await ctx.store.settle(usageId, outcome);
        facts.costNano = r.result === 'settled' ? r.costNano : 0n;
        obs.settled(facts);
        return;
      } catch (err) {
        if (attempt >= 4) {
          ctx.log.error(
            { err, reqId: requestId, usageId },
            'settlement failed; the reservation is left for recovery',
          );
          return;
        }
        await sleep(50 * 2 ** attempt);
      }
    }
  } finally {
    ctx.inflight.leave();
  }
}

// No `connection` header: set by hand, it stops node:http from sending `keep-alive: timeout=72`
// (fastify's keep-alive), and undici clients then drop an idle connection after their default
// 4 s; the paced bench reconnected ~half its streams that way (session 12).
const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
};

function streamErrorText(style: ErrorStyle, requestId: string, message: string): string {
  const body = errorBody('upstream_error', message, requestId, style);
  return style === 'anthropic'
    ? `event: error\ndata: ${body}\n\n`
    : `data: ${body}\n\ndata: [DONE]\n\n`;
}

/** Handles one request on a model route after authentication. */
export async function relayModelRoute(
  ctx: GatewayContext,
  def: EndpointDef,
  call: ModelCall,
  res: ServerResponse,
  caller: Caller,
  obs: RequestObserver,
): Promise<void> {
  const startedAt = performance.now();
  const nowMs = Date.now();
  const table = ctx.tables.current; // captured once: the price and routes in force at entry
  const requestId = call.id;
  // The caller's id, when the request came with one: kept on the usage row beside the gateway's.
  const clientRequestId = requestId === call.headers['x-request-id'] ? requestId : null;
  const admitted = await admit(
    ctx,
    table,
    def,
    caller,
    call.body,
    call.bodyBytes,
    requestId,
    clientRequestId,
    obs,
    nowMs,
    call.replyHeaders,
  );
  const endpoint = def.kind!;

  // A client that goes away aborts the upstream call; what was used is still billed.
  const abort = new RequestAbort();
  const onClose = (): void => {
    if (!res.writableFinished) abort.abort();
  };
  res.on('close', onClose);

  let dispatched: Dispatched;
  try {
    dispatched = await dispatch(ctx, admitted, endpoint, call, requestId, obs, abort);
  } catch (err) {
    dispatched = {
      kind: 'error',
      error:
        err instanceof GatewayError
          ? err
          : new GatewayError('upstream_error', 'the upstream call failed'),
      attempted: true,
    };
    ctx.log.error({ err, reqId: requestId }, 'dispatch failed');
  }

  if (dispatched.kind === 'error') {
    res.off('close', onClose);
    if (!dispatched.attempted) {
      // Rejected before any upstream call (every channel full): no usage row, the hold released.
      await ctx.store
        .release(admitted.usageId)
        .catch((err: unknown) => ctx.log.error({ err, reqId: requestId }, 'release failed'));
      throw dispatched.error;
    }
    // Failed attempts cost nothing: the reservation is settled at zero with the failure recorded.
    await settle(
      ctx,
      requestId,
      admitted,
      null,
      null,
      abort.aborted ? 'client_aborted' : 'failed',
      dispatched.error.status,
      startedAt,
      null,
      obs,
    );
    throw dispatched.error;
  }

  if (dispatched.kind === 'answer') {
    const { finished, candidate } = dispatched;
    const metered = meter(
      admitted,
      finished.usage,
      finished.images,
      finished.usage === null || !finished.usage.outputReported
        ? estimateOutputTokens(parseJson(finished.text))
        : 0,
    );
    res.off('close', onClose);
    const headers = call.replyHeaders;
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(finished.text));
    res.writeHead(200, headers);
    res.end(finished.text);
    void settle(
      ctx,
      requestId,
      admitted,
      candidate,
      metered,
      'ok',
      200,
      startedAt,
      finished.upstreamId,
      obs,
    );
    return;
  }

  // Stream: commit the response now and pass chunks through as they arrive, honouring backpressure.
  const { pump, candidate, release } = dispatched;
  const relay = pump.relay;
  let status: SettleStatus = 'ok';
  let timedOut = false;
  let deadline: NodeJS.Timeout | undefined;
  try {
    res.writeHead(200, Object.assign(call.replyHeaders, SSE_HEADERS));
    // The first chunk goes before the bookkeeping of its arrival: in a burst of new streams each
    // one's first byte waits for the work of those ahead of it.
    res.write(dispatched.first);
    sendWritten(res);
    // The channel's total time bounds the whole stream: one timer per request, none per chunk,
    // armed once the first chunk is written (a timer armed cold costs a paced stream's first
    // byte ~30 µs, decision 0070). Until then the first-byte timeout bounds the call.
    deadline = setTimeout(() => {
      timedOut = true;
      abort.abort();
    }, candidate.channel.timeouts.totalMs);
    dispatched.attempt.end('ok', pump.status);
    ctx.health.success(candidate.channel.id);
    obs.firstChunk(candidate.channel.id);
    const end = await pump.rest(res);
    if (!end.ended) {
      if (timedOut || !abort.aborted) {
        // After the first byte there is no retry: the stream ends with an error event.
        status = 'aborted';
        const message = timedOut
          ? 'the upstream exceeded its total time'
          : 'the upstream stream was cut';
        ctx.log.warn({ err: end.error, reqId: requestId, channel: candidate.channel.id }, message);
        obs
          .attempt(candidate.channel.id, candidate.channel.protocol, 0)
          .end(timedOut ? 'timeout' : 'stream_cut', 200);
        if (!res.destroyed) res.write(streamErrorText(styleOf(def), requestId, message));
      } else status = 'client_aborted';
    } else if (abort.aborted) status = 'client_aborted';
  } finally {
    clearTimeout(deadline);
    res.off('close', onClose);
    // Free the slot before the client sees the end, so its next request finds it free.
    await release();
    if (!res.destroyed) res.end();
    // Drop what is left of a body not read to its end (a no-op once undici has ended the call),
    // so the pool's connection is not held.
    pump.cancel();
  }
  const metered = meter(admitted, relay.usage, 0, relay.events, !relay.completed);
  obs.finish(200);
  await settle(
    ctx,
    requestId,
    admitted,
    candidate,
    metered,
    status,
    200,
    startedAt,
    relay.upstreamId,
    obs,
  );
}
