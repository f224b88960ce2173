import type { ErrorLine } from '../types';

/** An error: its name and message, and its stack as lines under a disclosure. */
export function ErrorBlock({ error, testid }: { error?: ErrorLine; testid?: string }) {
  if (!error) return null;
  return (
    <div class="error-block">
      <p class="error" data-testid={testid}>
        {error.name}: {error.message}
      </p>
      {error.stack ? (
        <details>
          <summary>Stack</summary>
          <pre data-testid={testid ? `${testid}-stack` : undefined}>{error.stack}</pre>
        </details>
      ) : null}
    </div>
  );
}
