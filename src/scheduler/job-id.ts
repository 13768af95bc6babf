/**
 * Maps an idempotency key to a BullMQ job id. BullMQ refuses custom ids that
 * contain `:` or are integers, so those characters are percent-encoded; the
 * mapping is injective, so two keys never share a job.
 */
export function jobIdForKey(key: string): string {
  if (key.length === 0) throw new RangeError('idempotencyKey must not be empty');
  let id = key.replace(/%/g, '%25').replace(/:/g, '%3A');
  if (/^\d+$/.test(id)) id = `%3${id[0]}${id.slice(1)}`;
  return id;
}

/** The inverse of {@link jobIdForKey}. */
export function keyForJobId(id: string): string {
  return decodeURIComponent(id);
}
