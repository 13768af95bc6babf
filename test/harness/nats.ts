import { AckPolicy, connect, nanos, type NatsConnection } from 'nats';

/** The machine's NATS with JetStream, or `NATS_URL`. */
export const natsUrl = process.env.NATS_URL ?? 'nats://127.0.0.1:4222';

/** A connection for a test's own streams, publishing and inspecting. */
export function natsTestConnection(servers = natsUrl): Promise<NatsConnection> {
  return connect({ servers });
}

/** Makes `stream` (subjects `<stream>.>`) and a durable explicit-ack pull consumer `consumer` on it. */
export async function makeStream(
  nc: NatsConnection,
  stream: string,
  consumer: string,
  options: { ackWaitMs?: number; maxDeliver?: number } = {},
): Promise<void> {
  const jsm = await nc.jetstreamManager();
  await jsm.streams.add({ name: stream, subjects: [`${stream}.>`] });
  await jsm.consumers.add(stream, {
    durable_name: consumer,
    ack_policy: AckPolicy.Explicit,
    ack_wait: nanos(options.ackWaitMs ?? 30_000),
    max_deliver: options.maxDeliver ?? -1,
  });
}

/** Messages still to deliver and delivered but not acknowledged, from the server. */
export async function consumerCounts(
  nc: NatsConnection,
  stream: string,
  consumer: string,
): Promise<{ pending: number; ackPending: number; redelivered: number }> {
  const jsm = await nc.jetstreamManager();
  const info = await jsm.consumers.info(stream, consumer);
  return {
    pending: info.num_pending,
    ackPending: info.num_ack_pending,
    redelivered: info.num_redelivered,
  };
}

/** Deletes `stream` (and its consumers); a missing one is fine. */
export async function deleteStream(nc: NatsConnection, stream: string): Promise<void> {
  const jsm = await nc.jetstreamManager();
  await jsm.streams.delete(stream).catch(() => undefined);
}
