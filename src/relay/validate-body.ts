// Request-body validation per endpoint: a clear 400 invalid_parameter_error naming the field, and
// the capability checks against the model's config (a capability the model lacks is a 400 too).
// Hand-written rather than ajv: each rule says exactly which field is wrong, in ~1 µs.
import { GatewayError } from '../http/errors.ts';
import type { ChatRequest, MessagesRequest } from '../protocols/types.ts';
import type { Effort, ModelEntry } from '../table/types.ts';

type Obj = Record<string, unknown>;

function bad(message: string): GatewayError {
  return new GatewayError('invalid_parameter_error', message);
}

function isObj(v: unknown): v is Obj {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function optType(body: Obj, field: string, type: 'boolean' | 'number' | 'string' | 'object'): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  const ok = type === 'object' ? isObj(v) : typeof v === type;
  if (!ok || (type === 'number' && !Number.isFinite(v))) throw bad(`${field} must be a ${type}`);
}

function optInt(body: Obj, field: string, min: number): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min) {
    throw bad(`${field} must be an integer of at least ${min}`);
  }
}

function optRange(body: Obj, field: string, min: number, max: number): void {
  const v = body[field];
  if (v === undefined || v === null) return;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) {
    throw bad(`${field} must be a number from ${min} to ${max}`);
  }
}

/** The model name of any JSON body; the first check every model route makes. */
export function modelOf(body: unknown): string {
  if (!isObj(body)) throw bad('the request body must be a JSON object');
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0)
    throw bad('model is required and must be a string');
  return model;
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
const EFFORTS = new Set(['low', 'high', 'max']);

export interface ChatFacts {
  stream: boolean;
  wantsUsage: boolean;
  maxTokens: number | null;
  /** Answers asked for (`n` of chat and completions): each may take maxTokens of output. */
  choices: number;
  imageBlocks: number;
  effort: Effort | null;
}

/** OpenAI's own ceiling on `n`. */
const MAX_CHOICES = 128;

function choicesOf(body: Obj): number {
  optInt(body, 'n', 1);
  const n = (body.n ?? 1) as number;
  if (n > MAX_CHOICES) throw bad(`n must be at most ${MAX_CHOICES}`);
  return n;
}

function requireCapability(model: ModelEntry, has: boolean, what: string): void {
  if (!has) throw bad(`model "${model.name}" does not support ${what}`);
}

function effortOf(body: Obj, model: ModelEntry): Effort | null {
  const e = body.reasoning_effort;
  if (e === undefined || e === null) return null;
  if (typeof e !== 'string' || !EFFORTS.has(e))
    throw bad('reasoning_effort must be one of: low, high, max');
  requireCapability(model, model.capabilities.reasoning, 'reasoning_effort');
  return e as Effort;
}

/** Validates a chat completions body (spec 2.1, 2.2) against the model's capabilities. */
export function validateChat(body: Obj, model: ModelEntry): ChatFacts {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw bad('messages must be a non-empty array');
  let imageBlocks = 0;
  messages.forEach((m: unknown, i) => {
    if (!isObj(m)) throw bad(`messages[${i}] must be an object`);
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      throw bad(`messages[${i}].role must be one of: system, user, assistant, tool`);
    }
    const content = m.content;
    if (typeof content === 'string') return;
    if (content === null || content === undefined) {
      if (m.role === 'assistant' && Array.isArray(m.tool_calls)) return;
      throw bad(`messages[${i}].content is required`);
    }
    if (!Array.isArray(content))
      throw bad(`messages[${i}].content must be a string or an array of content blocks`);
    content.forEach((b: unknown, j) => {
      const where = `messages[${i}].content[${j}]`;
      if (!isObj(b)) throw bad(`${where} must be an object`);
      if (b.type === 'text') {
        if (typeof b.text !== 'string') throw bad(`${where}.text must be a string`);
      } else if (b.type === 'image_url') {
        const url = isObj(b.image_url) ? b.image_url.url : undefined;
        if (typeof url !== 'string' || url.length === 0)
          throw bad(`${where}.image_url.url must be a string`);
        imageBlocks++;
      } else {
        throw bad(`${where}.type must be "text" or "image_url"`);
      }
    });
  });
  optType(body, 'stream', 'boolean');
  optInt(body, 'max_tokens', 1);
  optInt(body, 'max_completion_tokens', 1);
  optRange(body, 'temperature', 0, 2);
  optRange(body, 'top_p', 0, 1);
  optType(body, 'response_format', 'object');
  optType(body, 'stream_options', 'object');
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw bad('tools must be an array');
    body.tools.forEach((t: unknown, i) => {
      if (
        !isObj(t) ||
        t.type !== 'function' ||
        !isObj(t.function) ||
        typeof t.function.name !== 'string'
      ) {
        throw bad(`tools[${i}] must be {type: "function", function: {name, parameters}}`);
      }
    });
    requireCapability(model, model.capabilities.tools, 'tools');
  }
  if (body.tool_choice !== undefined && body.tool_choice !== null) {
    const tc = body.tool_choice;
    if (!(typeof tc === 'string' ? ['none', 'auto', 'required'].includes(tc) : isObj(tc))) {
      throw bad('tool_choice must be "none", "auto", "required" or an object');
    }
    requireCapability(model, model.capabilities.tools, 'tool_choice');
  }
  if (body.response_format !== undefined && body.response_format !== null) {
    requireCapability(model, model.capabilities.responseFormat, 'response_format');
  }
  if (imageBlocks > 0) requireCapability(model, model.capabilities.imageInput, 'image input');
  const so = body.stream_options as Obj | undefined | null;
  if (isObj(so) && so.include_usage !== undefined && typeof so.include_usage !== 'boolean') {
    throw bad('stream_options.include_usage must be a boolean');
  }
  const maxTokens = (body.max_completion_tokens ?? body.max_tokens ?? null) as number | null;
  return {
    stream: body.stream === true,
    wantsUsage: isObj(so) && so.include_usage === true,
    maxTokens,
    choices: choicesOf(body),
    imageBlocks,
    effort: effortOf(body, model),
  };
}

/** Validates a messages body (spec 2.6): max_tokens is required by that protocol. */
export function validateMessages(body: Obj, model: ModelEntry): ChatFacts {
  if (body.max_tokens === undefined || body.max_tokens === null)
    throw bad('max_tokens is required');
  optInt(body, 'max_tokens', 1);
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0)
    throw bad('messages must be a non-empty array');
  let imageBlocks = 0;
  messages.forEach((m: unknown, i) => {
    if (!isObj(m) || (m.role !== 'user' && m.role !== 'assistant')) {
      throw bad(`messages[${i}].role must be "user" or "assistant"`);
    }
    if (typeof m.content === 'string') return;
    if (!Array.isArray(m.content))
      throw bad(`messages[${i}].content must be a string or an array of content blocks`);
    m.content.forEach((b: unknown, j) => {
      if (!isObj(b) || typeof b.type !== 'string')
        throw bad(`messages[${i}].content[${j}] must be a content block`);
      if (b.type === 'image') imageBlocks++;
    });
  });
  if (body.system !== undefined && typeof body.system !== 'string' && !Array.isArray(body.system)) {
    throw bad('system must be a string or an array of text blocks');
  }
  optType(body, 'stream', 'boolean');
  optRange(body, 'temperature', 0, 1);
  optRange(body, 'top_p', 0, 1);
  if (body.tools !== undefined) {
    if (!Array.isArray(body.tools)) throw bad('tools must be an array');
    requireCapability(model, model.capabilities.tools, 'tools');
  }
  if (imageBlocks > 0) requireCapability(model, model.capabilities.imageInput, 'image input');
  return {
    stream: body.stream === true,
    wantsUsage: true,
    maxTokens: body.max_tokens as number,
    choices: 1,
    imageBlocks,
    effort: effortOf(body, model),
  };
}

/**
 * A text completion (/v1/completions, passed through): its output bound and `n`, which the
 * reservation needs; a max_tokens the client gives is sent as it is.
 */
export function validateCompletions(body: Obj): ChatFacts {
  optInt(body, 'max_tokens', 1);
  return {
    stream: false,
    wantsUsage: false,
    maxTokens: (body.max_tokens ?? null) as number | null,
    choices: choicesOf(body),
    imageBlocks: 0,
    effort: null,
  };
}

/** Validates a responses body (spec 2.6a). */
export function validateResponses(body: Obj, model: ModelEntry): ChatFacts {
  const input = body.input;
  if (typeof input !== 'string' && !Array.isArray(input))
    throw bad('input must be a string or an array of input items');
  optType(body, 'stream', 'boolean');
  optInt(body, 'max_output_tokens', 1);
  optType(body, 'instructions', 'string');
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw bad('tools must be an array');
    requireCapability(model, model.capabilities.tools, 'tools');
  }
  return {
    stream: body.stream === true,
    wantsUsage: true,
    maxTokens: (body.max_output_tokens ?? null) as number | null,
    choices: 1,
    imageBlocks: 0,
    effort: effortOf(body, model),
  };
}

export interface ImageFacts {
  size: string;
  n: number;
}

const SIZE = /^\d{2,5}x\d{2,5}$/;

/** Validates an image generation body (spec 2.5 and rule 4.2.3). */
export function validateImages(body: Obj, model: ModelEntry, sizes: readonly string[]): ImageFacts {
  if (typeof body.prompt !== 'string' || body.prompt.trim().length === 0)
    throw bad('prompt is required and must be a non-empty string');
  if (body.prompt.length > 32_000) throw bad('prompt is too long (at most 32000 characters)');
  optInt(body, 'n', 1);
  const n = (body.n ?? 1) as number;
  if (n > 10) throw bad('n must be at most 10');
  const size = body.size ?? sizes[0];
  if (typeof size !== 'string' || !SIZE.test(size))
    throw bad('size must be "<width>x<height>", e.g. 1024x1024');
  if (!sizes.includes(size))
    throw bad(
      `model "${model.name}" does not support size ${size}; supported: ${sizes.join(', ')}`,
    );
  return { size, n };
}

export { isObj };
export type { ChatRequest, MessagesRequest };
