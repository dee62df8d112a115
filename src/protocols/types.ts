// The minimal shapes of the OpenAI and Anthropic wire objects the adapters read or write.
// Only the fields the gateway touches are typed; everything else passes through as unknown.

export type JsonObject = Record<string, unknown>;

/** One parsed Server-Sent Event: `event` is null when the event carried no `event:` field. */
export interface SseEvent {
  event: string | null;
  data: string;
}

// ---- OpenAI chat completions ----

export interface ChatTextPart {
  type: 'text';
  text: string;
}

export interface ChatImagePart {
  type: 'image_url';
  image_url: { url: string; detail?: string };
}

export type ChatContentPart = ChatTextPart | ChatImagePart;

export interface ChatToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'developer' | 'user' | 'assistant' | 'tool';
  content?: string | ChatContentPart[] | null;
  name?: string;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  /** DeepSeek, Qwen, GLM and Kimi put the model's reasoning here. */
  reasoning_content?: string | null;
}

export interface ChatFunctionTool {
  type: 'function';
  function: { name: string; description?: string; parameters?: JsonObject; strict?: boolean };
}

export type ChatToolChoice =
  'auto' | 'none' | 'required' | { type: 'function'; function: { name: string } };

/** A chat completions request as the client sent it (already validated by the endpoint). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  stop?: string | string[] | null;
  tools?: ChatFunctionTool[];
  tool_choice?: ChatToolChoice;
  parallel_tool_calls?: boolean;
  reasoning_effort?: string;
  user?: string;
  [key: string]: unknown;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens?: number };
  completion_tokens_details?: { reasoning_tokens?: number };
}

export type ChatFinishReason =
  'stop' | 'length' | 'tool_calls' | 'content_filter' | 'function_call';

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: {
    index: number;
    message: {
      role: 'assistant';
      content: string | null;
      reasoning_content?: string;
      tool_calls?: ChatToolCall[];
      refusal: string | null;
    };
    finish_reason: ChatFinishReason | null;
    logprobs: null;
  }[];
  usage?: ChatUsage | null;
}

export interface ChatChunkToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

export interface ChatChunkChoice {
  index: number;
  delta: {
    role?: 'assistant';
    content?: string | null;
    reasoning_content?: string | null;
    tool_calls?: ChatChunkToolCallDelta[];
  };
  finish_reason: ChatFinishReason | null;
}

export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: ChatChunkChoice[];
  usage?: ChatUsage | null;
}

// ---- Anthropic messages ----

export type AnthropicImageSource =
  { type: 'base64'; media_type: string; data: string } | { type: 'url'; url: string };

export interface AnthropicTextBlock {
  type: 'text';
  text: string;
}

export interface AnthropicImageBlock {
  type: 'image';
  source: AnthropicImageSource;
}

export interface AnthropicToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: JsonObject;
}

export interface AnthropicToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content?: string | (AnthropicTextBlock | AnthropicImageBlock)[];
  is_error?: boolean;
}

export interface AnthropicThinkingBlock {
  type: 'thinking';
  thinking: string;
  signature: string;
}

export interface AnthropicRedactedThinkingBlock {
  type: 'redacted_thinking';
  data: string;
}

export type AnthropicContentBlock =
  | AnthropicTextBlock
  | AnthropicImageBlock
  | AnthropicToolUseBlock
  | AnthropicToolResultBlock
  | AnthropicThinkingBlock
  | AnthropicRedactedThinkingBlock;

export interface AnthropicMessageParam {
  role: 'user' | 'assistant';
  content: string | AnthropicContentBlock[];
}

export interface AnthropicTool {
  name: string;
  description?: string;
  input_schema: JsonObject;
  /** Server tools (web search, …) carry a type; custom tools may omit it. */
  type?: string;
}

export type AnthropicToolChoice =
  | { type: 'auto'; disable_parallel_tool_use?: boolean }
  | { type: 'any'; disable_parallel_tool_use?: boolean }
  | { type: 'tool'; name: string; disable_parallel_tool_use?: boolean }
  | { type: 'none' };

/** A messages request as the client sent it (already validated by the endpoint). */
export interface MessagesRequest {
  model: string;
  messages: AnthropicMessageParam[];
  max_tokens: number;
  system?: string | AnthropicTextBlock[];
  stream?: boolean;
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  tools?: AnthropicTool[];
  tool_choice?: AnthropicToolChoice;
  thinking?: { type: 'enabled'; budget_tokens: number } | { type: 'disabled' } | JsonObject;
  metadata?: { user_id?: string };
  [key: string]: unknown;
}

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens?: number | null;
  cache_read_input_tokens?: number | null;
  output_tokens_details?: { thinking_tokens?: number } | null;
}

export type AnthropicStopReason =
  'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'pause_turn' | 'refusal';

export interface AnthropicMessage {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: AnthropicContentBlock[];
  stop_reason: AnthropicStopReason | null;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

// ---- What a non-stream response tells the relay ----

/** Identity of an upstream answer, for logs: absent is null. */
export interface UpstreamIdentity {
  id: string | null;
  model: string | null;
}
