// The OpenAI side of the demo upstream: chat completions, responses, embeddings and images
// answers, built as the published API shapes them (objects, chunk and event sequences, usage).

import {
  jsonReply,
  nextId,
  REASONING_TOKENS,
  sse,
  streamReply,
  TOOL_CALL_TOKENS,
  type Reply,
  type ReplyPlan,
} from './plan.ts';

export function isOpenAiReasoning(body: Record<string, unknown>): boolean {
  return (
    body.reasoning_effort !== undefined ||
    body.thinking !== undefined ||
    body.enable_thinking === true ||
    body.reasoning !== undefined
  );
}

export function openAiToolName(tool: unknown): string | null {
  if (typeof tool !== 'object' || tool === null) return null;
  const t = tool as Record<string, unknown>;
  const fn = t.function;
  if (typeof fn === 'object' && fn !== null) {
    const name = (fn as Record<string, unknown>).name;
    return typeof name === 'string' ? name : null;
  }
  return typeof t.name === 'string' ? t.name : null;
}

function outputTokens(plan: ReplyPlan): number {
  return (
    (plan.tool !== null ? TOOL_CALL_TOKENS : plan.pieces.length) +
    (plan.reasoning ? REASONING_TOKENS : 0)
  );
}

function chatUsage(plan: ReplyPlan): Record<string, unknown> {
  const prompt = plan.inputTokens + plan.cacheHitTokens;
  const completion = outputTokens(plan);
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: plan.cacheHitTokens, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: plan.reasoning ? REASONING_TOKENS : 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

export function chatReply(plan: ReplyPlan): Reply {
  const id = nextId('chatcmpl-', plan.tag);
  const created = Math.floor(Date.now() / 1000);
  const fingerprint = `fp_${plan.tag}`;
  const toolCallId = plan.tool !== null ? nextId('call_', plan.tag) : '';
  if (!plan.stream) {
    const message: Record<string, unknown> = {
      role: 'assistant',
      content: plan.tool !== null ? null : plan.pieces.join(''),
      refusal: null,
      annotations: [],
    };
    if (plan.tool !== null) {
      message.tool_calls = [
        {
          id: toolCallId,
          type: 'function',
          function: { name: plan.tool, arguments: plan.toolArguments },
        },
      ];
    }
    const body: Record<string, unknown> = {
      id,
      object: 'chat.completion',
      created,
      model: plan.model,
      choices: [
        {
          index: 0,
          message,
          logprobs: null,
          finish_reason: plan.tool !== null ? 'tool_calls' : 'stop',
        },
      ],
      system_fingerprint: fingerprint,
    };
    if (!plan.omitUsage) body.usage = chatUsage(plan);
    return jsonReply(body, true);
  }
  // With include_usage every chunk carries "usage":null and a last chunk has choices: [].
  const usageTail = plan.includeUsage ? ',"usage":null}' : '}';
  const head =
    `{"id":"${id}","object":"chat.completion.chunk","created":${created},` +
    `"model":${JSON.stringify(plan.model)},"system_fingerprint":"${fingerprint}","choices":[`;
  const chunk = (delta: unknown, finish: string | null): string =>
    `data: ${head}{"index":0,"delta":${JSON.stringify(delta)},"logprobs":null,"finish_reason":${
      finish === null ? 'null' : `"${finish}"`
    }}]${usageTail}\n\n`;
  const parts: string[] = [chunk({ role: 'assistant', content: '', refusal: null }, null)];
  if (plan.tool !== null) {
    const half = plan.toolArguments.length >> 1;
    parts.push(
      chunk(
        {
          tool_calls: [
            {
              index: 0,
              id: toolCallId,
              type: 'function',
              function: { name: plan.tool, arguments: '' },
            },
          ],
        },
        null,
      ),
      chunk(
        { tool_calls: [{ index: 0, function: { arguments: plan.toolArguments.slice(0, half) } }] },
        null,
      ),
      chunk(
        { tool_calls: [{ index: 0, function: { arguments: plan.toolArguments.slice(half) } }] },
        null,
      ),
      chunk({}, 'tool_calls'),
    );
  } else {
    for (const piece of plan.pieces) parts.push(chunk({ content: piece }, null));
    parts.push(chunk({}, 'stop'));
  }
  if (plan.includeUsage && !plan.omitUsage) {
    parts.push(`data: ${head}],"usage":${JSON.stringify(chatUsage(plan))}}\n\n`);
  }
  parts.push('data: [DONE]\n\n');
  return streamReply(parts);
}

function responsesUsage(plan: ReplyPlan): Record<string, unknown> {
  const input = plan.inputTokens + plan.cacheHitTokens;
  const output = outputTokens(plan);
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: plan.cacheHitTokens },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: plan.reasoning ? REASONING_TOKENS : 0 },
    total_tokens: input + output,
  };
}

export function responsesReply(plan: ReplyPlan): Reply {
  const id = nextId('resp_', plan.tag);
  const itemId = nextId('msg_', plan.tag);
  const text = plan.pieces.join('');
  const response = (
    status: string,
    output: unknown[],
    usage: unknown,
  ): Record<string, unknown> => ({
    id,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: null,
    model: plan.model,
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: null, summary: null },
    store: true,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage,
    user: null,
    metadata: {},
  });
  const part = { type: 'output_text', text, annotations: [], logprobs: [] };
  const item = {
    id: itemId,
    type: 'message',
    status: 'completed',
    role: 'assistant',
    content: [part],
  };
  const usage = plan.omitUsage ? null : responsesUsage(plan);
  if (!plan.stream) return jsonReply(response('completed', [item], usage), true);
  let seq = 0;
  const ev = (type: string, fields: Record<string, unknown>): string =>
    sse(type, { type, sequence_number: seq++, ...fields });
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  const parts = [
    ev('response.created', { response: response('in_progress', [], null) }),
    ev('response.in_progress', { response: response('in_progress', [], null) }),
    ev('response.output_item.added', {
      output_index: 0,
      item: { ...item, status: 'in_progress', content: [] },
    }),
    ev('response.content_part.added', {
      ...at,
      part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
    }),
  ];
  for (const piece of plan.pieces) {
    parts.push(ev('response.output_text.delta', { ...at, delta: piece, logprobs: [] }));
  }
  parts.push(
    ev('response.output_text.done', { ...at, text, logprobs: [] }),
    ev('response.content_part.done', { ...at, part }),
    ev('response.output_item.done', { output_index: 0, item }),
    ev('response.completed', { response: response('completed', [item], usage) }),
  );
  return streamReply(parts);
}

const EMBEDDING_DIMENSIONS = 8;

/**
 * One deterministic 8-dimension vector per input, from its length; base64 (float32 LE) when
 * asked, as the openai SDK does by default. Usage: one token per 4 characters of each input.
 */
export function embeddingsReply(body: Record<string, unknown>, omitUsage: boolean): Reply {
  const raw = body.input;
  const inputs: unknown[] = Array.isArray(raw) ? raw : [raw];
  const base64 = body.encoding_format === 'base64';
  let tokens = 0;
  const data = inputs.map((input, index) => {
    const text = typeof input === 'string' ? input : JSON.stringify(input);
    tokens += Math.max(1, Math.ceil(text.length / 4));
    const vector = new Float32Array(EMBEDDING_DIMENSIONS);
    for (let d = 0; d < EMBEDDING_DIMENSIONS; d++) vector[d] = ((text.length + d) % 10) / 10;
    const embedding = base64
      ? Buffer.from(vector.buffer).toString('base64')
      : Array.from(vector, (x) => Math.round(x * 10) / 10);
    return { object: 'embedding', index, embedding };
  });
  const out: Record<string, unknown> = { object: 'list', data, model: body.model };
  if (!omitUsage) out.usage = { prompt_tokens: tokens, total_tokens: tokens };
  return jsonReply(out, true);
}

/** A 1x1 transparent PNG, what every demo image URL serves. */
export const PNG_1X1 =
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=';
/** Seconds an image URL claims to live (suppliers' signed URLs last about an hour). */
export const IMAGE_URL_LIFETIME_S = 3600;

/**
 * URLs for dall-e style models, signed-looking and expiring like a supplier's blob URLs
 * (`?se=<expiry>&sp=r&sig=…`); b64_json plus token usage for gpt-image models.
 */
export function imagesReply(
  body: Record<string, unknown>,
  origin: string,
  tag: string,
  omitUsage: boolean,
): Reply {
  const n = typeof body.n === 'number' && body.n > 0 ? Math.floor(body.n) : 1;
  const model = typeof body.model === 'string' ? body.model : '';
  const tokenBilled = model.startsWith('gpt-image');
  const created = Math.floor(Date.now() / 1000);
  const expiry = new Date((created + IMAGE_URL_LIFETIME_S) * 1000).toISOString();
  const data = [];
  for (let i = 0; i < n; i++) {
    const name = nextId('img-', tag);
    const sig = Buffer.from(`${name}|${expiry}`).toString('base64url');
    data.push(
      tokenBilled
        ? { b64_json: PNG_1X1 }
        : {
            url: `${origin}/files/${name}.png?se=${encodeURIComponent(expiry)}&sp=r&sig=${sig}`,
            revised_prompt: body.prompt,
          },
    );
  }
  const out: Record<string, unknown> = { created, data };
  if (tokenBilled && !omitUsage) {
    const prompt = typeof body.prompt === 'string' ? body.prompt : '';
    const text = Math.max(1, Math.ceil(prompt.length / 4));
    out.usage = {
      input_tokens: text,
      input_tokens_details: { text_tokens: text, image_tokens: 0 },
      output_tokens: 272 * n,
      total_tokens: text + 272 * n,
    };
  }
  return jsonReply(out, false);
}

/** The image behind every URL imagesReply hands out. */
export const imageFileReply: Reply = {
  status: 200,
  stream: false,
  contentType: 'image/png',
  parts: [],
  bytes: Buffer.from(PNG_1X1, 'base64'),
  reusable: true,
};

/** OpenAI's error object for a status, as its API writes it. */
export function openAiError(status: number, message: string): unknown {
  const [type, code] =
    status === 401
      ? ['invalid_request_error', 'invalid_api_key']
      : status === 429
        ? ['requests', 'rate_limit_exceeded']
        : status >= 500
          ? ['server_error', null]
          : status === 404
            ? ['invalid_request_error', 'model_not_found']
            : ['invalid_request_error', null];
  return { error: { message, type, param: null, code } };
}

export function modelsReply(models: readonly string[], owner: string): Reply {
  const data = models.map((id) => ({
    id,
    object: 'model',
    created: 1_700_000_000,
    owned_by: owner,
  }));
  return jsonReply({ object: 'list', data }, true);
}
