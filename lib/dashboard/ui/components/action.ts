import { useState } from 'preact/hooks';

/** The message of an action that failed: the error's, or its text. */
export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An action's message and a way to run one: `attempt(action)` clears the message, runs the action,
 * and shows what it threw. `setMessage` tells the outcome of one that succeeded.
 */
export function useAction(): { message: string; setMessage: (text: string) => void; attempt: (action: () => Promise<void>) => Promise<void> } {
  const [message, setMessage] = useState('');
  const attempt = async (action: () => Promise<void>) => {
    try {
      setMessage('');
      await action();
    } catch (error) {
      setMessage(errorText(error));
    }
  };
  return { message, setMessage, attempt };
}
