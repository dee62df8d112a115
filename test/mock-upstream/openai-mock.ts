// The OpenAI side of the mock upstream: the demo core's answers (src/demo/openai-replies.ts)
// under the names and signatures the mock has always exported.

import {
  imagesReply as coreImagesReply,
  modelsReply as coreModelsReply,
} from '../../src/demo/openai-replies.ts';
import { MOCK_VOICE, type MockReply } from './plan.ts';

export {
  chatReply,
  embeddingsReply,
  isOpenAiReasoning,
  openAiError,
  openAiToolName,
  responsesReply,
} from '../../src/demo/openai-replies.ts';

/** URLs (under `baseUrl`/files/) for dall-e style models; b64_json plus usage for gpt-image. */
export function imagesReply(
  body: Record<string, unknown>,
  baseUrl: string,
  omitUsage: boolean,
): MockReply {
  return coreImagesReply(body, baseUrl, MOCK_VOICE.tag, omitUsage);
}

export function modelsReply(): MockReply {
  return coreModelsReply(MOCK_VOICE.models, MOCK_VOICE.tag);
}
