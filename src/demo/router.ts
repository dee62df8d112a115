// Which answer a call to the demo upstream gets: request checks a supplier would make (400),
// unknown routes (404), and a cache so a request seen before is answered with prebuilt bytes.

import { anthropicToolName, isAnthropicThinking, messagesReply } from './anthropic-replies.ts';
import {
  chatReply,
  embeddingsReply,
  imageFileReply,
  imagesReply,
  isOpenAiReasoning,
  modelsReply,
  openAiToolName,
  responsesReply,
} from './openai-replies.ts';
import {
  basePlan,
  toolToCall,
  type Reply,
  type ReplyOverrides,
  type ReplyPlan,
  type Voice,
} from './plan.ts';

/**
 * Answers that depend only on the plan are built once and reused: a benchmark sends the same
 * request thousands of times, and a cached reply turns each into one socket write. 512 distinct
 * plans of a few kB each keep the cache under ~2 MB; past that it starts over.
 */
const REPLY_CACHE_LIMIT = 512;

export class ReplyRouter {
  readonly voice: Voice;
  /** Origin (scheme, host, port) that image URLs point at; set once the server listens. */
  origin: string;
  private readonly cache: Map<string, Reply>;

  constructor(voice: Voice) {
    this.voice = voice;
    this.origin = '';
    this.cache = new Map();
  }

  /** True for the image files behind image URLs: public, like a supplier's signed URLs. */
  static isFile(method: string, path: string): boolean {
    return method === 'GET' && path.startsWith('/files/');
  }

  /** The reply for a call, a validation message (to send as 400), or null (404). */
  route(
    method: string,
    path: string,
    body: Record<string, unknown>,
    overrides: ReplyOverrides | null,
  ): Reply | string | null {
    if (method === 'GET') {
      if (path === '/v1/models') return modelsReply(this.voice.models, this.voice.tag);
      if (ReplyRouter.isFile(method, path)) return imageFileReply;
      return null;
    }
    if (method !== 'POST') return null;
    switch (path) {
      case '/v1/chat/completions': {
        if (typeof body.model !== 'string') return 'you must provide a model parameter';
        if (!Array.isArray(body.messages)) return "Missing required parameter: 'messages'.";
        const tool = toolToCall(body, openAiToolName);
        const plan = basePlan(body, this.voice, overrides, isOpenAiReasoning(body), tool);
        return this.cached(path, plan, chatReply);
      }
      case '/v1/responses': {
        if (typeof body.model !== 'string') return 'you must provide a model parameter';
        const plan = basePlan(body, this.voice, overrides, isOpenAiReasoning(body), null);
        return this.cached(path, plan, responsesReply);
      }
      case '/v1/embeddings':
        if (body.input === undefined) return "Missing required parameter: 'input'.";
        return embeddingsReply(body, overrides?.omitUsage === true);
      case '/v1/images/generations':
        if (typeof body.prompt !== 'string' || body.prompt.length === 0) {
          return "Missing required parameter: 'prompt'.";
        }
        return imagesReply(body, this.origin, this.voice.tag, overrides?.omitUsage === true);
      case '/v1/messages': {
        if (typeof body.model !== 'string') return 'model: Field required';
        if (typeof body.max_tokens !== 'number') return 'max_tokens: Field required';
        if (!Array.isArray(body.messages)) return 'messages: Field required';
        const tool = toolToCall(body, anthropicToolName);
        const plan = basePlan(body, this.voice, overrides, isAnthropicThinking(body), tool);
        return this.cached(path, plan, messagesReply);
      }
      default:
        return null;
    }
  }

  private cached(path: string, plan: ReplyPlan, build: (plan: ReplyPlan) => Reply): Reply {
    const key = path + JSON.stringify(plan);
    let reply = this.cache.get(key);
    if (reply === undefined) {
      if (this.cache.size >= REPLY_CACHE_LIMIT) this.cache.clear();
      reply = build(plan);
      this.cache.set(key, reply);
    }
    return reply;
  }
}
