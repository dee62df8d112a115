// Reads what billing needs from an images response: how many images came back (per-image tiers)
// and, for token-billed image models (gpt-image-1), the token usage.

import { isObject } from '../json-read.ts';
import { usageFromOpenAiResponses, type Usage } from '../usage.ts';

export interface ImagesInfo {
  /** Number of entries in `data`: what a per-image price multiplies. */
  images: number;
  /** gpt-image-style usage ({input_tokens, output_tokens, input_tokens_details}), else null. */
  usage: Usage | null;
}

export function readImagesResponse(body: unknown): ImagesInfo {
  if (!isObject(body)) return { images: 0, usage: null };
  const data = body.data;
  // Same field names as the Responses usage object; cached_tokens sits in input_tokens_details.
  return {
    images: Array.isArray(data) ? data.length : 0,
    usage: usageFromOpenAiResponses(body.usage),
  };
}
