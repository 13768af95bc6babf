// Times, durations, shares and errors as the dashboard shows them.

export function ago(ms, now = Date.now()) {
  if (ms == null) return '';
  const d = ms - now;
  const s = Math.abs(d) / 1000;
  const text =
    s < 1
      ? 'now'
      : s < 60
        ? `${Math.round(s)}s`
        : s < 3600
          ? `${Math.floor(s / 60)}m ${Math.round(s % 60)}s`
          : s < 86400
            ? `${Math.floor(s / 3600)}h ${Math.round((s % 3600) / 60)}m`
            : `${Math.floor(s / 86400)}d ${Math.round((s % 86400) / 3600)}h`;
  if (text === 'now') return text;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}

export function time(ms) {
  if (ms == null) return '';
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(ms) {
  if (ms == null) return '';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return ago(Date.now() + ms).replace('in ', '');
}

export function pct(x) {
  return `${Math.round((x ?? 0) * 100)}%`;
}

export function errorText(e) {
  if (!e) return '';
  return `${e.class ?? 'Error'}${e.status ? ` ${e.status}` : ''}: ${e.message ?? ''}`;
}
