// Every route of spec section 4, declared once: method, path, how it authenticates, what its body
// is, and which endpoint kind of the table it resolves to. The app registers routes from this list.
import type { EndpointKind } from '../table/endpoints.ts';

export type AuthStyle = 'bearer' | 'anthropic' | 'none';
export type BodyKind = 'json' | 'multipart' | 'none' | 'any';
export type Handler =
  | 'chat'
  | 'responses'
  | 'messages'
  | 'models'
  | 'model'
  | 'embeddings'
  | 'images_generations'
  | 'passthrough'
  | 'no_model_route'
  | 'task_fetch'
  | 'pricing';

export interface EndpointDef {
  method: 'GET' | 'POST' | 'ANY';
  path: string;
  /** The table's endpoint kind; null for routes that are not per model. */
  kind: EndpointKind | null;
  auth: AuthStyle;
  body: BodyKind;
  handler: Handler;
  /** The route name used in metrics and spans (bounded). */
  name: string;
}

/** Prefixes of the drawing- and music-task route groups (Midjourney- and Suno-style proxies). */
export const DRAWING_PREFIX = '/mj';
export const MUSIC_PREFIX = '/suno';

function def(
  method: EndpointDef['method'],
  path: string,
  kind: EndpointKind | null,
  handler: Handler,
  body: BodyKind = 'json',
  auth: AuthStyle = 'bearer',
): EndpointDef {
  return { method, path, kind, auth, body, handler, name: `${method} ${path}` };
}

export const ENDPOINTS: readonly EndpointDef[] = [
  def('POST', '/v1/chat/completions', 'chat', 'chat'),
  def('POST', '/pg/chat/completions', 'chat', 'chat'),
  def('POST', '/v1/responses', 'responses', 'responses'),
  def('POST', '/v1/messages', 'messages', 'messages', 'json', 'anthropic'),
  def('GET', '/v1/models', null, 'models', 'none'),
  def('GET', '/v1/models/:model', null, 'model', 'none'),
  def('POST', '/v1/completions', 'completions', 'passthrough'),
  def('POST', '/v1/embeddings', 'embeddings', 'embeddings'),
  def('POST', '/v1/rerank', 'rerank', 'passthrough'),
  def('POST', '/v1/images/generations', 'images_generations', 'images_generations'),
  def('POST', '/v1/images/edits', 'images_edits', 'passthrough', 'multipart'),
  def('POST', '/v1/images/variations', 'images_variations', 'passthrough', 'multipart'),
  def('POST', '/v1/audio/speech', 'audio_speech', 'passthrough'),
  def('POST', '/v1/audio/transcriptions', 'audio_transcriptions', 'passthrough', 'multipart'),
  def('POST', '/v1/audio/translations', 'audio_translations', 'passthrough', 'multipart'),
  def('GET', '/v1/realtime', 'realtime', 'passthrough', 'none'),
  def('POST', '/v1/moderations', 'moderations', 'passthrough'),
  def('POST', '/v1/alpha/search', 'search', 'passthrough'),
  def('ANY', '/v1/files', null, 'no_model_route', 'any'),
  def('ANY', '/v1/files/*', null, 'no_model_route', 'any'),
  def('ANY', '/v1/fine-tunes', null, 'no_model_route', 'any'),
  def('ANY', '/v1/fine-tunes/*', null, 'no_model_route', 'any'),
  def('POST', '/v1/video/generations', 'video', 'passthrough'),
  def('GET', `${DRAWING_PREFIX}/task/:id/fetch`, 'drawing', 'task_fetch', 'none'),
  def('ANY', `${DRAWING_PREFIX}/*`, 'drawing', 'passthrough', 'any'),
  def('GET', `${MUSIC_PREFIX}/task/:id/fetch`, 'music', 'task_fetch', 'none'),
  def('ANY', `${MUSIC_PREFIX}/*`, 'music', 'passthrough', 'any'),
  def('GET', '/api/platform/pricing', null, 'pricing', 'none', 'none'),
];
