/**
 * The machine's wall clock as the exploration steps it (NTP steps, a VM resumed): `Date.now()` of
 * the whole Node process, offset by the model. Timers are not affected (they run on the monotonic
 * clock, as in Node itself).
 *
 * @example
 * ```ts
 * const clock = new SteppedWallClock();
 * clock.step(-3_600_000); // one hour back
 * clock.restore();
 * ```
 */
export class SteppedWallClock {
  private readonly realNow = Date.now;
  private offset = 0;

  constructor() {
    const realNow = this.realNow;
    Date.now = () => realNow() + this.offset;
  }

  step(milliseconds: number): void {
    this.offset += milliseconds;
  }

  restore(): void {
    Date.now = this.realNow;
  }
}
