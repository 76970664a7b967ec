/**
 * The entrance to one subtask's stage behind an exchange, when several subtask loops share the
 * process: the loops that send batches into the stage and the stage's own loop (its timers,
 * notifications, end of input) go through it one at a time, so that no operator is ever called
 * concurrently. A sender waits here until the stage has taken its batch: the channel from each
 * sender holds one batch at most, which is the backpressure that bounds memory whatever the skew.
 */
export class StageGate {
  private held = false;
  private readonly waiting: Array<() => void> = [];
  /** The most senders that ever waited at once (at most one per other loop). */
  maxWaiting = 0;

  /** `onReleased` runs after each action: the stage's own loop may have a new timer to wait for. */
  constructor(private readonly onReleased: () => void = () => {}) {}

  /** Runs `action` alone in the stage; resolves (or rejects) with its outcome. */
  run<T>(action: () => T | Promise<T>): T | Promise<T> {
    if (!this.held) {
      this.held = true;
      return this.runHeld(action);
    }
    return new Promise<T>((resolve, reject) => {
      this.waiting.push(() => {
        try {
          Promise.resolve(this.runHeld(action)).then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      if (this.waiting.length > this.maxWaiting) this.maxWaiting = this.waiting.length;
    });
  }

  private runHeld<T>(action: () => T | Promise<T>): T | Promise<T> {
    let result: T | Promise<T>;
    try {
      result = action();
    } catch (error) {
      this.release();
      throw error;
    }
    if (result instanceof Promise) {
      return result.finally(() => this.release());
    }
    this.release();
    return result;
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.held = false;
    this.onReleased();
  }
}
