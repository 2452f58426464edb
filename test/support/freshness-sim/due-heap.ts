// The earliest-due-first choice that Postgres makes with its index in production, as a heap.

/** A binary min-heap of (due, id) with lazy deletion by version. */
export class DueHeap {
  private due: number[] = [];
  private ids: number[] = [];
  private versions: number[] = [];
  constructor(private current: Int32Array) {}
  get size() {
    return this.ids.length;
  }
  push(due: number, id: number) {
    this.current[id]! += 1;
    this.due.push(due);
    this.ids.push(id);
    this.versions.push(this.current[id]!);
    let i = this.ids.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (this.due[p]! <= this.due[i]!) break;
      this.swap(i, p);
      i = p;
    }
  }
  /** The earliest live entry's due time, left in place (dead entries above it are dropped). */
  peekDue(): number | undefined {
    while (this.ids.length > 0 && this.versions[0] !== this.current[this.ids[0]!]) this.removeTop();
    return this.ids.length > 0 ? this.due[0] : undefined;
  }
  /** The earliest live entry, removed. */
  pop(): number | undefined {
    while (this.ids.length > 0) {
      const id = this.ids[0]!;
      const version = this.versions[0]!;
      this.removeTop();
      if (version === this.current[id]) return id;
    }
    return undefined;
  }
  private removeTop() {
    const last = this.ids.length - 1;
    this.swap(0, last);
    this.due.pop();
    this.ids.pop();
    this.versions.pop();
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let m = i;
      if (l < this.ids.length && this.due[l]! < this.due[m]!) m = l;
      if (r < this.ids.length && this.due[r]! < this.due[m]!) m = r;
      if (m === i) break;
      this.swap(i, m);
      i = m;
    }
  }
  private swap(a: number, b: number) {
    [this.due[a], this.due[b]] = [this.due[b]!, this.due[a]!];
    [this.ids[a], this.ids[b]] = [this.ids[b]!, this.ids[a]!];
    [this.versions[a], this.versions[b]] = [this.versions[b]!, this.versions[a]!];
  }
}
