/**
 * The commit a two-phase-commit sink with `backgroundCommits` runs off its write path: one at a
 * time, never rejecting; its failure is kept and surfaces at the sink's next call.
 *
 * @example
 * ```ts
 * const background = new BackgroundCommit();
 * background.start(commitUpTo(7), (error) => log.error({ err: error }, "background commit failed"));
 * await background.settled(); // the commit ran (its failure, if any, is kept)
 * background.throwIfFailed();
 * ```
 */
export class BackgroundCommit {
  /** The commit running now (never rejects), if any. */
  private running: Promise<void> | undefined;
  private failure: unknown;

  /**
   * Runs `commit` in the background: a failure is kept (the first one) and reported to `onFailure`.
   *
   * @example
   * ```ts
   * background.start(this.commitUpTo(checkpointId), (error) => this.log.error({ err: error }, "background commit failed"));
   * ```
   */
  start(commit: Promise<void>, onFailure: (error: unknown) => void): void {
    const running = commit.catch((error: unknown) => {
      this.failure ??= error;
      onFailure(error);
    });
    this.running = running;
    void running.finally(() => {
      if (this.running === running) this.running = undefined;
    });
  }

  /**
   * The commit running now, if any: it resolves once that commit has ended (it never rejects).
   *
   * @example
   * ```ts
   * await background.settled();
   * ```
   */
  settled(): Promise<void> | undefined {
    return this.running;
  }

  /**
   * Throws the failure of a background commit, if one failed.
   *
   * @example
   * ```ts
   * background.throwIfFailed();
   * ```
   */
  throwIfFailed(): void {
    if (this.failure !== undefined) throw this.failure;
  }

  /**
   * Forgets the running commit and its failure: a new attempt starts.
   *
   * @example
   * ```ts
   * await background.settled();
   * background.reset();
   * ```
   */
  reset(): void {
    this.running = undefined;
    this.failure = undefined;
  }
}
