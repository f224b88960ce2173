import { runHref } from '../router';

/** A status word in its colour; the text says it, the colour only helps. */
export function StatusBadge({ status }: { status?: string }) {
  if (!status) return null;
  return (
    <span class={`status status-${status}`} data-testid="status">
      {status}
    </span>
  );
}

export function RunLink({ id }: { id: string }) {
  return (
    <a href={runHref(id)} data-testid="run-link">
      {id}
    </a>
  );
}

/** An empty state: a sentence, never an empty table alone. */
export function Empty({ children, testid }: { children: preact.ComponentChildren; testid?: string }) {
  return (
    <p class="muted empty" data-testid={testid}>
      {children}
    </p>
  );
}
