// Preloaded with `node --import` by test/process/host-clock.test.ts: this process's wall clock runs
// CARDS_SYNC_TEST_CLOCK_SHIFT_MS milliseconds ahead (or behind, when negative) of the host's.
const shift = Number(process.env.CARDS_SYNC_TEST_CLOCK_SHIFT_MS ?? 0);
const HostDate = Date;
class ShiftedDate extends HostDate {
  constructor(...args) {
    if (args.length === 0) super(HostDate.now() + shift);
    else super(...args);
  }
  static now() {
    return HostDate.now() + shift;
  }
}
globalThis.Date = ShiftedDate;
