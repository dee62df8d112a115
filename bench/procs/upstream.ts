// The benchmark's upstream in its own process: the test mock (OpenAI chat, streamed and not)
// without call recording, with the paced streams the stream and open-streams sections need.
import { MOCK_DEFAULT_KEY, startMockUpstream } from '../../test/mock-upstream/server.ts';
import { childArgs, serveParent, toParent } from './ipc.ts';

export interface UpstreamArgs {
  /** Chunks and gap of `bench-stream` answers (the stream section). */
  streamChunks: number;
  streamGapMs: number;
  /** Chunks and gap of `bench-paced` answers (streams at a model's pace, the paced section). */
  pacedChunks: number;
  pacedGapMs: number;
  /** Chunks and gap of `bench-slow` answers (streams held open for the memory section). */
  slowChunks: number;
  slowGapMs: number;
}

const args = childArgs<UpstreamArgs>();
const mock = await startMockUpstream({ record: false });
// Matched by the upstream model name; `times` large enough to never run out.
mock.script(
  { model: 'bench-stream', chunks: args.streamChunks, chunkDelayMs: args.streamGapMs, times: 1e15 },
  { model: 'bench-paced', chunks: args.pacedChunks, chunkDelayMs: args.pacedGapMs, times: 1e15 },
  { model: 'bench-slow', chunks: args.slowChunks, chunkDelayMs: args.slowGapMs, times: 1e15 },
);
serveParent(() => mock.close());
toParent({ type: 'ready', url: mock.url, key: MOCK_DEFAULT_KEY });
