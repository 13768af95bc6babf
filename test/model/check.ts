/**
 * The end of a model run: bring the system to quiescence, then compare it
 * with the model. Returns every violation found, each a sentence.
 */
import type { Job, JobType } from 'bullmq';
import { forceBreaker } from './commands.js';
import { allDead, observe, seqsOf } from './dead-records.js';
import type { LogicalJob, Model } from './model.js';
import { deathIdentity, type DeathEntry, type ModelJobData, type RunEntry } from './protocol.js';
import type { RealSystem } from './system.js';
import { queueHashTag } from '../../src/redis/keys.js';

const pendingStates: JobType[] = ['wait', 'prioritized', 'delayed', 'active', 'waiting-children'];
const allStates: JobType[] = [...pendingStates, 'completed', 'failed'];

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until no job is waiting, delayed or active, three polls in a row. */
export async function quiesce(r: RealSystem, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  while (Date.now() < deadline) {
    const counts = await r.queue.bull.getJobCounts(...pendingStates);
    const pending = Object.values(counts).reduce((a, b) => a + b, 0);
    quiet = pending === 0 ? quiet + 1 : 0;
    if (quiet >= 3) return true;
    await sleep(150);
  }
  return false;
}

function seqOf(data: unknown): number | undefined {
  const seq = (data as Partial<ModelJobData> | undefined)?.seq;
  return typeof seq === 'number' ? seq : undefined;
}

function describe(job: LogicalJob): string {
  const plan = job.plan.map((life) => life.join('>')).join(' | ');
  return `seq ${job.seq} (${job.key === undefined ? 'keyless' : `key ${job.key}`}, ids ${[...job.ids].join(',')}, plan ${plan})`;
}

export async function settleAndCheck(
  m: Model,
  r: RealSystem,
  quiesceTimeoutMs = 45_000,
): Promise<string[]> {
  const violations = [...m.violations];
  // An isolated breaker holds jobs back by design; close it so they can finish.
  if (m.breakerOpen) {
    await forceBreaker(r, false);
    r.journal.push('end: breakerForceClose()');
  }
  const quiet = await quiesce(r, quiesceTimeoutMs);
  // Events and onDead come after the state they announce; give them a moment to be recorded.
  await sleep(300);

  // Where every job is, by BullMQ's own read-only getters.
  const stateOf = new Map<string, string[]>();
  for (const state of allStates) {
    for (const id of await r.queue.bull.getRanges([state], 0, -1)) {
      stateOf.set(id, [...(stateOf.get(id) ?? []), state]);
    }
  }
  const sourceJobs: { id: string; states: string[]; seq: number | undefined }[] = [];
  // Read in batches: the chaos suites (test/chaos/) check 100,000 jobs with this.
  const entries = [...stateOf];
  for (let i = 0; i < entries.length; i += 500) {
    const batch = entries.slice(i, i + 500);
    const jobs = await Promise.all(
      batch.map(([id]) => r.queue.bull.getJob(id) as Promise<Job | undefined>),
    );
    batch.forEach(([id, states], k) => sourceJobs.push({ id, states, seq: seqOf(jobs[k]?.data) }));
  }
  const sourceBySeq = new Map<number, typeof sourceJobs>();
  for (const job of sourceJobs) {
    if (job.seq !== undefined) sourceBySeq.set(job.seq, [...(sourceBySeq.get(job.seq) ?? []), job]);
  }
  const dead = await allDead(r.dlq);
  const deadBySeq = new Map<number, typeof dead>();
  for (const record of dead) {
    for (const seq of seqsOf(record)) deadBySeq.set(seq, [...(deadBySeq.get(seq) ?? []), record]);
  }
  observe(m, dead);
  const runs = (await r.admin.smembers(r.keys.runs)).map((x) => JSON.parse(x) as RunEntry);
  const deaths = (await r.admin.smembers(r.keys.deaths)).map((x) => JSON.parse(x) as DeathEntry);
  r.journal.push(
    `end: source ${sourceJobs.map((j) => `${j.id}:${j.states.join('+')}:seq${j.seq}`).join(' ')}; dlq ${dead.map((d) => `${d.id}:${d.reason}:seq${seqOf(d.data)}`).join(' ')}`,
  );

  // A parked job is delayed (waiting for its key's slot): quiescence released
  // every one; no key may stay parked (issue 22).
  const parked = await r.admin.keys(`requeue:${queueHashTag(r.name)}:parked*`);
  if (parked.length > 0) violations.push(`parked state left at quiescence: ${parked.join(', ')}`);

  if (!quiet) {
    const stuck = sourceJobs.filter((j) =>
      j.states.some((s) => (pendingStates as string[]).includes(s)),
    );
    violations.push(
      `no quiescence within ${quiesceTimeoutMs} ms: ${stuck
        .map((j) => {
          const job = j.seq === undefined ? undefined : m.jobs.get(j.seq);
          return `${j.id} ${j.states.join('+')} ${job ? describe(job) : ''}`;
        })
        .join('; ')}`,
    );
  }

  // One place per id, nothing failed in BullMQ's sense.
  for (const job of sourceJobs) {
    if (job.states.length > 1) violations.push(`job ${job.id} is in ${job.states.join(' and ')}`);
    if (job.states.includes('failed')) {
      const lj = job.seq === undefined ? undefined : m.jobs.get(job.seq);
      violations.push(
        `job ${job.id} is in BullMQ's failed set (outside the DLQ)${lj ? `: ${describe(lj)}` : ''}`,
      );
    }
    if (job.seq === undefined || !m.jobs.has(job.seq)) {
      violations.push(`job ${job.id} (seq ${job.seq}) in the source queue was never added`);
    }
  }

  // No dead record twice, nothing dead that was never added.
  const deadIds = new Map<string, number>();
  const deadOwnSeqs = new Map<number, number>();
  for (const record of dead) {
    deadIds.set(record.id, (deadIds.get(record.id) ?? 0) + 1);
    const seq = seqOf(record.data);
    if (seq === undefined || !m.jobs.has(seq)) {
      violations.push(`dead job ${record.id} (seq ${seq}) was never added`);
    } else {
      deadOwnSeqs.set(seq, (deadOwnSeqs.get(seq) ?? 0) + 1);
    }
  }
  for (const [id, n] of deadIds)
    if (n > 1) violations.push(`dead job ${id} is in the DLQ ${n} times`);
  for (const [seq, n] of deadOwnSeqs) {
    if (n > 1) violations.push(`seq ${seq} has ${n} dead records`);
  }

  // Every logical job in exactly one place: completed, or dead (or removed on purpose).
  let completed = 0;
  let deadCount = 0;
  let removed = 0;
  for (const job of m.jobs.values()) {
    if (job.mergedInto !== undefined) continue;
    const inSource = sourceBySeq.get(job.seq) ?? [];
    const inDlq = deadBySeq.get(job.seq) ?? [];
    const places = inSource.length + inDlq.length;
    const where = [
      ...inSource.map((j) => `${j.states.join('+')} as ${j.id}`),
      ...inDlq.map((d) => `dead as ${d.id}`),
    ].join(', ');
    if (job.removed) {
      removed += 1;
      if (places > 0) {
        // The deaths its workers announced and the ones in the DLQ, to tell a
        // mis-attributed death (a merge, a re-send) from a removal that did not happen.
        const announced = deaths
          .filter((d) => d.seq === job.seq)
          .map((d) => `${d.kind} ${d.death} life ${d.replays ?? '?'}`);
        const stored = inDlq.map((d) => `${deathIdentity(d)} life ${d.replays}`);
        violations.push(
          `${describe(job)} was ${job.removed} but is still ${where} (announced: ${announced.join(', ') || 'none'}; stored: ${stored.join(', ') || 'none'})`,
        );
      }
      continue;
    }
    if (places === 0 && !job.uncertain) {
      const excuse = m.removals.find(
        (rm) =>
          rm.at > job.addedAt &&
          (rm.kind === 'trim' ||
            [...job.ids].some((id) => rm.ids?.has(id)) ||
            deaths.some((d) => d.seq === job.seq && (!rm.reason || d.reason === rm.reason))),
      );
      if (excuse) {
        removed += 1;
        continue;
      }
      const last = runs.filter((x) => x.seq === job.seq).sort((a, b) => b.attempt - a.attempt)[0];
      violations.push(
        `${describe(job)} is nowhere: not completed, not dead, not pending (replayed ${job.replays}×; ${runs.filter((x) => x.seq === job.seq).length} runs${last ? `, last ${last.outcome} on attempt ${last.attempt}` : ''})`,
      );
    } else if (places > 1) {
      violations.push(`${describe(job)} is in ${places} places: ${where}`);
    } else if (places === 1) {
      if (inSource.some((j) => j.states.includes('completed'))) completed += 1;
      else if (inDlq.length === 1) deadCount += 1;
    }
  }
  const live = [...m.jobs.values()].filter((j) => j.mergedInto === undefined && !j.uncertain);
  if (quiet && completed + deadCount + removed < live.length) {
    violations.push(
      `completed ${completed} + dead ${deadCount} + removed ${removed} < added ${live.length}`,
    );
  }

  // Handler runs per logical job: attempts allowed per life, plus what crashes cut short.
  const runsBySeq = new Map<number, RunEntry[]>();
  for (const run of runs) {
    if (!m.jobs.has(run.seq)) violations.push(`a handler ran for seq ${run.seq}, never added`);
    const list = runsBySeq.get(run.seq);
    if (list) list.push(run);
    else runsBySeq.set(run.seq, [run]);
  }
  for (const [seq, list] of runsBySeq) {
    const job = m.jobs.get(seq);
    if (!job) continue;
    const bound = m.config.maxAttempts * (1 + job.replays) + job.hits;
    if (list.length > bound) {
      violations.push(
        `${describe(job)} ran ${list.length} times; at most ${bound} allowed (${m.config.maxAttempts} attempts × ${1 + job.replays} lives + ${job.hits} crashes/restarts)`,
      );
    }
    if (job.calm) {
      const seen = new Set<string>();
      for (const run of list) {
        if (run.replays === null) continue;
        const at = `${run.replays}/${run.attempt}`;
        if (seen.has(at))
          violations.push(`${describe(job)} ran attempt ${at} (life/attempt) twice`);
        seen.add(at);
      }
    }
  }

  // One death, one event and one onDead; exactly one where no crash or restart came near it.
  for (const kind of ['event', 'onDead'] as const) {
    const label = kind === 'event' ? 'job:dead-lettered event' : 'onDead call';
    const byDeath = new Map<string, DeathEntry[]>();
    for (const d of deaths.filter((x) => x.kind === kind)) {
      byDeath.set(d.death, [...(byDeath.get(d.death) ?? []), d]);
    }
    for (const [death, list] of byDeath) {
      if (list.length > 1) {
        violations.push(
          `death ${death} (seq ${list[0]!.seq}) produced ${list.length} ${label}s (pids ${list.map((x) => x.pid).join(',')})`,
        );
      }
    }
    for (const job of m.jobs.values()) {
      if (!job.calm) continue;
      for (const death of job.deaths) {
        if (!byDeath.has(death)) {
          violations.push(`death ${death} of ${describe(job)} produced no ${label}`);
        }
      }
    }
    for (const d of deaths.filter((x) => x.kind === kind)) {
      const job = d.seq === null ? undefined : m.jobs.get(d.seq);
      if (
        job?.calm &&
        job.deaths.size > 0 &&
        !job.deaths.has(d.death) &&
        !job.removed &&
        job.mergedInto === undefined
      ) {
        violations.push(
          `${label} for death ${d.death} of ${describe(job)}, a death never seen in the DLQ (${[...job.deaths].join(', ')} were)`,
        );
      }
    }
  }
  return violations;
}
