// A child task that does its work (writes the file it is given), reports done and exits.
import { writeFileSync } from 'node:fs';
import { reportDone } from '../../../src/store/child-task.ts';

writeFileSync(process.argv[2]!, 'written');
await reportDone();
