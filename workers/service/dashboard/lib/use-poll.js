// The data hook every panel reads the admin API with.
import { useEffect, useState } from 'preact/hooks';
import { Unauthorized, api } from './api.js';

/** Loads `path` now and on every tick; keeps the last good answer while a refresh fails. */
export function usePoll(path, tick, onError) {
  const [data, setData] = useState(undefined);
  const [error, setError] = useState(undefined);
  // Another path (a filter, a page, another job) does not show the last one's answer.
  useEffect(() => {
    setData(undefined);
    setError(undefined);
  }, [path]);
  useEffect(() => {
    if (!path) return undefined;
    let live = true;
    api(path).then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(undefined);
      },
      (e) => {
        if (!live) return;
        if (e instanceof Unauthorized) onError(e);
        setError(e.message);
      },
    );
    return () => {
      live = false;
    };
  }, [path, tick]);
  return [data, error];
}
