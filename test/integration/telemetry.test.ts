/**
 * Issue 11 (optional part): OpenTelemetry through BullMQ's own hook. With
 * `telemetry: new BullMQOtel(...)` on the queue and the worker, BullMQ's own
 * spans (add, process, complete) are made for requeue's jobs.
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { BullMQOtel } from 'bullmq-otel';
import { afterAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/config/logger.js';
import { createQueue } from '../../src/scheduler/queue.js';
import { createWorker } from '../../src/scheduler/requeue-worker.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanQueue, connect, redisUrl, uniqueQueueName } from '../harness/redis.js';
import { WorkerEventLog } from '../harness/worker-events.js';

const admin = connect();
afterAll(() => admin.disconnect());

describe('OpenTelemetry through bullmq-otel', () => {
  it("passes BullMQ's telemetry hook through: a retried job's add, processing and completion are spans", async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      spanProcessors: [new SimpleSpanProcessor(exporter)],
    });
    // A context manager, as any OpenTelemetry setup for Node has: the add's span is active
    // while BullMQ stores the job, so its context travels with the job to the worker.
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(provider);
    onCleanup(async () => {
      await provider.shutdown();
      trace.disable();
      context.disable();
    });
    const telemetry = new BullMQOtel({ tracerName: 'requeue-test' });
    const name = uniqueQueueName('otel');
    const queue = createQueue(name, { connection: redisUrl(), telemetry });
    let runs = 0;
    const worker = createWorker(
      name,
      async () => {
        runs += 1;
        if (runs === 1) throw Object.assign(new Error('503'), { status: 503 });
        return 'ok';
      },
      {
        connection: redisUrl(),
        telemetry,
        logger: createLogger({ level: 'silent' }),
        policy: { strategy: 'fixed', baseMs: 10, capMs: 10, maxAttempts: 3 },
      },
    );
    const events = new WorkerEventLog(worker);
    onCleanup(async () => {
      await worker.close({ timeoutMs: 5_000 });
      await queue.close();
      await cleanQueue(admin, name);
    });
    const { id } = await queue.add('sync', { n: 1 });
    await events.waitForCount('job:completed', 1);

    const spans = exporter.getFinishedSpans();
    const names = spans.map((s) => s.name).join(', ');
    const ofJob = (operation: string) =>
      spans.filter(
        (s) =>
          s.attributes['bullmq.queue.operation'] === operation &&
          s.attributes['bullmq.job.id'] === id,
      );
    // BullMQ's spans, through requeue's queue and worker: the add, the processing, the completion.
    expect(ofJob('add'), names).toHaveLength(1);
    expect(ofJob('process').length, names).toBeGreaterThanOrEqual(1);
    expect(ofJob('complete'), names).toHaveLength(1);
    expect(runs).toBe(2);
  });
});
