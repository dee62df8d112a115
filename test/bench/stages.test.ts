// The stage probe's rows summed up for a section (bench/stages.ts): the window, the medians, the
// requests alone and the share preempted; rows without an upstream call are left out; each turn's
// first wave apart; a gateway's path split into the steps it published.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  readStageRows,
  stageLine,
  stepLine,
  summariseFirstWave,
  summariseStages,
  summariseSteps,
  waveLine,
} from '../../bench/stages.ts';

const dir = mkdtempSync(join(tmpdir(), 'sy-stages-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bench stages', () => {
  it('sums up the rows of the requests that arrived in the window and went upstream', () => {
    const file = join(dir, 'side.tsv');
    writeFileSync(
      file,
      [
        // at, made, head, first, run-queue wait, ahead, loop busy between made and head, steps,
        // the first write's bytes to the socket's handle, the client's send to arrival
        '999.000\t10.0\t100.0\t110.0\t0.0\t0\t50.0', // before the window
        '1000.000\t20.0\t1020.0\t1050.0\t0.0\t0\t200.0\t\t1060.0\t150.0',
        '1001.000\t40.0\t1240.0\t1260.0\t300.0\t1\t900.0\t\t1290.0\t250.0',
        '1002.000\t60.0\t1060.0\t1100.0\t0.0\t0', // a probe without the loop's reading
        '1003.000\t-1\t-1\t30.0\t-1\t0\t-1', // refused before any upstream call
        '2000.000\t10.0\t100.0\t110.0\t0.0\t0', // after it
        '',
      ].join('\n'),
    );
    const rows = readStageRows(file);
    expect(rows).toHaveLength(6);
    expect(rows[4]).toEqual({
      at: 1003,
      made: null,
      head: null,
      first: 30,
      waitUs: null,
      ahead: 0,
      headBusyUs: null,
      steps: [],
      sent: null,
      fromClient: null,
    });
    expect(rows[1]!.headBusyUs).toBe(200);
    expect(rows[1]!.sent).toBe(1060);
    expect(rows[2]!.fromClient).toBe(250);
    expect(rows[3]!.headBusyUs).toBeNull();
    const s = summariseStages(rows, 1000, 2000);
    expect(s).toEqual({
      requests: 3,
      toUpstream: 40,
      upstreamToHead: 1000,
      upstreamToHeadBusy: 550,
      headToFirst: 30,
      toFirst: 1100,
      fromClient: 200,
      firstToSent: 20,
      alone: 2,
      aloneToUpstream: 40,
      aloneToFirst: 1075,
      preempted: 1 / 3,
      preemptedMeanUs: 300,
    });
    expect(stageLine('this', s)).toBe(
      "  this    client's send to arrival 200, to upstream 40, upstream to head 1000 (loop busy 550), " +
        'head to first write 30, arrival to first write 1100, its bytes to the kernel 20 ' +
        '(3 requests; 2 alone: to upstream 40, to first write 1075); ' +
        'path preempted 33% (mean 300 µs)',
    );
  });

  it("splits a gateway's path into its steps, each from the one before, up to the upstream request", () => {
    const file = join(dir, 'steps.tsv');
    writeFileSync(
      file,
      [
        // … loop busy, then each step's end in µs after arrival
        '1000.000\t400.0\t900.0\t950.0\t0.0\t0\t10.0\tfront:50.0,observer:70.0,blacklist:120.0,key:150.0,body:220.0,validated:250.0,rpm:280.0,reserved:300.0,planned:330.0',
        // without an RPM limit: no rpm step, the reservation counts from validation
        '1001.000\t500.0\t900.0\t950.0\t0.0\t0\t10.0\tfront:60.0,observer:80.0,blacklist:130.0,key:170.0,body:250.0,validated:290.0,reserved:340.0,planned:400.0',
        '1002.000\t400.0\t900.0\t950.0\t0.0\t0\t10.0', // the bare proxy: no steps
        '1003.000\t-1\t-1\t30.0\t-1\t0\t-1\tfront:40.0,observer:60.0', // refused
        '',
      ].join('\n'),
    );
    const rows = readStageRows(file);
    expect(rows[1]!.steps.slice(0, 2)).toEqual([
      { step: 'front', at: 60 },
      { step: 'observer', at: 80 },
    ]);
    expect(rows[2]!.steps).toEqual([]);
    const s = summariseSteps(rows, 1000, 2000);
    expect(s).toEqual({
      requests: 2,
      steps: [
        { step: 'front', us: 55 },
        { step: 'observer', us: 20 },
        { step: 'blacklist', us: 50 },
        { step: 'key', us: 35 },
        { step: 'body', us: 75 },
        { step: 'validated', us: 35 },
        { step: 'rpm', us: 30 },
        { step: 'reserved', us: 35 },
        { step: 'planned', us: 45 },
        { step: 'upstream', us: 85 },
      ],
    });
    expect(stepLine('base', s)).toBe(
      '  base    front 55, observer 20, blacklist 50, key 35, body 75, validated 35, rpm 30, ' +
        'reserved 35, planned 45, upstream 85 (2 requests)',
    );
    // The bare proxy's rows, or a window without requests: nothing to split.
    expect(summariseSteps(rows, 1002, 1003)).toBeNull();
    expect(stepLine('base', null)).toBe('  base    – (no steps published)');
    // A step this checkout does not name (another checkout's gateway) comes after the rest.
    writeFileSync(file, '1000.000\t300.0\t900.0\t950.0\t0.0\t0\t10.0\tfront:50.0,lookup:90.0\n');
    expect(summariseSteps(readStageRows(file), 1000, 2000)?.steps).toEqual([
      { step: 'front', us: 50 },
      { step: 'lookup', us: 40 },
      { step: 'upstream', us: 210 },
    ]);
  });

  it('reads a missing file as no rows, and says what it cannot know', () => {
    const s = summariseStages(readStageRows(join(dir, 'absent.tsv')), 0, 1);
    expect(s.requests).toBe(0);
    expect(s.preempted).toBeNull();
    expect(stageLine('proxy', s)).toContain('to upstream –');
    expect(stageLine('proxy', s)).toContain('(loop busy –)');
  });
  it("takes each turn's first wave: the first requests after a gap, in arrival order", () => {
    const file = join(dir, 'waves.tsv');
    const row = (at: number, made: number, head: number, first: number, busy: number): string =>
      `${at.toFixed(3)}\t${made}\t${head}\t${first}\t0.0\t0\t${busy}`;
    writeFileSync(
      file,
      [
        row(500, 10, 20, 30, 5), // before the window
        // Turn 1: written in first-write order, so not sorted by arrival; three waves of two.
        row(1000.5, 300, 2300, 2400, 1800),
        row(1000, 100, 1100, 1200, 900),
        row(1010, 50, 150, 160, 40), // the turn's third request: not in its first wave
        // Turn 2, 2 s later: one of its first two did not go upstream.
        row(3000, 200, 1200, 1300, 1000),
        row(3002, -1, -1, 30, -1),
        row(3003, 60, 160, 170, 50),
        '',
      ].join('\n'),
    );
    const w = summariseFirstWave(readStageRows(file), 1000, 4000, 2, 500);
    expect(w).toEqual({
      turns: 2,
      requests: 3,
      toUpstream: 200,
      upstreamToHead: 1000,
      upstreamToHeadBusy: 1000,
      toFirst: 1300,
      arrivalSpread: 1250,
    });
    expect(waveLine('base', w)).toBe(
      '  base    to upstream 200, upstream to head 1000 (loop busy 1000), arrival to first write ' +
        '1300, arrivals spread 1250 (3 requests in 2 turns)',
    );
    const none = summariseFirstWave([], 0, 1, 8, 500);
    expect(none.turns).toBe(0);
    expect(waveLine('proxy', none)).toContain('to upstream –');
  });
});
