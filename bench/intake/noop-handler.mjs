// The handler the intake benchmark's queues run: the worker consumes what the intake adds.
export default async () => 'ok';
