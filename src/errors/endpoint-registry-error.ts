/** Why an endpoint registry write was refused. */
export type EndpointRegistryErrorCode = 'not-found' | 'exists' | 'conflict';

/**
 * A registry write refused: no such endpoint, the id already taken, or the
 * record changed while it was being updated.
 */
export class EndpointRegistryError extends Error {
  override name = 'EndpointRegistryError';

  constructor(
    message: string,
    readonly code: EndpointRegistryErrorCode,
  ) {
    super(message);
  }
}

/** Whether `err` is an {@link EndpointRegistryError}, by `instanceof` or by name. */
export function isEndpointRegistryError(err: unknown): err is EndpointRegistryError {
  return (
    err instanceof EndpointRegistryError ||
    (typeof err === 'object' &&
      err !== null &&
      (err as { name?: unknown }).name === 'EndpointRegistryError')
  );
}
