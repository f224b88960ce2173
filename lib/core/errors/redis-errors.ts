/** Redis out of reach, refusing writes, or failing one of this package's scripts. */
import { RedflowError } from './redflow-error';

/** The longest Redis reply an error message quotes; replies of failed scripts can be long. */
const MAX_REPLY_CHARS = 300;

/** The first line of a Redis error reply, at most 300 characters, so no Lua source leaks into messages. */
function shortReply(reply: string): string {
  const line = String(reply).split(/\r?\n/, 1)[0].trim();
  return line.length > MAX_REPLY_CHARS ? `${line.slice(0, MAX_REPLY_CHARS - 1)}…` : line;
}

/** A reply without its final period, so the sentence around it does not end with two. */
function inSentence(reply: string): string {
  return reply.replace(/\.+$/, '');
}

/**
 * Redis cannot be reached: the connection is down, or it gave no answer in time. The call may
 * still be applied once Redis answers again.
 */
export class RedisUnavailableError extends RedflowError {
  constructor(
    /** `host:port` (or socket path) of the Redis, never with its password. */
    readonly address: string,
    /** What went wrong, e.g. `connect ECONNREFUSED` or `no answer within 5000 ms`. */
    readonly detail: string,
  ) {
    super(
      `Redis at ${address} is unavailable (${detail}). Check that Redis is running and reachable from this host (REDIS_URL or the connection option). A call that timed out may still be applied when Redis comes back: retry it with an idempotency key.`,
    );
  }
}

/**
 * Redis answered but refused to write: it is out of memory (OOM), a read-only replica (READONLY),
 * or cannot persist to disk (MISCONF). Nothing of the call was applied.
 */
export class RedisWriteRefusedError extends RedflowError {
  /** The refusal, first line only, at most 300 characters. */
  readonly reply: string;

  constructor(
    /** The name of the Lua script (or command) that was refused. */
    readonly script: string,
    reply: string,
  ) {
    const short = shortReply(reply);
    super(
      `Redis refused a write in script "${script}": ${inSentence(short)}. Free memory or raise maxmemory (OOM), connect to the primary instead of a replica (READONLY), or fix the disk Redis persists to (MISCONF). Workers pause and resume by themselves once writes succeed.`,
    );
    this.reply = short;
  }
}

/** One of this package's Lua scripts answered with an error other than a refused write. */
export class RedisScriptError extends RedflowError {
  /** The error reply, first line only, at most 300 characters. */
  readonly reply: string;

  constructor(
    /** The name of the Lua script. */
    readonly script: string,
    reply: string,
  ) {
    const short = shortReply(reply);
    super(`Redis script "${script}" failed: ${inSentence(short)}.`);
    this.reply = short;
  }
}

// A refusal comes as the reply itself ("OOM command not allowed ...") or, from inside a script on
// older Redis, wrapped: "ERR Error running script (...): @user_script:12: -OOM command ...".
const WRITE_REFUSED = /(?:^-?|:\s*-?|\s-)(?:OOM|READONLY|MISCONF)(?=\s|$)/;

/** True when a Redis error message (plain or wrapped by a Lua script) says Redis refuses writes. */
export function isWriteRefusedReply(message: string): boolean {
  return WRITE_REFUSED.test(message);
}
