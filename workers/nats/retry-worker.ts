import { PermanentError } from '../../src/errors/permanent-error.js';
import type { RequeueJob } from '../../src/scheduler/attempt/context.js';
import type { RequeueWorker } from '../../src/scheduler/requeue-worker.js';
import { messageDedupeKey } from '../consumer/dedupe-key.js';
import { republishHeaders } from '../consumer/republish.js';
import { loadNats } from './load.js';
import type { BrokerJobData } from '../consumer/broker-message.js';
import {
  createBrokerRetryWorker,
  type BrokerRetryWorkerOptions,
} from '../consumer/retry-worker.js';
import { defaultNatsRetryQueue } from './consumer-config.js';

/** Options of {@link createNatsRetryWorker}. */
export interface NatsRetryWorkerOptions<B = unknown> extends BrokerRetryWorkerOptions<B> {
  /** The JetStream stream. */
  stream: string;
  /** The durable consumer. */
  consumer: string;
  /** The retry queue. @defaultValue `<stream>.<consumer>.retry`, as the consumer's */
  retryQueue?: string;
  /**
   * Publish each due retry (attempt 2, 3, …, and every run of a DLQ replay)
   * back to the stream instead of running the handler here: to `subject`
   * (default: the message's own subject) through JetStream, which answers
   * once the stream stored it; the retry job completes then, and the
   * consumer runs the message as a fresh delivery (`x-requeue-attempt` says
   * which attempt). Its `Nats-Msg-Id` names the retry attempt, so a second
   * publish of the same attempt (a crash between the stream's ack and the
   * job's completion) is dropped within the stream's duplicate window; past
   * it, at least once. `servers`: @defaultValue `NATS_URL`, else `nats://127.0.0.1:4222`
   */
  republish?: { servers?: string; subject?: string };
}

/**
 * A requeue worker on a JetStream consumer's retry queue: the first run of
 * each job replays the JetStream attempt's error (or, in `nak` mode, the
 * death the consumer already decided), later runs call the handler. Needed
 * in both failure modes: in `nak` mode it moves the dead messages into the DLQ.
 */
export function createNatsRetryWorker<B = unknown>(
  options: NatsRetryWorkerOptions<B>,
): RequeueWorker<BrokerJobData, void> {
  const { stream, consumer, retryQueue, republish, ...rest } = options;
  return createBrokerRetryWorker<B>(
    retryQueue ?? defaultNatsRetryQueue(stream, consumer),
    rest,
    republish &&
      ((job) =>
        publishToStream(
          republish.servers ?? process.env.NATS_URL ?? 'nats://127.0.0.1:4222',
          republish.subject,
          job,
        )),
  );
}

/**
 * One connection per republished retry: publish the stored body and headers
 * with the retry's headers and `Nats-Msg-Id`, wait for the stream's ack,
 * close. Throws when no stream took it or NATS is unreachable.
 */
async function publishToStream(
  servers: string,
  subjectOption: string | undefined,
  job: RequeueJob<BrokerJobData>,
): Promise<void> {
  const subject = subjectOption ?? job.data.properties.subject;
  if (typeof subject !== 'string' || subject.length === 0) {
    throw new PermanentError('the stored message has no subject to republish to', {
      deadReason: 'invalid-payload',
    });
  }
  const nats = await loadNats();
  const nc = await nats.connect({
    servers: servers.split(',').map((s) => s.trim()),
    timeout: 5000,
    maxReconnectAttempts: 0,
  });
  try {
    const { headers, attempt, retryOf, replays } = republishHeaders(job);
    const natsHeaders = nats.headers();
    for (const [name, value] of Object.entries(headers)) {
      // The stored Nats-Msg-Id is the first message's: the retry gets its own.
      if (name.toLowerCase() !== 'nats-msg-id') natsHeaders.set(name, value);
    }
    await nc.jetstream().publish(subject, Buffer.from(job.data.body, 'base64'), {
      headers: natsHeaders,
      msgID: `requeue-retry:${messageDedupeKey({ id: `${retryOf}#${replays}.${attempt}`, body: new Uint8Array() })}`,
      expect: { streamName: job.data.source },
    });
  } finally {
    await nc.close().catch(() => undefined);
  }
}
