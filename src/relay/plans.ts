// For one (endpoint, candidate channel): the upstream call to make and how to turn its answer into
// the client's, natively or through a translation. The only place that picks protocol adapters.
import { anthropicHeaders } from '../protocols/anthropic/headers.ts';
import { mapMessagesRequest } from '../protocols/anthropic/messages-request.ts';
import { readMessagesResponse } from '../protocols/anthropic/messages-response.ts';
import { MessagesStreamRelay } from '../protocols/anthropic/messages-stream-relay.ts';
import { mapChatRequest } from '../protocols/openai/chat-request.ts';
import { readChatResponse } from '../protocols/openai/chat-response.ts';
import { ChatStreamRelay } from '../protocols/openai/chat-stream-relay.ts';
import { readEmbeddingsResponse } from '../protocols/openai/embeddings.ts';
import { openAiHeaders } from '../protocols/openai/headers.ts';
import { readImagesResponse } from '../protocols/openai/images.ts';
import { mapResponsesRequest, readResponsesResponse } from '../protocols/openai/responses.ts';
import { ResponsesStreamRelay } from '../protocols/openai/responses-stream-relay.ts';
import type { StreamRelay } from '../protocols/stream-relay.ts';
import { anthropicResponseToChat } from '../protocols/translate/anthropic-response-to-chat.ts';
import { AnthropicToChatStream } from '../protocols/translate/anthropic-stream-to-chat.ts';
import { chatRequestToAnthropic } from '../protocols/translate/chat-request-to-anthropic.ts';
import { messagesRequestToOpenAi } from '../protocols/translate/messages-request-to-openai.ts';
import { openAiResponseToMessages } from '../protocols/translate/openai-response-to-messages.ts';
import { OpenAiToMessagesStream } from '../protocols/translate/openai-stream-to-messages.ts';
import type {
  ChatRequest,
  JsonObject,
  MessagesRequest,
  UpstreamIdentity,
} from '../protocols/types.ts';
import { usageFromOpenAiChat, type Usage } from '../protocols/usage.ts';
import type { EndpointKind } from '../table/endpoints.ts';
import type { Candidate, Effort, ModelEntry } from '../table/types.ts';

export interface Finished {
  /** The client's response body. */
  text: string;
  usage: Usage | null;
  upstreamId: string | null;
  upstreamModel: string | null;
  /** Images returned (per-image billing); 0 elsewhere. */
  images: number;
}

export interface UpstreamPlan {
  /** Path under the channel's base path, e.g. "/chat/completions". */
  path: string;
  headers: Record<string, string>;
  body: string;
  stream: boolean;
  /** Non-stream: maps the upstream's answer (parsed, and its text); null when it is not the expected object. */
  finish(answer: unknown, text: string): Finished | null;
  /** Stream: a fresh incremental relay for this attempt. */
  relay(): StreamRelay;
}

export interface PlanInput {
  endpoint: EndpointKind;
  candidate: Candidate;
  model: ModelEntry;
  body: JsonObject;
  effort: Effort | null;
  wantsUsage: boolean;
  apiKey: string;
  /** Client's anthropic-beta header, forwarded to Anthropic upstreams. */
  anthropicBeta: string | null;
  /** Sent upstream as x-request-id, after the channel's own headers. */
  requestId: string;
  /**
   * Image generation: the size that was priced (the body's, or the model's first when it gave
   * none), sent upstream so the supplier makes what is billed; null elsewhere.
   */
  imageSize: string | null;
}

function reasoningParams(input: PlanInput): Record<string, unknown> | null {
  const r = input.model.reasoning;
  if (r === null) return null;
  const effort = input.effort ?? r.defaultEffort;
  return (
    (r.params[effort][input.candidate.channel.protocol] as Record<string, unknown> | null) ?? null
  );
}

/** One fresh object a request: the protocol's headers, the channel's, then the request id. */
function headersFor(input: PlanInput): Record<string, string> {
  const ch = input.candidate.channel;
  const base =
    ch.protocol === 'anthropic'
      ? anthropicHeaders(input.apiKey, input.anthropicBeta)
      : openAiHeaders(input.apiKey);
  for (const name in ch.headers) base[name] = ch.headers[name]!;
  base['x-request-id'] = input.requestId;
  return base;
}

const PASSTHROUGH_PATHS: Partial<Record<EndpointKind, string>> = {
  completions: '/completions',
  rerank: '/rerank',
  audio_speech: '/audio/speech',
  moderations: '/moderations',
  search: '/alpha/search',
  video: '/video/generations',
};

function json(value: unknown): string {
  return JSON.stringify(value);
}

export function planFor(input: PlanInput): UpstreamPlan {
  const { candidate, body } = input;
  const upstreamModel = candidate.upstreamModel;
  const headers = headersFor(input);
  const params = reasoningParams(input);
  const publicName = input.model.name;

  switch (input.endpoint) {
    case 'chat': {
      if (candidate.channel.protocol === 'anthropic') {
        const t = chatRequestToAnthropic(
          body as unknown as ChatRequest,
          upstreamModel,
          params,
          input.model.maxOutputTokens,
        );
        const show = (answer: unknown): unknown => anthropicResponseToChat(answer, publicName);
        return plan(
          '/messages',
          headers,
          t,
          finisher(readMessagesResponse, show),
          () => new AnthropicToChatStream(t.clientWantsUsage, publicName),
        );
      }
      const m = mapChatRequest(body as unknown as ChatRequest, upstreamModel, params, {
        tokens: input.model.maxOutputTokens,
        reasoning: input.model.reasoning !== null,
      });
      return plan(
        '/chat/completions',
        headers,
        m,
        finisher(readChatResponse),
        () => new ChatStreamRelay(m.clientWantsUsage),
      );
    }
    case 'messages': {
      if (candidate.channel.protocol === 'openai') {
        const t = messagesRequestToOpenAi(
          body as unknown as MessagesRequest,
          upstreamModel,
          params,
        );
        const show = (answer: unknown): unknown => openAiResponseToMessages(answer, publicName);
        return plan(
          '/chat/completions',
          headers,
          t,
          finisher(readChatResponse, show),
          () => new OpenAiToMessagesStream(publicName),
        );
      }
      const m = mapMessagesRequest(body as unknown as MessagesRequest, upstreamModel, params);
      return plan(
        '/messages',
        headers,
        m,
        finisher(readMessagesResponse),
        () => new MessagesStreamRelay(),
      );
    }
    case 'responses': {
      const m = mapResponsesRequest(body, upstreamModel, params, input.model.maxOutputTokens);
      return plan(
        '/responses',
        headers,
        m,
        finisher(readResponsesResponse),
        () => new ResponsesStreamRelay(),
      );
    }
    case 'embeddings':
      return nonStream(
        '/embeddings',
        headers,
        { ...body, model: upstreamModel },
        finisher(readEmbeddingsResponse),
      );
    case 'images_generations':
      return nonStream(
        '/images/generations',
        headers,
        // Without it the supplier picks its own default (1024x1024 at OpenAI) while the price
        // was the first listed size's, the cheapest when listed in order (session 21).
        input.imageSize === null
          ? { ...body, model: upstreamModel }
          : { ...body, model: upstreamModel, size: input.imageSize },
        (answer, text) => {
          const info = readImagesResponse(answer);
          return {
            text,
            usage: info.usage,
            upstreamId: null,
            upstreamModel: null,
            images: info.images,
          };
        },
      );
    default: {
      const path = PASSTHROUGH_PATHS[input.endpoint] ?? `/${input.endpoint}`;
      const read = (answer: unknown): UpstreamIdentity & { usage: Usage | null } => ({
        id: null,
        model: null,
        usage: usageFromOpenAiChat((answer as JsonObject | null)?.usage),
      });
      return nonStream(
        path,
        headers,
        { ...body, model: upstreamModel, stream: false },
        finisher(read),
      );
    }
  }
}

type Reader = (answer: unknown) => UpstreamIdentity & { usage: Usage | null };

/**
 * Billing reads the upstream's answer; the client gets that answer's own bytes (no re-serialising
 * on the native path) or, when `show` translates it, the translation (null: not the expected object).
 */
function finisher(
  read: Reader,
  show: ((answer: unknown) => unknown) | null = null,
): UpstreamPlan['finish'] {
  return (answer, text) => {
    let out = text;
    if (show !== null) {
      const shown = show(answer);
      if (shown === null) return null;
      out = json(shown);
    }
    const info = read(answer);
    return {
      text: out,
      usage: info.usage,
      upstreamId: info.id,
      upstreamModel: info.model,
      images: 0,
    };
  };
}

function plan(
  path: string,
  headers: Record<string, string>,
  mapped: { body: JsonObject; stream: boolean },
  finish: UpstreamPlan['finish'],
  relay: () => StreamRelay,
): UpstreamPlan {
  return { path, headers, body: json(mapped.body), stream: mapped.stream, finish, relay };
}

function nonStream(
  path: string,
  headers: Record<string, string>,
  body: JsonObject,
  finish: UpstreamPlan['finish'],
): UpstreamPlan {
  return plan(path, headers, { body, stream: false }, finish, () => {
    throw new Error(`${path} does not stream`);
  });
}
