import amqp, { type Channel, type ChannelModel } from 'amqplib';

/** The machine's RabbitMQ (guest/guest on loopback), or `AMQP_URL`. */
export const amqpUrl = process.env.AMQP_URL ?? 'amqp://guest:guest@127.0.0.1:5672';

/** A connection and a channel for a test's own publishing and inspecting. */
export async function amqpTestChannel(): Promise<{ model: ChannelModel; channel: Channel }> {
  const model = await amqp.connect(amqpUrl);
  model.on('error', () => undefined);
  const channel = await model.createChannel();
  channel.on('error', () => undefined);
  return { model, channel };
}

/** Publishes each body to `queue` and waits until the broker has them all. */
export async function publishAll(
  model: ChannelModel,
  queue: string,
  messages: { body: Buffer; options?: amqp.Options.Publish }[],
): Promise<void> {
  const channel = await model.createConfirmChannel();
  for (const m of messages)
    channel.sendToQueue(queue, m.body, { persistent: true, ...(m.options ?? {}) });
  await channel.waitForConfirms();
  await channel.close();
}

/** Ready and unacknowledged message counts of `queue`, from the broker. */
export async function queueCounts(
  channel: Channel,
  queue: string,
): Promise<{ ready: number; consumers: number }> {
  const q = await channel.checkQueue(queue);
  return { ready: q.messageCount, consumers: q.consumerCount };
}
