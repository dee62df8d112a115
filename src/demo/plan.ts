// What one demo answer will contain, decided once from the request, and the deterministic token
// arithmetic behind its usage: one stream piece of the answer text is one output token.

/** Reasoning tokens reported (and included in output) when the request enables reasoning. */
export const REASONING_TOKENS = 8;
/** Output tokens of a tool call (on top of the text pieces of an Anthropic answer). */
export const TOOL_CALL_TOKENS = 12;

/** What a caller may change in an otherwise normal answer (the test mock scripts these). */
export interface ReplyOverrides {
  /** Number of text pieces, for voices that honour it (the test mock does, the demo does not). */
  chunks?: number;
  /** Uncached input tokens to report instead of the estimate. */
  inputTokens?: number;
  /** Prompt tokens to report as cache hits, in the protocol's own fields. */
  cacheHitTokens?: number;
  /** Leave usage out of the answer (and of the stream). */
  omitUsage?: boolean;
}

/** Who is speaking: the words, ids and tool arguments that tell a demo answer from a mock one. */
export interface Voice {
  /** Put in ids, fingerprints and model owners, e.g. 'demo' gives `chatcmpl-demo000001`. */
  tag: string;
  /** Arguments of every tool call, sent in two pieces when streaming. */
  toolArguments: string;
  /** Model ids that GET /v1/models lists. */
  models: readonly string[];
  /** The answer as stream pieces (one piece is one output token); `chunks` from overrides. */
  answer(body: Record<string, unknown>, chunks: number | null): readonly string[];
}

export interface ReplyPlan {
  model: string;
  stream: boolean;
  /** The answer text split as it streams; its length is the text's output tokens. */
  pieces: readonly string[];
  /** Uncached input tokens to report. */
  inputTokens: number;
  cacheHitTokens: number;
  omitUsage: boolean;
  /** OpenAI chat: stream_options.include_usage was set. */
  includeUsage: boolean;
  reasoning: boolean;
  /** Name of the tool to call, or null for a text answer. */
  tool: string | null;
  toolArguments: string;
  tag: string;
}

/** One answer as the server writes it: a JSON body, the SSE events of a stream, or a file. */
export interface Reply {
  status: number;
  stream: boolean;
  contentType: string;
  /** The whole body (not streaming) or one string per SSE event (streaming). */
  parts: readonly string[];
  /** All parts encoded once, so a repeated answer is one socket write with no UTF-8 work. */
  bytes: Buffer;
  /** False when the answer carries per-call values (image URLs) and must not be replayed. */
  reusable: boolean;
}

export function jsonReply(body: unknown, reusable: boolean): Reply {
  const text = JSON.stringify(body);
  return {
    status: 200,
    stream: false,
    contentType: 'application/json',
    parts: [text],
    bytes: Buffer.from(text, 'utf8'),
    reusable,
  };
}

export function streamReply(parts: string[]): Reply {
  return {
    status: 200,
    stream: true,
    contentType: 'text/event-stream; charset=utf-8',
    parts,
    bytes: Buffer.from(parts.join(''), 'utf8'),
    reusable: true,
  };
}

/**
 * Default uncached input tokens: one token per 4 characters of the JSON of what the model reads
 * (messages, system, input), at least 1. Tests call this to predict usage.
 */
export function estimateInputTokens(body: Record<string, unknown>): number {
  let chars = 0;
  for (const key of ['system', 'messages', 'input']) {
    const v = body[key];
    if (v !== undefined) chars += JSON.stringify(v).length;
  }
  return Math.max(1, Math.ceil(chars / 4));
}

export function basePlan(
  body: Record<string, unknown>,
  voice: Voice,
  overrides: ReplyOverrides | null,
  reasoning: boolean,
  tool: string | null,
): ReplyPlan {
  const streamOptions = body.stream_options;
  return {
    model: typeof body.model === 'string' ? body.model : '',
    stream: body.stream === true,
    pieces: voice.answer(body, overrides?.chunks ?? null),
    inputTokens: overrides?.inputTokens ?? estimateInputTokens(body),
    cacheHitTokens: overrides?.cacheHitTokens ?? 0,
    omitUsage: overrides?.omitUsage === true,
    includeUsage:
      typeof streamOptions === 'object' &&
      streamOptions !== null &&
      (streamOptions as Record<string, unknown>).include_usage === true,
    reasoning,
    tool,
    toolArguments: voice.toolArguments,
    tag: voice.tag,
  };
}

/**
 * The text of the last user message, from a string or an array of text parts: chat and messages
 * use `text` parts, the Responses API `input_text`.
 */
export function lastUserText(messages: unknown): string {
  if (!Array.isArray(messages)) return '';
  for (let i = messages.length - 1; i >= 0; i--) {
    const m: unknown = messages[i];
    if (typeof m !== 'object' || m === null) continue;
    const msg = m as Record<string, unknown>;
    if (msg.role !== 'user') continue;
    const content = msg.content;
    if (typeof content === 'string') return content;
    if (!Array.isArray(content)) return '';
    let text = '';
    for (const part of content) {
      if (typeof part === 'object' && part !== null) {
        const p = part as Record<string, unknown>;
        if ((p.type === 'text' || p.type === 'input_text') && typeof p.text === 'string') {
          text += p.text;
        }
      }
    }
    return text;
  }
  return '';
}

/** What the user last said, in chat, messages or Responses shape. */
export function userText(body: Record<string, unknown>): string {
  if (typeof body.input === 'string') return body.input;
  return lastUserText(body.messages ?? body.input);
}

/** The first tool's name when tools are given and the last user message says "use tool". */
export function toolToCall(
  body: Record<string, unknown>,
  nameOf: (t: unknown) => string | null,
): string | null {
  const tools = body.tools;
  if (!Array.isArray(tools) || tools.length === 0) return null;
  if (!lastUserText(body.messages).toLowerCase().includes('use tool')) return null;
  return nameOf(tools[0]);
}

export function sse(event: string | null, data: unknown): string {
  const json = typeof data === 'string' ? data : JSON.stringify(data);
  return event === null ? `data: ${json}\n\n` : `event: ${event}\ndata: ${json}\n\n`;
}

let serial = 0;
/** Ids in the supplier's style, e.g. `chatcmpl-demo00000a`; unique within the process. */
export function nextId(prefix: string, tag: string): string {
  serial++;
  return `${prefix}${tag}${serial.toString(36).padStart(6, '0')}`;
}
