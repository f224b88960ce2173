import { href, query } from '../api';
import type { Preview } from '../types';

/**
 * A payload: pretty-printed JSON in a collapsible block; when it was cut at 64 KiB, its size and a
 * link to download the whole of it.
 */
export function JsonView({
  preview,
  runId,
  field,
  testid,
  open = true,
  label,
}: {
  preview?: Preview;
  runId: string;
  field: string;
  testid: string;
  open?: boolean;
  label?: string;
}) {
  if (!preview) return null;
  const body = (
    <>
      <pre data-testid={testid} tabIndex={0}>
        {preview.text}
      </pre>
      {preview.truncated ? (
        <p class="muted" data-testid={`${testid}-truncated`}>
          Showing the first 64 KiB of {Math.ceil(preview.bytes / 1024)} KiB.{' '}
          <a href={href(`/run/payload?${query({ id: runId, field })}`)} download="">
            Show all (download)
          </a>
        </p>
      ) : null}
    </>
  );
  if (!label) return body;
  return (
    <details open={open} class="payload">
      <summary>{label}</summary>
      {body}
    </details>
  );
}
