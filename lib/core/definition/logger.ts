/** The logger the engine writes through; the Nest layer passes Nest's Logger. */
export interface RedflowLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string, stack?: string): void;
}

/** Writes warnings and errors to stderr, nothing else. */
export const stderrLogger: RedflowLogger = {
  log() {},
  warn(message) {
    process.stderr.write(`[redflow] ${message}\n`);
  },
  error(message, stack) {
    process.stderr.write(`[redflow] ${message}${stack ? `\n${stack}` : ''}\n`);
  },
};
