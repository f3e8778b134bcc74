/** Small pieces every section uses: errors, times, copy and confirm buttons, loading data. */
import { useEffect, useRef, useState } from 'hono/jsx/dom';
import { describeError } from './api.ts';

export const formatTime = (iso: string | null | undefined): string =>
  iso ? new Date(iso).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' }) : '—';

export const formatAddress = (a: { identifier: string; display_name: string } | undefined): string =>
  !a ? '' : a.display_name ? `${a.display_name} <${a.identifier}>` : a.identifier;

/** An error message next to what failed, announced to screen readers. */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {describeError(error)}
    </p>
  );
}

/** A secret shown once (or on demand), with a copy button. */
export function Secret({ value, label }: { value: string; label: string }) {
  const [copied, setCopied] = useState<string | null>(null);
  const copy = () => {
    // The clipboard API exists on https and localhost only.
    (navigator.clipboard ? navigator.clipboard.writeText(value) : Promise.reject()).then(
      () => setCopied('Copied.'),
      () => setCopied('Copying was refused by the browser: select the text and copy it.'),
    );
  };
  return (
    <div class="secret">
      <span class="sr-only">{label}:</span>
      <code>{value}</code>
      <button type="button" onClick={copy}>
        Copy
      </button>
      {copied && <span role="status">{copied}</span>}
    </div>
  );
}

/**
 * A destructive action behind a confirmation: the first press asks `question`, the second does it.
 * Keyboard focus moves to the confirming button.
 */
export function ConfirmButton(props: { label: string; question: string; confirm: string; onConfirm: () => unknown }) {
  const [asking, setAsking] = useState(false);
  const confirmButton = useRef<HTMLButtonElement>(null);
  // Once, when the question appears (a callback ref would take the focus back at every re-render).
  useEffect(() => {
    if (asking) confirmButton.current?.focus();
  }, [asking]);
  if (!asking)
    return (
      <button type="button" class="danger" onClick={() => setAsking(true)}>
        {props.label}
      </button>
    );
  return (
    <fieldset class="confirm">
      <legend>{props.question}</legend>
      <button
        type="button"
        class="danger"
        ref={confirmButton}
        onClick={() => {
          setAsking(false);
          props.onConfirm();
        }}
      >
        {props.confirm}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </fieldset>
  );
}

/**
 * Loads something from the API and reloads it when `deps` change, when `reload()` is called, or
 * every `everyMs` (live views). Keeps the last good value while a reload runs or fails.
 */
export function useApi<T>(load: () => Promise<T>, deps: unknown[], everyMs?: number) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    const run = () =>
      load().then(
        (v) => {
          if (!live) return;
          setValue(v);
          setError(null);
        },
        (err: unknown) => {
          if (live) setError(err);
        },
      );
    void run();
    const timer = everyMs ? setInterval(() => void run(), everyMs) : undefined;
    return () => {
      live = false;
      clearInterval(timer);
    };
  }, [...deps, tick]);
  return { value, error, reload: () => setTick((t) => t + 1) };
}

/** Reads a form's fields as strings (unchecked checkboxes are absent). */
export function formFields(event: Event): Record<string, string> {
  event.preventDefault();
  const form = event.currentTarget as HTMLFormElement;
  const out: Record<string, string> = {};
  for (const [name, value] of new FormData(form)) if (typeof value === 'string') out[name] = value;
  return out;
}
