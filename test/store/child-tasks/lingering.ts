// A child task that reports its work done and then never exits by itself (as a child caught in
// nodejs/node#54918 at exit would not): a timer keeps its event loop alive. Prints its pid.
import { reportDone } from '../../../src/store/child-task.ts';

process.stderr.write(`pid ${process.pid}\n`);
setInterval(() => undefined, 60_000);
await reportDone();
